//! `pipec check FILE|FOLDER...`: every problem of every file, in one run; a folder stands
//! for the `.pipe` files in it and its subfolders. A `.yaml` or `.yml` file named on the
//! command line is a reShapr Resources specification, loaded as `pipec serve` loads it.
//! Offline unless `--online`, which also starts the servers of the `.pipe` files and
//! compares what they list (`check_online.rs`).

use std::path::PathBuf;

use clap::ValueEnum;

use super::check_fix::{FixRequest, Fixed};
use super::check_online::{Online, RUNTIME_RULES};
use super::pipe_files::pipe_files;
use super::{ColorChoice, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::diagnostic::{self, Applicability, Counts, Diagnostic, Rule, TerminalOptions};
use crate::fix::Mode;
use crate::source::{FsLoader, SourceDb};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The .pipe files to check (folders are searched for .pipe files, hidden folders
    /// skipped), and reShapr Resources specifications (.yaml, .yml)
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Terminal)]
    format: Format,
    /// Treat warnings as errors (`--deny warnings`)
    #[arg(long, value_name = "warnings")]
    deny: Option<Deny>,
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Also start every server the files declare and compare what each lists (tools,
    /// their schemas and annotations, resource templates, protocol) with the declarations
    #[arg(long)]
    online: bool,
    /// Apply the safe fixes and write the files, then report what remains
    #[arg(long, conflicts_with = "online")]
    fix: bool,
    /// Apply the unsafe fixes too (they change what the program means: read the diff);
    /// implies --fix
    #[arg(long, conflicts_with = "online")]
    unsafe_fixes: bool,
    /// Print a unified diff of what --fix (or --unsafe-fixes) would change, and write
    /// nothing; exits 1 when there would be changes
    #[arg(long, conflicts_with = "online")]
    diff: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(super) enum Format {
    Terminal,
    Json,
    Sarif,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(super) enum Deny {
    Warnings,
}

pub(super) fn run(args: Args) -> u8 {
    let files = match pipe_files(&args.files) {
        Ok(files) => files,
        Err(problem) => {
            super::err(&problem.message());
            return EXIT_USAGE;
        }
    };
    if args.fix || args.unsafe_fixes || args.diff {
        let roots: Vec<(PathBuf, String)> = files
            .iter()
            .filter(|f| !crate::serve::spec::is_spec_path(f))
            .map(|f| (f.clone(), f.to_string_lossy().into_owned()))
            .collect();
        let request = FixRequest {
            mode: if args.unsafe_fixes {
                Mode::Unsafe
            } else {
                Mode::Safe
            },
            diff: args.diff,
        };
        match super::check_fix::run(&roots, request) {
            Fixed::Done(code) => return code,
            // The files as written are checked again below, from disk.
            Fixed::Written => {}
        }
    }
    let online = match args.online.then(Online::start).transpose() {
        Ok(online) => online,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return EXIT_USAGE;
        }
    };
    let mut all: Vec<(SourceDb, Vec<Diagnostic>)> = Vec::new();
    for file in &files {
        let name = file.to_string_lossy().into_owned();
        if crate::serve::spec::is_spec_path(file) {
            let mut db = SourceDb::default();
            let loaded = crate::serve::spec::load_spec_file(&mut db, file, &name);
            all.push((db, loaded.diagnostics));
            continue;
        }
        let mut analysis = crate::analyze(&FsLoader, file, &name);
        if let Some(online) = &online {
            let found = online.diagnostics(&analysis, &name);
            analysis.diagnostics.extend(found);
            diagnostic::snap_spans(&analysis.db, &mut analysis.diagnostics);
            diagnostic::sort_and_dedup(&mut analysis.diagnostics);
        }
        // The file's trees are freed on a thread of their own: freeing a large file's
        // takes milliseconds that the report need not wait for.
        let trees = (analysis.hir, analysis.syntax);
        std::thread::spawn(move || drop(trees));
        all.push((analysis.db, analysis.diagnostics));
    }
    let deny = args.deny == Some(Deny::Warnings);
    let mut counts = Counts::default();
    for (_, diags) in &all {
        let c = Counts::of(diags);
        counts.errors += c.errors;
        counts.warnings += c.warnings;
    }
    match args.format {
        Format::Terminal => {
            let opts = TerminalOptions {
                color: args.color.enabled(),
                width: terminal_width(),
            };
            let mut text = String::new();
            for (db, diags) in &all {
                text.push_str(&diagnostic::render_terminal(db, diags, opts));
            }
            if counts.errors + counts.warnings > 0 {
                text.push_str(&summary(counts));
                text.push_str(&fixable(&all));
            }
            super::out(&text);
        }
        Format::Json => {
            let mut diags_json: Vec<serde_json::Value> = Vec::new();
            for (db, diags) in &all {
                let one: serde_json::Value =
                    serde_json::from_str(&diagnostic::render_json(db, diags)).unwrap_or_default();
                if let Some(list) = one.get("diagnostics").and_then(|d| d.as_array()) {
                    diags_json.extend(list.iter().cloned());
                }
            }
            let doc = serde_json::json!({
                "version": diagnostic::JSON_FORMAT_VERSION,
                "diagnostics": diags_json,
                "summary": { "errors": counts.errors, "warnings": counts.warnings },
            });
            super::out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            ));
        }
        Format::Sarif => {
            // One SARIF run covering every file: merge the results.
            let mut rules: Vec<&Rule> = crate::rules::ALL_RULES.to_vec();
            if online.is_some() {
                rules.extend(RUNTIME_RULES.iter().copied());
            }
            let mut merged: Option<serde_json::Value> = None;
            for (db, diags) in &all {
                let one: serde_json::Value =
                    serde_json::from_str(&diagnostic::render_sarif(db, diags, &rules))
                        .unwrap_or_default();
                match &mut merged {
                    None => merged = Some(one),
                    Some(m) => {
                        let extra = one["runs"][0]["results"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default();
                        if let Some(results) = m["runs"][0]["results"].as_array_mut() {
                            results.extend(extra);
                        }
                    }
                }
            }
            super::out(&format!(
                "{}\n",
                serde_json::to_string_pretty(&merged.unwrap_or_default()).unwrap_or_default()
            ));
        }
    }
    if counts.errors > 0 || (deny && counts.warnings > 0) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}

