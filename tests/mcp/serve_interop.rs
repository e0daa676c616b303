//! `pipec serve` driven by the official MCP Python SDK's client (`tests/interop/
//! serve_client.py`), over stdio and streamable HTTP, in both protocol eras: listings
//! with their metadata, text and blob reads, a refused traversal, the unknown-URI error
//! of each era, and a subscription that hears each change of a file exactly once (and
//! nothing once it ended). The reShapr seed example is served unchanged, its template
//! read through `--backend` from a local HTTP server.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::python::python_with_mcp;
use common::serve_http::{Running, initialize, request, serve_http};
use common::{Project, pipec_bin};
use serde_json::{Value, json};

const CHANGES: usize = 50;
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x01binary";

fn client() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/serve_client.py")
}

fn project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write("docs/a.txt", "hello\n");
    std::fs::write(p.dir.join("docs/b.png"), PNG).expect("png");
    p.write("secret.txt", "outside the root\n");
    p.write(
        "site.pipe",
        r##"serve {
  resource "file:///site/readme" {
    name = "readme"
    title = "Read me"
    mime_type = "text/markdown"
    text = "# Site"
    annotations {
      audience = ["user"]
      priority = 0.5
    }
  }
  resource "file:///site/logo" {
    name = "logo"
    mime_type = "image/png"
    blob = "iVBORw0KGgoAAWJpbmFyeQ=="
    icons = [{ src: "https://example.com/logo.png", mime_type: "image/png", sizes: ["48x48"] }]
    annotations {
      last_modified = "2026-12-01T10:00:00Z"
    }
  }
  template "file:///site/docs/{+path}" {
    name = "docs"
    root = "docs"
  }
}
"##,
    );
    p
}

#[derive(Clone, Copy, PartialEq)]
enum Era {
    Legacy,
    Modern,
}

impl Era {
    fn name(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }

    /// The code an unknown URI is answered with.
    fn not_found(self) -> i64 {
        match self {
            Era::Legacy => -32002,
            Era::Modern => -32602,
        }
    }
}

#[derive(Clone, Copy)]
enum Via<'a> {
    Stdio(&'a [&'a str]),
    Http(&'a str, &'a str),
}

/// The client's command for `plan`, driving `pipec serve` as `via` says, with more
/// variables in the client's environment (and so the stdio server's).
fn client_command(dir: &Path, era: Era, via: Via, plan: &Value, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(python_with_mcp());
    cmd.arg(client())
        .args(["--era", era.name()])
        .envs(env.iter().copied())
        .current_dir(dir);
    match via {
        Via::Http(url, token) => {
            cmd.args(["--url", url, "--token", token])
                .arg(plan.to_string());
        }
        Via::Stdio(args) => {
            cmd.arg("--stdio")
                .arg(pipec_bin())
                .arg("serve")
                .args(args)
                .arg(plan.to_string());
        }
    }
    cmd
}

fn drive(dir: &Path, era: Era, via: Via, plan: &Value) -> Value {
    drive_with_log(dir, era, via, plan, &[]).0
}

/// [`drive`] with more variables in the client's environment (and so the stdio server's).
fn drive_with(dir: &Path, era: Era, via: Via, plan: &Value, env: &[(&str, &str)]) -> Value {
    drive_with_log(dir, era, via, plan, env).0
}

/// What the client saw, and what it logged on stderr.
fn drive_with_log(
    dir: &Path,
    era: Era,
    via: Via,
    plan: &Value,
    env: &[(&str, &str)],
) -> (Value, String) {
    let out = client_command(dir, era, via, plan, env)
        .output()
        .expect("the client runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the client failed: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seen = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{stderr}"));
    (seen, stderr)
}

fn plan(p: &Project) -> Value {
    json!({
        "read": [
            "file:///site/readme",
            "file:///site/logo",
            "file:///site/docs/a.txt",
            "file:///site/docs/b.png",
            "file:///site/docs/../secret.txt",
            "file:///site/docs/%2e%2e/secret.txt",
            "file:///elsewhere"
        ],
        "subscribe": {
            "uri": "file:///site/docs/a.txt",
            "file": p.dir.join("docs/a.txt"),
            "changes": CHANGES
        }
    })
}

fn check(out: &Value, era: Era) {
    let text = out.to_string();
    assert!(!text.contains("outside the root"), "{text}");
    assert_eq!(
        out["protocol"],
        if era == Era::Legacy {
            "2025-11-25"
        } else {
            "2026-07-28"
        }
    );
    let readme = &out["resources"][0];
    assert_eq!(readme["uri"], "file:///site/readme");
    assert_eq!(readme["title"], "Read me");
    assert_eq!(readme["annotations"]["priority"], 0.5);
    assert_eq!(readme["annotations"]["audience"], json!(["user"]));
    assert_eq!(
        out["templates"][0]["uriTemplate"],
        "file:///site/docs/{+path}"
    );
    let reads = &out["reads"];
    assert_eq!(
        reads["file:///site/readme"]["contents"][0]["text"],
        "# Site"
    );
    assert_eq!(
        reads["file:///site/readme"]["contents"][0]["mimeType"],
        "text/markdown"
    );
    assert_eq!(
        reads["file:///site/docs/a.txt"]["contents"][0]["text"],
        "hello\n"
    );
    let blob = reads["file:///site/docs/b.png"]["contents"][0]["blob"]
        .as_str()
        .expect("a blob");
    assert_eq!(decode(blob), PNG);
    assert_eq!(
        reads["file:///site/docs/b.png"]["contents"][0]["mimeType"],
        "image/png"
    );
    for refused in [
        "file:///site/docs/../secret.txt",
        "file:///site/docs/%2e%2e/secret.txt",
    ] {
        assert_eq!(reads[refused]["error"]["code"], -32602, "{refused}: {text}");
    }
    assert_eq!(
        reads["file:///elsewhere"]["error"]["code"],
        era.not_found(),
        "{text}"
    );
    let updates: Vec<u64> = out["updates"]
        .as_array()
        .expect("updates")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(updates, vec![1; CHANGES], "one notice per change: {text}");
    assert_eq!(out["after_unsubscribe"], 0, "{text}");
}

