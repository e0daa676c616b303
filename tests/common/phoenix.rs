//! Arize Phoenix, a real OpenTelemetry trace backend, for the tests of pipec's tracing:
//! [`Phoenix::start`] runs `phoenix serve` on a free loopback port with a database of its
//! own, an exporter sends it OTLP over HTTP at [`Phoenix::otlp_endpoint`], and
//! [`Phoenix::spans`] reads back what it stored, through its REST API.
//!
//! Phoenix comes from PyPI (`tests/interop/phoenix-requirements.txt` pins it, with every
//! package it pulls in); [`phoenix_python`] finds a Python that has it, and a test that
//! needs it fails, saying how to install it, when there is none.
//!
//! What Phoenix (the pinned 20.26.1) accepts and keeps, as its source says:
//!
//! - OTLP over HTTP at `POST /v1/traces`, as protobuf only (`Content-Type:
//!   application/x-protobuf`, plain, gzip or deflate). OTLP JSON (`application/json`) is
//!   refused with 415 Unsupported Media Type, so an exporter must use `http/protobuf`
//!   ([`OTLP_PROTOCOL`]). OTLP over gRPC works too, on a port of its own that this helper
//!   lets the system choose and does not report.
//! - The project of a span: the `x-project-name` header of the request ([`PROJECT_HEADER`])
//!   when it has one; else the resource attribute `openinference.project.name`
//!   ([`PROJECT_ATTRIBUTE`]) of the span's resource, when it is a non-empty string; else
//!   `default` ([`DEFAULT_PROJECT`]). Nothing else names a project: not `service.name`, and
//!   not the server's `PHOENIX_PROJECT_NAME` (only Phoenix's own client library reads that,
//!   to set the resource attribute). A project is made when its first span arrives.
//! - Attributes are stored nested (`{"gen_ai": {"usage": {"input_tokens": 12}}}`) and read
//!   back with dotted keys again; [`Phoenix::spans`] flattens whatever is still nested.
//!   Phoenix adds OpenInference attributes derived from the `gen_ai.*` ones without
//!   replacing any the span has (for a `chat` span: `llm.model_name`,
//!   `llm.token_count.prompt`, `llm.token_count.completion`, `llm.token_count.total`), and
//!   sets the span's OpenInference kind from them (`LLM`); that kind is read back apart
//!   from the attributes, as `span_kind`.
//! - Times are kept to the microsecond. Links are not kept at all, nor the span's OTLP kind
//!   (server, client), its scope, or its resource.
//! - Spans are written in batches a moment after the request is answered: read them with
//!   [`Phoenix::wait_for_spans`], which polls.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// The project Phoenix files a span under when neither the request nor the span's
/// resource names one.
pub const DEFAULT_PROJECT: &str = "default";

/// The resource attribute whose string value names the project of the spans under that
/// resource.
pub const PROJECT_ATTRIBUTE: &str = "openinference.project.name";

/// The HTTP header that names the project of every span in an OTLP request, ahead of the
/// resource attribute.
pub const PROJECT_HEADER: &str = "x-project-name";

/// The `OTEL_EXPORTER_OTLP_PROTOCOL` that Phoenix understands over HTTP.
pub const OTLP_PROTOCOL: &str = "http/protobuf";

/// The version of Phoenix that `tests/interop/phoenix-requirements.txt` pins.
pub const PINNED_VERSION: &str = "20.26.1";

/// How long Phoenix may take to start: it imports for about fifteen seconds on an idle
/// machine, and the tests run beside others on two cores.
pub const START_WITHIN: Duration = Duration::from_secs(240);

/// How long one HTTP request to Phoenix may take before it counts as failed.
const REQUEST_WITHIN: Duration = Duration::from_secs(60);

/// The most spans Phoenix answers in one page.
const PAGE_SIZE: usize = 1000;

/// The file in Phoenix's folder that receives its standard error (its log).
const STDERR_FILE: &str = "phoenix.stderr";

/// The file in Phoenix's folder that receives its standard output (its banner).
const STDOUT_FILE: &str = "phoenix.stdout";

/// Numbers the folders of the Phoenix servers this test process starts.
static STARTED: AtomicU32 = AtomicU32::new(0);

/// The folder of the venv that `.ci/run` makes: `target/phoenix-venv` under the crate.
pub fn phoenix_venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/phoenix-venv")
}

