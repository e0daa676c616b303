//! The `pipec` binary end to end: exit codes, output formats, and the acceptance cases
//! of the checker on copies of the example project.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// This build's binary, or `PIPEC_TEST_BIN` (to see a regression test fail on another).
fn pipec() -> Command {
    Command::new(common::pipec_bin())
}

fn run(args: &[&str], cwd: &Path) -> Output {
    pipec()
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .expect("pipec runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh copy of `pipelines/` and `prompts/` in a temporary folder.
struct Project {
    dir: PathBuf,
}

impl Project {
    fn new(tag: &str) -> Project {
        let dir = std::env::temp_dir().join(format!("pipec-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["pipelines", "prompts"] {
            copy_dir(&crate_root().join(sub), &dir.join(sub));
        }
        Project { dir }
    }

    fn edit(&self, rel: &str, from: &str, to: &str) {
        let path = self.dir.join(rel);
        let text = std::fs::read_to_string(&path).expect("file exists");
        assert!(text.contains(from), "{rel} does not contain {from:?}");
        std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
    }

    fn check_json(&self, file: &str) -> (i32, serde_json::Value) {
        let out = run(&["check", "--format", "json", file], &self.dir);
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json output");
        (out.status.code().unwrap_or(-1), json)
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let p = entry.path();
        let target = to.join(entry.file_name());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).expect("copy");
        }
    }
}

fn diags(json: &serde_json::Value) -> Vec<serde_json::Value> {
    json["diagnostics"].as_array().cloned().unwrap_or_default()
}

fn example_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(crate_root().join("pipelines"))
        .expect("pipelines/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pipe"))
        .map(|p| {
            format!(
                "pipelines/{}",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn examples_check_clean_and_print_nothing() {
    let files = example_files();
    assert!(
        files.len() >= 3,
        "the examples are deal_research.pipe and at least two more"
    );
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let out = run(&args, &crate_root());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), "");
    // With warnings denied too: the examples have none.
    args.push("--deny");
    args.push("warnings");
    assert_eq!(run(&args, &crate_root()).status.code(), Some(0));
}

#[test]
fn renamed_uri_variable_is_unbound_at_its_line_and_column() {
    let p = Project::new("uri");
    let file = "pipelines/deal_research.pipe";
    let text = std::fs::read_to_string(p.dir.join(file)).unwrap_or_default();
    let needle = "resource(\"mcp://crm/deals/{deal_id}/activity\", max_bytes: 50kb)";
    let offset = text.find(needle).expect("the research node's resource");
    let line = text[..offset].lines().count();
    let col = offset - text[..offset].rfind('\n').map_or(0, |n| n + 1)
        + "resource(\"mcp://crm/deals/".len()
        + 1;
    p.edit(
        file,
        needle,
        "resource(\"mcp://crm/deals/{deal}/activity\", max_bytes: 50kb)",
    );
    let (code, json) = p.check_json(file);
    assert_eq!(code, 1);
    let d = diags(&json);
    let hit = d
        .iter()
        .find(|d| d["code"] == "P0301")
        .expect("P0301 unbound-uri-variable");
    assert_eq!(hit["name"], "unbound-uri-variable");
    assert_eq!(hit["line"], line);
    assert_eq!(
        hit["column"],
        col + 1,
        "points at the variable inside the braces"
    );
    assert!(hit["message"].as_str().unwrap_or("").contains("`deal`"));
}

#[test]
fn removing_a_link_kind_from_the_producer_is_an_unproduced_link_kind() {
    let p = Project::new("link");
    let file = "pipelines/deal_research.pipe";
    p.edit(
        file,
        "links = [\"activity-history\", \"email-history\"]",
        "links = [\"activity-history\"]",
    );
    let (code, json) = p.check_json(file);
    assert_eq!(code, 1);
    let d = diags(&json);
    let hit = d
        .iter()
        .find(|d| d["code"] == "P0304")
        .expect("P0304 unproduced-link-kind");
    let text = std::fs::read_to_string(p.dir.join(file)).unwrap_or_default();
    let line_of_ref = text
        .lines()
        .position(|l| l.contains("resource(ref: \"email-history\""))
        .expect("the ref binding")
        + 1;
    assert_eq!(hit["line"], line_of_ref);
    assert!(
        hit["message"]
            .as_str()
            .unwrap_or("")
            .contains("email-history")
    );
}

#[test]
fn an_undefined_prompt_variable_points_into_the_template_file() {
    let p = Project::new("prompt");
    let tpl = "prompts/consume/brief.jinja";
    p.edit(
        tpl,
        "Write a brief for the next call.",
        "Write a brief for the next call. {{ nope }}",
    );
    let (code, json) = p.check_json("pipelines/deal_research.pipe");
    assert_eq!(code, 1);
    let d = diags(&json);
    let hit = d
        .iter()
        .find(|d| d["code"] == "P0402")
        .expect("P0402 undefined-prompt-variable");
    assert!(
        hit["file"]
            .as_str()
            .unwrap_or("")
            .ends_with("prompts/consume/brief.jinja"),
        "{hit}"
    );
    let text = std::fs::read_to_string(p.dir.join(tpl)).unwrap_or_default();
    let line = text
        .lines()
        .position(|l| l.contains("{{ nope }}"))
        .expect("line")
        + 1;
    assert_eq!(hit["line"], line);
    let col = text
        .lines()
        .nth(line - 1)
        .and_then(|l| l.find("nope"))
        .expect("col")
        + 1;
    assert_eq!(hit["column"], col);
}

#[test]
fn swapped_parameter_types_are_a_type_mismatch_naming_both() {
    let p = Project::new("swap");
    let file = "pipelines/deal_research.pipe";
    // Two parameters of `consume` with their types swapped.
    p.edit(
        file,
        "  digest: Digest = digest,\n  history: EmailPage = resource",
        "  digest: EmailPage = digest,\n  history: Digest = resource",
    );
    let out = run(&["check", file], &p.dir);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("P0201 type-mismatch"), "{text}");
    assert!(
        text.contains("expected `EmailPage`, found `Digest`"),
        "{text}"
    );
}

