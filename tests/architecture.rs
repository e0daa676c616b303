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
fn rmcp_stays_inside_the_mcp_module() {
    // Programs under `src/bin/` included: they reach MCP through `pipec::mcp`.
    for (path, text) in files_under("") {
        if path.starts_with(src().join("mcp")) {
            continue;
        }
        for line in code(&text) {
            assert!(
                !line.contains("rmcp"),
                "{} uses rmcp: {line}",
                path.display()
            );
        }
    }
}

#[test]
fn the_lsp_crates_stay_inside_the_lsp_module() {
    for (path, text) in files_under("") {
        if path.starts_with(src().join("lsp")) {
            continue;
        }
        for line in code(&text) {
            assert!(
                !line.contains("lsp_server") && !line.contains("lsp_types"),
                "{} uses the LSP crates: {line}",
                path.display()
            );
        }
    }
}

#[test]
fn the_compiler_does_no_runtime_io() {
    for module in [
        "syntax",
        "check",
        "lint",
        "plan",
        "diagnostic",
        "graph",
        "fix",
        "rules",
        "names.rs",
        "nesting.rs",
        "uri.rs",
    ] {
        let mut files = files_under(module);
        if module.ends_with(".rs") {
            let path = src().join(module);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(!text.is_empty(), "{} is missing", path.display());
            files.push((path, text));
        }
        for (path, text) in files {
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

// ------------------------------------------------------------ module dependencies

/// Which top-level modules each module may use through `crate::` (or `super::` reaching
/// the crate root). Data flows one way, syntax → check → plan → runtime → store; the
/// leaves (spans and files, diagnostics and their codes, the rule catalogue, "did you
/// mean", URI templates, process control) are used from above and use nothing above them.
/// `lib.rs` and `main.rs` are the crate's surface and may use anything.
const ALLOWED: &[(&str, &[&str])] = &[
    // Leaves.
    ("source", &[]),
    ("names", &[]),
    ("uri", &[]),
    ("base64", &[]),
    ("nesting", &[]),
    ("process", &[]),
    ("diagnostic", &["source", "names"]),
    ("rules", &["diagnostic"]),
    // The compiler.
    (
        "syntax",
        &["source", "diagnostic", "rules", "names", "nesting"],
    ),
    (
        "check",
        &[
            "source",
            "diagnostic",
            "rules",
            "names",
            "nesting",
            "uri",
            "base64",
            "syntax",
        ],
    ),
    (
        "lint",
        &[
            "source",
            "diagnostic",
            "rules",
            "names",
            "nesting",
            "uri",
            "syntax",
            "check",
        ],
    ),
    (
        "plan",
        &[
            "source",
            "diagnostic",
            "names",
            "nesting",
            "uri",
            "syntax",
            "check",
        ],
    ),
    ("graph", &["diagnostic", "plan"]),
    // Fixes: check, edit the texts in memory, check again (the CLI writes them).
    (
        "fix",
        &[
            "source",
            "diagnostic",
            "syntax",
            "check",
            "lint",
            "<crate root>",
        ],
    ),
    // The language server: the compiler's answers for editors, nothing of what runs.
    (
        "lsp",
        &[
            "source",
            "diagnostic",
            "rules",
            "names",
            "nesting",
            "uri",
            "syntax",
            "check",
            "lint",
            "<crate root>",
        ],
    ),
    ("synth", &[]),
    // What runs plans.
    ("llm", &["diagnostic", "names", "nesting"]),
    ("prompt", &["diagnostic", "names", "nesting", "plan", "llm"]),
    ("store", &["diagnostic"]),
    ("mcp", &["diagnostic", "names", "uri", "base64", "process"]),
    (
        "runtime",
        &[
            "source",
            "diagnostic",
            "rules",
            "names",
            "nesting",
            "uri",
            "base64",
            "plan",
            "prompt",
            "llm",
            "store",
            "process",
            "mcp",
        ],
    ),
    // The server side: a project's resources and pipelines offered over MCP.
    (
        "serve",
        &[
            "source",
            "diagnostic",
            "rules",
            "names",
            "nesting",
            "uri",
            "base64",
            "plan",
            "prompt",
            "store",
            "process",
            "mcp",
            "runtime",
        ],
    ),
    // The command line drives everything, the crate root's functions included.
    (
        "cli",
        &[
            "source",
            "diagnostic",
            "rules",
            "names",
            "nesting",
            "uri",
            "process",
            "syntax",
            "check",
            "lint",
            "plan",
            "graph",
            "fix",
            "synth",
            "llm",
            "prompt",
            "store",
            "mcp",
            "runtime",
            "serve",
            "lsp",
            "<crate root>",
        ],
    ),
    // Programs of their own (`src/bin/`): they reach the library as `pipec::`, as any
    // other crate would, so no `crate::` path may appear in them.
    ("bin", &[]),
];

/// The external crates a module may name, where that is restricted: process control is a
/// leaf on the operating system alone, so the compiler and the MCP client can share it.
/// The language server is synchronous and reads files only through the compiler's loader,
/// so it names the protocol crates and serde alone (no tokio, redb, rmcp).
const EXTERNAL_ALLOWED: &[(&str, &[&str])] = &[
    ("process", &["libc", "tokio"]),
    ("lsp", &["lsp_server", "lsp_types", "serde", "serde_json"]),
];

/// Items of the crate root that are not modules, and the module that defines them.
const ROOT_ITEMS: &[(&str, &str)] = &[("declare_rule", "diagnostic")];

fn allowed(module: &str) -> Option<&'static [&'static str]> {
    ALLOWED.iter().find(|(m, _)| *m == module).map(|(_, a)| *a)
}

/// The module path of a file under `src/`: `src/check/nodes/body.rs` is `check::nodes::body`,
/// `src/check/mod.rs` is `check`, `src/names.rs` is `names`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" {
            parts.push(stem);
        }
    }
    parts
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first identifier of `text`, or of each entry of a `{...}` group it starts with.
fn first_segments(text: &str) -> Vec<String> {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        let mut depth = 0usize;
        let mut out = Vec::new();
        let mut entry_start = true;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => entry_start = true,
                c if entry_start && !c.is_whitespace() => {
                    entry_start = false;
                    let name: String = group[i..]
                        .chars()
                        .take_while(|c| is_ident_char(*c))
                        .collect();
                    if !name.is_empty() {
                        out.push(name);
                    }
                }
                _ => {}
            }
        }
        return out;
    }
    let name: String = text.chars().take_while(|c| is_ident_char(*c)).collect();
    if name.is_empty() {
        Vec::new()
    } else {
        vec![name]
    }
}

