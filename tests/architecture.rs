//! The invariants of ARCHITECTURE.md that Cargo does not enforce by itself.
//!
//! Cargo keeps each crate to the crates it declares and refuses cycles; these tests keep
//! the declarations to the intended layering (which crate may depend on which, which crate
//! owns each heavy dependency, what the embeddable core leaves out), and hold the rules
//! about source text that no manifest can state.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What `cargo COMMAND --manifest-path <the workspace> ARGS...` prints.
fn cargo(command: &str, args: &[&str]) -> Vec<u8> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg(command)
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cargo {command} does not run: {e}"));
    assert!(
        out.status.success(),
        "cargo {command} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `cargo metadata` of the workspace, with `args` choosing the root package's features.
fn metadata(args: &[&str]) -> Value {
    let args = [&["--format-version", "1"], args].concat();
    serde_json::from_slice(&cargo("metadata", &args)).expect("cargo metadata gives JSON")
}

/// The short name of a workspace crate: `pipec-check` is `check`; the root is `pipec`.
fn short(name: &str) -> String {
    name.strip_prefix("pipec-").unwrap_or(name).to_string()
}

fn workspace_packages(meta: &Value) -> Vec<&Value> {
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| members.contains(p["id"].as_str().unwrap()))
        .collect()
}

/// The workspace crates that are tools of the project, never published nor depended on.
const UNPUBLISHED: &[&str] = &["pipec-demo-crm", "pipec-conformance"];

/// The crates a package names under `[dependencies]` (not dev or build dependencies).
fn normal_dependencies(package: &Value) -> BTreeSet<String> {
    package["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null())
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

/// Every package a workspace crate is built with (its normal and build dependencies, to
/// the bottom), as resolved with the features `meta` was asked for.
fn closure(meta: &Value, crate_name: &str) -> BTreeSet<String> {
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: BTreeMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let start = names
        .iter()
        .find(|(id, name)| **name == crate_name && nodes.contains_key(*id))
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("{crate_name} is not in the workspace"));
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let built_with = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null() || k["kind"] == "build");
            if built_with {
                stack.push(dep["pkg"].as_str().unwrap());
            }
        }
    }
    seen.remove(start);
    seen.into_iter().map(|id| names[id].to_string()).collect()
}

// ------------------------------------------------------------------ the layering

/// The workspace crates each crate may depend on. Data flows one way: source text →
/// syntax → check → plan → runtime (on a store, through MCP and process control) → serve
/// and the command line. The runtime takes a plan, not source: it does not depend on the
/// compiler. The demo CRM server stands beside the others and uses only the base.
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &[]),
    ("diagnostic", &["base"]),
    ("syntax", &["base", "diagnostic"]),
    ("schema", &["base"]),
    ("plan", &["base", "diagnostic", "schema"]),
    ("check", &["base", "diagnostic", "syntax", "plan", "schema"]),
    ("store", &[]),
    ("process", &[]),
    ("mcp", &["base", "process"]),
    (
        "runtime",
        &[
            "base",
            "diagnostic",
            "plan",
            "schema",
            "store",
            "mcp",
            "process",
        ],
    ),
    (
        "serve",
        &[
            "base",
            "diagnostic",
            "plan",
            "schema",
            "check",
            "store",
            "mcp",
            "runtime",
        ],
    ),
    ("lsp", &["base", "diagnostic", "syntax", "check"]),
    // Traces over OTLP: the runtime's span records as OpenTelemetry's.
    ("telemetry", &["runtime"]),
    // The web inspector: threads read from the store, acted on through the runtime.
    (
        "ui",
        &["base", "diagnostic", "plan", "runtime", "schema", "store"],
    ),
    // `pipec test`: a pipeline's checked tests run through the runtime on a throwaway store.
    ("test", &["base", "mcp", "plan", "runtime", "store"]),
    ("demo-crm", &["base"]),
    // The client the MCP conformance suite drives: the MCP session and example arguments.
    ("conformance", &["mcp", "schema"]),
    (
        "pipec",
        &[
            "base",
            "diagnostic",
            "syntax",
            "schema",
            "plan",
            "check",
            "store",
            "process",
            "mcp",
            "runtime",
            "serve",
            "lsp",
            "telemetry",
            "ui",
            "test",
        ],
    ),
];

