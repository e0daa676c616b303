//! `pipec tools`: what MCP servers offer, as `.pipe` declarations. `pull.rs` is the
//! command (which server, reaching it, printing); `declarations.rs` writes the text.
//! JSON Schemas become pipec types in `pipec-schema` (`read`), and a server's names
//! become pipec's in `pipec-base` (`identifiers`).

mod declarations;
mod pull;

use clap::Subcommand;

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(subcommand)]
    command: ToolsCommand,
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// Print declarations for what a server offers: types, tools, readers
    Pull(pull::Args),
}

pub(super) fn run(args: Args) -> u8 {
    match args.command {
        ToolsCommand::Pull(a) => pull::run(a),
    }
}