#[test]
fn three_syntax_errors_are_reported_in_one_run() {
    let p = Project::new("syntax");
    let file = "pipelines/deal_research.pipe";
    p.edit(
        file,
        "  command = \"pipec-demo-crm\"",
        "  command: \"pipec-demo-crm\"",
    );
    p.edit(file, "  stage: string", "  stage string");
    p.edit(file, "input deal_id: string", "input deal_id string");
    let (code, json) = p.check_json(file);
    assert_eq!(code, 1);
    let lines: Vec<i64> = diags(&json)
        .iter()
        .filter(|d| d["code"] == "P0001")
        .filter_map(|d| d["line"].as_i64())
        .collect();
    assert_eq!(lines.len(), 3, "{json}");
    assert!(
        lines.windows(2).all(|w| w[0] < w[1]),
        "three places: {lines:?}"
    );
}

#[test]
fn json_diagnostics_are_versioned_and_complete() {
    let p = Project::new("json");
    p.edit(
        "pipelines/deal_research.pipe",
        "prompt = file(\"consume/brief\")",
        "prompt = file(\"consume/brif\")",
    );
    let (code, json) = p.check_json("pipelines/deal_research.pipe");
    assert_eq!(code, 1);
    assert_eq!(json["version"], 1);
    let d = &diags(&json)[0];
    for key in [
        "code", "name", "severity", "message", "file", "line", "column", "end", "labels", "help",
    ] {
        assert!(d.get(key).is_some(), "missing `{key}` in {d}");
    }
    assert_eq!(d["code"], "P0401");
    assert_eq!(d["severity"], "error");
    assert!(d["end"]["column"].as_i64() > d["column"].as_i64());
    assert_eq!(json["summary"]["errors"], 1);
}