/// The crates that make up the compiler: what `pipec check` and the language server need.
const COMPILER: &[&str] = &[
    "pipec-base",
    "pipec-diagnostic",
    "pipec-syntax",
    "pipec-schema",
    "pipec-plan",
    "pipec-check",
];

/// What the compiler must never be built with: an async runtime, the store, MCP, HTTP,
/// JSON Schema validation. The compiler is pure: text in, diagnostics and a plan out.
const RUNTIME_ONLY: &[&str] = &[
    "tokio",
    "redb",
    "rmcp",
    "reqwest",
    "hyper",
    "jsonschema",
    "tokio-postgres",
    "rustls",
];

/// Heavy or protocol-specific dependencies and the only crates that may name them, so
/// each concept has one home: the MCP SDK in mcp (and the demo
/// server, which serves with it), the store engines in store, the LSP crates in lsp.
const OWNERS: &[(&str, &[&str])] = &[
    ("miette", &["diagnostic"]),
    ("rmcp", &["mcp", "demo-crm"]),
    ("sse-stream", &["mcp"]),
    ("redb", &["store"]),
    ("tokio-postgres", &["store"]),
    ("deadpool-postgres", &["store"]),
    ("tokio-postgres-rustls", &["store"]),
    ("lsp-server", &["lsp"]),
    ("lsp-types", &["lsp"]),
    ("saphyr-parser", &["serve"]),
    // The tokenizers `pipec budget` and P0408 count with: the checker's alone.
    ("tiktoken-rs", &["check"]),
    // Behind pipec-schema's `validate` feature, which only the runtime turns on.
    ("jsonschema", &["schema"]),
    ("clap", &["pipec", "demo-crm"]),
    ("clap_complete", &["pipec"]),
    ("opentelemetry", &["telemetry"]),
    ("opentelemetry_sdk", &["telemetry"]),
    ("opentelemetry-otlp", &["telemetry"]),
];

#[test]
fn workspace_crates_depend_only_on_the_layers_below() {
    let meta = metadata(&["--no-deps"]);
    let mut seen = BTreeSet::new();
    for package in workspace_packages(&meta) {
        let own = short(package["name"].as_str().unwrap());
        let allowed = LAYERS
            .iter()
            .find(|(name, _)| *name == own)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("the crate {own} is not in LAYERS (tests/architecture.rs)"));
        for dep in normal_dependencies(package) {
            if !dep.starts_with("pipec") {
                continue;
            }
            assert!(
                allowed.contains(&short(&dep).as_str()),
                "{own} depends on {dep}, which LAYERS does not allow; see ARCHITECTURE.md"
            );
        }
        seen.insert(own);
    }
    for (name, _) in LAYERS {
        assert!(
            seen.contains(*name),
            "LAYERS names {name}, which is not a workspace crate"
        );
    }
}

/// Every package `cargo build -p crate_name` builds it with (normal and build
/// dependencies, for every target). Unlike `cargo metadata`, which resolves features once
/// for the whole workspace, a build unifies features only among the packages it selects:
/// the runtime turning on `pipec-schema/validate` does not bring jsonschema to `check`.
fn built_alone(crate_name: &str) -> BTreeSet<String> {
    let out = cargo(
        "tree",
        &[
            "--edges",
            "normal,build",
            "--target",
            "all",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--package",
            crate_name,
        ],
    );
    String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != crate_name)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_compiler_is_built_without_the_runtime_crates() {
    for krate in COMPILER {
        let deps = built_alone(krate);
        for heavy in RUNTIME_ONLY {
            assert!(
                !deps.contains(*heavy),
                "{krate} is built with {heavy}; the compiler crates stay pure"
            );
        }
    }
    // The same look sees what the runtime is built with.
    assert!(
        built_alone("pipec-runtime").contains("jsonschema"),
        "the runtime validates without jsonschema?"
    );
}

