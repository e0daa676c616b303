//! Tapes: what a test's models and MCP servers were asked and what they answered,
//! recorded by `pipec test --record` and answered from on every other run, so a test
//! reaches no endpoint and starts no server.
//!
//! A tape is a JSON file of entries, each a request in canonical form (the model and
//! what it is sent; the server, tool and arguments; the server and URI read) with the
//! answers it got, in order, keyed by the SHA-256 of the request's canonical JSON. The
//! same request asked again gets the next answer, the last one once they run out.
//! Secrets are scrubbed from requests and answers before they are keyed or written, so
//! a tape never holds one and a replay with other values of them finds the same keys.
//! A request the tape does not hold fails its node with the nearest recording and the
//! lines that differ.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use pipec_mcp::{
    Called, McpError, RequestOptions, ResourceContent, Resumption, TaskRef, ToolInfo, ToolResult,
};
use pipec_plan::{Plan, ToolKind};
use pipec_runtime::llm::{Model, ModelError, ModelFuture, ModelReply, ModelRequest};
use pipec_runtime::secrets::Scrubber;
use pipec_runtime::{ServerFuture, Servers};

/// The format's version, the first key of every tape.
const VERSION: u32 = 1;

/// A tape file as written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TapeFile {
    pipec_tape: u32,
    /// Each server's `tools/list`, as it listed its tools.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    listings: BTreeMap<String, Vec<Value>>,
    #[serde(default)]
    entries: Vec<Entry>,
}

/// One request and the answers it got.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// `sha256:` of the request's canonical JSON; worked out again when a tape is read,
    /// so a request edited by hand is found by what it now says.
    #[serde(default)]
    key: String,
    request: Value,
    /// In the order they were given: a model's reply, a `CallToolResult`, a read's
    /// `{"contents": [...]}`, or the JSON-RPC error the server answered with
    /// (`{"error": {"code", "message"}}`).
    answers: Vec<Value>,
}

/// How a tape is used.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Answered from.
    Replay,
    /// Recorded into: from empty, or (`append`) after what the file holds (what the
    /// killed process of a `kill_after` test recorded); `save_each`: written after
    /// every answer (that process dies without a chance to write it).
    Record { append: bool, save_each: bool },
}

impl Mode {
    /// The mode of a test's tape: `recording` or not, in the process that is killed,
    /// or in a test with `kill_after` after that process.
    pub(crate) fn of(recording: bool, killed_process: bool, after_a_kill: bool) -> Mode {
        match (recording, killed_process) {
            (false, _) => Mode::Replay,
            (true, true) => Mode::Record {
                append: false,
                save_each: true,
            },
            (true, false) => Mode::Record {
                append: after_a_kill,
                save_each: false,
            },
        }
    }
}

/// A test's tape, shared by the attempts of its run.
pub(crate) struct Tape {
    path: PathBuf,
    /// As the test names it, for messages.
    shown: String,
    mode: Mode,
    /// `provider/model` of each declared model, the model a request is keyed by.
    models: BTreeMap<String, String>,
    /// The declared tools, the listing of a server the tape has none of.
    plan: Arc<Plan>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    by_key: HashMap<String, usize>,
    /// How many answers of each entry were given.
    given: HashMap<String, usize>,
    listings: BTreeMap<String, Vec<Value>>,
    /// The secrets of the attempt, scrubbed from everything keyed or written.
    scrubber: Arc<Scrubber>,
    /// Why each request the tape had no answer to went unanswered: a loop's model may
    /// take a miss as a tool's error and go on, so the test reports them itself.
    misses: Vec<String>,
}

