//! A real HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions API, with the
//! test deciding each reply from the request (the model's judgement is the only thing a
//! test fakes). It records every request body, and counts the bytes of answers it could
//! write (a reply padded to any size is written while it streams, never held whole).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Decides a reply from the request body (and the requests seen before it).
pub type Reply = Arc<dyn Fn(&Value, &[Value]) -> Value + Send + Sync>;

/// One HTTP answer: a status, extra headers and a body.
#[derive(Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Filler written into the body while it is sent.
    pub padding: Option<Padding>,
}

/// `bytes` bytes of `x` written at byte `at` of a body; with `declared`, the whole
/// length is the `content-length`, else the body ends when the connection closes.
#[derive(Clone, Copy)]
pub struct Padding {
    pub at: usize,
    pub bytes: u64,
    pub declared: bool,
}

impl Response {
    /// A 200 answer with `body` as JSON.
    pub fn ok(body: &Value) -> Response {
        Response {
            status: 200,
            headers: vec![],
            body: body.to_string(),
            padding: None,
        }
    }

    /// A 200 completion whose content is `bytes` bytes of `x` (`declared`: with its
    /// length in `content-length`).
    pub fn huge(bytes: u64, declared: bool) -> Response {
        let body = text("").to_string();
        let at = body.find(r#""content":""#).expect("content") + r#""content":""#.len();
        Response {
            status: 200,
            headers: vec![],
            body,
            padding: Some(Padding {
                at,
                bytes,
                declared,
            }),
        }
    }
}

/// Decides a whole HTTP answer from the request body and the requests seen before it.
pub type Answer = Arc<dyn Fn(&Value, &[Value]) -> Response + Send + Sync>;

pub struct ChatServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    /// Each request's `traceparent` header, when it had one.
    traceparents: Arc<Mutex<Vec<Option<String>>>>,
    written: Arc<AtomicU64>,
}

impl ChatServer {
    /// Serves completions made by `reply` until the test ends.
    pub fn start(reply: Reply) -> ChatServer {
        ChatServer::answering(Arc::new(move |req, seen| Response::ok(&reply(req, seen))))
    }

    /// Serves the HTTP answers made by `answer` (statuses and headers included).
    pub fn answering(answer: Answer) -> ChatServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let traceparents = Arc::new(Mutex::new(Vec::new()));
        let parents = traceparents.clone();
        let written = Arc::new(AtomicU64::new(0));
        let count = written.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut len = 0usize;
                let mut traceparent = None;
                let mut line = String::new();
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let l = line.trim_end();
                    if l.is_empty() {
                        break;
                    }
                    if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if let Some((k, v)) = l.split_once(':')
                        && k.eq_ignore_ascii_case("traceparent")
                    {
                        traceparent = Some(v.trim().to_string());
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                let before = seen.lock().expect("lock").clone();
                let r = answer(&request, &before);
                seen.lock().expect("lock").push(request);
                parents.lock().expect("lock").push(traceparent);
                let length = match r.padding {
                    Some(p) if !p.declared => None,
                    Some(p) => Some(r.body.len() as u64 + p.bytes),
                    None => Some(r.body.len() as u64),
                };
                let mut head = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\nconnection: close\r\n",
                    r.status
                );
                if let Some(n) = length {
                    head.push_str(&format!("content-length: {n}\r\n"));
                }
                for (k, v) in &r.headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                let _ = stream.write_all(head.as_bytes());
                let (before, after) = r
                    .padding
                    .map_or((r.body.as_str(), ""), |p| r.body.split_at(p.at));
                let filler = r.padding.map_or(0, |p| p.bytes);
                let _ = write_counted(&mut stream, before.as_bytes(), &count)
                    .and_then(|()| pad(&mut stream, filler, &count))
                    .and_then(|()| write_counted(&mut stream, after.as_bytes(), &count));
            }
        });
        ChatServer {
            url,
            requests,
            traceparents,
            written,
        }
    }

    /// The bytes of bodies written so far (those the client read or the kernel took).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }

    /// The `traceparent` header of every request so far, in order (`None` for one
    /// without).
    pub fn traceparents(&self) -> Vec<Option<String>> {
        self.traceparents.lock().expect("lock").clone()
    }
}

fn write_counted(stream: &mut impl Write, bytes: &[u8], count: &AtomicU64) -> std::io::Result<()> {
    stream.write_all(bytes)?;
    count.fetch_add(bytes.len() as u64, Ordering::SeqCst);
    Ok(())
}

/// `n` bytes of `x`, a block at a time: a client that stops reading ends it.
fn pad(stream: &mut impl Write, n: u64, count: &AtomicU64) -> std::io::Result<()> {
    let block = [b'x'; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let len = left.min(block.len() as u64) as usize;
        write_counted(stream, &block[..len], count)?;
        left -= len as u64;
    }
    Ok(())
}

/// A completion whose message is `content`.
pub fn text(content: &str) -> Value {
    json!({
        "id": "x", "object": "chat.completion",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": 12, "completion_tokens": 7 }
    })
}

/// A completion that calls tools: `(name, arguments)` each.
pub fn tool_calls(calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({ "id": format!("call_{i}"), "type": "function", "function": { "name": name, "arguments": args.to_string() } })
        })
        .collect();
    json!({
        "id": "x", "object": "chat.completion",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": null, "tool_calls": calls }, "finish_reason": "tool_calls" }],
        "usage": { "prompt_tokens": 20, "completion_tokens": 9 }
    })
}

/// How many tool results the request carries (the turn the model is at).
pub fn tool_results(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}