fn decode(b64: &str) -> Vec<u8> {
    pipec::base64::decode(b64).unwrap_or_else(|e| panic!("not base64 ({e}): {b64}"))
}

#[test]
fn stdio_legacy_lists_reads_refuses_and_notifies_each_change_once() {
    let p = project("serve-stdio-legacy");
    check(
        &drive(&p.dir, Era::Legacy, Via::Stdio(&["site.pipe"]), &plan(&p)),
        Era::Legacy,
    );
}

#[test]
fn stdio_modern_lists_reads_refuses_and_notifies_each_change_once() {
    let p = project("serve-stdio-modern");
    check(
        &drive(&p.dir, Era::Modern, Via::Stdio(&["site.pipe"]), &plan(&p)),
        Era::Modern,
    );
}

#[test]
fn http_legacy_lists_reads_refuses_and_notifies_each_change_once() {
    let p = project("serve-http-legacy");
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    check(
        &drive(&p.dir, Era::Legacy, Via::Http(&url, "t0ken"), &plan(&p)),
        Era::Legacy,
    );
}

#[test]
fn http_modern_lists_reads_refuses_and_notifies_each_change_once() {
    let p = project("serve-http-modern");
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    check(
        &drive(&p.dir, Era::Modern, Via::Http(&url, "t0ken"), &plan(&p)),
        Era::Modern,
    );
}

/// A bare `ping` POSTed with `headers`, and the answer.
fn http(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    request(
        url,
        "POST",
        headers,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    )
}

#[test]
fn http_needs_the_token_and_a_loopback_host() {
    let p = project("serve-http-auth");
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    let (status, _) = http(&url, &[]);
    assert_eq!(status, 401, "no token");
    let (status, _) = http(&url, &[("authorization", "Bearer wrong")]);
    assert_eq!(status, 401, "a wrong token");
    let (status, answer) = http(
        &url,
        &[
            ("authorization", "Bearer t0ken"),
            ("host", "evil.example.com"),
        ],
    );
    assert!(
        status >= 400 && status != 401,
        "a rebinding host is refused: {answer}"
    );
    // With the token and a loopback host the request reaches MCP, which asks for the
    // handshake this bare request skipped.
    let (status, answer) = http(&url, &[("authorization", "Bearer t0ken")]);
    assert!(status != 401 && answer.contains("Session"), "{answer}");
}

#[test]
fn no_auth_is_refused_beyond_loopback_and_changes_nothing() {
    let p = project("serve-no-auth");
    let out = p.run(&[
        "serve",
        "site.pipe",
        "--http",
        "0.0.0.0:0",
        "--no-auth",
        "--allowed-host",
        "h.example.com",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-auth"));
    let out = p.run(&["serve", "site.pipe", "--http", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allowed-host"));
}

/// A backend on 127.0.0.1 that answers every GET with the path it was asked for, as
/// `text/plain`, and logs the request targets.
fn backend() -> (String, Arc<Mutex<Vec<String>>>) {
    backend_answering("text/plain", |target| format!("source of {target}"))
}

/// A backend on 127.0.0.1 that answers every GET with `body(target)` labelled
/// `content_type`, and logs the request targets.
fn backend_answering(
    content_type: &'static str,
    body: fn(&str) -> String,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let target = first.split_whitespace().nth(1).unwrap_or("").to_string();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
            }
            seen.lock().expect("lock").push(target.clone());
            let body = body(&target);
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    (url, log)
}

#[test]
fn the_reshapr_seed_example_is_served_unchanged_and_its_template_reads_the_backend() {
    let p = Project::new("serve-reshapr");
    let spec =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve/open-meteo.yaml");
    let (backend_url, log) = backend();
    let spec_arg = spec.to_string_lossy().into_owned();
    let args = [
        "--resources",
        spec_arg.as_str(),
        "--backend",
        backend_url.as_str(),
    ];
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&args),
        &json!({ "read": [
            "file:///project/readme.md",
            "file:///project/src/resources%2Fdoc.md?mode=raw",
            "file:///project/src/resources/doc.md?mode=raw",
            "file:///project/src/../etc/passwd?mode=raw"
        ] }),
    );
    let text = out.to_string();
    let readme = &out["resources"][0];
    assert_eq!(readme["uri"], "file:///project/readme.md");
    assert_eq!(readme["name"], "README.MD");
    assert_eq!(readme["title"], "Open-Meteo APIs readme");
    assert_eq!(
        readme["description"],
        "Documentation on how to use the Open-Meteo APIs"
    );
    assert_eq!(readme["mimeType"], "text/plain");
    assert_eq!(
        readme["icons"],
        json!([{ "src": "file:///assets/icons/md-file-icon.png", "mimeType": "image/png", "sizes": ["48x48"] }])
    );
    assert_eq!(
        readme["annotations"],
        json!({ "audience": ["user"], "priority": 0.8 })
    );
    let template = &out["templates"][0];
    assert_eq!(
        template["uriTemplate"],
        "file:///project/src/{path}?mode=raw"
    );
    assert_eq!(template["name"], "Project Source File");
    assert_eq!(template["title"], "📁 Project Files");
    assert_eq!(template["mimeType"], "application/octet-stream");
    assert_eq!(
        template["icons"][0]["src"],
        "file:///assets/icons/folder-icon.png"
    );
    assert!(
        out["reads"]["file:///project/readme.md"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("## Hello World")),
        "{text}"
    );
    // The template declares `application/octet-stream`, and the declared type is what
    // a read answers (the backend says `text/plain`): bytes, as a blob.
    for uri in [
        "file:///project/src/resources%2Fdoc.md?mode=raw",
        "file:///project/src/resources/doc.md?mode=raw",
    ] {
        let content = &out["reads"][uri]["contents"][0];
        assert_eq!(
            content["mimeType"], "application/octet-stream",
            "{uri}: {text}"
        );
        let blob = content["blob"].as_str().expect("a blob");
        assert_eq!(
            decode(blob),
            b"source of /project/src/resources/doc.md?mode=raw",
            "{uri}: {text}"
        );
    }
    assert_eq!(
        out["reads"]["file:///project/src/../etc/passwd?mode=raw"]["error"]["code"], -32602,
        "{text}"
    );
    let targets = log.lock().expect("lock").clone();
    assert_eq!(
        targets.len(),
        2,
        "the refused read reached nothing: {targets:?}"
    );
    assert!(
        targets
            .iter()
            .all(|t| t == "/project/src/resources/doc.md?mode=raw"),
        "{targets:?}"
    );
}

#[test]
fn a_reshapr_template_without_a_backend_answers_a_clear_error() {
    let p = Project::new("serve-reshapr-nobackend");
    let spec =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve/open-meteo.yaml");
    let spec_arg = spec.to_string_lossy().into_owned();
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&["--resources", spec_arg.as_str()]),
        &json!({ "read": ["file:///project/src/a.md?mode=raw"] }),
    );
    let error = &out["reads"]["file:///project/src/a.md?mode=raw"]["error"];
    assert_eq!(error["code"], -32603, "{out}");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("--backend")),
        "{out}"
    );
}