impl Tape {
    /// The tape at `path`: read to answer from, or empty to record into.
    pub(crate) fn open(
        path: &Path,
        shown: &str,
        mode: Mode,
        plan: Arc<Plan>,
    ) -> Result<Arc<Tape>, String> {
        let mut state = State::default();
        let read = match mode {
            Mode::Replay => true,
            Mode::Record { append, .. } => append && path.exists(),
        };
        if read {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!("cannot read the tape {shown}: {e}; record it with `pipec test --record`")
            })?;
            let file: TapeFile = serde_json::from_str(&text)
                .map_err(|e| format!("the tape {shown} is not a tape: {e}"))?;
            if file.pipec_tape != VERSION {
                return Err(format!(
                    "the tape {shown} is of version {}, and this pipec reads version {VERSION}; record it again with `pipec test --record`",
                    file.pipec_tape
                ));
            }
            for mut entry in file.entries {
                if entry.answers.is_empty() {
                    return Err(format!(
                        "an entry of the tape {shown} has no answers: {}",
                        canonical(&entry.request)
                    ));
                }
                entry.key = key_of(&entry.request);
                state.add(entry);
            }
            state.listings = file.listings;
        }
        let models = plan
            .models
            .iter()
            .map(|m| {
                let name = m.model.clone().unwrap_or_else(|| m.name.clone());
                (m.name.clone(), format!("{}/{name}", m.provider))
            })
            .collect();
        Ok(Arc::new(Tape {
            path: path.to_path_buf(),
            shown: shown.to_string(),
            mode,
            models,
            plan,
            state: Mutex::new(state),
        }))
    }

    /// Writes what was recorded, entries in the order they were first asked.
    pub(crate) fn save(&self) -> Result<(), String> {
        let state = self.lock();
        let file = TapeFile {
            pipec_tape: VERSION,
            listings: state.listings.clone(),
            entries: state.entries.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())? + "\n";
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        // Written beside and renamed, so a tape is never half written.
        let partial = self.path.with_extension("json.partial");
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, &self.path))
            .map_err(|e| format!("cannot write the tape {}: {e}", self.shown))
    }

    /// The requests it had no answer to, each with the nearest recording.
    pub(crate) fn misses(&self) -> Vec<String> {
        self.lock().misses.clone()
    }

    /// Whether the tape is being recorded (else it answers).
    pub(crate) fn recording(&self) -> bool {
        self.mode != Mode::Replay
    }

    /// Takes the secrets of an attempt, scrubbed from everything keyed or written.
    pub(crate) fn take_secrets(&self, secrets: &Scrubber) {
        self.lock().scrubber = Arc::new(secrets.clone());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The request scrubbed of secrets, as it is keyed.
    fn scrubbed(&self, mut request: Value) -> Value {
        self.lock().scrubber.scrub_value(&mut request);
        request
    }

    /// Records an answer to a request (both scrubbed here).
    fn record(&self, request: Value, mut answer: Value) {
        let request = self.scrubbed(request);
        let mut state = self.lock();
        state.scrubber.scrub_value(&mut answer);
        let key = key_of(&request);
        match state.by_key.get(&key) {
            Some(&i) => state.entries[i].answers.push(answer),
            None => state.add(Entry {
                key,
                request,
                answers: vec![answer],
            }),
        }
        drop(state);
        if let Mode::Record {
            save_each: true, ..
        } = self.mode
        {
            // The process may die at the next step; what it heard is kept. A tape that
            // cannot be written fails the test when the process that resumes saves it.
            let _ = self.save();
        }
    }

    /// The next answer to a request, or what the tape holds instead.
    fn answer(&self, request: Value) -> Result<Value, String> {
        let request = self.scrubbed(request);
        let key = key_of(&request);
        let mut guard = self.lock();
        let state = &mut *guard;
        let Some(&i) = state.by_key.get(&key) else {
            let miss = self.miss(&state.entries, &request);
            state.misses.push(miss.clone());
            return Err(miss);
        };
        let given = state.given.entry(key).or_insert(0);
        let answers = &state.entries[i].answers;
        let answer = answers[(*given).min(answers.len() - 1)].clone();
        *given += 1;
        Ok(answer)
    }

    /// Why a request is not answered: the nearest recording of its kind and the lines
    /// that differ.
    fn miss(&self, entries: &[Entry], request: &Value) -> String {
        let asked = pretty(request);
        let kind = request.get("kind");
        let nearest = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.request.get("kind") == kind)
            .map(|(i, e)| {
                let text = pretty(&e.request);
                (nearness(&text, &asked), i, text)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let mut out = format!(
            "the tape {} holds no answer to this request ({})",
            self.shown,
            key_of(request)
        );
        match nearest {
            None => out.push_str(&format!(
                ", nor any request of its kind; it asks:\n{}",
                indent(&asked)
            )),
            Some((_, i, text)) => {
                out.push_str(&format!(
                    "; the nearest recording, entry {} ({}), differs (- recorded, + asked):\n",
                    i + 1,
                    entries[i].key
                ));
                out.push_str(&line_diff(&text, &asked));
            }
        }
        out.push_str("\nrecord the tape again with `pipec test --record`");
        out
    }

    /// A model of the test standing for `name`: answering from the tape, or (recording)
    /// calling `inner` and recording what it answers.
    pub(crate) fn model(self: &Arc<Tape>, name: &str, inner: Option<Arc<dyn Model>>) -> TapeModel {
        TapeModel {
            tape: self.clone(),
            model: self
                .models
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.to_string()),
            inner,
        }
    }

    /// The servers of the test: answering from the tape, or (recording) `inner`'s
    /// answers recorded.
    pub(crate) fn servers(self: &Arc<Tape>, inner: Option<Arc<dyn Servers>>) -> TapeServers {
        TapeServers {
            tape: self.clone(),
            inner,
        }
    }
}

