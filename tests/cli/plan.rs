//! The Plan format: its top-level shape declared a second time (so an unplanned change
//! fails here), determinism, what the hash covers, node fingerprints, and reading plans.

use std::path::Path;

use pipec::Plan;
use pipec::plan::PlanLoadError;
use pipec::source::MemoryLoader;
use serde::Deserialize;

/// The plan's top level, declared again. A field added, removed or renamed in
/// `pipec::plan::Plan` without updating this (and bumping `format_version` when it
/// breaks readers) fails `plan_top_level_shape_is_declared`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct PlanShape {
    format_version: u32,
    hash: String,
    compiler: String,
    name: String,
    #[serde(default)]
    doc: Option<String>,
    inputs: Vec<serde_json::Value>,
    outputs: Vec<serde_json::Value>,
    #[serde(rename = "$defs")]
    defs: serde_json::Map<String, serde_json::Value>,
    servers: Vec<serde_json::Value>,
    models: Vec<serde_json::Value>,
    link_kinds: Vec<serde_json::Value>,
    tools: Vec<serde_json::Value>,
    nodes: Vec<NodeShape>,
    config: Vec<serde_json::Value>,
    #[serde(default)]
    serve: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct NodeShape {
    name: String,
    kind: String,
    #[serde(default)]
    doc: Option<String>,
    params: Vec<ParamShape>,
    #[serde(default)]
    each: Option<String>,
    output: serde_json::Value,
    output_type: String,
    body: serde_json::Value,
    #[serde(default)]
    when: Option<serde_json::Value>,
    #[serde(default)]
    when_reads: Vec<String>,
    deps: Vec<String>,
    skippable: bool,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    retries: Option<u64>,
    #[serde(default)]
    backoff_ms: Option<u64>,
    #[serde(default)]
    concurrency: Option<u64>,
    #[serde(default)]
    drop_failed_items: bool,
    fingerprint: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ParamShape {
    name: String,
    schema: serde_json::Value,
    #[serde(rename = "type")]
    type_name: String,
    optional: bool,
    #[serde(default)]
    keep_ref: bool,
    source: serde_json::Value,
}

fn example(name: &str) -> Plan {
    pipec::compile_file(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("pipelines")
            .join(name),
    )
    .unwrap_or_else(|e| panic!("{name} compiles:\n{e}"))
}

fn compile_text(text: &str) -> Plan {
    pipec::compile_str("p.pipe", text).unwrap_or_else(|e| panic!("compiles:\n{e}"))
}

#[test]
fn plan_top_level_shape_is_declared() {
    for name in ["deal_research.pipe", "triage.pipe", "release_notes.pipe"] {
        let plan = example(name);
        let json = plan.to_json();
        let shape: Result<PlanShape, _> = serde_json::from_str(&json);
        assert!(shape.is_ok(), "{name}: {:?}", shape.err());
        assert_eq!(plan.format_version, pipec::plan::FORMAT_VERSION);
    }
}

#[test]
fn a_plan_reads_back_and_verifies_its_hash() {
    let plan = example("deal_research.pipe");
    let json = plan.to_json();
    let back = Plan::from_json(&json).expect("reads back");
    assert_eq!(back, plan);
    // Edited content no longer matches the hash.
    let tampered = json.replacen("\"gpt-4o-mini\"", "\"gpt-5\"", 1);
    let err = Plan::from_json(&tampered).expect_err("tampered plan refused");
    assert!(matches!(err, PlanLoadError::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains("does not match its hash"), "{err}");
    assert_eq!(err.code(), "R0004");
    // Another format version is refused with a clear message.
    let newer = json.replacen("\"format_version\": 1", "\"format_version\": 99", 1);
    let err = Plan::from_json(&newer).expect_err("newer format refused");
    assert_eq!(err, PlanLoadError::FormatVersionUnsupported { found: 99 });
    assert!(err.to_string().contains("format version 99"), "{err}");
    assert!(Plan::from_json("{not json").is_err());
    assert!(Plan::from_json("{}").is_err());
}

const BASE: &str = r#"//! A tiny pipeline.

/// Who to greet.
input name: string

/// A greeting.
type Greeting {
  /// The words.
  text: string
}

node greet(name: string = input.name) -> Greeting {
  return = { text: name }
}

node shout(g: Greeting = greet) -> Greeting {
  return = { text: g.text }
}

output greeting = shout
"#;

#[test]
fn formatting_and_line_comments_do_not_change_the_hash() {
    let base = compile_text(BASE);
    let reformatted = BASE
        .replace(
            "node greet(name: string = input.name) -> Greeting {",
            "node greet(\n    name: string = input.name,   // from the caller\n) -> Greeting {\n\n",
        )
        .replace("  text: string\n", "  text :string // words\n")
        .replace(
            "output greeting = shout",
            "// the result\noutput   greeting=shout",
        );
    let other = compile_text(&reformatted);
    assert_eq!(base.hash, other.hash);
    assert_eq!(base.to_json(), other.to_json(), "byte-identical plans");
}

#[test]
fn doc_comments_change_the_hash_and_the_fingerprints_of_nodes_that_touch_the_type() {
    let base = compile_text(BASE);
    let edited = compile_text(&BASE.replace("/// The words.", "/// The exact words."));
    assert_ne!(base.hash, edited.hash);
    // Both nodes return `Greeting`, whose field doc changed.
    for n in ["greet", "shout"] {
        assert_ne!(
            base.node(n).map(|x| &x.fingerprint),
            edited.node(n).map(|x| &x.fingerprint),
            "{n} touches Greeting"
        );
    }
    assert_eq!(
        edited.defs["Greeting"]["properties"]["text"]["description"],
        "The exact words."
    );
}

#[test]
fn a_changed_node_changes_only_its_own_fingerprint() {
    let base = compile_text(BASE);
    let edited = compile_text(&BASE.replace(
        "return = { text: g.text }",
        "return = { text: g.text ?? \"\" }",
    ));
    assert_ne!(
        base.node("shout").map(|n| &n.fingerprint),
        edited.node("shout").map(|n| &n.fingerprint)
    );
    assert_eq!(
        base.node("greet").map(|n| &n.fingerprint),
        edited.node("greet").map(|n| &n.fingerprint)
    );
}

#[test]
fn prompt_text_is_part_of_the_fingerprint() {
    let loader = |prompt: &str| {
        MemoryLoader::new()
            .with("proj/p.pipe", "model m {\n  provider = \"openai\"\n  name = \"x\"\n}\n\ninput q: string\n\nthink t(q: string = input.q) -> string {\n  model = m\n  prompt = file(\"ask\")\n}\n\noutput a = t\n")
            .with("proj/prompts/ask.jinja", prompt)
    };
    let a = pipec::compile_with(&loader("Answer {{ q }}."), Path::new("proj/p.pipe"))
        .expect("compiles");
    let b = pipec::compile_with(
        &loader("Answer briefly: {{ q }}."),
        Path::new("proj/p.pipe"),
    )
    .expect("compiles");
    assert_ne!(a.nodes[0].fingerprint, b.nodes[0].fingerprint);
    match &a.nodes[0].body {
        pipec::plan::Body::Model {
            prompt, structured, ..
        } => {
            assert_eq!(
                prompt.sources.get("ask.jinja").map(String::as_str),
                Some("Answer {{ q }}.")
            );
            assert!(!structured, "`-> string` is a plain completion");
        }
        other => panic!("expected a model body, got {other:?}"),
    }
}

#[test]
fn the_plan_holds_what_the_runtime_needs() {
    let plan = example("deal_research.pipe");
    // Topological order: every node after its dependencies.
    let pos = |n: &str| plan.nodes.iter().position(|x| x.name == n).expect("node");
    for node in &plan.nodes {
        for d in &node.deps {
            assert!(pos(d) < pos(&node.name), "{} before {}", d, node.name);
        }
    }
    // Secrets stay references; configuration is collected.
    let json = plan.to_json();
    assert!(json.contains("\"kind\": \"secret\""));
    assert!(
        plan.config
            .iter()
            .any(|c| c.var == "OPENAI_API_KEY" && c.secret)
    );
    // The link binding names its producer; URI bindings their server.
    let consume = plan.node("consume").expect("consume");
    let history = consume
        .params
        .iter()
        .find(|p| p.name == "history")
        .expect("history");
    match &history.source {
        pipec::plan::Source::Link {
            producer,
            link_kind,
            max_bytes,
            ..
        } => {
            assert_eq!(producer, "research");
            assert_eq!(link_kind, "email-history");
            assert_eq!(*max_bytes, Some(200_000));
        }
        other => panic!("{other:?}"),
    }
    let digest = plan.node("digest").expect("digest");
    assert!(digest.skippable && digest.when.is_some());
    assert!(plan.outputs[0].optional);
    // Types are JSON Schemas with their docs.
    assert_eq!(
        plan.defs["DealSummary"]["description"],
        "What the research agent hands to the reviewer."
    );
    // Prompts are in the plan, so the runtime needs no files.
    match &plan.node("research").expect("research").body {
        pipec::plan::Body::Model { prompt, tools, .. } => {
            assert!(prompt.sources.contains_key("research/scan.jinja"));
            assert_eq!(
                tools,
                &vec!["get_deal".to_string(), "read_emails".to_string()]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_ref_parameter_keeps_the_reference() {
    let plan = example("release_notes.pipe");
    let kept: Vec<&str> = plan
        .nodes
        .iter()
        .flat_map(|n| n.params.iter())
        .filter(|p| p.keep_ref)
        .map(|p| p.type_name.as_str())
        .collect();
    assert!(
        !kept.is_empty(),
        "release_notes.pipe binds a ref<T> parameter"
    );
    assert!(kept.iter().all(|t| t.starts_with("ref<")));
}

/// Every `.pipe` file under `dir`, recursively.
fn pipe_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            pipe_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "pipe") {
            out.push(p);
        }
    }
}

#[test]
fn every_plan_the_compiler_writes_passes_the_load_checks() {
    // The examples and every UI case that compiles (warnings allowed): the structural
    // checks on load must accept whatever `compile` writes.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    pipe_files(&root.join("pipelines"), &mut files);
    pipe_files(&root.join("tests/ui"), &mut files);
    files.sort();
    let mut compiled = 0;
    for file in &files {
        let Ok(plan) = pipec::compile_file(file) else {
            continue;
        };
        compiled += 1;
        let back = Plan::from_json(&plan.to_json());
        assert_eq!(back.as_ref(), Ok(&plan), "{}", file.display());
    }
    assert!(compiled > 50, "only {compiled} files compiled");
}

#[test]
fn a_format_version_that_is_not_a_whole_number_is_named_as_written() {
    let json = compile_text(BASE).to_json();
    let with = |v: &str| {
        json.replacen(
            "\"format_version\": 1",
            &format!("\"format_version\": {v}"),
            1,
        )
    };
    for (written, why) in [
        ("1.5", "not a whole number"),
        ("1.0", "not a whole number"),
        ("-1", "a negative number"),
        ("\"1\"", "a string, not a number"),
        ("null", "not a number"),
    ] {
        let err = Plan::from_json(&with(written)).expect_err(written);
        assert_eq!(
            err,
            PlanLoadError::FormatVersionInvalid {
                found: written.to_string(),
                why
            },
            "{written}"
        );
        let shown = err.to_string();
        assert!(!shown.contains("missing"), "{shown}");
        assert!(shown.contains(written), "{shown}");
        assert_eq!(err.code(), "R0004");
    }
    let without = json.replacen("\"format_version\": 1,", "", 1);
    assert_eq!(
        Plan::from_json(&without),
        Err(PlanLoadError::FormatVersionMissing)
    );
    assert_eq!(Plan::from_json("[1, 2]"), Err(PlanLoadError::NotAnObject));
}

#[test]
fn defect_15_null_defaults_and_answers_read_back_as_written() {
    // `null` as an input's default, a tool parameter's default and a gate's `on_timeout`
    // is a value: the plan must read back with it, and with its hash.
    let plan = compile_text(
        r#"
server crm {
  command = "pipec-demo-crm"
}

tool find(query: string? = null) -> json from crm {
  read_only = true
}

input note: string? = null

node found(note: string? = input.note) -> json {
  call = find(query: note)
}

gate review(found: json = found) -> bool? {
  message = "Go on?"
  timeout = 1d
  on_timeout = null
}

output found = found
output review = review
"#,
    );
    assert_eq!(plan.inputs[0].default, Some(serde_json::Value::Null));
    assert_eq!(
        plan.tools[0].params[0].default,
        Some(serde_json::Value::Null)
    );
    assert_eq!(Plan::from_json(&plan.to_json()), Ok(plan));
}

#[test]
fn a_servers_command_args_and_url_may_be_read_from_the_environment() {
    let plan = compile_text(
        r#"
server crm {
  url = env("CRM_URL", default: "http://127.0.0.1:8080/mcp")
}

server files {
  command = env("FILES_SERVER")
  args = ["--root", env("FILES_ROOT", default: "data")]
}

server plain {
  url = "https://plain.example/mcp"
}

tool get_deal(deal_id: string) -> json from crm {
  read_only = true
}

tool list_files(root: string) -> json from files {
  read_only = true
}

tool ping(text: string) -> json from plain {
  read_only = true
}

input deal_id: string

node deal(deal_id: string = input.deal_id) -> json {
  call = get_deal(deal_id: deal_id)
}

node listed(deal_id: string = input.deal_id) -> json {
  call = list_files(root: deal_id)
}

node pinged(deal_id: string = input.deal_id) -> json {
  call = ping(text: deal_id)
}

output deal = deal
output listed = listed
output pinged = pinged
"#,
    );
    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).expect("json");
    let server = |name: &str| {
        json["servers"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == name))
            .cloned()
            .expect("server")
    };
    // A literal is the plain string it always was, so such plans keep their hash.
    assert_eq!(
        server("plain")["url"],
        serde_json::json!("https://plain.example/mcp")
    );
    assert_eq!(
        server("crm")["url"],
        serde_json::json!({"kind": "env", "var": "CRM_URL", "default": "http://127.0.0.1:8080/mcp"})
    );
    assert_eq!(
        server("files")["command"],
        serde_json::json!({"kind": "env", "var": "FILES_SERVER"})
    );
    assert_eq!(
        server("files")["args"],
        serde_json::json!(["--root", {"kind": "env", "var": "FILES_ROOT", "default": "data"}])
    );
    let listed: Vec<&str> = plan.config.iter().map(|c| c.var.as_str()).collect();
    for var in ["CRM_URL", "FILES_SERVER", "FILES_ROOT"] {
        assert!(listed.contains(&var), "{var} in config: {listed:?}");
    }
    assert_eq!(Plan::from_json(&plan.to_json()), Ok(plan));
}

#[test]
fn a_servers_oauth_reaches_the_plan_without_its_secret_and_a_forged_one_is_refused() {
    let plan = compile_text(
        r#"
server reports {
  url = "https://reports.example/mcp"
  oauth {
    grant = "client_credentials"
    client_id = "pipec-worker"
    client_secret = secret("REPORTS_CLIENT_SECRET")
    scopes = ["reports:read"]
  }
}

tool latest(quarter: string) -> json from reports {
  read_only = true
}

input quarter: string

node report(quarter: string = input.quarter) -> json {
  call = latest(quarter: quarter)
}

output report = report
"#,
    );
    let text = plan.to_json();
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        json["servers"][0]["oauth"],
        serde_json::json!({
            "client_id": {"kind": "literal", "value": "pipec-worker"},
            "client_secret": {"kind": "secret", "var": "REPORTS_CLIENT_SECRET"},
            "grant": "client_credentials",
            "scopes": ["reports:read"],
        })
    );
    assert!(
        plan.config
            .iter()
            .any(|c| c.var == "REPORTS_CLIENT_SECRET" && c.secret)
    );
    assert_eq!(Plan::from_json(&text), Ok(plan.clone()));
    // Plans compile never writes are refused by the load checks, each saying why.
    let forge = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut forged = json.clone();
        edit(&mut forged);
        // Hashed again, as a forger would: the checks after the hash are the ones at stake.
        let mut plan: Plan = serde_json::from_value(forged.clone()).expect("a plan's shape");
        plan.hash = pipec::plan::hash_plan(&plan);
        match Plan::from_json(&plan.to_json()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a forged plan loaded: {forged}"),
        }
    };
    let said = forge(&|p| {
        p["servers"][0]["oauth"]["client_secret"] =
            serde_json::json!({"kind": "literal", "value": "s3cret"})
    });
    assert!(said.contains("not read with secret()"), "{said}");
    assert!(!said.contains("s3cret"), "{said}");
    let said = forge(&|p| {
        p["servers"][0]["oauth"]
            .as_object_mut()
            .map(|o| o.remove("client_id"));
    });
    assert!(said.contains("no client_id or no client_secret"), "{said}");
    let said = forge(&|p| {
        p["servers"][0]["headers"] =
            serde_json::json!({"Authorization": {"kind": "secret", "var": "REPORTS_CLIENT_SECRET"}})
    });
    assert!(said.contains("OAuth and an Authorization header"), "{said}");
}

