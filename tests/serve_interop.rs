//! `pipec serve` driven by the official MCP Python SDK's client (`tests/interop/
//! serve_client.py`), over stdio and streamable HTTP, in both protocol eras: listings
//! with their metadata, text and blob reads, a refused traversal, the unknown-URI error
//! of each era, and a subscription that hears each change of a file exactly once (and
//! nothing once it ended). The reShapr seed example is served unchanged, its template
//! read through `--backend` from a local HTTP server.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use common::python::python_with_mcp;
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

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `pipec serve ARGS --http 127.0.0.1:0` and the URL it printed.
fn serve_http(dir: &Path, args: &[&str], token: &str) -> (Served, String) {
    let mut child = Command::new(pipec_bin())
        .arg("serve")
        .args(args)
        .args(["--http", "127.0.0.1:0"])
        .current_dir(dir)
        .env("PIPEC_SERVE_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pipec serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(rest) = line.strip_prefix("pipec serve: MCP at ") {
                    break rest.trim().to_string();
                }
            }
            _ => panic!("pipec serve ended before it said where it listens"),
        }
    };
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (Served(child), url)
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

enum Via<'a> {
    Stdio(&'a [&'a str]),
    Http(&'a str, &'a str),
}

fn drive(dir: &Path, era: Era, via: Via, plan: &Value) -> Value {
    let mut cmd = Command::new(python_with_mcp());
    cmd.arg(client())
        .args(["--era", era.name()])
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
    let out = cmd.output().expect("the client runs");
    assert!(
        out.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
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

/// One HTTP request: method, target and headers, and the answer.
fn http(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("http");
    let (authority, path) = rest.split_once('/').expect("a path");
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    let mut host_given = false;
    for (k, v) in headers {
        host_given |= k.eq_ignore_ascii_case("host");
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if !host_given {
        request.push_str(&format!("host: {authority}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, answer)
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

/// A backend on 127.0.0.1 that answers every GET with the path it was asked for, and
/// logs the request targets.
fn backend() -> (String, Arc<Mutex<Vec<String>>>) {
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
            let body = format!("source of {target}");
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
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
    for uri in [
        "file:///project/src/resources%2Fdoc.md?mode=raw",
        "file:///project/src/resources/doc.md?mode=raw",
    ] {
        assert_eq!(
            out["reads"][uri]["contents"][0]["text"],
            "source of /project/src/resources/doc.md?mode=raw",
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