#[test]
fn sarif_output_names_rules_and_locations() {
    let p = Project::new("sarif");
    p.edit(
        "pipelines/deal_research.pipe",
        "when = ack.approved",
        "when = ack.aproved",
    );
    let out = run(
        &["check", "--format", "sarif", "pipelines/deal_research.pipe"],
        &p.dir,
    );
    assert_eq!(out.status.code(), Some(1));
    let sarif: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("sarif json");
    assert_eq!(sarif["version"], "2.1.0");
    let run0 = &sarif["runs"][0];
    assert_eq!(run0["tool"]["driver"]["name"], "pipec");
    assert!(
        run0["tool"]["driver"]["rules"]
            .as_array()
            .is_some_and(|r| r.len() >= 40)
    );
    let result = &run0["results"][0];
    assert_eq!(result["ruleId"], "P0202");
    assert_eq!(result["level"], "error");
    let region = &result["locations"][0]["physicalLocation"]["region"];
    assert!(region["startLine"].as_i64().is_some_and(|l| l > 1));
    // `aproved` has one close field: the rename is a SARIF fix at the same place.
    let fix = &result["fixes"][0];
    assert_eq!(fix["description"]["text"], "rename `aproved` to `approved`");
    let replacement = &fix["artifactChanges"][0]["replacements"][0];
    assert_eq!(replacement["insertedContent"]["text"], "approved");
    assert_eq!(
        replacement["deletedRegion"]["startLine"],
        region["startLine"]
    );
}

#[test]
fn warnings_exit_zero_unless_denied() {
    let dir = std::env::temp_dir().join(format!("pipec-cli-warn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("warn.pipe");
    std::fs::write(&file, "input a: string\ninput unused: string\n\nnode echo(a: string = input.a) -> string {\n  return = a\n}\n\noutput echo = echo\n").expect("write");
    let f = file.to_string_lossy().into_owned();
    let out = run(&["check", &f], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("P0503 unused-declaration"));
    assert!(stdout(&out).contains("1 warning"));
    let out = run(&["check", "--deny", "warnings", &f], &dir);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_and_io_errors_exit_two() {
    let root = crate_root();
    assert_eq!(
        run(&["check", "no/such/file.pipe"], &root).status.code(),
        Some(2)
    );
    assert_eq!(
        run(
            &["check", "--format", "xml", "pipelines/deal_research.pipe"],
            &root
        )
        .status
        .code(),
        Some(2)
    );
    assert_eq!(run(&["frobnicate"], &root).status.code(), Some(2));
    assert_eq!(run(&["explain", "P9999"], &root).status.code(), Some(2));
}

#[test]
fn explain_prints_the_rule_documentation() {
    let root = crate_root();
    let out = run(&["explain", "P0301"], &root);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.starts_with("P0301 unbound-uri-variable (error)"),
        "{text}"
    );
    for section in ["## What it catches", "## Why it matters", "## Example"] {
        assert!(text.contains(section), "{text}");
    }
    let by_name = stdout(&run(&["explain", "unbound-uri-variable"], &root));
    assert_eq!(by_name, text);
    let list = stdout(&run(&["explain", "--list"], &root));
    for rule in pipec::rules::ALL_RULES {
        assert!(
            list.contains(rule.code) && list.contains(rule.name),
            "{} missing from --list",
            rule.code
        );
    }
    assert!(list.contains("R0402") && list.contains("thread-locked"));
}

#[test]
fn every_rule_documents_what_why_and_an_example() {
    for rule in pipec::rules::ALL_RULES {
        let doc = rule.documentation();
        for section in ["## What it catches", "## Why it matters", "## Example"] {
            assert!(
                doc.contains(section),
                "{} {} lacks `{section}`",
                rule.code,
                rule.name
            );
        }
        assert!(
            rule.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '-'),
            "{} is not kebab-case",
            rule.name
        );
    }
    let mut codes: Vec<&str> = pipec::rules::ALL_RULES.iter().map(|r| r.code).collect();
    codes.sort();
    let before = codes.len();
    codes.dedup();
    assert_eq!(before, codes.len(), "codes are unique");
}

#[test]
fn compile_twice_gives_byte_identical_plans() {
    let root = crate_root();
    for file in example_files() {
        let a = run(&["compile", &file], &root);
        let b = run(&["compile", &file], &root);
        assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
        assert_eq!(a.stdout, b.stdout, "{file}");
        let plan: serde_json::Value = serde_json::from_slice(&a.stdout).expect("plan json");
        assert!(
            plan["hash"]
                .as_str()
                .is_some_and(|h| h.starts_with("sha256:"))
        );
    }
}

#[test]
fn compile_writes_to_a_file_and_refuses_a_broken_pipeline() {
    let p = Project::new("compile");
    let out = run(
        &["compile", "pipelines/deal_research.pipe", "-o", "plan.json"],
        &p.dir,
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "");
    let plan = std::fs::read_to_string(p.dir.join("plan.json")).expect("plan written");
    assert!(pipec::Plan::from_json(&plan).is_ok());
    p.edit(
        "pipelines/deal_research.pipe",
        "model = fast\n  prompt = file(\"consume/brief\")",
        "model = slow\n  prompt = file(\"consume/brief\")",
    );
    let out = run(&["compile", "pipelines/deal_research.pipe"], &p.dir);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "", "no plan on stdout");
    assert!(stderr(&out).contains("unknown model `slow`"));
}