#[test]
fn a_servers_elicitation_answer_reaches_the_plan_and_a_forged_nested_field_is_refused() {
    let plan = compile_text(
        r#"
server crm {
  command = "pipec-demo-crm"
  elicitation = { confirm: true, note: "ok", tags: ["a", "b"], amount: 3 }
}

tool close_deal(deal_id: string) -> json from crm

input deal_id: string

act closed(deal_id: string = input.deal_id) -> json {
  call = close_deal(deal_id: deal_id)
}

output closed = closed
"#,
    );
    let text = plan.to_json();
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        json["servers"][0]["elicitation"],
        serde_json::json!({
            "answer": {"amount": 3, "confirm": true, "note": "ok", "tags": ["a", "b"]},
        })
    );
    assert_eq!(Plan::from_json(&text), Ok(plan.clone()));
    // A field that is not what a form takes (here a record) is refused by the load checks,
    // even in a plan hashed again, as a forger would.
    let mut forged = json.clone();
    forged["servers"][0]["elicitation"] = serde_json::json!({"answer": {"x": {"y": 1}}});
    let mut plan: Plan = serde_json::from_value(forged.clone()).expect("a plan's shape");
    plan.hash = pipec::plan::hash_plan(&plan);
    let said = match Plan::from_json(&plan.to_json()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a forged plan loaded: {forged}"),
    };
    assert!(said.contains("elicitation answer's field `x`"), "{said}");
}
