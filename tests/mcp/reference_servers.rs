//! pipec's client against MCP servers nobody here wrote, as a user reaches them: the
//! reference servers from npm (filesystem, memory, everything over streamable HTTP) and
//! PyPI (time, git), and a server written with FastMCP — through pipelines that call and
//! read them, and through `pipec mcp`. The npm servers are installed under `target/` on
//! first use (`common::npm`); the PyPI ones come with the tests' Python
//! (`tests/interop/requirements.txt`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::npm::{EVERYTHING, FILESYSTEM, MEMORY, reference_server};
use crate::common::python::python_with_mcp;
use crate::common::{Project, code, crate_root, json, stderr, stdout};
use serde_json::Value;

/// A program installed beside the tests' Python (a PyPI server's entry point).
fn beside_python(program: &str) -> PathBuf {
    let python = PathBuf::from(python_with_mcp());
    let python = crate::common::python::on_path(&python.display().to_string());
    let bin = python.with_file_name(program);
    assert!(
        bin.exists(),
        "{} is not installed beside {}: install tests/interop/requirements.txt",
        program,
        python.display()
    );
    bin
}

fn run(p: &Project, file: &str, args: &[&str]) -> Value {
    let mut all = vec!["run", file];
    all.extend_from_slice(args);
    let out = p.run(&all);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    json(&stdout(&out))
}

fn ok(out: &Output) -> Value {
    assert_eq!(code(out), 0, "{}{}", stdout(out), stderr(out));
    json(&stdout(out))
}

#[test]
fn mcp_server_time_converts_a_time_for_a_pipeline() {
    let p = Project::new("ref-time");
    p.write(
        "time.pipe",
        &format!(
            r#"server time {{
  command = "{}"
  args = ["--local-timezone", "UTC"]
}}

type Moment {{
  timezone: string
  datetime: string
  day_of_week: string
  is_dst: bool
}}

type Conversion {{
  source: Moment
  target: Moment
  time_difference: string
}}

tool convert_time(source_timezone: string, time: string, target_timezone: string) -> Conversion from time {{
  read_only = true
}}

input at: string

node tokyo(at: string = input.at) -> Conversion {{
  call = convert_time(source_timezone: "Europe/Paris", time: at, target_timezone: "Asia/Tokyo")
}}

output tokyo = tokyo
"#,
            beside_python("mcp-server-time").display()
        ),
    );
    let out = run(&p, "time.pipe", &["--input", "at=14:30"]);
    let target = out["tokyo"]["target"]["datetime"].as_str().unwrap_or("");
    assert!(target.ends_with("T22:30:00+09:00"), "{out}");
    assert_eq!(out["tokyo"]["time_difference"], "+8.0h");
}

#[test]
fn mcp_server_git_reports_the_state_of_a_repository() {
    let p = Project::new("ref-git");
    let repo = p.dir.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(&repo)
            .stdout(Stdio::null())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("notes.txt"), "one\n").expect("write");
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "first notes"]);
    std::fs::write(repo.join("notes.txt"), "one\ntwo\n").expect("write");
    p.write(
        "git.pipe",
        &format!(
            r#"server git {{
  command = "{}"
  args = ["--repository", "{}"]
}}

tool git_status(repo_path: string) -> string from git {{
  read_only = true
}}

tool git_log(repo_path: string, max_count: int) -> string from git {{
  read_only = true
}}

input repo: string

node status(repo: string = input.repo) -> string {{
  call = git_status(repo_path: repo)
}}

node log(repo: string = input.repo) -> string {{
  call = git_log(repo_path: repo, max_count: 5)
}}

output status = status
output log = log
"#,
            beside_python("mcp-server-git").display(),
            repo.display()
        ),
    );
    let out = run(
        &p,
        "git.pipe",
        &["--input", &format!("repo={}", repo.display())],
    );
    let status = out["status"].as_str().unwrap_or("");
    assert!(status.contains("On branch main"), "{status}");
    assert!(status.contains("modified:   notes.txt"), "{status}");
    assert!(
        out["log"].as_str().unwrap_or("").contains("first notes"),
        "{out}"
    );
}