impl State {
    fn add(&mut self, entry: Entry) {
        self.by_key.insert(entry.key.clone(), self.entries.len());
        self.entries.push(entry);
    }
}

/// A model whose replies come from a tape, or are recorded into it.
pub(crate) struct TapeModel {
    tape: Arc<Tape>,
    /// `provider/model`.
    model: String,
    inner: Option<Arc<dyn Model>>,
}

impl TapeModel {
    /// What a request is keyed by: the model and all it is sent (not the node asking,
    /// nor the trace it is part of).
    fn request(&self, r: &ModelRequest) -> Value {
        json!({
            "kind": "model",
            "model": self.model,
            "messages": r.messages,
            "response_schema": r.schema,
            "tools": r.tools,
            "temperature": r.temperature,
            "max_tokens": r.max_tokens,
        })
    }
}

impl Model for TapeModel {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let asked = self.request(request);
            match &self.inner {
                Some(inner) => {
                    let reply = inner.complete(request).await?;
                    let answer = serde_json::to_value(&reply)
                        .map_err(|e| ModelError::Fatal(e.to_string()))?;
                    self.tape.record(asked, answer);
                    Ok(reply)
                }
                None => {
                    let answer = self.tape.answer(asked).map_err(ModelError::Fatal)?;
                    serde_json::from_value::<ModelReply>(answer).map_err(|e| {
                        ModelError::Fatal(format!(
                            "a reply of the tape {} is not a model's reply: {e}",
                            self.tape.shown
                        ))
                    })
                }
            }
        })
    }
}

/// MCP servers answering from a tape, or recorded into it.
pub(crate) struct TapeServers {
    tape: Arc<Tape>,
    inner: Option<Arc<dyn Servers>>,
}

impl TapeServers {
    /// Records a server's answer: its result, or the JSON-RPC error it answered with (a
    /// link that is gone answers so, and a replay must see it to heal the link).
    fn note<T>(&self, asked: Value, got: &Result<T, McpError>, answer: impl Fn(&T) -> Value) {
        match got {
            Ok(v) => self.tape.record(asked, answer(v)),
            Err(McpError::Server {
                code,
                message,
                data,
                ..
            }) => self.tape.record(
                asked,
                json!({ "error": { "code": code, "message": message, "data": data } }),
            ),
            Err(_) => {}
        }
    }