/// The top-level modules (or crate-root items) a line of code in the module `own` names
/// through `crate::`, `$crate::` or `super::` paths.
fn crate_uses(line: &str, own: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let bytes: Vec<(usize, char)> = line.char_indices().collect();
    for (k, &(i, _)) in bytes.iter().enumerate() {
        let before = if k == 0 { None } else { Some(bytes[k - 1].1) };
        if before.is_some_and(|c| is_ident_char(c) || c == ':') {
            continue;
        }
        let rest = &line[i..];
        if let Some(after) = rest.strip_prefix("crate::") {
            out.extend(first_segments(after));
        } else if rest.starts_with("super::") {
            let mut path: Vec<String> = own.to_vec();
            let mut after = rest;
            while let Some(a) = after.strip_prefix("super::") {
                path.pop();
                after = a;
            }
            match path.first() {
                Some(top) => out.push(top.clone()),
                None => out.extend(first_segments(after)),
            }
        }
    }
    out
}

#[test]
fn the_dependency_reader_sees_every_kind_of_path() {
    let own = |p: &str| module_path(Path::new(p));
    assert_eq!(own("check/nodes/body.rs"), ["check", "nodes", "body"]);
    assert_eq!(own("check/mod.rs"), ["check"]);
    assert_eq!(own("names.rs"), ["names"]);
    let check_file = own("check/decls.rs");
    assert_eq!(
        crate_uses("use crate::lint::rules as r;", &check_file),
        ["lint"]
    );
    assert_eq!(
        crate_uses(
            "use crate::{plan::Plan, store::{Store, Write}};",
            &check_file
        ),
        ["plan", "store"]
    );
    assert_eq!(
        crate_uses(
            "let x = crate::runtime::run(crate::plan::x());",
            &check_file
        ),
        ["runtime", "plan"]
    );
    assert_eq!(crate_uses("use super::Checker;", &check_file), ["check"]);
    let body = own("check/nodes/body.rs");
    assert_eq!(crate_uses("use super::super::expr;", &body), ["check"]);
    assert_eq!(
        crate_uses("use super::super::super::lint;", &body),
        ["lint"]
    );
    assert_eq!(
        crate_uses("use super::lint;", &own("check/mod.rs")),
        ["lint"]
    );
    assert_eq!(
        crate_uses("$crate::diagnostic::Rule", &own("rules/mod.rs")),
        ["diagnostic"]
    );
    assert!(crate_uses("use pipec_crate::x; use my_super::y;", &check_file).is_empty());
}