#[test]
fn server_filesystem_reads_within_its_root_and_refuses_outside_it() {
    let Some(server) = reference_server(FILESYSTEM) else {
        return;
    };
    let p = Project::new("ref-fs");
    let root = p.dir.join("handbook");
    std::fs::create_dir_all(root.join("policies")).expect("mkdir");
    std::fs::write(
        root.join("policies/refunds.md"),
        "Refunds within 30 days.\n",
    )
    .expect("write");
    p.write(
        "fs.pipe",
        &format!(
            r#"server files {{
  command = "{}"
  args = ["{}"]
}}

type Text {{
  content: string
}}

tool read_text_file(path: string) -> Text from files {{
  read_only = true
}}

tool list_directory(path: string) -> string from files {{
  read_only = true
}}

input folder: string
input file: string

node policy(file: string = input.file) -> Text {{
  call = read_text_file(path: file)
}}

node listing(folder: string = input.folder) -> string {{
  call = list_directory(path: folder)
}}

output policy = policy.content
output listing = listing
"#,
            server.display(),
            root.display()
        ),
    );
    let folder = root.join("policies");
    let out = run(
        &p,
        "fs.pipe",
        &[
            "--input",
            &format!("folder={}", folder.display()),
            "--input",
            &format!("file={}", folder.join("refunds.md").display()),
        ],
    );
    assert_eq!(out["policy"], "Refunds within 30 days.\n");
    assert!(
        out["listing"]
            .as_str()
            .unwrap_or("")
            .contains("[FILE] refunds.md"),
        "{out}"
    );
    // Outside its root the server answers with an error result: the call fails with it.
    let refused = p.run(&[
        "mcp",
        "call",
        "files",
        "--file",
        "fs.pipe",
        "--tool",
        "read_text_file",
        "--args",
        r#"{"path": "/etc/hostname"}"#,
    ]);
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    let answer = json(&stdout(&refused));
    assert_eq!(answer["isError"], true);
    assert!(
        answer["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("Access denied"),
        "{answer}"
    );
}

#[test]
fn server_memory_keeps_what_one_process_told_it_for_the_next() {
    let Some(server) = reference_server(MEMORY) else {
        return;
    };
    let p = Project::new("ref-memory");
    p.write(
        "memory.pipe",
        &format!(
            r#"server memory {{
  command = "{}"
  env = {{ MEMORY_FILE_PATH: env("MEMORY_FILE") }}
}}
"#,
            server.display()
        ),
    );
    let memory = p.dir.join("memory.jsonl");
    let call = |tool: &str, args: &str| {
        p.cmd(&[
            "mcp",
            "call",
            "memory",
            "--file",
            "memory.pipe",
            "--tool",
            tool,
            "--args",
            args,
        ])
        .env("MEMORY_FILE", &memory)
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs")
    };
    ok(&call(
        "create_entities",
        r#"{"entities": [{"name": "ACME", "entityType": "account", "observations": ["renews in March"]}]}"#,
    ));
    ok(&call(
        "add_observations",
        r#"{"observations": [{"entityName": "ACME", "contents": ["asked for a discount"]}]}"#,
    ));
    let graph = ok(&call("read_graph", "{}"));
    let observations = &graph["structuredContent"]["entities"][0]["observations"];
    assert_eq!(
        observations,
        &serde_json::json!(["renews in March", "asked for a discount"]),
        "{graph}"
    );
}