#[test]
fn compile_schema_describes_the_plan() {
    let out = run(&["compile", "--schema"], &crate_root());
    assert_eq!(out.status.code(), Some(0));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).expect("schema json");
    let props = &schema["properties"];
    for key in [
        "format_version",
        "hash",
        "nodes",
        "inputs",
        "outputs",
        "$defs",
        "servers",
        "models",
        "tools",
        "link_kinds",
    ] {
        assert!(props.get(key).is_some(), "schema lacks {key}");
    }
}

#[test]
fn graph_draws_node_kinds_and_resource_edges() {
    let root = crate_root();
    let out = run(
        &[
            "graph",
            "pipelines/deal_research.pipe",
            "--format",
            "mermaid",
        ],
        &root,
    );
    assert_eq!(out.status.code(), Some(0));
    let m = stdout(&out);
    assert!(m.starts_with("flowchart TD"));
    assert!(
        m.contains("n_review{\"gate review\"}"),
        "gates are diamonds:\n{m}"
    );
    assert!(m.contains("n_research[[\"agent research\"]]"), "{m}");
    assert!(
        m.contains("s_crm -.->"),
        "resource bindings come from the server:\n{m}"
    );
    assert!(
        m.contains("n_research -.->|\"history (link email-history)\"| n_consume"),
        "links come from their producer:\n{m}"
    );
    let out = run(
        &["graph", "pipelines/deal_research.pipe", "--format", "dot"],
        &root,
    );
    let d = stdout(&out);
    assert!(d.starts_with("digraph"));
    assert!(d.contains("shape=diamond"));
    assert!(d.contains("style=dashed"));
}