/// Every top-level module of `src/`, by name.
fn top_level_modules() -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(src()).into_iter().flatten().flatten() {
        let p = e.path();
        let name = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        let Some(name) = name else { continue };
        if p.is_dir()
            || (p.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main")
        {
            out.push(name);
        }
    }
    out.sort();
    out
}

#[test]
fn every_module_is_in_the_dependency_table() {
    for module in top_level_modules() {
        assert!(
            allowed(&module).is_some(),
            "src/{module} is not in the dependency table (ALLOWED in tests/architecture.rs)"
        );
    }
}

#[test]
fn the_dependency_table_has_no_cycle() {
    // Depth-first search over the allowed edges; a module met again on the current path
    // closes a cycle.
    fn visit(module: &str, path: &mut Vec<String>, done: &mut Vec<String>) {
        if done.iter().any(|d| d == module) {
            return;
        }
        assert!(
            !path.iter().any(|p| p == module),
            "the table allows a cycle: {} → {module}",
            path.join(" → ")
        );
        path.push(module.to_string());
        for next in allowed(module).unwrap_or(&[]) {
            if allowed(next).is_some() {
                visit(next, path, done);
            }
        }
        path.pop();
        done.push(module.to_string());
    }
    let mut done = Vec::new();
    for (module, _) in ALLOWED {
        visit(module, &mut Vec::new(), &mut done);
    }
}

#[test]
fn modules_use_only_what_the_dependency_table_allows() {
    let mut problems = Vec::new();
    for (path, text) in files_under("") {
        let Ok(rel) = path.strip_prefix(src()) else {
            continue;
        };
        if rel == Path::new("lib.rs") || rel == Path::new("main.rs") {
            continue;
        }
        let own = module_path(rel);
        let Some(top) = own.first().cloned() else {
            continue;
        };
        let Some(may_use) = allowed(&top) else {
            continue; // reported by every_module_is_in_the_dependency_table
        };
        for line in code(&text) {
            for used in crate_uses(line, &own) {
                if used == top {
                    continue;
                }
                let target = if allowed(&used).is_some() {
                    used.clone()
                } else if let Some((_, owner)) = ROOT_ITEMS.iter().find(|(i, _)| *i == used) {
                    owner.to_string()
                } else {
                    "<crate root>".to_string()
                };
                if target != top && !may_use.contains(&target.as_str()) {
                    problems.push(format!(
                        "{}: `{top}` may not use `{target}` (`{used}`): {line}",
                        rel.display()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "back edges between modules:\n{}",
        problems.join("\n")
    );
}

/// The crates of `[dependencies]`, as Rust names them.
fn external_crates() -> Vec<String> {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .unwrap_or_default();
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once('=') {
            out.push(name.trim().replace('-', "_"));
        }
    }
    out
}

#[test]
fn restricted_modules_use_only_their_external_crates() {
    let crates = external_crates();
    assert!(crates.iter().any(|c| c == "tokio"), "{crates:?}");
    for (module, may_use) in EXTERNAL_ALLOWED {
        for (path, text) in files_under(module) {
            for line in code(&text) {
                for name in &crates {
                    let named = line
                        .match_indices(&format!("{name}::"))
                        .any(|(i, _)| !line[..i].ends_with(|c: char| is_ident_char(c) || c == ':'));
                    assert!(
                        !named || may_use.contains(&name.as_str()),
                        "{} (`{module}`) uses `{name}`: {line}",
                        path.display()
                    );
                }
            }
        }
    }
}
