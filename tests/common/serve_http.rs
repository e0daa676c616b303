//! `pipec serve --http` for the tests that drive it: the server started on a free
//! loopback port (killed on drop) and one-shot raw HTTP requests to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::pipec_bin;

/// A child process (a server, a client), killed and reaped on drop, so a failed test
/// leaves none behind.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `pipec serve ARGS --http 127.0.0.1:0` with `token`, and the URL it printed; its
/// configuration folder is `dir/.config`.
pub fn serve_http(dir: &Path, args: &[&str], token: &str) -> (Running, String) {
    serve_http_in(dir, args, token, &dir.join(".config"))
}

/// `pipec serve ARGS --http 127.0.0.1:0` with `token` and the configuration folder
/// `config` (where its state key is), the state key and store from nowhere else; and the
/// URL it printed.
pub fn serve_http_in(dir: &Path, args: &[&str], token: &str, config: &Path) -> (Running, String) {
    serve_http_with(dir, args, token, config, &[])
}

/// [`serve_http`] with the variables `env` set besides.
pub fn serve_http_env(
    dir: &Path,
    args: &[&str],
    token: &str,
    env: &[(String, String)],
) -> (Running, String) {
    serve_http_with(dir, args, token, &dir.join(".config"), env)
}

fn serve_http_with(
    dir: &Path,
    args: &[&str],
    token: &str,
    config: &Path,
    env: &[(String, String)],
) -> (Running, String) {
    let mut child = Command::new(pipec_bin())
        .arg("serve")
        .args(args)
        .args(["--http", "127.0.0.1:0"])
        .current_dir(dir)
        .env("PIPEC_SERVE_TOKEN", token)
        .env("XDG_CONFIG_HOME", config)
        .env_remove("PIPEC_SERVE_STATE_KEY")
        .env_remove("PIPEC_STORE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pipec serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let running = Running(child);
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
    (running, url)
}

/// The `host:port` of a URL such as `http://127.0.0.1:8080/mcp`.
pub fn authority(url: &str) -> &str {
    let rest = url.strip_prefix("http://").expect("http");
    rest.split_once('/').map_or(rest, |(a, _)| a)
}

/// One request on a connection of its own (`connection: close`): the status and the
/// whole answer as text. `Host` is the URL's unless `headers` names one.
pub fn request(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    request_at(url, "/mcp", method, headers, body)
}

/// [`request`] to `path` of the URL's server.
pub fn request_at(
    url: &str,
    path: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let authority = authority(url);
    let mut stream = TcpStream::connect(authority).expect("connect");
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("host: {authority}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    (status_of(&answer), answer)
}

/// The status code of an HTTP answer; 0 when there is none.
pub fn status_of(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The value of a header of an HTTP answer.
pub fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    answer
        .split("\r\n\r\n")
        .next()?
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// Opens a legacy session with a raw `initialize` and answers its id; the answer's
/// stream is left once its headers are read.
pub fn initialize(url: &str, token: &str) -> String {
    let authority = authority(url);
    let mut stream = TcpStream::connect(authority).expect("connect");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let text = format!(
        "POST /mcp HTTP/1.1\r\nhost: {authority}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes()).expect("send");
    let mut head = String::new();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    assert_eq!(status_of(&head), 200, "{head}");
    header(&head, "mcp-session-id")
        .unwrap_or_else(|| panic!("no session id: {head}"))
        .to_string()
}

/// One request of the 2026-07-28 era, as raw JSON-RPC over HTTP with `token`: `params`
/// with `_meta` (the era, a client name, `capabilities`, beside what `params` has in it), the `Mcp-Method` header and
/// `Mcp-Name` when given, and `extra` headers. The status and the JSON-RPC answer.
pub fn call_2026(
    url: &str,
    token: &str,
    method: &str,
    name: Option<&str>,
    params: serde_json::Value,
    capabilities: serde_json::Value,
    extra: &[(&str, &str)],
) -> (u16, serde_json::Value) {
    let mut params = params;
    // What the caller put in `_meta` (a traceparent) stays, beside the era's fields.
    let mut meta = match params["_meta"].take() {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    meta.extend([
        (
            "io.modelcontextprotocol/protocolVersion".to_string(),
            "2026-07-28".into(),
        ),
        (
            "io.modelcontextprotocol/clientInfo".to_string(),
            serde_json::json!({ "name": "raw", "version": "1" }),
        ),
        (
            "io.modelcontextprotocol/clientCapabilities".to_string(),
            capabilities,
        ),
    ]);
    params["_meta"] = serde_json::Value::Object(meta);
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })
        .to_string();
    let auth = format!("Bearer {token}");
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers.extend_from_slice(extra);
    let (status, text) = request(url, "POST", &headers, &body);
    let answer = text
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .find(|l| l.starts_with('{') && l.contains("\"id\":7"))
        .unwrap_or_else(|| panic!("no answer: {text}"));
    (status, serde_json::from_str(answer).expect("JSON"))
}