    /// The recorded answer, or the error the server answered with.
    fn recorded(&self, server: &str, asked: Value) -> Result<Value, McpError> {
        let answer = self
            .tape
            .answer(asked)
            .map_err(|message| McpError::NoAnswer {
                server: server.to_string(),
                message,
            })?;
        match answer.get("error") {
            Some(error) => Err(McpError::Server {
                server: server.to_string(),
                code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                data: error.get("data").filter(|d| !d.is_null()).cloned(),
            }),
            None => Ok(answer),
        }
    }

    fn unreadable(&self, server: &str, what: &str, problem: String) -> McpError {
        McpError::NoAnswer {
            server: server.to_string(),
            message: format!(
                "{what} of the tape {} cannot be read: {problem}",
                self.tape.shown
            ),
        }
    }
}

impl Servers for TapeServers {
    fn call_tool<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult> {
        Box::pin(async move {
            let asked = tool_request(server, tool, &arguments);
            match &self.inner {
                Some(inner) => {
                    let got = inner
                        .call_tool(server, tool, arguments, meta, options)
                        .await;
                    self.note(asked, &got, ToolResult::to_json);
                    got
                }
                None => {
                    let answer = self.recorded(server, asked)?;
                    ToolResult::from_json(&answer)
                        .map_err(|e| self.unreadable(server, "a tool result", e))
                }
            }
        })
    }

    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        Box::pin(async move {
            match &self.inner {
                Some(inner) => {
                    let asked = tool_request(server, tool, &arguments);
                    let got = inner
                        .call(server, tool, arguments, meta, options, resumption)
                        .await;
                    // A result is taped; a question for a person or a task is not (a
                    // replay answers with the result alone).
                    match &got {
                        Ok(Called::Result(result)) => self.tape.record(asked, result.to_json()),
                        Ok(_) => {}
                        Err(_) => self.note(asked, &got, |_| Value::Null),
                    }
                    got
                }
                None => self
                    .call_tool(server, tool, arguments, meta, options)
                    .await
                    .map(Called::Result),
            }
        })
    }

    fn await_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        match &self.inner {
            Some(inner) => inner.await_task(server, task, options, resumption),
            None => Box::pin(async move {
                Err(McpError::NoAnswer {
                    server: server.to_string(),
                    message: format!("a tape holds no tasks, such as {}", task.id),
                })
            }),
        }
    }

    fn cancel_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        match &self.inner {
            Some(inner) => inner.cancel_task(server, task),
            None => Box::pin(async {}),
        }
    }

    fn read<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>> {
        Box::pin(async move {
            let asked = json!({ "kind": "read", "server": server, "uri": uri });
            match &self.inner {
                Some(inner) => {
                    let got = inner.read(server, uri, options).await;
                    self.note(asked, &got, |contents| {
                        json!({ "contents": contents.iter().map(ResourceContent::to_json).collect::<Vec<_>>() })
                    });
                    got
                }
                None => {
                    let answer = self.recorded(server, asked)?;
                    answer
                        .get("contents")
                        .and_then(Value::as_array)
                        .ok_or_else(|| "it has no `contents` list".to_string())
                        .and_then(|contents| {
                            contents.iter().map(ResourceContent::from_json).collect()
                        })
                        .map_err(|e| self.unreadable(server, "a read", e))
                }
            }
        })
    }

    fn list_tools<'a>(&'a self, server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>> {
        Box::pin(async move {
            match &self.inner {
                Some(inner) => {
                    let got = inner.list_tools(server).await;
                    if let Ok(tools) = &got {
                        let mut listed: Vec<Value> = tools.iter().map(|t| t.raw.clone()).collect();
                        let mut state = self.tape.lock();
                        for tool in &mut listed {
                            state.scrubber.scrub_value(tool);
                        }
                        state.listings.insert(server.to_string(), listed);
                    }
                    got
                }
                None => {
                    let listed = self.tape.lock().listings.get(server).cloned();
                    match listed {
                        Some(tools) => tools
                            .iter()
                            .map(ToolInfo::from_json)
                            .collect::<Result<_, _>>()
                            .map_err(|e| self.unreadable(server, "the listing", e)),
                        // A tape written by hand may list nothing: the declarations
                        // are what the server offers.
                        None => Ok(declared_listing(&self.tape.plan, server)),
                    }
                }
            }
        })
    }

    fn close(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if let Some(inner) = &self.inner {
                inner.close().await;
            }
        })
    }
}