/// The Python that runs Phoenix: `PIPEC_TEST_PHOENIX_PYTHON`, else the venv's
/// (`target/phoenix-venv/bin/python`) when it exists. It must have Phoenix and the
/// OpenTelemetry SDK with its OTLP/HTTP exporter; when there is no such Python this panics
/// with the commands that install one (the tests that need Phoenix never skip).
pub fn phoenix_python() -> String {
    static CHECKED: OnceLock<Result<String, String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let python = match std::env::var("PIPEC_TEST_PHOENIX_PYTHON") {
            Ok(python) if !python.is_empty() => python,
            _ => {
                let venv = phoenix_venv().join("bin/python");
                if !venv.exists() {
                    return Err(format!(
                        "PIPEC_TEST_PHOENIX_PYTHON is not set and there is no {}.",
                        venv.display()
                    ));
                }
                venv.display().to_string()
            }
        };
        // Importing `phoenix` itself takes about ten seconds; finding it proves as much.
        let mut probe = Command::new(&python);
        probe
            .args([
                "-c",
                "import importlib.metadata as m, importlib.util as u\n\
                 assert u.find_spec('phoenix'), 'no phoenix'\n\
                 assert u.find_spec('opentelemetry.sdk.trace'), 'no opentelemetry-sdk'\n\
                 assert u.find_spec('opentelemetry.exporter.otlp.proto.http'), \
                 'no opentelemetry-exporter-otlp-proto-http'\n\
                 print(m.version('arize-phoenix'))",
            ])
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null());
        super::python::probed(&python, probe, "does not have Arize Phoenix")
    });
    match checked {
        Ok(python) => python.clone(),
        Err(why) => panic!(
            "{why}\nThe tracing tests need Arize Phoenix {PINNED_VERSION} from PyPI. Install it \
             (about 860 MB) from the crate's folder with\n    \
             python3 -m venv target/phoenix-venv\n    \
             target/phoenix-venv/bin/pip install -r tests/interop/phoenix-requirements.txt\n\
             or set PIPEC_TEST_PHOENIX_PYTHON to a Python that can `import phoenix` \
             (.ci/run makes that venv when it is missing)."
        ),
    }
}

/// A Phoenix server of a test's own: its own folder (database, logs), its own ports. It is
/// killed with every process it started, and its folder removed, on drop
/// (`PIPEC_KEEP_TEST_DIRS` keeps the folder).
pub struct Phoenix {
    /// The `phoenix serve` process, leader of a process group of its own.
    child: Child,
    /// Phoenix's working folder: its SQLite database and its logs.
    dir: PathBuf,
    /// The loopback port of its HTTP server: UI, REST API, GraphQL and OTLP over HTTP.
    port: u16,
}

/// How one attempt to start Phoenix ended.
enum Started {
    /// It answers that it is ready.
    Ready,
    /// It exited before it was ready, having found its port taken.
    PortTaken,
}

