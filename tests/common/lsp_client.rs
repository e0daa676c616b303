//! A small LSP client over the real `pipec lsp` process's stdio (Content-Length framed
//! JSON-RPC), for the tests and the benchmark.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub struct LspClient {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    /// Messages read while waiting for something else.
    backlog: VecDeque<Value>,
    next_id: i64,
}

/// How long any one answer may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(30);

impl LspClient {
    /// Starts `bin lsp` in `cwd` and initializes it.
    pub fn start(bin: &str, cwd: &Path) -> LspClient {
        Self::start_with(bin, cwd, json!({}))
    }

    /// [`LspClient::start`], telling the server these client capabilities.
    pub fn start_with(bin: &str, cwd: &Path, capabilities: Value) -> LspClient {
        let mut child = Command::new(bin)
            .arg("lsp")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start pipec lsp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            while let Some(v) = read_frame(&mut r) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut c = LspClient {
            child,
            stdin,
            incoming: rx,
            backlog: VecDeque::new(),
            next_id: 1,
        };
        let root = Value::String(file_uri(cwd));
        let init = c.request(
            "initialize",
            json!({ "processId": null, "rootUri": root, "capabilities": capabilities }),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        c.notify("initialized", json!({}));
        c
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).expect("write to pipec lsp");
        self.stdin.flush().expect("flush");
    }

    pub fn send(&mut self, msg: &Value) {
        let body = msg.to_string();
        let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.send_raw(frame.as_bytes());
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Sends a request and returns its whole response (`result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.wait_for(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none())
    }

    /// The next message matching `pred`; the others are kept for later waits.
    pub fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i).expect("backlog item");
        }
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(m) if pred(&m) => return m,
                Ok(m) => self.backlog.push_back(m),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no matching message from pipec lsp within {TIMEOUT:?}; got {:?}",
                    self.backlog
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("pipec lsp closed its output; got {:?}", self.backlog)
                }
            }
        }
    }

    /// The next `publishDiagnostics` for `uri`, as its list of diagnostics.
    pub fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let m = self.wait_for(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
        });
        m["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Drops every `publishDiagnostics` already read.
    pub fn forget_diagnostics(&mut self) {
        while let Ok(m) = self.incoming.try_recv() {
            self.backlog.push_back(m);
        }
        self.backlog
            .retain(|m| m["method"] != "textDocument/publishDiagnostics");
    }

    pub fn open(&mut self, uri: &str, text: &str) {
        let language = if uri.ends_with(".pipe") {
            "pipe"
        } else {
            "jinja"
        };
        self.notify(
            "textDocument/didOpen",
            json!({ "textDocument": { "uri": uri, "languageId": language, "version": 1, "text": text } }),
        );
    }

    /// Replaces the whole text of an open document.
    pub fn change_all(&mut self, uri: &str, version: i64, text: &str) {
        self.notify(
            "textDocument/didChange",
            json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": [{ "text": text }] }),
        );
    }

    /// Replaces a range (0-based line and UTF-16 column) of an open document.
    pub fn change_range(
        &mut self,
        uri: &str,
        version: i64,
        start: (u32, u32),
        end: (u32, u32),
        text: &str,
    ) {
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": { "uri": uri, "version": version },
                "contentChanges": [{
                    "range": { "start": { "line": start.0, "character": start.1 }, "end": { "line": end.0, "character": end.1 } },
                    "text": text,
                }],
            }),
        );
    }

    /// A request about a position in a document.
    pub fn at(
        &mut self,
        method: &str,
        uri: &str,
        line: u32,
        character: u32,
        extra: Value,
    ) -> Value {
        let mut params = json!({
            "textDocument": { "uri": uri },
            "position": { "line": line, "character": character },
        });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                p.insert(k.clone(), v.clone());
            }
        }
        self.request(method, params)
    }

    pub fn shutdown(mut self) -> std::process::ExitStatus {
        let r = self.request("shutdown", Value::Null);
        assert!(r.get("error").is_none(), "shutdown failed: {r}");
        self.notify("exit", Value::Null);
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pipec lsp did not exit after `exit`"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_frame(r: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    r.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

/// The `file://` URI of a path (made absolute).
pub fn file_uri(path: &Path) -> String {
    let abs = std::path::absolute(path).expect("absolute path");
    url::Url::from_file_path(&abs)
        .expect("file URI")
        .to_string()
}

/// The resident memory of a process in KiB (Linux: `VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
