//! The invariants of ARCHITECTURE.md that a machine can check.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files_under(sub: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&src().join(sub), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap_or_default();
            (p, t)
        })
        .collect()
}

/// Lines of code, without comments, up to the file's unit tests (which come last).
fn code(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .map(str::trim_start)
        .filter(|l| !l.starts_with("//"))
}

#[test]
fn pest_stays_inside_the_syntax_module() {
    for (path, text) in files_under("") {
        if path.starts_with(src().join("syntax")) {
            continue;
        }
        for line in code(&text) {
            assert!(
                !line.contains("pest::") && !line.contains("pest_derive"),
                "{} uses pest: {line}",
                path.display()
            );
        }
    }
}

#[test]
fn the_compiler_does_no_runtime_io() {
    for module in ["syntax", "check", "lint", "plan", "diagnostic", "graph"] {
        for (path, text) in files_under(module) {
            for line in code(&text) {
                for forbidden in ["tokio", "redb", "rmcp", "std::net", "std::process"] {
                    assert!(
                        !line.contains(forbidden),
                        "{} (compiler) uses {forbidden}: {line}",
                        path.display()
                    );
                }
                // Files are read through the loader only.
                assert!(
                    !line.contains("std::fs::"),
                    "{} reads files directly: {line}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn every_source_file_says_what_it_owns() {
    for (path, text) in files_under("") {
        assert!(
            text.starts_with("//!"),
            "{} does not open with a `//!` line",
            path.display()
        );
    }
}

#[test]
fn every_rule_file_is_registered() {
    let catalogue = std::fs::read_to_string(src().join("rules/mod.rs")).unwrap_or_default();
    let passes = std::fs::read_to_string(src().join("lint/registry.rs")).unwrap_or_default();
    let mut rule_files = 0;
    for (path, text) in files_under("rules") {
        if path.ends_with("mod.rs") {
            continue;
        }
        rule_files += 1;
        let file = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let file = file.unwrap_or_default();
        let Some(name) = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("pub static ")
                .and_then(|r| r.split_whitespace().next())
        }) else {
            panic!("{} declares no rule", path.display());
        };
        // The catalogue entry names the file and the rule, so both must agree.
        assert!(
            catalogue.contains(&format!("    {file}::{name},")),
            "{name} ({}) is not in the catalogue of src/rules/mod.rs",
            path.display()
        );
        // A rule file is catalogue only: the pass, if the rule has one, is in lint/.
        assert!(
            !code(&text).any(|l| l.contains("fn ")),
            "{} holds code; passes go in src/lint/passes/{file}.rs",
            path.display()
        );
    }
    assert!(rule_files > 40, "found only {rule_files} rule files");
    for (path, _) in files_under("lint/passes") {
        if path.ends_with("mod.rs") {
            continue;
        }
        let file = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let file = file.unwrap_or_default();
        assert!(
            src().join("rules").join(format!("{file}.rs")).is_file(),
            "the pass {} is named after no rule of src/rules/",
            path.display()
        );
        assert!(
            passes.contains(&format!("p::{file}::check,")),
            "the pass {} is not in PASSES (src/lint/registry.rs)",
            path.display()
        );
    }
}
