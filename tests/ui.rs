//! UI tests: every `fail*.pipe` and `pass*.pipe` under `tests/ui/<rule-name>/` is checked
//! and its rendered diagnostics compared with the snapshot beside it (`<case>.snap`, the
//! source and the diagnostics, no colour, fixed width). A `fail*.yaml` or `pass*.yaml` case
//! is a reShapr Resources specification, loaded as `pipec check` loads one.
//!
//! - a `fail` case must report its folder's rule; a `pass` case must report nothing;
//! - every rule has at least one of each (but those of `pipec check --online`, whose
//!   cases are in `tests/mcp/tools.rs`);
//! - a snapshot without its case, or a case without its snapshot, fails;
//! - a `.pipe` case whose diagnostics offer fixes has the text `pipec check --fix` makes
//!   of it beside it, byte for byte, as `<case>.fixed.pipe`, and the text
//!   `--unsafe-fixes` makes as `<case>.unsafe-fixed.pipe` when that is another text; a
//!   fixed text must parse, offer no fix its mode would make (fixing is done), and no
//!   longer report the case's rule where every report of it had such a fix. Fixes are made
//!   in memory; what they change in other files of the case's folder (an import, a prompt
//!   template) is compared with `<case>.fixed.files/<path>` (`unsafe-fixed.files`).
//!
//! Each case is a test of its own, named by its path under `tests/ui/`: `cargo test --test
//! ui unknown-name` runs that rule's cases. `PIPEC_BLESS=1 cargo test --test ui` rewrites
//! the snapshots.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use libtest_mimic::{Failed, Trial};
use pipec::diagnostic::{Applicability, Severity, TerminalOptions, render_terminal};
use pipec::fix::Mode;
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
        && !stem.ends_with(".fixed")
        && !stem.ends_with(".unsafe-fixed")
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
    let mut snap = format!("--- source\n{source}--- diagnostics (exit {exit})\n{rendered}");
    let fixes: Vec<String> = diagnostics
        .iter()
        .flat_map(|d| {
            d.fixes.iter().map(move |f| {
                let kind = match f.applicability {
                    Applicability::Safe => "safe",
                    Applicability::Unsafe => "unsafe",
                };
                format!("{} {kind}: {}\n", d.rule.code, f.title)
            })
        })
        .collect();
    if !fixes.is_empty() {
        snap.push_str("--- fixes\n");
        snap.extend(fixes);
    }
    (snap, codes)
}

/// One test per case, named by its path under `tests/ui/` (`cargo test --test ui
/// unknown-name` runs that rule's), run in parallel; and one for the files without their
/// case and one for the rules without cases.
fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let root = Path::new("tests/ui");
    let mut files = Vec::new();
    cases(root, &mut files);
    let bless = std::env::var_os("PIPEC_BLESS").is_some();
    let mut trials: Vec<Trial> = files
        .iter()
        .filter(|p| is_case(p))
        .map(|case| {
            let name = case
                .strip_prefix(root)
                .unwrap_or(case)
                .to_string_lossy()
                .replace('\\', "/");
            let case = case.clone();
            Trial::test(name, move || verdict(check_case(&case, bless)))
        })
        .collect();
    let all = files.clone();
    trials.push(Trial::test("files_without_their_case", move || {
        verdict(files_without_their_case(&all, bless))
    }));
    trials.push(Trial::test("every_rule_has_cases", move || {
        verdict(rules_without_cases(&files))
    }));
    libtest_mimic::run(&args, trials).exit();
}

fn verdict(failures: Vec<String>) -> Result<(), Failed> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} UI problems:\n\n{}",
            failures.len(),
            failures.join("\n\n")
        )
        .into())
    }
}

/// A snapshot without its case, and a fixed text without its case, are stale.
fn files_without_their_case(files: &[PathBuf], bless: bool) -> Vec<String> {
    let mut failures = Vec::new();
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
    for fixed in files.iter().filter(|p| {
        p.file_stem().is_some_and(|s| {
            let s = s.to_string_lossy();
            s.ends_with(".fixed") || s.ends_with(".unsafe-fixed")
        })
    }) {
        let stem = fixed.file_stem().unwrap_or_default().to_string_lossy();
        let case_stem = stem
            .trim_end_matches(".unsafe-fixed")
            .trim_end_matches(".fixed");
        if !fixed.with_file_name(format!("{case_stem}.pipe")).exists() {
            failures.push(format!(
                "{}: a fixed text without its case",
                fixed.display()
            ));
        }
    }
    failures
}