/// `mcp-server-everything streamableHttp` on a free port, killed on drop.
struct Everything(Child, u16);

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn everything_over_http(server: &Path) -> Everything {
    let port = free_port();
    let child = Command::new(server)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the reference server starts");
    let mut everything = Everything(child, port);
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = everything.0.try_wait().expect("wait");
        assert!(
            exited.is_none() && started.elapsed() < Duration::from_secs(30),
            "the reference server did not listen on {port}: {exited:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    everything
}

#[test]
fn server_everything_answers_over_streamable_http() {
    let Some(server) = reference_server(EVERYTHING) else {
        return;
    };
    let everything = everything_over_http(&server);
    let p = Project::new("ref-everything-http");
    let url = format!("http://127.0.0.1:{}/mcp", everything.1);
    let listed = ok(&p.run(&["mcp", "list", "everything", "--url", &url]));
    let tools: Vec<&str> = listed["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(tools.contains(&"echo"), "{listed}");
    assert!(
        !listed["prompts"].as_array().is_none_or(Vec::is_empty),
        "{listed}"
    );
    let echoed = ok(&p.run(&[
        "mcp",
        "call",
        "everything",
        "--url",
        &url,
        "--tool",
        "echo",
        "--args",
        r#"{"message": "over HTTP"}"#,
    ]));
    assert_eq!(echoed["content"][0]["text"], "Echo: over HTTP");

    p.write(
        "echo.pipe",
        &format!(
            r#"server everything {{
  url = "{url}"
}}

tool echo(message: string) -> string from everything {{
  read_only = true
}}

input message: string

node echoed(message: string = input.message) -> string {{
  call = echo(message: message)
}}

output echoed = echoed
"#
        ),
    );
    let out = run(&p, "echo.pipe", &["--input", "message=from a pipeline"]);
    assert_eq!(out["echoed"], "Echo: from a pipeline");
}

#[test]
fn a_fastmcp_server_is_called_read_and_prompted() {
    let p = Project::new("ref-fastmcp");
    let script = crate_root().join("tests/interop/fastmcp_server.py");
    p.write(
        "inventory.pipe",
        &format!(
            r#"server inventory {{
  command = "{}"
  args = ["{}"]
}}

type Stock {{
  item: string
  count: int
}}

type Record {{
  item: string
  count: int
  warehouse: string
}}

tool stock(item: string) -> Stock from inventory {{
  read_only = true
}}

input item: string

node counted(item: string = input.item) -> Stock {{
  call = stock(item: item)
}}

node where_kept(item: string = input.item, record: Record = resource("inventory://items/{{item}}")) -> string {{
  return = record.warehouse
}}

output counted = counted
output warehouse = where_kept
"#,
            python_with_mcp(),
            script.display()
        ),
    );
    let out = run(&p, "inventory.pipe", &["--input", "item=widget"]);
    assert_eq!(
        out["counted"],
        serde_json::json!({"item": "widget", "count": 12})
    );
    assert_eq!(out["warehouse"], "north");
    let prompt = ok(&p.run(&[
        "mcp",
        "get",
        "inventory",
        "--file",
        "inventory.pipe",
        "--prompt",
        "restock",
        "--args",
        r#"{"item": "gadget"}"#,
    ]));
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        "Order more of gadget: 0 left."
    );
}

/// Mixed content of a real server as declared records: `server-everything`'s tiny image
/// (text, an image, text) as `{data, mime}`, and its resource reference (text, an
/// embedded resource, text) as `{text, mime, uri}`, over stdio.
#[test]
fn server_everything_images_and_embedded_resources_fill_records_of_parts() {
    let Some(server) = reference_server(EVERYTHING) else {
        return;
    };
    let p = Project::new("ref-everything-parts");
    p.write(
        "parts.pipe",
        &format!(
            r#"server everything {{
  command = {server:?}
  args = ["stdio"]
}}

type Shot {{
  data: bytes
  mime: string
}}

type Document {{
  text: string
  mime: string
  uri: string
}}

tool tiny_image() -> Shot from everything {{
  name = "get-tiny-image"
  read_only = true
}}

tool resource_reference(id: int as "resourceId", kind: string as "resourceType") -> Document from everything {{
  name = "get-resource-reference"
  read_only = true
}}

node shot() -> Shot {{
  call = tiny_image()
}}

node document() -> Document {{
  call = resource_reference(id: 2, kind: "Text")
}}

output shot: Shot = shot
output document: Document = document
"#,
            server = server.display().to_string()
        ),
    );
    let out = run(&p, "parts.pipe", &[]);
    assert_eq!(out["shot"]["mime"], "image/png", "{out}");
    let png = out["shot"]["data"].as_str().unwrap_or("");
    // A PNG's signature, base64: \x89PNG\r\n\x1a\n.
    assert!(png.starts_with("iVBORw0KGgo"), "{png}");
    assert_eq!(out["document"]["uri"], "demo://resource/dynamic/text/2");
    assert_eq!(out["document"]["mime"], "text/plain");
    assert!(
        out["document"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Resource 2:")),
        "{out}"
    );
}