#[test]
fn each_heavy_dependency_has_its_owners_alone() {
    let meta = metadata(&["--no-deps"]);
    for package in workspace_packages(&meta) {
        let own = short(package["name"].as_str().unwrap());
        for dep in normal_dependencies(package) {
            if let Some((_, owners)) = OWNERS.iter().find(|(name, _)| *name == dep) {
                assert!(
                    owners.contains(&own.as_str()),
                    "{own} depends on {dep}, which belongs to {owners:?}"
                );
            }
        }
    }
}

#[test]
fn the_embeddable_core_leaves_out_the_command_line_and_its_servers() {
    let meta = metadata(&["--no-default-features"]);
    let deps = closure(&meta, "pipec");
    for left_out in [
        "clap",
        "clap_complete",
        "pipec-serve",
        "pipec-lsp",
        "lsp-server",
        "lsp-types",
        "tokio-postgres",
        "deadpool-postgres",
        "saphyr-parser",
        "pipec-demo-crm",
        "pipec-telemetry",
        "opentelemetry",
        "opentelemetry_sdk",
        "pipec-ui",
    ] {
        assert!(
            !deps.contains(left_out),
            "pipec without default features is built with {left_out}"
        );
    }
    for kept in ["pipec-check", "pipec-runtime", "redb"] {
        assert!(deps.contains(kept), "the embeddable core lacks {kept}");
    }
    // The default build is the whole command line.
    let full = closure(&metadata(&[]), "pipec");
    for kept in [
        "clap",
        "pipec-serve",
        "pipec-lsp",
        "tokio-postgres",
        "pipec-telemetry",
        "pipec-ui",
    ] {
        assert!(full.contains(kept), "pipec's default features lack {kept}");
    }
}

#[test]
fn the_mcp_server_side_is_behind_a_feature() {
    let meta = metadata(&[]);
    let runtime = closure(&meta, "pipec-runtime");
    // The runtime calls servers; serving is `pipec-serve`'s, through pipec-mcp's `server`.
    let package = workspace_packages(&meta)
        .into_iter()
        .find(|p| p["name"] == "pipec-mcp")
        .unwrap();
    assert!(
        package["features"]["server"].is_array(),
        "pipec-mcp has no `server` feature"
    );
    let runtime_pkg = workspace_packages(&meta)
        .into_iter()
        .find(|p| p["name"] == "pipec-runtime")
        .unwrap();
    for dep in runtime_pkg["dependencies"].as_array().unwrap() {
        if dep["name"] == "pipec-mcp" {
            let features: Vec<&str> = dep["features"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            assert!(
                !features.contains(&"server"),
                "the runtime asks for the MCP server side"
            );
        }
    }
    assert!(runtime.contains("pipec-mcp"));
}

#[test]
fn the_demo_server_and_the_conformance_client_are_neither_published_nor_depended_on() {
    let meta = metadata(&["--no-deps"]);
    for package in workspace_packages(&meta) {
        let name = package["name"].as_str().unwrap();
        if UNPUBLISHED.contains(&name) {
            assert_eq!(
                package["publish"],
                serde_json::json!([]),
                "{name} is published"
            );
        }
        for tool in UNPUBLISHED {
            assert!(
                !normal_dependencies(package).contains(*tool),
                "{name} depends on {tool}"
            );
        }
    }
}

// ------------------------------------------------------------------ source text

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

/// The `src/` folder of a workspace crate (`pipec` is the root's).
fn src(krate: &str) -> PathBuf {
    if krate == "pipec" {
        root().join("src")
    } else {
        root().join("crates").join(krate).join("src")
    }
}

fn files_of(krate: &str) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&src(krate), &mut files);
    assert!(
        !files.is_empty(),
        "{} holds no source",
        src(krate).display()
    );
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap_or_default();
            (p, t)
        })
        .collect()
}