/// Runs pipec in `cwd`, killing it after `secs` seconds (an older build may wait forever
/// on a plan it should have refused).
fn run_for(args: &[&str], cwd: &Path, secs: u64) -> (Option<i32>, String) {
    let mut child = pipec()
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .env_remove("PIPEC_STORE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("pipec starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = child
        .wait_with_output()
        .map(|o| stderr(&o))
        .unwrap_or_default();
    (status, out)
}

#[test]
fn defect_6_an_edited_plan_is_refused_when_loaded_and_starts_nothing() {
    let dir = std::env::temp_dir().join(format!("pipec-cli-plan-invalid-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let source = "input x: string\n\nnode a(x: string = input.x) -> string {\n  return = x\n}\n\nnode b(a: string = a) -> string {\n  return = a\n}\n\noutput b = b\n";
    let mut plan = pipec::compile_str("loop.pipe", source).expect("compiles");
    // The edit adds a cycle (`a` now waits for `b`), and the hash is recomputed so that
    // the hash check alone cannot notice.
    plan.nodes[0].deps.push("b".into());
    plan.hash = pipec::plan::hash_plan(&plan);
    std::fs::write(dir.join("edited.json"), plan.to_json()).expect("write");
    let (status, err) = run_for(&["run", "edited.json", "--input", "x=hi"], &dir, 30);
    assert_eq!(status, Some(1), "{err}");
    assert!(err.contains("error[R0004]"), "{err}");
    assert!(err.contains("a → b → a"), "{err}");
    assert!(err.contains("help: compile the pipeline again"), "{err}");
    assert!(
        !dir.join(".pipec").exists(),
        "a refused plan created a store: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn docs_list_every_code_with_its_name_and_severity() {
    let docs =
        std::fs::read_to_string(crate_root().join("docs/diagnostics.md")).expect("docs exist");
    for rule in pipec::rules::ALL_RULES
        .iter()
        .chain(pipec::diagnostic::RUNTIME_CODES.iter())
    {
        let row = format!(
            "| {} | {} | {} |",
            rule.code,
            rule.name,
            rule.severity.as_str()
        );
        assert!(
            docs.contains(&row),
            "docs/diagnostics.md has no row `{row} ... |` in its table of codes"
        );
    }
}

/// The help lines of a file's diagnostics with this code, from `pipec check --format json`.
fn helps(file: &str, code: &str) -> Vec<String> {
    let out = run(&["check", "--format", "json", file], &crate_root());
    let json: serde_json::Value = serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("{file}: not JSON ({e}): {}", stderr(&out)));
    diags(&json)
        .iter()
        .filter(|d| d["code"] == code)
        .map(|d| d["help"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn defect_14_check_of_a_folder_checks_its_pipe_files() {
    let dir = std::env::temp_dir().join(format!("pipec-cli-folder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clean = "input a: string\n\nnode echo(a: string = input.a) -> string {\n  return = a\n}\n\noutput echo = echo\n";
    let broken = "node echo() -> string {\n  return = nope\n}\n";
    for (rel, text) in [
        ("ok.pipe", clean),
        ("sub/deeper/bad.pipe", broken),
        (".hidden/bad.pipe", broken),
        (".pipec/bad.pipe", broken),
        ("notes.txt", broken),
    ] {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    let d = dir.to_string_lossy().into_owned();
    let out = run(&["check", "--format", "json", &d], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let files: Vec<String> = diags(&json)
        .iter()
        .map(|x| x["file"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!files.is_empty(), "{json}");
    assert!(
        files.iter().all(|f| f.ends_with("sub/deeper/bad.pipe")),
        "only the visible broken file is reported: {files:?}"
    );
    // A folder with no .pipe file is a usage error, like a missing file.
    std::fs::create_dir_all(dir.join("empty/.pipec")).expect("mkdir");
    std::fs::write(dir.join("empty/.pipec/x.pipe"), broken).expect("write");
    let empty = dir.join("empty").to_string_lossy().into_owned();
    let out = run(&["check", &empty], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("holds no .pipe file"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn defect_14_type_help_lines_name_the_real_sources() {
    assert_eq!(
        helps("tests/ui/type-mismatch/fail.pipe", "P0201"),
        [
            "to run once per item, fan out: `subject: string = each(research.recent_email_subjects)`; to take the whole list, declare `subject: string[]`"
        ]
    );
    assert_eq!(
        helps("tests/ui/type-mismatch/fail-field.pipe", "P0201"),
        ["did you mean its field `input.summary.headline`?"]
    );
    assert_eq!(
        helps("tests/ui/invalid-literal-type/fail-default.pipe", "P0203"),
        ["write `input min_amount: int = 20000`"]
    );
    assert_eq!(
        helps("tests/ui/optional-into-required/fail.pipe", "P0204"),
        ["give a default: `review.note ?? \"\"`, or declare `note: string?`"]
    );
}

#[test]
fn defect_14_a_namespaced_link_kind_is_suggested() {
    assert_eq!(
        helps("tests/ui/unknown-name/fail-namespaced-link.pipe", "P0101"),
        ["did you mean `kb.chunk`?"]
    );
}

#[test]
fn defect_14_a_file_that_is_not_utf8_is_reported_as_such() {
    for (file, named) in [
        ("tests/ui/invalid-encoding/fail.pipe", "fail.pipe"),
        (
            "tests/ui/invalid-encoding/fail-import.pipe",
            "shared/latin1.pipe",
        ),
        (
            "tests/ui/invalid-encoding/fail-prompt.pipe",
            "prompts/latin1.jinja",
        ),
    ] {
        let out = run(&["check", "--format", "json", file], &crate_root());
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        let all = diags(&json);
        let codes: Vec<&str> = all.iter().filter_map(|d| d["code"].as_str()).collect();
        assert_eq!(codes, ["P0004"], "{file}: {json}");
        let message = all[0]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(named) && message.contains("not UTF-8"),
            "{file}: {message}"
        );
    }
}

#[test]
fn defect_15_a_compiled_plan_with_a_null_default_runs() {
    let dir = std::env::temp_dir().join(format!("pipec-cli-null-default-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let source = "input note: string? = null\n\nnode brief(note: string? = input.note) -> string {\n  return = note ?? \"no note\"\n}\n\noutput brief = brief\n";
    std::fs::write(dir.join("brief.pipe"), source).expect("write");
    let out = run(&["compile", "brief.pipe", "-o", "brief.json"], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let (status, err) = run_for(&["run", "brief.json", "-q"], &dir, 30);
    assert_eq!(status, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three misspellings in three files: the pipeline, a prompt template it uses and a file it
/// imports (through `triage.pipe`). Each has one close name, so each fix is safe.
fn misspell_three_files(p: &Project) {
    p.edit(
        "pipelines/deal_research.pipe",
        "digest: Digest = digest,",
        "digest: Digest = digset,",
    );
    p.edit(
        "prompts/consume/brief.jinja",
        "{{ history.count }}",
        "{{ history.cont }}",
    );
    p.edit(
        "pipelines/shared/tracker.pipe",
        "priority: Priority",
        "priority: Priorty",
    );
}

fn read(p: &Project, rel: &str) -> String {
    std::fs::read_to_string(p.dir.join(rel)).expect("file exists")
}

#[test]
fn check_diff_shows_every_fix_and_writes_nothing() {
    let p = Project::new("fix-diff");
    misspell_three_files(&p);
    let before: Vec<String> = [
        "pipelines/deal_research.pipe",
        "prompts/consume/brief.jinja",
        "pipelines/shared/tracker.pipe",
    ]
    .iter()
    .map(|f| read(&p, f))
    .collect();
    let out = run(
        &[
            "check",
            "--diff",
            "pipelines/deal_research.pipe",
            "pipelines/triage.pipe",
        ],
        &p.dir,
    );
    assert_eq!(out.status.code(), Some(1), "changes to make: exit 1");
    let diff = stdout(&out);
    assert!(
        diff.contains("--- a/pipelines/deal_research.pipe\n+++ b/pipelines/deal_research.pipe\n"),
        "{diff}"
    );
    assert!(
        diff.contains("-  digest: Digest = digset,\n+  digest: Digest = digest,\n"),
        "{diff}"
    );
    assert!(diff.contains("-Its emails from {{ history.start }} to {{ history.end }} ({{ history.cont }} in all):\n+Its emails from {{ history.start }} to {{ history.end }} ({{ history.count }} in all):\n"), "{diff}");
    assert!(diff.contains("+  priority: Priority"), "{diff}");
    assert!(
        stderr(&out).contains("would fix 3 problems in 3 files"),
        "{}",
        stderr(&out)
    );
    let after: Vec<String> = [
        "pipelines/deal_research.pipe",
        "prompts/consume/brief.jinja",
        "pipelines/shared/tracker.pipe",
    ]
    .iter()
    .map(|f| read(&p, f))
    .collect();
    assert_eq!(before, after, "--diff writes nothing");
    // Nothing to fix: no diff, exit 0.
    let clean = run(
        &["check", "--diff", "pipelines/deal_research.pipe"],
        &crate_root(),
    );
    assert_eq!(clean.status.code(), Some(0), "{}", stderr(&clean));
    assert_eq!(stdout(&clean), "");
}

#[test]
fn check_fix_writes_every_file_keeps_comments_and_checks_again() {
    let p = Project::new("fix-write");
    misspell_three_files(&p);
    let out = run(
        &[
            "check",
            "--fix",
            "pipelines/deal_research.pipe",
            "pipelines/triage.pipe",
        ],
        &p.dir,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(err.contains("3 problems fixed in 3 files"), "{err}");
    assert!(
        err.contains("P0101 unknown-name: rename `digset` to `digest`"),
        "{err}"
    );
    assert_eq!(stdout(&out), "", "the files check clean afterwards");
    // Each fix restores the text exactly, comments and layout included.
    for rel in [
        "pipelines/deal_research.pipe",
        "prompts/consume/brief.jinja",
        "pipelines/shared/tracker.pipe",
    ] {
        let original = std::fs::read_to_string(crate_root().join(rel)).expect("original");
        assert_eq!(read(&p, rel), original, "{rel}");
    }
    assert!(read(&p, "pipelines/deal_research.pipe").contains("// prompts/research/scan.jinja"));
    // No temporary file is left beside them.
    let left: Vec<String> = std::fs::read_dir(p.dir.join("pipelines"))
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("pipec-fix"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A second run has nothing to do.
    let again = run(&["check", "--fix", "pipelines/deal_research.pipe"], &p.dir);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(stderr(&again), "");
}

#[test]
fn check_fix_leaves_unsafe_fixes_and_unfixable_errors() {
    let p = Project::new("fix-unsafe");
    p.edit(
        "pipelines/deal_research.pipe",
        "history: EmailPage = resource(ref: \"email-history\", max_bytes: 200kb),",
        "history: EmailPage = resource(ref: \"email-history\"),",
    );
    // A warning with an unsafe fix: --fix changes nothing and says how to apply it.
    let out = run(&["check", "--fix", "pipelines/deal_research.pipe"], &p.dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("1 fixable with `pipec check --unsafe-fixes`"),
        "{}",
        stdout(&out)
    );
    assert!(read(&p, "pipelines/deal_research.pipe").contains("resource(ref: \"email-history\"),"));
    let out = run(
        &["check", "--unsafe-fixes", "pipelines/deal_research.pipe"],
        &p.dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        read(&p, "pipelines/deal_research.pipe")
            .contains("resource(ref: \"email-history\", max_bytes: 100kb),")
    );
    assert!(stderr(&out).contains("P0306 unbounded-prompt-resource: add `max_bytes: 100kb`"));
    // An error with no fix stays, and fails the check after the others are fixed.
    p.edit(
        "pipelines/deal_research.pipe",
        "digest: Digest = digest,",
        "digest: Digest = zzzzzz,",
    );
    let out = run(&["check", "--fix", "pipelines/deal_research.pipe"], &p.dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("unknown node `zzzzzz`"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn json_fixes_name_their_edits() {
    let p = Project::new("fix-json");
    p.edit(
        "pipelines/deal_research.pipe",
        "digest: Digest = digest,",
        "digest: Digest = digset,",
    );
    let (code, json) = p.check_json("pipelines/deal_research.pipe");
    assert_eq!(code, 1);
    assert_eq!(json["version"], 1);
    let d = &diags(&json)[0];
    let fix = &d["fixes"][0];
    assert_eq!(fix["title"], "rename `digset` to `digest`");
    assert_eq!(fix["applicability"], "safe");
    let edit = &fix["edits"][0];
    assert_eq!(edit["file"], "pipelines/deal_research.pipe");
    assert_eq!(edit["replacement"], "digest");
    assert_eq!(edit["line"], d["line"]);
    assert_eq!(edit["column"], d["column"]);
    assert_eq!(edit["end"], d["end"]);
    let text = read(&p, "pipelines/deal_research.pipe");
    let (start, end) = (
        edit["byte_start"].as_u64().expect("byte_start") as usize,
        edit["byte_end"].as_u64().expect("byte_end") as usize,
    );
    assert_eq!(&text[start..end], "digset");
}

/// A fresh folder holding the given files.
fn folder_with(tag: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipec-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

/// Shown failing on the old build: miette padded the caret with a format width past
/// 65,535 and panicked (exit 101) in every command that renders diagnostics.
#[test]
fn a_diagnostic_past_column_65535_is_drawn_clipped_around_its_span() {
    // A minified literal of 70,000 characters, then an error on the same line.
    let source = format!("input a: string = \"{}\" + 1\n", "x".repeat(70_000));
    let dir = folder_with("long-line", &[("long.pipe", &source)]);
    for command in ["check", "compile", "fmt", "run", "serve"] {
        let out = run(&[command, "long.pipe"], &dir);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{command}: {text}");
        // The location is the one in the file, and the line is clipped to a window
        // around the span, marked with `…`, the caret still under the `+`.
        assert!(text.contains("long.pipe:1:70022"), "{command}: {text}");
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(" 1 │ …"))
            .unwrap_or_else(|| panic!("{command}: no clipped line in {text}"));
        assert!(lines[at].chars().count() < 200, "{command}: {}", lines[at]);
        let column = |line: &str, c: char| line.chars().position(|x| x == c);
        assert_eq!(
            column(lines[at], '+'),
            column(lines[at + 1], '┬'),
            "{command}: the caret is not under the `+`:\n{}\n{}",
            lines[at],
            lines[at + 1]
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Shown failing on the old build: each aborted `check`, `compile` or `run` with a stack
/// overflow (or, for brackets, reported a misleading syntax error).
#[test]
fn deep_nesting_is_a_coded_error_not_a_stack_overflow() {
    let deep = |open: &str, inner: &str, close: &str, n: usize| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    let cases = [
        (
            "parentheses",
            format!("input a: int = {}\n", deep("(", "1", ")", 5_000)),
        ),
        (
            "lists",
            format!("input a: json = {}\n", deep("[", "", "]", 10_000)),
        ),
        (
            "records",
            format!("input a: json = {}\n", deep("{a: ", "1", "}", 5_000)),
        ),
        (
            "list-types",
            format!("input a: string{}\n", "[]".repeat(10_000)),
        ),
        (
            "generics",
            format!("input a: {}\n", deep("list<", "int", ">", 5_000)),
        ),
        (
            "record-types",
            format!("input a: {}\n", deep("{a: ", "int", "}", 5_000)),
        ),
        (
            "nots",
            format!("input a: bool = {}true\n", "!".repeat(50_000)),
        ),
        (
            "comparisons",
            format!("input a: bool = true{}\n", " == true".repeat(50_000)),
        ),
        (
            "coalescing",
            format!("input a: int? = null{}\n", " ?? null".repeat(50_000)),
        ),
        (
            "fields",
            format!("input a: int = x{}\n", ".a".repeat(50_000)),
        ),
        (
            "calls",
            format!("input a: int = f{}\n", "()".repeat(50_000)),
        ),
    ];
    for (what, source) in &cases {
        let dir = folder_with(&format!("deep-{what}"), &[("deep.pipe", source)]);
        let out = run(&["check", "--format", "json", "deep.pipe"], &dir);
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr(&out));
        let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
        let codes: Vec<String> = diags(&json)
            .iter()
            .filter_map(|d| d["code"].as_str().map(str::to_string))
            .collect();
        assert_eq!(codes, ["P0005"], "{what}: {json}");
        for command in ["compile", "run"] {
            let out = run(&[command, "deep.pipe"], &dir);
            assert_eq!(out.status.code(), Some(1), "{what}: {command}");
            let text = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                text.contains("P0005 nesting-too-deep"),
                "{what}: {command}: {text}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Shown failing on the old build: a chain of 20,000 attributes in a prompt template
/// overflowed the stack of `check`.
#[test]
fn a_prompt_template_nested_too_deep_is_a_coded_error() {
    let pipe = "model fast {\n  provider = \"openai\"\n  name = \"gpt-4o-mini\"\n  api_key = secret(\"OPENAI_API_KEY\")\n}\n\ninput topic: string\n\nthink brief(topic: string = input.topic) -> string {\n  model = fast\n  prompt = file(\"brief\")\n}\n\noutput brief = brief\n";
    for (what, template) in [
        (
            "attributes",
            format!("{{{{ topic{} }}}}", ".a".repeat(20_000)),
        ),
        ("nots", format!("{{{{ {}topic }}}}", "not ".repeat(20_000))),
        (
            "concatenation",
            format!("{{{{ topic{} }}}}", " ~ topic".repeat(20_000)),
        ),
    ] {
        let dir = folder_with(
            &format!("deep-template-{what}"),
            &[("brief.pipe", pipe), ("prompts/brief.jinja", &template)],
        );
        let out = run(&["check", "brief.pipe"], &dir);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {text}{}", stderr(&out));
        assert!(text.contains("P0005 nesting-too-deep"), "{what}: {text}");
        assert!(text.contains("prompts/brief.jinja:1:1"), "{what}: {text}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
