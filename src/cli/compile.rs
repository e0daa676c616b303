//! `pipec compile FILE [-o plan.json]`, and `pipec compile --schema`.

use std::path::PathBuf;

use super::{ColorChoice, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic::{Counts, TerminalOptions};
use crate::plan::Plan;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The .pipe file to compile
    #[arg(required_unless_present = "schema")]
    file: Option<PathBuf>,
    /// Where to write the plan (stdout by default)
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Print the JSON Schema of the plan format instead
    #[arg(long)]
    schema: bool,
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
}

pub(super) fn run(args: Args) -> u8 {
    if args.schema {
        super::out(&Plan::json_schema());
        return EXIT_OK;
    }
    let Some(file) = args.file else {
        return EXIT_USAGE;
    };
    if !file.is_file() {
        super::err(&format!(
            "error: cannot read `{}`: no such file",
            file.display()
        ));
        return EXIT_USAGE;
    }
    let name = file.to_string_lossy().into_owned();
    let analysis = crate::analyze(&crate::source::FsLoader, &file, &name);
    // Warnings are shown on stderr; the plan goes to stdout or the output file.
    let opts = TerminalOptions {
        color: args.color.enabled() && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        width: 100,
    };
    let counts = Counts::of(&analysis.diagnostics);
    if counts.errors + counts.warnings > 0 {
        let mut text =
            crate::diagnostic::render_terminal(&analysis.db, &analysis.diagnostics, opts);
        text.push_str(super::check::summary(counts).trim_end());
        super::err(&text);
    }
    match crate::lower_analysis(analysis, &file) {
        Ok(plan) => {
            let json = plan.to_json();
            match args.output {
                Some(path) => {
                    if let Err(e) = std::fs::write(&path, json) {
                        super::err(&format!("error: cannot write `{}`: {e}", path.display()));
                        return EXIT_USAGE;
                    }
                }
                None => super::out(&json),
            }
            EXIT_OK
        }
        Err(_) => EXIT_FINDINGS,
    }
}