/// The tools the plan declares on `server`, as a `tools/list` would give them.
pub(crate) fn declared_listing(plan: &Plan, server: &str) -> Vec<ToolInfo> {
    plan.tools
        .iter()
        .filter(|t| t.server == server && t.kind == ToolKind::Tool)
        .filter_map(|t| {
            let properties: Map<String, Value> = t
                .params
                .iter()
                .map(|p| (p.wire_name.clone(), p.schema.clone()))
                .collect();
            let required: Vec<&str> = t
                .params
                .iter()
                .filter(|p| p.required)
                .map(|p| p.wire_name.as_str())
                .collect();
            ToolInfo::from_json(&json!({
                "name": t.wire_name,
                "description": t.description,
                "inputSchema": { "type": "object", "properties": properties, "required": required },
                "annotations": {
                    "readOnlyHint": t.read_only,
                    "idempotentHint": t.idempotent,
                    "destructiveHint": t.destructive,
                },
            }))
            .ok()
        })
        .collect()
}

/// What a tool call is keyed by: the server, the tool and the arguments (not `_meta`,
/// which carries the trace).
fn tool_request(server: &str, tool: &str, arguments: &Map<String, Value>) -> Value {
    json!({ "kind": "tool", "server": server, "tool": tool, "arguments": arguments })
}

/// `sha256:` of the value's canonical JSON.
fn key_of(request: &Value) -> String {
    format!(
        "sha256:{}",
        pipec_base::digest::sha256_hex(canonical(request).as_bytes(), 32)
    )
}

/// JSON with every object's keys sorted, whatever order the value holds them in.
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

/// A request as a person compares two: keys sorted, a text's lines on lines of their
/// own (a prompt differs by the line, not as one long string).
fn pretty(v: &Value) -> String {
    let canonical: Value = serde_json::from_str(&canonical(v)).unwrap_or_else(|_| v.clone());
    serde_json::to_string_pretty(&canonical)
        .unwrap_or_else(|_| v.to_string())
        .replace("\\n", "\n")
}

/// How alike two requests are, from 0 to 1: by characters when they are small (two
/// URIs that differ in one id are near), by lines when they are not (prompts).
fn nearness(a: &str, b: &str) -> f32 {
    if a.len() + b.len() <= 16 * 1024 {
        similar::TextDiff::from_chars(a, b).ratio()
    } else {
        similar::TextDiff::from_lines(a, b).ratio()
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines that differ with two of context around them; a long line shown around
/// where it differs.
fn line_diff(recorded: &str, asked: &str) -> String {
    let diff = similar::TextDiff::from_lines(recorded, asked);
    let mut out = String::new();
    for group in diff.grouped_ops(2) {
        for op in group {
            for change in diff.iter_changes(&op) {
                let sign = match change.tag() {
                    similar::ChangeTag::Delete => "-",
                    similar::ChangeTag::Insert => "+",
                    similar::ChangeTag::Equal => " ",
                };
                out.push_str(sign);
                out.push_str(&shortened(change.value().trim_end_matches('\n')));
                out.push('\n');
            }
        }
        out.push_str("  ...\n");
    }
    out.trim_end().to_string()
}

/// A line cut to 400 characters.
fn shortened(line: &str) -> String {
    const MAX: usize = 400;
    if line.chars().count() <= MAX {
        return line.to_string();
    }
    let cut: String = line.chars().take(MAX).collect();
    format!("{cut}…")
}