#[test]
fn serve_with_nothing_to_serve_or_a_broken_spec_refuses_to_start() {
    let p = Project::new("serve-refuse");
    let out = p.run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to serve"));
    p.write("bad.yaml", "apiVersion: reshapr.io/v9\nkind: Resources\n");
    let out = p.run(&["serve", "--resources", "bad.yaml"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("P0802"), "{err}");
}

/// A file that declares servers and tools but no `serve` block and no nodes serves
/// nothing: `pipec serve` says so and exits instead of starting an empty server that
/// waits on stdin without a word.
#[test]
fn serve_of_files_that_serve_nothing_says_so() {
    let p = Project::new("serve-empty");
    p.write(
        "lib.pipe",
        "server crm {\n  command = \"pipec-demo-crm\"\n}\n\ntool get_deal(deal_id: string) -> json from crm {\n  read_only = true\n}\n",
    );
    let out = p
        .cmd(&["serve", "lib.pipe"])
        .stdin(std::process::Stdio::piped())
        .output()
        .expect("pipec runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nothing to serve") && err.contains("lib.pipe") && err.contains("serve {"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing on the protocol stream");
}

fn spec_text(name: &str) -> String {
    format!(
        "apiVersion: reshapr.io/v1alpha1\nkind: Resources\nservice:\n  name: notes\n  version: '1'\nresources:\n  'notes://{name}':\n    name: {name}\n    text: the {name} note\n"
    )
}

fn edit_a_spec(era: Era, tag: &str) {
    let p = Project::new(tag);
    p.write("notes.yaml", &spec_text("first"));
    let out = drive(
        &p.dir,
        era,
        Via::Stdio(&["--resources", "notes.yaml"]),
        &json!({ "read": ["notes://first"], "edit": {
            "file": p.dir.join("notes.yaml"), "text": spec_text("second")
        } }),
    );
    let text = out.to_string();
    assert_eq!(
        out["reads"]["notes://first"]["contents"][0]["text"], "the first note",
        "{text}"
    );
    assert_eq!(out["list_changed"], 1, "one edit, one notice: {text}");
    let after: Vec<&str> = out["resources_after"]
        .as_array()
        .expect("listed")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(after, ["notes://second"], "{text}");
}

#[test]
fn editing_a_specification_sends_list_changed_once_legacy() {
    edit_a_spec(Era::Legacy, "serve-edit-legacy");
}

#[test]
fn editing_a_specification_sends_list_changed_once_modern() {
    edit_a_spec(Era::Modern, "serve-edit-modern");
}

const GREET: &str = r#"input name: string

type Approval {
  approved: bool
}

node hello(name: string = input.name) -> { text: string } {
  return = { text: name }
}

gate ok(h: { text: string } = hello) -> Approval {
  message = "Greet {{ h.text }}?"
}

node done(h: { text: string } = hello, a: Approval = ok) -> { text: string, approved: bool } {
  return = { text: h.text, approved: a.approved }
}

output greeting = done
"#;

fn served_pipeline(era: Era, tag: &str) {
    let p = Project::new(tag);
    p.write("greet.pipe", GREET);
    let out = drive(
        &p.dir,
        era,
        Via::Stdio(&["greet.pipe"]),
        &json!({ "pipeline": {
            "tool": "greet", "arguments": { "name": "Ada" },
            "gate": "ok", "answer": { "approved": true }
        } }),
    );
    let text = out.to_string();
    let tool = out["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "greet"))
        .expect("the pipeline is a tool");
    assert_eq!(tool["inputSchema"]["required"], json!(["name"]), "{text}");
    assert_eq!(tool["inputSchema"]["properties"]["name"]["type"], "string");
    assert_eq!(
        tool["annotations"]["readOnlyHint"], false,
        "a run writes a thread"
    );
    assert_eq!(tool["annotations"]["idempotentHint"], false);
    assert!(
        out["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "resume_run")),
        "{text}"
    );
    // Paused: a link to the run and the gate's message, no outputs yet.
    let call = &out["call"];
    assert_eq!(call["isError"], false, "{text}");
    let link = call["links"][0].as_str().expect("a run link");
    assert!(link.starts_with("pipec://runs/"), "{link}");
    assert!(
        call["text"]
            .as_str()
            .is_some_and(|t| t.contains("Greet Ada?")),
        "{text}"
    );
    assert_eq!(out["run_paused"]["status"], "paused", "{text}");
    assert_eq!(out["run_paused"]["gates"][0]["gate"], "ok");
    assert_eq!(
        out["run_paused"]["gates"][0]["schema"]["$ref"], "#/$defs/Approval",
        "the gate's schema is shown: {text}"
    );
    assert!(
        out["templates"].as_array().is_some_and(Vec::is_empty),
        "runs are never listed"
    );
    // resume_run continues it to completion; the subscribed run heard of it.
    assert_eq!(
        out["resume"]["structured"]["greeting"],
        json!({ "text": "Ada", "approved": true }),
        "{text}"
    );
    assert!(
        out["run_updates"].as_u64().is_some_and(|n| n >= 1),
        "{text}"
    );
    assert_eq!(out["run_done"]["status"], "completed", "{text}");
    assert_eq!(
        out["run_done"]["outputs"]["greeting"]["approved"], true,
        "{text}"
    );
    // The run is a thread of the project's store, as `pipec run` would make it.
    let runs = p.run(&["runs"]);
    assert!(String::from_utf8_lossy(&runs.stdout).contains("completed"));
}

/// A served pipeline whose node echoes a secret as a server's JSON text holds it (escaped
/// the way Go escapes `&`, `<` and `>`) and base64-encoded: the tool's result names it.
#[test]
fn a_served_pipelines_result_never_holds_a_secret_in_any_encoding() {
    let p = Project::new("serve-secret");
    p.write(
        "leak.pipe",
        "node echo(token: string = secret(\"GO_SECRET\")) -> json {\n  exec = [\"./echo.sh\"]\n}\n\noutput echoed = echo\n",
    );
    p.script("echo.sh", common::ECHO_ENCODED);
    let secret = "pa&ss<word>-canary-e6a0";
    let out = drive_with(
        &p.dir,
        Era::Modern,
        Via::Stdio(&["leak.pipe"]),
        &json!({ "pipeline": { "tool": "leak", "arguments": {} } }),
        &[("GO_SECRET", secret)],
    );
    let text = out["call"].to_string();
    assert_eq!(out["call"]["isError"], false, "{text}");
    let b64 = pipec::base64::encode(secret.as_bytes());
    assert!(!text.contains("e6a0"), "the secret in the result:\n{text}");
    assert!(
        !text.contains(&b64[4..20]),
        "base64 of it in the result:\n{text}"
    );
    assert!(text.contains("secret(GO_SECRET)"), "{text}");
}

#[test]
fn a_served_pipeline_pauses_links_its_run_and_resume_run_completes_it_legacy() {
    served_pipeline(Era::Legacy, "serve-pipeline-legacy");
}

#[test]
fn a_served_pipeline_pauses_links_its_run_and_resume_run_completes_it_modern() {
    served_pipeline(Era::Modern, "serve-pipeline-modern");
}

#[test]
fn pipec_consumes_pipec_an_act_calls_a_served_pipeline_and_hydrates_its_run_link() {
    let p = Project::new("serve-consumes");
    p.write("greet.pipe", GREET);
    p.write(
        "consumer.pipe",
        r#"server inner {
  command = "pipec"
  args = ["serve", "greet.pipe", "--store", "inner.redb"]
}

type Gate {
  gate: string
  message: string
}

type Started {
  thread: string
  status: string
}

type Run {
  thread: string
  status: string
  gates: Gate[]
}

link "run": Run = "pipec://runs/{thread}"

/// Starts a greeting run of the served pipeline.
tool greet(name: string) -> Started from inner {
  destructive = false
  links = ["run"]
}

input name: string

act start(name: string = input.name) -> Started {
  call = greet(name: name)
}

node look(run: Run = resource(ref: "run", max_bytes: 64kb)) -> Run {
  after = [start]
  return = run
}

output started = start
output run = look
"#,
    );
    let out = p.run(&["run", "consumer.pipe", "--input", "name=Ada"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs: Value = serde_json::from_str(&stdout).expect("the outputs");
    let thread = outputs["started"]["thread"].as_str().expect("a thread");
    // The link the served pipeline returned was read: the run, paused at its gate.
    assert_eq!(outputs["run"]["thread"], thread, "{stdout}");
    assert_eq!(outputs["run"]["status"], "paused", "{stdout}");
    assert_eq!(
        outputs["run"]["gates"][0]["message"], "Greet Ada?",
        "{stdout}"
    );
    // The inner run is a thread of the served project's own store.
    let inner = p.run(&["runs", "--store", "inner.redb"]);
    let listing = String::from_utf8_lossy(&inner.stdout);
    assert!(
        listing.contains(thread) && listing.contains("paused"),
        "{listing}"
    );
}

#[test]
fn a_root_templates_path_is_completed_from_its_folder_without_dotfiles() {
    let p = project("serve-complete");
    p.write("docs/alpha.md", "a");
    p.write("docs/also.txt", "b");
    p.write("docs/.hidden", "c");
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&["site.pipe"]),
        &json!({ "complete": { "template": "file:///site/docs/{+path}", "argument": "path", "value": "a" } }),
    );
    let mut values: Vec<String> = out["completion"]
        .as_array()
        .expect("values")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    values.sort();
    assert_eq!(
        values,
        ["a.txt", "algo", "alpha.md", "also.txt"]
            .iter()
            .filter(|v| p.dir.join("docs").join(v).exists())
            .map(|v| v.to_string())
            .collect::<Vec<_>>(),
        "{out}"
    );
    assert!(!values.iter().any(|v| v.starts_with('.')), "{out}");
}

#[test]
fn a_run_still_going_after_the_wait_answers_its_link_and_completes_behind_it() {
    let p = Project::new("serve-background");
    p.script(
        "slow.sh",
        "#!/bin/sh\ncat >/dev/null\nsleep 1\necho '{\"v\": 1}'\n",
    );
    p.write(
        "slow.pipe",
        "input n: int\n\nnode wait(n: int = input.n) -> { v: int } {\n  exec = [\"./slow.sh\"]\n  idempotent = true\n}\n\noutput v = wait\n",
    );
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&["slow.pipe", "--wait", "0"]),
        &json!({ "background": { "tool": "slow", "arguments": { "n": 1 } } }),
    );
    let text = out.to_string();
    assert_eq!(
        out["background"]["structured"]["status"], "running",
        "{text}"
    );
    assert!(
        out["background"]["links"][0]
            .as_str()
            .is_some_and(|l| l.starts_with("pipec://runs/")),
        "{text}"
    );
    let statuses: Vec<&str> = out["statuses"]
        .as_array()
        .expect("statuses")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        statuses.last(),
        Some(&"completed"),
        "the run went on behind the answer: {text}"
    );
}