/// The folder of a case, which names its rule.
fn rule_dir(case: &Path) -> String {
    case.parent()
        .and_then(|p| p.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Every rule has a `fail` and a `pass` case.
fn rules_without_cases(files: &[PathBuf]) -> Vec<String> {
    let covered: BTreeSet<(String, &'static str)> = files
        .iter()
        .filter(|p| is_case(p))
        .filter_map(|case| {
            let rule = pipec::rules::find_rule(&rule_dir(case))?;
            let stem = case.file_stem()?.to_string_lossy().into_owned();
            let kind = if stem.starts_with("fail") {
                "fail"
            } else {
                "pass"
            };
            Some((rule.name.to_string(), kind))
        })
        .collect();
    // The online rules come from what servers say, which an offline check never
    // hears: their cases are in tests/mcp/tools.rs.
    let offline = pipec::rules::ALL_RULES
        .iter()
        .filter(|r| !pipec::rules::ONLINE_FAMILY.contains(&r.code));
    let mut failures = Vec::new();
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
    failures
}

/// One case: its rule reported (`fail`) or nothing (`pass`), its fixed texts and its
/// snapshot.
fn check_case(case: &Path, bless: bool) -> Vec<String> {
    let mut failures = Vec::new();
    let rule_dir = rule_dir(case);
    let Some(rule) = pipec::rules::find_rule(&rule_dir) else {
        failures.push(format!(
            "{}: the folder `{rule_dir}` names no rule",
            case.display()
        ));
        return failures;
    };
    let (snap_text, codes) = render_case(case);
    let stem = case
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem.starts_with("fail") {
        if !codes.iter().any(|(c, _)| c == rule.code) {
            failures.push(format!(
                "{}: expected {} {}, got {:?}",
                case.display(),
                rule.code,
                rule.name,
                codes
            ));
        }
    } else if !codes.is_empty() {
        failures.push(format!(
            "{}: a pass case must check clean, got {:?}",
            case.display(),
            codes
        ));
    }
    if case.extension().is_some_and(|e| e == "pipe") {
        for (mode, suffix) in [(Mode::Safe, "fixed"), (Mode::Unsafe, "unsafe-fixed")] {
            check_fixed(case, rule, mode, suffix, bless, &mut failures);
        }
    }
    let snap_path = case.with_extension("snap");
    let existing = std::fs::read_to_string(&snap_path).ok();
    expect_text(
        &snap_path,
        existing,
        &snap_text,
        (case, "snapshot"),
        bless,
        &mut failures,
    );
    failures
}

/// `actual` is the text of `path`, which held `existing`: under `PIPEC_BLESS` it is written,
/// otherwise a difference is a failure that names the case and the text (`shown`).
fn expect_text(
    path: &Path,
    existing: Option<String>,
    actual: &str,
    shown: (&Path, &str),
    bless: bool,
    failures: &mut Vec<String>,
) {
    if existing.as_deref() == Some(actual) {
        return;
    }
    if bless {
        let _ = std::fs::write(path, actual);
    } else {
        let (name, what) = shown;
        failures.push(format!(
            "{}: {what} differs (run with PIPEC_BLESS=1 to accept)\n--- expected\n{}\n--- actual\n{}",
            name.display(),
            existing.as_deref().unwrap_or("(none)"),
            actual
        ));
    }
}

/// The name of the text `mode`'s fixes make of `case`: `fail.fixed.pipe`,
/// `fail.unsafe-fixed.pipe`.
fn fixed_path(case: &Path, suffix: &str) -> PathBuf {
    let stem = case
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    case.with_file_name(format!("{stem}.{suffix}.pipe"))
}

/// Fixes `case` in memory with `mode` and compares the result with its fixed text.
fn check_fixed(
    case: &Path,
    rule: &pipec::diagnostic::Rule,
    mode: Mode,
    suffix: &str,
    bless: bool,
    failures: &mut Vec<String>,
) {
    let name = case.to_string_lossy().replace('\\', "/");
    let roots = [(case.to_path_buf(), name.clone())];
    let mut run = pipec::fix::fix_files(&FsLoader, &roots, mode);
    // The unsafe texts are kept only where they differ from the safe ones.
    if mode == Mode::Unsafe {
        let safe = pipec::fix::fix_files(&FsLoader, &roots, Mode::Safe);
        let texts = |r: &pipec::fix::FixRun| -> Vec<(PathBuf, String)> {
            r.changed
                .iter()
                .map(|c| (c.path.clone(), c.after.clone()))
                .collect()
        };
        if texts(&safe) == texts(&run) {
            run.changed.clear();
        }
    }
    let path = fixed_path(case, suffix);
    let abs = std::path::absolute(case).unwrap_or_else(|_| case.to_path_buf());
    let abs = pipec::source::normalize_path(&abs);
    let folder = abs.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut others: Vec<(PathBuf, String)> = Vec::new();
    for c in &run.changed {
        if c.path == abs {
            continue;
        }
        match c.path.strip_prefix(&folder) {
            Ok(rel) => others.push((rel.to_path_buf(), c.after.clone())),
            Err(_) => failures.push(format!(
                "{name}: a fix changed {}, outside the case's folder",
                c.name
            )),
        }
    }
    let stem = case
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let files_dir = case.with_file_name(format!("{stem}.{suffix}.files"));
    for (rel, text) in &others {
        let snap = files_dir.join(rel);
        let existing = std::fs::read_to_string(&snap).ok();
        if existing.as_deref() != Some(text.as_str()) {
            if bless {
                if let Some(dir) = snap.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let _ = std::fs::write(&snap, text);
            } else {
                failures.push(format!(
                    "{}: the {suffix} text differs (run with PIPEC_BLESS=1 to accept)\n--- expected\n{}\n--- actual\n{}",
                    snap.display(),
                    existing.as_deref().unwrap_or("(none)"),
                    text
                ));
            }
        }
    }
    if others.is_empty() && files_dir.exists() {
        if bless {
            let _ = std::fs::remove_dir_all(&files_dir);
        } else {
            failures.push(format!(
                "{}: no fix changes other files any more",
                files_dir.display()
            ));
        }
    }
    let after = run
        .changed
        .iter()
        .find(|c| c.path == abs)
        .map(|c| c.after.clone());
    let existing = std::fs::read_to_string(&path).ok();
    let Some(after) = after else {
        if existing.is_some() {
            if bless {
                let _ = std::fs::remove_file(&path);
            } else {
                failures.push(format!(
                    "{}: no fix makes this text any more (delete it, or run with PIPEC_BLESS=1)",
                    path.display()
                ));
            }
        }
        return;
    };
    if !pipec::fix::parses(case, &after) {
        failures.push(format!("{name}: the {suffix} text does not parse"));
    }
    if let Some(analysis) = run.analyses.first() {
        let left: Vec<&str> = analysis
            .diagnostics
            .iter()
            .filter(|d| d.fixes.iter().any(|f| mode.allows(f.applicability)))
            .map(|d| d.rule.code)
            .collect();
        if !left.is_empty() || !run.unfinished.is_empty() {
            failures.push(format!("{name}: still fixable after fixing: {left:?}"));
        }
    }
    let original = pipec::analyze(&FsLoader, case, &name);
    let all_fixable = original
        .diagnostics
        .iter()
        .filter(|d| d.rule.code == rule.code)
        .all(|d| d.fixes.iter().any(|f| mode.allows(f.applicability)));
    let still = run
        .analyses
        .first()
        .is_some_and(|a| a.diagnostics.iter().any(|d| d.rule.code == rule.code));
    if all_fixable && still {
        failures.push(format!(
            "{name}: {} {} is still reported after its fixes",
            rule.code, rule.name
        ));
    }
    let what = format!("the {suffix} text");
    expect_text(&path, existing, &after, (&path, &what), bless, failures);
}