impl Phoenix {
    /// Starts `python -m phoenix.server.main serve` on a free loopback port, with a fresh
    /// folder as its working directory (so a database of its own), gRPC on a port the
    /// system chooses, and no telemetry or other request to the internet; and waits until
    /// `GET /readyz` answers 200. Panics with Phoenix's log when it exits or is not ready
    /// within [`START_WITHIN`].
    pub fn start() -> Phoenix {
        let python = phoenix_python();
        let n = STARTED.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("pipec-phoenix-{}-{n}", std::process::id()));
        // The port is free when chosen and taken by Phoenix only once it has started: another
        // program may take it in between, and then Phoenix is started again on another.
        let mut attempt = 1;
        loop {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("make Phoenix's folder");
            let port = free_port();
            let child = spawn(&python, &dir, port);
            let mut phoenix = Phoenix {
                child,
                dir: dir.clone(),
                port,
            };
            match phoenix.wait_until_ready() {
                Started::Ready => return phoenix,
                Started::PortTaken if attempt < 3 => {
                    attempt += 1;
                    phoenix.kill();
                }
                Started::PortTaken => {
                    panic!(
                        "Phoenix found its port taken three times:\n{}",
                        phoenix.log()
                    )
                }
            }
        }
    }

    /// Polls `GET /readyz` (200 once the server is up and its database answers) until it
    /// answers 200 or Phoenix exits.
    fn wait_until_ready(&mut self) -> Started {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = self.log();
                if log.contains("address already in use") || log.contains("Errno 98") {
                    return Started::PortTaken;
                }
                panic!("Phoenix exited ({status}) before it was ready:\n{log}");
            }
            if let Ok((200, _)) = self.http("GET", "/readyz", &[], b"") {
                return Started::Ready;
            }
            if started.elapsed() > START_WITHIN {
                panic!(
                    "Phoenix was not ready within {START_WITHIN:?} at {}:\n{}",
                    self.otlp_endpoint(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The base URL to give an exporter as `OTEL_EXPORTER_OTLP_ENDPOINT`, such as
    /// `http://127.0.0.1:40123`: it posts traces to `{endpoint}/v1/traces`. It is also the
    /// address of Phoenix's UI and REST API.
    pub fn otlp_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The full URL that receives OTLP traces over HTTP (protobuf only): what
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` would be.
    pub fn traces_endpoint(&self) -> String {
        format!("{}/v1/traces", self.otlp_endpoint())
    }

    /// The variables that point an OpenTelemetry exporter at this Phoenix, over HTTP with
    /// protobuf: `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn exporter_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
                self.otlp_endpoint(),
            ),
            (
                "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
                OTLP_PROTOCOL.to_string(),
            ),
        ]
    }

    /// Phoenix's folder: its database (`phoenix.db`) and its logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last part of Phoenix's standard error (its log), and where the whole of it is,
    /// to put in a failed test's message.
    pub fn log(&self) -> String {
        let path = self.dir.join(STDERR_FILE);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let mut start = text.len().saturating_sub(8000);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        format!("--- {} (its end)\n{}", path.display(), &text[start..])
    }

    /// One request to Phoenix on a connection of its own, with `content_type` when the
    /// body is not empty: the status and the body of the answer, as text. Panics when
    /// Phoenix does not answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> (u16, String) {
        let headers: &[(&str, &str)] = if body.is_empty() {
            &[]
        } else {
            &[("content-type", content_type)]
        };
        match self.http(method, path, headers, body) {
            Ok((status, body)) => (status, String::from_utf8_lossy(&body).into_owned()),
            Err(e) => panic!("{method} {path} to Phoenix failed: {e}\n{}", self.log()),
        }
    }

    /// The names of the projects Phoenix has (`GET /v1/projects`, every page).
    pub fn projects(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = "/v1/projects?limit=100".to_string();
            if let Some(cursor) = &cursor {
                path.push_str(&format!("&cursor={}", encode(cursor)));
            }
            let (status, body) = self.request("GET", &path, "", b"");
            assert_eq!(status, 200, "GET {path} from Phoenix: {body}");
            let page = self.parse(&path, &body);
            for project in page["data"].as_array().into_iter().flatten() {
                if let Some(name) = project["name"].as_str() {
                    names.push(name.to_string());
                }
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return names,
            }
        }
    }

    /// Every span Phoenix has stored for `project`, earliest start first, through
    /// `GET /v1/projects/{project}/spans` page by page; none when there is no such project
    /// (yet). Each is a JSON object:
    ///
    /// - `name`, `span_kind` (Phoenix's OpenInference kind: `LLM`, `CHAIN`, ..., `UNKNOWN`);
    /// - `trace_id` (32 lowercase hexadecimal digits), `span_id` (16), `parent_id` (16, or
    ///   null for a root span);
    /// - `start_time`, `end_time` (as Phoenix writes them, such as
    ///   `2026-01-02T03:04:05.123456+00:00`) and `start_time_unix_nano`,
    ///   `end_time_unix_nano` (the same as integers, to compare and subtract);
    /// - `status_code` (`UNSET`, `OK` or `ERROR`) and `status_message`;
    /// - `attributes`: one flat object of dotted keys (`"gen_ai.usage.input_tokens": 12`),
    ///   with the attributes Phoenix derived among them (see the module's notes);
    /// - `events`: `name`, `timestamp`, `time_unix_nano` and flat `attributes` each;
    /// - `phoenix_id`: Phoenix's own identifier of the span.
    ///
    /// There are no `links`: Phoenix does not keep them.
    pub fn spans(&self, project: &str) -> Vec<Value> {
        let mut spans = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!(
                "/v1/projects/{}/spans?limit={PAGE_SIZE}&sort=start_time&order=asc",
                encode(project)
            );
            if let Some(cursor) = &cursor {
                path.push_str(&format!("&cursor={}", encode(cursor)));
            }
            let (status, body) = self.request("GET", &path, "", b"");
            // Phoenix answers 404 "Project with name ... not found" until the project's
            // first span arrives.
            if status == 404
                && cursor.is_none()
                && body.contains("not found")
                && body.contains(project)
            {
                return Vec::new();
            }
            assert_eq!(status, 200, "GET {path} from Phoenix: {body}");
            let page = self.parse(&path, &body);
            for span in page["data"].as_array().into_iter().flatten() {
                spans.push(normalize_span(span));
            }
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_string()),
                None => return spans,
            }
        }
    }

    /// Polls [`Phoenix::spans`] of `project` until `predicate` holds of them, and answers
    /// them; panics after `timeout` with the spans it last saw, the projects there are and
    /// Phoenix's log. Exporters batch and send spans in the background, and Phoenix
    /// writes them a moment after it answers, so a test waits for what it expects.
    pub fn wait_for_spans(
        &self,
        project: &str,
        predicate: impl Fn(&[Value]) -> bool,
        timeout: Duration,
    ) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans = self.spans(project);
            if predicate(&spans) {
                return spans;
            }
            if started.elapsed() > timeout {
                panic!(
                    "the spans of project {project:?} in Phoenix were not as expected within \
                     {timeout:?}; they are:\n{}\nthe projects: {:?}\n{}",
                    serde_json::to_string_pretty(&spans).unwrap_or_default(),
                    self.projects(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A JSON answer of Phoenix's, parsed; panics with it when it is not JSON.
    fn parse(&self, path: &str, body: &str) -> Value {
        serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("GET {path} from Phoenix is not JSON ({e}): {body}"))
    }

    /// One HTTP/1.1 request on a connection of its own (`connection: close`): the status
    /// and the body of the answer, or why there is none.
    fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), String> {
        let authority = format!("127.0.0.1:{}", self.port);
        let mut stream = TcpStream::connect(&authority).map_err(|e| format!("connect: {e}"))?;
        let _ = stream.set_read_timeout(Some(REQUEST_WITHIN));
        let _ = stream.set_write_timeout(Some(REQUEST_WITHIN));
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nhost: {authority}\r\naccept: */*\r\ncontent-length: {}\r\nconnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        stream
            .write_all(&request)
            .map_err(|e| format!("send: {e}"))?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .map_err(|e| format!("read the answer: {e}"))?;
        parse_answer(&answer)
    }

    /// Kills Phoenix's process group (Phoenix and whatever it started) and reaps Phoenix.
    fn kill(&mut self) {
        let group = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        self.kill();
        if std::env::var_os("PIPEC_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `python -m phoenix.server.main serve` on `port` of the loopback interface, in a process
/// group of its own, with `dir` as its working directory and temporary folder, its output
/// in files there; none of the caller's `PHOENIX_*` or `OTEL_*` variables reach it.
fn spawn(python: &str, dir: &Path, port: u16) -> Child {
    let stdout = std::fs::File::create(dir.join(STDOUT_FILE)).expect("make Phoenix's output file");
    let stderr = std::fs::File::create(dir.join(STDERR_FILE)).expect("make Phoenix's log file");
    let mut command = Command::new(python);
    command
        .args(["-m", "phoenix.server.main", "serve", "--host", "127.0.0.1"])
        .args(["--port", &port.to_string()])
        // `--port 0` would mean the default port (6006); `--grpc-port 0` is passed on to
        // gRPC, which binds a free port of its choosing.
        .args(["--grpc-port", "0"])
        .current_dir(dir);
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("PHOENIX_") || text.starts_with("OTEL_") {
            command.env_remove(&name);
        }
    }
    command
        // The SQLite database `phoenix.db` and its other files.
        .env("PHOENIX_WORKING_DIR", dir)
        // Its pid file, which it keeps under the temporary folder.
        .env("TMPDIR", dir)
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
        .env("PHOENIX_DISABLE_AGENT_ASSISTANT", "true")
        .env("PHOENIX_ENABLE_MCP_SERVER", "false")
        .env("PHOENIX_ALLOWED_SANDBOX_PROVIDERS", "NONE")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    command
        .spawn()
        .unwrap_or_else(|e| panic!("`{python} -m phoenix.server.main serve` does not start: {e}"))
}

/// A loopback port that is free now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// The status and body of a whole HTTP/1.1 answer (its body by its length, or chunked).
fn parse_answer(answer: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no complete answer: {}", String::from_utf8_lossy(answer)))?;
    let head = String::from_utf8_lossy(&answer[..end]);
    let rest = &answer[end + 4..];
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status: {head}"))?;
    let header = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        return Ok((status, unchunk(rest)?));
    }
    match header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        Some(length) if length <= rest.len() => Ok((status, rest[..length].to_vec())),
        Some(length) => Err(format!(
            "the answer ended after {} of its {length} bytes",
            rest.len()
        )),
        None => Ok((status, rest.to_vec())),
    }
}

/// The body of a chunked answer.
fn unchunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("a chunk without its size")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|e| format!("chunk size {size_text:?}: {e}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size {
            return Err("the answer ended inside a chunk".to_string());
        }
        body.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or(&[]);
    }
}

/// `text` percent-encoded for a path segment or a query value: everything but letters,
/// digits and `-._~`.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A span as Phoenix's REST API answers it, in the shape [`Phoenix::spans`] documents.
fn normalize_span(span: &Value) -> Value {
    let lower = |value: &Value| match value.as_str() {
        Some(text) => Value::String(text.to_ascii_lowercase()),
        None => Value::Null,
    };
    let events: Vec<Value> = span["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|event| {
            json!({
                "name": event["name"],
                "timestamp": event["timestamp"],
                "time_unix_nano": unix_nanos(&event["timestamp"]),
                "attributes": flatten_attributes(&event["attributes"]),
            })
        })
        .collect();
    json!({
        "name": span["name"],
        "span_kind": span["span_kind"],
        "trace_id": lower(&span["context"]["trace_id"]),
        "span_id": lower(&span["context"]["span_id"]),
        "parent_id": lower(&span["parent_id"]),
        "start_time": span["start_time"],
        "end_time": span["end_time"],
        "start_time_unix_nano": unix_nanos(&span["start_time"]),
        "end_time_unix_nano": unix_nanos(&span["end_time"]),
        "status_code": span["status_code"],
        "status_message": span["status_message"],
        "attributes": flatten_attributes(&span["attributes"]),
        "events": events,
        "phoenix_id": span["id"],
    })
}

/// Attributes as one flat object of dotted keys: a nested object's keys are joined to
/// its own (`{"gen_ai": {"usage": {"input_tokens": 12}}}` is
/// `{"gen_ai.usage.input_tokens": 12}`), and so are the positions in a list of objects
/// (`llm.input_messages.0.message.role`); a list of plain values stays a list.
pub fn flatten_attributes(attributes: &Value) -> Value {
    let mut flat = Map::new();
    if let Value::Object(map) = attributes {
        for (key, value) in map {
            flatten_into(key, value, &mut flat);
        }
    }
    Value::Object(flat)
}

/// Adds `value` under `key` to `flat`, its nested parts under dotted keys.
fn flatten_into(key: &str, value: &Value, flat: &mut Map<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (sub, value) in map {
                flatten_into(&format!("{key}.{sub}"), value, flat);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for (index, value) in items.iter().enumerate() {
                flatten_into(&format!("{key}.{index}"), value, flat);
            }
        }
        _ => {
            flat.insert(key.to_string(), value.clone());
        }
    }
}

/// A time as Phoenix writes it (`2026-01-02T03:04:05.123456+00:00`, or with `Z`, with or
/// without a fraction) in nanoseconds since the Unix epoch; null when it is no such time.
fn unix_nanos(time: &Value) -> Value {
    time.as_str()
        .and_then(parse_rfc3339)
        .map_or(Value::Null, |nanos| json!(nanos))
}

/// An RFC 3339 time in nanoseconds since the Unix epoch.
fn parse_rfc3339(text: &str) -> Option<i64> {
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut date_parts = date.splitn(3, '-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: i64 = date_parts.next()?.parse().ok()?;
    let day: i64 = date_parts.next()?.parse().ok()?;
    let (clock, offset_seconds) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (clock, offset) = time.split_at(at);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = offset[1..].split_once(':')?;
        let seconds = hours.parse::<i64>().ok()? * 3600 + minutes.parse::<i64>().ok()? * 60;
        (clock, sign * seconds)
    };
    let (whole, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut clock_parts = whole.splitn(3, ':');
    let hour: i64 = clock_parts.next()?.parse().ok()?;
    let minute: i64 = clock_parts.next()?.parse().ok()?;
    let second: i64 = clock_parts.next()?.parse().ok()?;
    let mut nanos: i64 = 0;
    for (place, digit) in fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .enumerate()
    {
        let digit = i64::from(digit.to_digit(10)?);
        nanos += digit * 10_i64.pow(8 - place as u32);
    }
    // Days since 1970-01-01 of a date of the proleptic Gregorian calendar.
    let shifted_year = if month <= 2 { year - 1 } else { year };
    let era = shifted_year.div_euclid(400);
    let year_of_era = shifted_year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    Some(seconds * 1_000_000_000 + nanos)
}

/// The one span named `name` among `spans`; panics, listing their names, when there is
/// none or more than one.
pub fn span_named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|span| span["name"] == name).collect();
    match found.as_slice() {
        [span] => span,
        _ => panic!(
            "{} spans named {name:?}; the spans are named {:?}",
            found.len(),
            spans.iter().map(|span| &span["name"]).collect::<Vec<_>>()
        ),
    }
}