fn every_crate() -> Vec<String> {
    LAYERS
        .iter()
        .map(|(name, _)| {
            if *name == "pipec" {
                "pipec".to_string()
            } else {
                format!("pipec-{name}")
            }
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
fn the_compiler_does_no_io_but_through_the_loader() {
    // `pipec-base`'s `source` module is the loader: the compiler reads files through it.
    let loader = src("pipec-base").join("source.rs");
    for krate in COMPILER {
        for (path, text) in files_of(krate) {
            for line in code(&text) {
                for forbidden in ["std::net", "std::process", "std::env::var"] {
                    assert!(
                        !line.contains(forbidden),
                        "{} (compiler) uses {forbidden}: {line}",
                        path.display()
                    );
                }
                assert!(
                    path == loader || !line.contains("std::fs::"),
                    "{} reads files past the loader: {line}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn every_source_file_says_what_it_owns() {
    for krate in every_crate() {
        for (path, text) in files_of(&krate) {
            assert!(
                text.starts_with("//!"),
                "{} does not open with a `//!` line",
                path.display()
            );
        }
    }
}

#[test]
fn unsafe_code_is_allowed_only_where_the_operating_system_needs_it() {
    // The workspace denies `unsafe_code`; these modules lift it, each block saying why it
    // is sound: process control, inotify and `openat2` for `serve`'s files, and the
    // liveness probe of a redb file's owner.
    let allowed = [
        "crates/pipec-process/src/lib.rs",
        "crates/pipec-process/src/proc_stat.rs",
        "crates/pipec-serve/src/lib.rs",
        "crates/pipec-store/src/redb_store/open.rs",
    ];
    for krate in every_crate() {
        for (path, text) in files_of(&krate) {
            let rel = path
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if text.contains("allow(unsafe_code)") {
                assert!(allowed.contains(&rel.as_str()), "{rel} allows unsafe code");
            }
        }
    }
}

#[test]
fn every_rule_file_is_registered() {
    let rules = src("pipec-diagnostic").join("rules");
    let lint = src("pipec-check").join("lint");
    let catalogue = std::fs::read_to_string(rules.join("mod.rs")).unwrap_or_default();
    let passes = std::fs::read_to_string(lint.join("registry.rs")).unwrap_or_default();
    let mut rule_files = 0;
    for (path, text) in files_of("pipec-diagnostic") {
        if !path.starts_with(&rules) || path.ends_with("mod.rs") {
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
            "{name} ({}) is not in the catalogue of {}",
            path.display(),
            rules.join("mod.rs").display()
        );
        // A rule file is catalogue only: the pass, if the rule has one, is in the checker.
        assert!(
            !code(&text).any(|l| l.contains("fn ")),
            "{} holds code; passes go in {}/passes/{file}.rs",
            path.display(),
            lint.display()
        );
    }
    assert!(rule_files > 40, "found only {rule_files} rule files");
    let mut pass_files = 0;
    for (path, _) in files_of("pipec-check") {
        if !path.starts_with(lint.join("passes")) || path.ends_with("mod.rs") {
            continue;
        }
        pass_files += 1;
        let file = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let file = file.unwrap_or_default();
        assert!(
            rules.join(format!("{file}.rs")).is_file(),
            "the pass {} is named after no rule of {}",
            path.display(),
            rules.display()
        );
        assert!(
            passes.contains(&format!("p::{file}::check,")),
            "the pass {} is not in PASSES ({})",
            path.display(),
            lint.join("registry.rs").display()
        );
    }
    assert!(pass_files > 10, "found only {pass_files} passes");
}
