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
    let registry = std::fs::read_to_string(src().join("lint/registry.rs")).unwrap_or_default();
    for (path, text) in files_under("lint/rules") {
        if path.ends_with("mod.rs") {
            continue;
        }
        let Some(name) = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("pub static ")
                .and_then(|r| r.split_whitespace().next())
        }) else {
            panic!("{} declares no rule", path.display());
        };
        assert!(
            registry.contains(&format!("r::{name},")),
            "{name} is not in ALL_RULES"
        );
    }
}

#[test]
fn process_control_uses_std_libc_and_tokio_only() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .unwrap_or_default();
    // The crates under [dependencies], by the name code uses (`-` becomes `_`).
    let dependencies: Vec<String> = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap_or("")
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| {
            l.split_once('=')
                .map(|(name, _)| name.trim().replace('-', "_"))
        })
        .filter(|name| !name.is_empty() && name != "libc" && name != "tokio")
        .collect();
    assert!(
        dependencies.iter().any(|d| d == "serde_json"),
        "{dependencies:?}"
    );
    for (path, text) in files_under("process") {
        for line in code(&text) {
            assert!(
                !line.contains("crate::"),
                "{} uses another module of pipec: {line}",
                path.display()
            );
            for dep in &dependencies {
                let used = line.match_indices(&format!("{dep}::")).any(|(at, _)| {
                    at == 0 || !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                });
                assert!(!used, "{} uses {dep}: {line}", path.display());
            }
        }
    }
}
