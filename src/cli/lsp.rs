//! `pipec lsp`: the language server, over stdin and stdout.

use super::EXIT_OK;

#[derive(clap::Args)]
pub(super) struct Args {
    /// Accepted for editors that pass it; stdio is the only transport
    #[arg(long)]
    stdio: bool,
}

pub(super) fn run(args: Args) -> u8 {
    let _ = args.stdio;
    match crate::lsp::run_stdio() {
        0 => EXIT_OK,
        code => code,
    }
}