#[test]
fn two_served_pipelines_of_one_name_are_refused() {
    let p = Project::new("serve-two-names");
    p.write("a/greet.pipe", GREET);
    p.write("b/greet.pipe", GREET);
    let out = p.run(&["serve", "a", "b"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("two served pipelines are named `greet`"),
        "{err}"
    );
}

// Regression tests, named after the defect each one closes. Each fails on a build
// without its fix (`PIPEC_TEST_BIN=<that build> cargo test --test mcp serve_interop::NAME`).

/// Closing an HTTP session: the SDK's `DELETE` used to be answered 202, which the
/// Python SDK logs as "Session termination failed: 202" on every close.
#[test]
fn closing_an_http_session_is_answered_so_the_sdk_logs_no_failure() {
    let p = project("serve-http-close");
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    let (out, log) = drive_with_log(
        &p.dir,
        Era::Legacy,
        Via::Http(&url, "t0ken"),
        &json!({ "read": ["file:///site/readme"] }),
        &[],
    );
    assert_eq!(
        out["reads"]["file:///site/readme"]["contents"][0]["text"],
        "# Site"
    );
    assert!(!log.contains("Session termination failed"), "{log}");
}

/// `ping` in the 2026-07-28 era used to be answered over stdio (sent before the era
/// was settled) and refused over HTTP. That revision removed `ping`, and the MCP
/// conformance suite checks that a server refuses it: it is refused over both
/// transports, and a legacy `ping` is answered over both.
#[test]
fn ping_is_answered_in_the_legacy_era_and_refused_in_the_2026_era_over_both_transports() {
    let p = project("serve-ping");
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    for (via, name) in [
        (Via::Http(&url, "t0ken"), "HTTP"),
        (Via::Stdio(&["site.pipe"]), "stdio"),
    ] {
        let legacy = drive(&p.dir, Era::Legacy, via, &json!({ "ping": true }));
        assert_eq!(legacy["ping"], "ok", "legacy over {name}: {legacy}");
        let modern = drive(&p.dir, Era::Modern, via, &json!({ "ping": true }));
        assert_eq!(
            modern["ping"]["code"], -32601,
            "2026-07-28 over {name}: {modern}"
        );
    }
}

const OTHER: &str = r#"input n: int

node keep(n: int = input.n) -> { v: int } {
  return = { v: n }
}

output v = keep
"#;

/// `pipec://runs/{id}` used to show the threads of pipelines the server does not serve
/// (a store shared with `pipec run`), while `resume_run` refused them.
#[test]
fn a_run_of_a_pipeline_not_served_is_neither_shown_nor_resumed() {
    let p = Project::new("serve-foreign-run");
    p.write("greet.pipe", GREET);
    p.write("other.pipe", OTHER);
    let out = p.run(&[
        "run",
        "other.pipe",
        "--input",
        "n=3",
        "--thread",
        "01JD0000000000000000000000",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&["greet.pipe"]),
        &json!({
            "read": ["pipec://runs/01JD0000000000000000000000"],
            "calls": [{ "tool": "resume_run", "arguments": { "thread": "01JD0000000000000000000000", "gate": "ok", "answer": { "approved": true } } }]
        }),
    );
    let text = out.to_string();
    let read = &out["reads"]["pipec://runs/01JD0000000000000000000000"];
    assert_eq!(read["error"]["code"], -32002, "{text}");
    let resumed = &out["calls"][0]["error"];
    assert_eq!(resumed["code"], -32602, "{text}");
    for error in [&read["error"], resumed] {
        let message = error["message"].as_str().unwrap_or("");
        assert!(
            message.contains("no run 01JD0000000000000000000000"),
            "{text}"
        );
        assert!(
            !message.contains("other`"),
            "the other pipeline is not named: {text}"
        );
    }
    assert!(!text.contains("\"v\""), "its outputs are not shown: {text}");
}

/// A Resources template declared `application/json` whose backend answers
/// `application/octet-stream` used to be served as a base64 blob of the backend's type.
#[test]
fn a_declared_mime_type_wins_over_the_type_the_backend_answers() {
    let p = Project::new("serve-declared-mime");
    let (backend_url, _log) =
        backend_answering("application/octet-stream", |_| r#"{"ticket": 7}"#.into());
    p.write(
        "tickets.yaml",
        "apiVersion: reshapr.io/v1alpha1\nkind: Resources\nservice:\n  name: tickets\n  version: '1'\nresourceTemplates:\n  'file:///tickets/{id}':\n    name: ticket\n    mimeType: application/json\n",
    );
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&[
            "--resources",
            "tickets.yaml",
            "--backend",
            backend_url.as_str(),
        ]),
        &json!({ "read": ["file:///tickets/7"] }),
    );
    let content = &out["reads"]["file:///tickets/7"]["contents"][0];
    assert_eq!(content["mimeType"], "application/json", "{out}");
    assert_eq!(content["text"], r#"{"ticket": 7}"#, "{out}");
}

fn uris(names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| format!("file:///site/docs/{n}"))
        .collect()
}

