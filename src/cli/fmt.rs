//! `pipec fmt FILE... [--check]`.

use std::path::PathBuf;

use super::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic::TerminalOptions;
use crate::source::SourceDb;

#[derive(clap::Args)]
pub struct Args {
    /// The .pipe files to format (folders are searched for .pipe files)
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Change nothing; exit 1 if a file is not formatted (for CI)
    #[arg(long)]
    check: bool,
}

fn expand(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            entries.sort();
            let (dirs, files): (Vec<PathBuf>, Vec<PathBuf>) =
                entries.into_iter().partition(|e| e.is_dir());
            out.extend(
                files
                    .into_iter()
                    .filter(|f| f.extension().is_some_and(|x| x == "pipe")),
            );
            out.extend(expand(&dirs));
        } else {
            out.push(p.clone());
        }
    }
    out
}

pub fn run(args: Args) -> u8 {
    let mut code = EXIT_OK;
    for file in expand(&args.files) {
        let text = match std::fs::read_to_string(&file) {
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