pub(crate) fn summary(c: Counts) -> String {
    let plural = |n: usize, w: &str| {
        if n == 1 {
            format!("1 {w}")
        } else {
            format!("{n} {w}s")
        }
    };
    match (c.errors, c.warnings) {
        (0, w) => format!("{}\n", plural(w, "warning")),
        (e, 0) => format!("{}\n", plural(e, "error")),
        (e, w) => format!("{}, {}\n", plural(e, "error"), plural(w, "warning")),
    }
}

/// How many diagnostics `--fix` and `--unsafe-fixes` would fix, as a line under the
/// summary (empty when none would).
fn fixable(all: &[(SourceDb, Vec<Diagnostic>)]) -> String {
    let has = |d: &Diagnostic, a: Applicability| d.fixes.iter().any(|f| f.applicability == a);
    let diags = || all.iter().flat_map(|(_, d)| d.iter());
    let safe = diags().filter(|d| has(d, Applicability::Safe)).count();
    let unsafe_only = diags()
        .filter(|d| !has(d, Applicability::Safe) && has(d, Applicability::Unsafe))
        .count();
    match (safe, unsafe_only) {
        (0, 0) => String::new(),
        (s, 0) => format!("{s} fixable with `pipec check --fix`\n"),
        (0, u) => format!("{u} fixable with `pipec check --unsafe-fixes`\n"),
        (s, u) => {
            format!("{s} fixable with `pipec check --fix` ({u} more with `--unsafe-fixes`)\n")
        }
    }
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100)
        .clamp(60, 200)
}