/// Subscriptions used to have no limit: one client could subscribe to any number of
/// URIs. Past the limit of a session, a subscription is refused with a JSON-RPC error
/// that names the option; within it, it is accepted whole.
#[test]
fn subscriptions_past_the_limit_of_a_session_are_refused_with_a_clear_error() {
    let p = project("serve-subscription-limit");
    for n in ["n1.txt", "n2.txt", "n3.txt", "n4.txt"] {
        p.write(&format!("docs/{n}"), n);
    }
    let four = uris(&["n1.txt", "n2.txt", "n3.txt", "n4.txt"]);
    let args = ["site.pipe", "--max-subscriptions-per-session", "3"];
    let out = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&args),
        &json!({ "subscribe_all": four }),
    );
    let answers = &out["subscribe_all"];
    assert_eq!(answers[0], "ok", "{out}");
    assert_eq!(answers[2], "ok", "{out}");
    assert_eq!(answers[3]["code"], -32000, "{out}");
    assert!(
        answers[3]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--max-subscriptions-per-session")),
        "{out}"
    );
    let out = drive(
        &p.dir,
        Era::Modern,
        Via::Stdio(&args),
        &json!({ "subscribe_all": four }),
    );
    assert_eq!(out["subscribe_all"]["code"], -32000, "{out}");
    let out = drive(
        &p.dir,
        Era::Modern,
        Via::Stdio(&args),
        &json!({ "subscribe_all": four[..3] }),
    );
    assert_eq!(out["subscribe_all"], "ok", "{out}");
}

