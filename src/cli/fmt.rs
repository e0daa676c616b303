//! `pipec fmt FILE... [--check]`.

use std::path::PathBuf;

use super::pipe_files::pipe_files;
use super::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic::TerminalOptions;
use crate::source::SourceDb;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The .pipe files to format (folders are searched for .pipe files, hidden folders
    /// skipped)
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Change nothing; exit 1 if a file is not formatted (for CI)
    #[arg(long)]
    check: bool,
}

pub(super) fn run(args: Args) -> u8 {
    let files = match pipe_files(&args.files) {
        Ok(files) => files,
        Err(problem) => {
            super::err(&problem.message());
            return EXIT_USAGE;
        }
    };
    let mut code = EXIT_OK;
    for file in files {
        let text = match crate::source::read_text(&file) {
            Ok(t) => t,
            Err(e) => {
                super::err(&format!("error: cannot read `{}`: {e}", file.display()));
                return EXIT_USAGE;
            }
        };
        match crate::syntax::format_source(&text) {
            Ok(formatted) if formatted == text => {}
            Ok(formatted) => {
                if args.check {
                    super::out(&format!("would reformat {}\n", file.display()));
                    code = EXIT_FINDINGS;
                } else if let Err(e) = std::fs::write(&file, formatted) {
                    super::err(&format!("error: cannot write `{}`: {e}", file.display()));
                    return EXIT_USAGE;
                }
            }
            Err(diags) => {
                let mut db = SourceDb::default();
                let _ = db.add(
                    file.to_string_lossy().into_owned(),
                    file.clone(),
                    text.into(),
                );
                super::err(&crate::diagnostic::render_terminal(
                    &db,
                    &diags,
                    TerminalOptions::default(),
                ));
                super::err(&format!(
                    "{} has syntax errors and was not formatted",
                    file.display()
                ));
                code = EXIT_FINDINGS;
            }
        }
    }
    code
}
