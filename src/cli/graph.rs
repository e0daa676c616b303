//! `pipec graph FILE --format mermaid|dot`.

use std::path::PathBuf;

use clap::ValueEnum;

use super::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic::TerminalOptions;
use crate::graph::GraphFormat;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The .pipe file to draw
    file: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Mermaid)]
    format: Format,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    Mermaid,
    Dot,
}

pub(super) fn run(args: Args) -> u8 {
    if !args.file.is_file() {
        super::err(&format!(
            "error: cannot read `{}`: no such file",
            args.file.display()
        ));
        return EXIT_USAGE;
    }
    match crate::compile_file(&args.file) {
        Ok(plan) => {
            let format = match args.format {
                Format::Mermaid => GraphFormat::Mermaid,
                Format::Dot => GraphFormat::Dot,
            };
            super::out(&crate::graph::render(&plan, format));
            EXIT_OK
        }
        Err(e) => {
            super::err(&e.render(TerminalOptions::default()));
            EXIT_FINDINGS
        }
    }
}