/// The subscriptions of a client that went away used to be followed until its session
/// timed out, minutes later. Its session now ends soon after its last connection
/// closes, freeing what it held; others then subscribe and hear each change.
#[test]
fn a_client_that_went_away_frees_its_subscriptions_and_others_still_hear_changes() {
    let p = project("serve-subscriptions-freed");
    for n in ["n1.txt", "n2.txt", "n3.txt"] {
        p.write(&format!("docs/{n}"), n);
    }
    let (_server, url) = serve_http(
        &p.dir,
        &[
            "site.pipe",
            "--max-subscriptions",
            "3",
            "--session-timeout",
            "1",
        ],
        "t0ken",
    );
    let held = uris(&["n1.txt", "n2.txt", "n3.txt"]);
    let other = uris(&["a.txt"]);
    for era in [Era::Legacy, Era::Modern] {
        // A client holds every subscription the server allows, then is killed: it
        // never ends its session or its listen.
        let mut holder = Running(
            client_command(
                &p.dir,
                era,
                Via::Http(&url, "t0ken"),
                &json!({ "subscribe_all": held, "hold": true }),
                &[],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the client runs"),
        );
        let mut first = String::new();
        let _ = BufReader::new(holder.0.stdout.take().expect("stdout")).read_line(&mut first);
        let seen: Value = serde_json::from_str(&first).unwrap_or(Value::Null);
        let all_ok = match era {
            Era::Legacy => json!(["ok", "ok", "ok"]),
            Era::Modern => json!("ok"),
        };
        assert_eq!(seen["subscribe_all"], all_ok, "{first}");
        let out = drive(
            &p.dir,
            era,
            Via::Http(&url, "t0ken"),
            &json!({ "subscribe_all": other }),
        );
        let refused = match era {
            Era::Legacy => &out["subscribe_all"][0],
            Era::Modern => &out["subscribe_all"],
        };
        assert_eq!(refused["code"], -32000, "{out}");
        assert!(
            refused["message"]
                .as_str()
                .is_some_and(|m| m.contains("--max-subscriptions")),
            "{out}"
        );
        drop(holder);
        wait_until_subscribed(&p, era, &url, &other);
        let mut changes = plan(&p);
        changes["subscribe"]["changes"] = json!(3);
        changes["read"] = json!([]);
        let out = drive(&p.dir, era, Via::Http(&url, "t0ken"), &changes);
        assert_eq!(
            out["updates"],
            json!([1, 1, 1]),
            "{era_name}: {out}",
            era_name = era.name()
        );
    }
}

/// Subscribes to `uris` again and again until the server accepts (what a client that
/// went away held is freed a moment after it went); panics after a minute.
fn wait_until_subscribed(p: &Project, era: Era, url: &str, uris: &[String]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = drive(
            &p.dir,
            era,
            Via::Http(url, "t0ken"),
            &json!({ "subscribe_all": uris }),
        );
        let accepted = match era {
            Era::Legacy => out["subscribe_all"]
                .as_array()
                .is_some_and(|a| a.iter().all(|x| x == "ok")),
            Era::Modern => out["subscribe_all"] == "ok",
        };
        if accepted {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "what the killed client held was never freed: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `DELETE` of a session used to answer 202 whether or not there was such a session.
/// It answers 204 once the session is ended, and 404 for one that is not there.
#[test]
fn deleting_a_session_answers_204_and_404_once_it_is_gone() {
    let p = project("serve-http-delete");
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    let session = initialize(&url, "t0ken");
    let auth = ("authorization", "Bearer t0ken");
    let delete = |id: &str| request(&url, "DELETE", &[auth, ("mcp-session-id", id)], "");
    let (status, answer) = delete(&session);
    assert_eq!(status, 204, "{answer}");
    let (status, answer) = delete(&session);
    assert_eq!(status, 404, "ended already: {answer}");
    let (status, answer) = delete("no-such-session");
    assert_eq!(status, 404, "never was: {answer}");
}

/// A project that serves prompts: one with text, an enum and an optional argument that
/// embeds a served document, one that shows a served picture.
fn prompts_project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write(
        "prompts/review.jinja",
        "Review this code, {{ tone }}{% if focus %}, looking at {{ focus }}{% endif %}:\n{{ code }}\n{{ resource(\"docs://style\") }}\n{{ role(\"assistant\") }}\nI will follow the style guide.\n",
    );
    p.write(
        "site.pipe",
        r##"enum Tone {
  kind
  terse
}

serve {
  resource "docs://style" {
    name = "style"
    mime_type = "text/markdown"
    text = "# Style"
  }
  resource "docs://pixel" {
    name = "pixel"
    mime_type = "image/png"
    blob = "iVBORw0KGgoAAWJpbmFyeQ=="
  }

  /// Review a piece of code.
  prompt review(
    /// The code to review.
    code: string,
    tone: Tone = "kind",
    focus: string?,
  ) {
    title = "Code review"
    text = file("review")
  }

  prompt picture() {
    text = #"Describe this picture. {{ resource("docs://pixel") }}"#
  }
}
"##,
    );
    p
}

fn check_prompts(out: &Value) {
    let listed = &out["prompt_list"];
    assert_eq!(listed[0]["name"], "review", "{out}");
    assert_eq!(listed[0]["title"], "Code review");
    assert_eq!(listed[0]["description"], "Review a piece of code.");
    assert_eq!(
        listed[0]["arguments"],
        json!([
            {"name": "code", "description": "The code to review.", "required": true},
            {"name": "tone", "required": false},
            {"name": "focus", "required": false}
        ])
    );
    assert_eq!(listed[1]["name"], "picture");
    let gets = &out["prompt_gets"];
    assert_eq!(
        gets[0]["messages"],
        json!([
            {"role": "user", "content": {"type": "text", "text": "Review this code, kind, looking at names:\nfn x()"}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "docs://style", "mimeType": "text/markdown", "text": "# Style"}}},
            {"role": "assistant", "content": {"type": "text", "text": "I will follow the style guide."}}
        ]),
        "{out}"
    );
    assert_eq!(gets[0]["description"], "Review a piece of code.");
    let picture = &gets[1]["messages"][1]["content"];
    assert_eq!(picture["type"], "image", "{out}");
    assert_eq!(picture["mimeType"], "image/png");
    assert_eq!(
        decode(picture["data"].as_str().unwrap_or("")),
        b"\x89PNG\r\n\x1a\n\x00\x01binary"
    );
    // Refused, with what was wrong: invalid parameters.
    for (i, says) in [
        (2, "needs the argument `code`"),
        (3, "one of kind, terse"),
        (4, "no prompt is named `nothing`"),
    ] {
        assert_eq!(gets[i]["error"]["code"], -32602, "{out}");
        let message = gets[i]["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{message}");
    }
    assert_eq!(out["prompt_completion"], json!(["terse"]));
}

