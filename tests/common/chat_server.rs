//! A real HTTP server on 127.0.0.1 that speaks the OpenAI Chat Completions API, with the
//! test deciding each reply from the request (the model's judgement is the only thing a
//! test fakes). It records every request body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
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
}

impl Response {
    /// A 200 answer with `body` as JSON.
    pub fn ok(body: &Value) -> Response {
        Response {
            status: 200,
            headers: vec![],
            body: body.to_string(),
        }
    }
}

/// Decides a whole HTTP answer from the request body and the requests seen before it.
pub type Answer = Arc<dyn Fn(&Value, &[Value]) -> Response + Send + Sync>;

pub struct ChatServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
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
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut len = 0usize;
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
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                let before = seen.lock().expect("lock").clone();
                let r = answer(&request, &before);
                seen.lock().expect("lock").push(request);
                let mut head = format!(
                    "HTTP/1.1 {} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                    r.status,
                    r.body.len()
                );
                for (k, v) in &r.headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(r.body.as_bytes());
            }
        });
        ChatServer { url, requests }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("lock").clone()
    }
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
