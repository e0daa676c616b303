//! UI tests: every `fail*.pipe` and `pass*.pipe` under `tests/ui/<rule-name>/` is checked
//! and its rendered diagnostics compared with the snapshot beside it (`<case>.snap`, the
//! source and the diagnostics, no colour, fixed width). A `fail*.yaml` or `pass*.yaml` case
//! is a reShapr Resources specification, loaded as `pipec check` loads one.
//!
//! - a `fail` case must report its folder's rule; a `pass` case must report nothing;
//! - every rule has at least one of each (but those of `pipec check --online`, whose
//!   cases are in `tests/tools.rs`);
//! - a snapshot without its case, or a case without its snapshot, fails.
//!
//! `PIPEC_BLESS=1 cargo test --test ui` rewrites the snapshots.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pipec::diagnostic::{Severity, TerminalOptions, render_terminal};
use pipec::source::{FsLoader, SourceDb};

fn cases(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            cases(&p, out);
        } else if p
            .extension()
            .is_some_and(|e| e == "pipe" || e == "yaml" || e == "snap")
        {
            out.push(p);
        }
    }
}

fn is_case(p: &Path) -> bool {
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    p.extension().is_some_and(|e| e == "pipe" || e == "yaml")
        && (stem.starts_with("fail") || stem.starts_with("pass"))
}

fn render_case(path: &Path) -> (String, Vec<(String, Severity)>) {
    let name = path.to_string_lossy().replace('\\', "/");
    let (db, diagnostics) = if pipec::serve::is_spec_path(path) {
        let mut db = SourceDb::default();
        let loaded = pipec::serve::load_spec_file(&mut db, path, &name);
        (db, loaded.diagnostics)
    } else {
        let analysis = pipec::analyze(&FsLoader, path, &name);
        (analysis.db, analysis.diagnostics)
    };
    let rendered = render_terminal(
        &db,
        &diagnostics,
        TerminalOptions {
            color: false,
            width: 100,
        },
    );
    let codes = diagnostics
        .iter()
        .map(|d| (d.rule.code.to_string(), d.severity))
        .collect();
    // Lossy, so that a case that is not UTF-8 (P0004) still shows its text.
    let source = String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
    let exit = if diagnostics.iter().any(|d| d.is_error()) {
        1
    } else {
        0
    };
    let snap = format!("--- source\n{source}--- diagnostics (exit {exit})\n{rendered}");
    (snap, codes)
}

#[test]
fn ui_cases() {
    let root = Path::new("tests/ui");
    let mut files = Vec::new();
    cases(root, &mut files);
    let bless = std::env::var_os("PIPEC_BLESS").is_some();
    let mut failures: Vec<String> = Vec::new();
    let mut covered: BTreeSet<(String, &'static str)> = BTreeSet::new();
    let case_paths: Vec<&PathBuf> = files.iter().filter(|p| is_case(p)).collect();

    for snap in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
    {
        let has_case = ["pipe", "yaml"]
            .iter()
            .any(|ext| snap.with_extension(ext).exists());
        if !has_case {
            if bless {
                let _ = std::fs::remove_file(snap);
            } else {
                failures.push(format!(
                    "{}: snapshot without a case (delete it, or run with PIPEC_BLESS=1)",
                    snap.display()
                ));
            }
        }
    }

    for case in case_paths {
        let rule_dir = case
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(rule) = pipec::rules::find_rule(&rule_dir) else {
            failures.push(format!(
                "{}: the folder `{rule_dir}` names no rule",
                case.display()
            ));
            continue;
        };
        let (snap_text, codes) = render_case(case);
        let stem = case
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let fails = stem.starts_with("fail");
        if fails {
            covered.insert((rule.name.to_string(), "fail"));
            if !codes.iter().any(|(c, _)| c == rule.code) {
                failures.push(format!(
                    "{}: expected {} {}, got {:?}",
                    case.display(),
                    rule.code,
                    rule.name,
                    codes
                ));
            }
        } else {
            covered.insert((rule.name.to_string(), "pass"));
            if !codes.is_empty() {
                failures.push(format!(
                    "{}: a pass case must check clean, got {:?}",
                    case.display(),
                    codes
                ));
            }
        }
        let snap_path = case.with_extension("snap");
        let existing = std::fs::read_to_string(&snap_path).ok();
        if existing.as_deref() != Some(snap_text.as_str()) {
            if bless {
                let _ = std::fs::write(&snap_path, &snap_text);
            } else {
                failures.push(format!(
                    "{}: snapshot differs (run with PIPEC_BLESS=1 to accept)\n--- expected\n{}\n--- actual\n{}",
                    case.display(),
                    existing.as_deref().unwrap_or("(no snapshot)"),
                    snap_text
                ));
            }
        }
    }

    // The online rules come from what servers say, which an offline check never
    // hears: their cases are in tests/tools.rs.
    let offline = pipec::rules::ALL_RULES
        .iter()
        .filter(|r| !pipec::rules::ONLINE_FAMILY.contains(&r.code));
    for rule in offline {
        for kind in ["fail", "pass"] {
            if !covered.contains(&(rule.name.to_string(), kind)) {
                failures.push(format!(
                    "{} {} has no `{kind}` UI case in tests/ui/{}/",
                    rule.code, rule.name, rule.name
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} UI problems:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