fn prompts_plan() -> Value {
    json!({
        "prompts": [
            {"name": "review", "arguments": {"code": "fn x()", "focus": "names"}},
            {"name": "picture"},
            {"name": "review", "arguments": {}},
            {"name": "review", "arguments": {"code": "x", "tone": "rude"}},
            {"name": "nothing"}
        ],
        "complete_prompt": {"prompt": "review", "argument": "tone", "value": "te"}
    })
}

/// Prompts of a `serve` block are listed with their arguments, got with their messages
/// (roles, an embedded document, an image), refused with what is wrong, and their enum
/// arguments completed, by the official SDK's client of both eras, over stdio and HTTP.
#[test]
fn served_prompts_are_listed_got_and_completed_in_both_eras() {
    let p = prompts_project("serve-prompts");
    check_prompts(&drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&["site.pipe"]),
        &prompts_plan(),
    ));
    // A file that serves prompts alone is served.
    p.write(
        "only.pipe",
        "serve {\n  prompt greet(name: string) {\n    text = \"Greet {{ name }}.\"\n  }\n}\n",
    );
    let only = drive(
        &p.dir,
        Era::Legacy,
        Via::Stdio(&["only.pipe"]),
        &json!({"prompts": [{"name": "greet", "arguments": {"name": "Ada"}}]}),
    );
    assert_eq!(
        only["prompt_gets"][0]["messages"][0]["content"]["text"], "Greet Ada.",
        "{only}"
    );
    let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
    check_prompts(&drive(
        &p.dir,
        Era::Modern,
        Via::Http(&url, "t0ken"),
        &prompts_plan(),
    ));
}

/// A project of pipelines whose outputs are records of a block's parts, and one of three
/// steps.
fn content_project(tag: &str) -> Project {
    let p = Project::new(tag);
    p.write(
        "shots.pipe",
        r##"//! A picture, a note about it, and its source.

type Picture {
  data: bytes
  mime: string
}

type Document {
  text: string
  uri: string
  mime: string
}

node pixel() -> Picture {
  exec = ["printf", "%s", #"{"data": "iVBORw0KGgoAAWJpbmFyeQ==", "mime": "image/png"}"#]
}

node source() -> Document {
  return = { text: "# Source", uri: "docs://source", mime: "text/markdown" }
}

node note() -> string {
  return = "one pixel"
}

output caption = note
output image = pixel
output source = source
"##,
    );
    p.write(
        "pixel.pipe",
        r##"type Picture {
  data: bytes
  mime: string
}

node pixel() -> Picture {
  exec = ["printf", "%s", #"{"data": "iVBORw0KGgoAAWJpbmFyeQ==", "mime": "image/png"}"#]
}

output image = pixel
"##,
    );
    p.write(
        "steps.pipe",
        r##"node first() -> string {
  return = "one"
}

node second(before: string = first) -> string[] {
  return = [before, "two"]
}

node third(before: string[] = second) -> int {
  return = len(before)
}

output steps = third
"##,
    );
    p
}

fn check_content(out: &Value, era: Era) {
    let call = &out["calls"][0];
    assert_eq!(call["isError"], false, "{out}");
    // The outputs that are not parts are the text (one string output: the string itself,
    // as a function's answer reads); the parts are blocks of their kind.
    assert_eq!(call["text"], "one pixel", "{out}");
    let blocks = &call["blocks"];
    assert_eq!(blocks[0]["type"], "image", "{out}");
    assert_eq!(blocks[0]["mimeType"], "image/png");
    assert_eq!(
        decode(blocks[0]["data"].as_str().unwrap_or("")),
        b"\x89PNG\r\n\x1a\n\x00\x01binary"
    );
    assert_eq!(
        blocks[1],
        json!({"type": "resource", "resource": {"uri": "docs://source", "mimeType": "text/markdown", "text": "# Source"}})
    );
    // A pipeline whose outputs are all parts has no text block: its bytes are sent once.
    let pixel = &out["calls"][1];
    assert_eq!(pixel["text"], "", "{out}");
    assert_eq!(pixel["blocks"].as_array().map(Vec::len), Some(1), "{out}");
    // Structured content keeps every output.
    assert_eq!(call["structured"]["caption"], "one pixel");
    // Each node that ended was heard of, in order, before the result.
    let heard = out["progress"].as_array().cloned().unwrap_or_default();
    let steps: Vec<f64> = heard
        .iter()
        .filter_map(|h| h["progress"].as_f64())
        .collect();
    assert_eq!(steps, [1.0, 2.0, 3.0], "{out}");
    assert!(heard.iter().all(|h| h["total"] == 3.0), "{out}");
    assert_eq!(heard[2]["message"], "the node `third` finished");
    assert_eq!(out["progress_call"]["structured"], json!({"steps": 2}));
    // Any other outputs are their JSON object.
    assert_eq!(out["progress_call"]["text"], r#"{"steps":2}"#, "{out}");
    // A client that asked to hear logs hears each node end at info. A legacy session
    // asked just before the call: the calls before it logged nothing. A 2026-07-28 client
    // asked on every request: the nodes of the calls before (3, 1 and 3) were logged.
    let before = if era == Era::Legacy { 0 } else { 7 };
    assert_eq!(out["logs_before_asking"], before, "{out}");
    let logged: Vec<&Value> = out["logs"]
        .as_array()
        .map(|l| l.iter().collect())
        .unwrap_or_default();
    assert_eq!(logged.len(), 3, "{out}");
    assert!(
        logged
            .iter()
            .all(|l| l["level"] == "info" && l["logger"] == "pipec"),
        "{out}"
    );
    assert_eq!(logged[0]["data"], "the node `first` finished");
    let tools = out["tools"].as_array().cloned().unwrap_or_default();
    // A pipeline's output schema is its outputs, or where an unfinished run stands (the
    // SDK client checks every structured result against it).
    let shots = tools
        .iter()
        .find(|t| t["name"] == "shots")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        shots["outputSchema"]["anyOf"][0]["required"],
        json!(["caption", "image", "source"]),
        "{out}"
    );
    assert_eq!(
        shots["outputSchema"]["anyOf"][1]["required"],
        json!(["thread", "status"])
    );
    // The input schemas say their dialect.
    assert!(
        tools
            .iter()
            .all(|t| t["inputSchema"]["$schema"] == "https://json-schema.org/draft/2020-12/schema"),
        "{out}"
    );
}

/// A served pipeline answers its outputs as content of their kinds (an image, an
/// embedded document, the rest as text), and a client that asks to hear progress, or
/// logs, hears of each node as it ends, over stdio and HTTP, in both eras.
#[test]
fn served_pipelines_answer_images_and_documents_and_report_progress() {
    let p = content_project("serve-content");
    let plan = json!({
        "calls": [{"tool": "shots", "arguments": {}}, {"tool": "pixel", "arguments": {}}],
        "progress_call": {"tool": "steps", "arguments": {}},
        "log_call": {"tool": "steps", "arguments": {}},
        "pipeline": {"tool": "steps", "arguments": {}}
    });
    let files = [
        "shots.pipe",
        "pixel.pipe",
        "steps.pipe",
        "--store",
        ".pipec/runs.redb",
    ];
    check_content(
        &drive(&p.dir, Era::Legacy, Via::Stdio(&files), &plan),
        Era::Legacy,
    );
    let (_server, url) = serve_http(&p.dir, &files, "t0ken");
    check_content(
        &drive(&p.dir, Era::Modern, Via::Http(&url, "t0ken"), &plan),
        Era::Modern,
    );
}
