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

/// The largest tape read, in bytes: a tape holds what a run's models and servers
/// answered, which their caps bound far below this.
const MAX_TAPE_BYTES: u64 = 256 << 20;

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

/// The tapes being recorded in this process, by path: the tests that name one tape
/// record into it together, and each saves it whole when it ends.
static RECORDING: Mutex<BTreeMap<PathBuf, Arc<Tape>>> = Mutex::new(BTreeMap::new());

/// A test's tape: answered from by the attempts of its run, or recorded into by every
/// test of the run that names it.
pub(crate) struct Tape {
    path: PathBuf,
    /// As the test names it, for messages.
    shown: String,
    recording: bool,
    /// `provider/model` of each declared model, the model a request is keyed by.
    models: BTreeMap<String, String>,
    /// The declared tools, the listing of a server the tape has none of.
    plan: Arc<Plan>,
    state: Mutex<State>,
    /// Held while the file is written, so two saves never cross.
    saving: Mutex<()>,
    /// A secret too short to be found was read while recording: the tape is not
    /// written, since it could hold the secret.
    unsafe_to_write: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    by_key: HashMap<String, usize>,
    /// How many answers of each entry were given.
    given: HashMap<String, usize>,
    listings: BTreeMap<String, Vec<Value>>,
    /// A replay's attempt's secrets, scrubbed from each request before it is keyed (a
    /// recording scrubs with the secrets of the attempt that made the request).
    scrubber: Arc<Scrubber>,
    /// Why each request the tape had no answer to went unanswered: a loop's model may
    /// take a miss as a tool's error and go on, so the test reports them itself.
    misses: Vec<String>,
}

impl Tape {
    /// The tape at `path`: read to answer from, or (`recording`) the one this process
    /// records into at that path, empty at first.
    pub(crate) fn open(
        path: &Path,
        shown: &str,
        recording: bool,
        plan: Arc<Plan>,
    ) -> Result<Arc<Tape>, String> {
        let models = plan
            .models
            .iter()
            .map(|m| {
                let name = m.model.clone().unwrap_or_else(|| m.name.clone());
                (m.name.clone(), format!("{}/{name}", m.provider))
            })
            .collect();
        let tape = |state| Tape {
            path: path.to_path_buf(),
            shown: shown.to_string(),
            recording,
            models,
            plan,
            state: Mutex::new(state),
            saving: Mutex::new(()),
            unsafe_to_write: std::sync::atomic::AtomicBool::new(false),
        };
        if recording {
            let mut open = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
            return Ok(open
                .entry(path.to_path_buf())
                .or_insert_with(|| Arc::new(tape(State::default())))
                .clone());
        }
        let text = crate::read_capped(path, MAX_TAPE_BYTES).map_err(|e| {
            format!("cannot read the tape {shown}: {e}; record it with `pipec test --record`")
        })?;
        let file: TapeFile = serde_json::from_str(&text).map_err(|e| {
            format!("the tape {shown} is not a tape: {e}; fix it, or record it again with `pipec test --record`")
        })?;
        if file.pipec_tape != VERSION {
            return Err(format!(
                "the tape {shown} is of version {}, and this pipec reads version {VERSION}; record it again with `pipec test --record`",
                file.pipec_tape
            ));
        }
        let mut state = State::default();
        for mut entry in file.entries {
            if entry.answers.is_empty() {
                return Err(format!(
                    "an entry of the tape {shown} has no answers: {}; give it one, or record the tape again",
                    canonical(&entry.request)
                ));
            }
            entry.key = key_of(&entry.request);
            if state.by_key.contains_key(&entry.key) {
                return Err(format!(
                    "the tape {shown} holds the request {} twice; put all its answers, in order, in one entry",
                    entry.key
                ));
            }
            state.add(entry);
        }
        state.listings = file.listings;
        Ok(Arc::new(tape(state)))
    }

    /// Refuses to write the tape: `why` fails the test.
    pub(crate) fn refuse_to_write(&self, why: String) {
        if !self
            .unsafe_to_write
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.add_miss(why);
        }
    }

    /// Writes what was recorded, entries in the order they were first asked; nothing
    /// when a secret could not be scrubbed from it.
    pub(crate) fn save(&self) -> Result<(), String> {
        if self
            .unsafe_to_write
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(());
        }
        let text = {
            let state = self.lock();
            let file = TapeFile {
                pipec_tape: VERSION,
                listings: state.listings.clone(),
                entries: state.entries.clone(),
            };
            serde_json::to_string_pretty(&file).map_err(|e| e.to_string())? + "\n"
        };
        let _saving = self.saving.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        }
        // Written beside, under a name of this process's own, and renamed: a tape is
        // never half written, and no other process's save is taken for this one.
        let partial = self
            .path
            .with_extension(format!("json.{}.partial", std::process::id()));
        std::fs::write(&partial, text)
            .and_then(|()| std::fs::rename(&partial, &self.path))
            .map_err(|e| format!("cannot write the tape {}: {e}", self.shown))
    }

    /// The tape as the test names it.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// The requests it had no answer to, each with the nearest recording.
    pub(crate) fn misses(&self) -> Vec<String> {
        self.lock().misses.clone()
    }

    /// Whether the tape is being recorded (else it answers).
    pub(crate) fn recording(&self) -> bool {
        self.recording
    }

    /// Takes a replay's attempt's secrets, scrubbed from each request before it is keyed.
    pub(crate) fn take_secrets(&self, secrets: &Scrubber) {
        self.lock().scrubber = Arc::new(secrets.clone());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an answer to a request, both scrubbed of the attempt's `secrets` first.
    fn record(&self, mut request: Value, mut answer: Value, secrets: &Scrubber) {
        secrets.scrub_value(&mut request);
        secrets.scrub_value(&mut answer);
        crate::child::note(json!({ "recorded": { "request": request, "answer": answer } }));
        self.add_recorded(request, answer);
    }

    /// Adds an answer already scrubbed (recorded here, or by the killed process of a
    /// `kill_after` test).
    pub(crate) fn add_recorded(&self, request: Value, answer: Value) {
        let mut state = self.lock();
        let key = key_of(&request);
        match state.by_key.get(&key) {
            Some(&i) => state.entries[i].answers.push(answer),
            None => state.add(Entry {
                key,
                request,
                answers: vec![answer],
            }),
        }
    }

    /// Adds a server's listing, already scrubbed.
    pub(crate) fn add_listing(&self, server: &str, tools: Vec<Value>) {
        self.lock().listings.insert(server.to_string(), tools);
    }

    /// Counts an answer the killed process of a `kill_after` test was given.
    pub(crate) fn consume(&self, key: &str) {
        *self.lock().given.entry(key.to_string()).or_insert(0) += 1;
    }

    /// Adds a miss the killed process of a `kill_after` test met.
    pub(crate) fn add_miss(&self, miss: String) {
        self.lock().misses.push(miss);
    }

    /// The next answer to a request, or what the tape holds instead.
    fn answer(&self, mut request: Value) -> Result<Value, String> {
        let entries = {
            let mut guard = self.lock();
            let state = &mut *guard;
            state.scrubber.scrub_value(&mut request);
            let key = key_of(&request);
            if let Some(&i) = state.by_key.get(&key) {
                let given = state.given.entry(key.clone()).or_insert(0);
                let answers = &state.entries[i].answers;
                let answer = answers[(*given).min(answers.len() - 1)].clone();
                *given += 1;
                drop(guard);
                crate::child::note(json!({ "answered": key }));
                return Ok(answer);
            }
            state.entries.clone()
        };
        // The nearest recording is looked for with the lock let go: the other calls of
        // the run go on meanwhile.
        let miss = self.miss(&entries, &request);
        crate::child::note(json!({ "miss": miss }));
        self.add_miss(miss.clone());
        Err(miss)
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
                out.push_str(&crate::text::changes(&text, &asked));
            }
        }
        out.push_str("\nrecord the tape again with `pipec test --record`");
        out
    }

    /// A model of the test standing for `name`: answering from the tape, or (recording)
    /// calling `inner` and recording what it answers, scrubbed of `secrets`.
    pub(crate) fn model(
        self: &Arc<Tape>,
        name: &str,
        inner: Option<(Arc<dyn Model>, Arc<Scrubber>)>,
    ) -> TapeModel {
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
    /// answers recorded, scrubbed of the attempt's secrets.
    pub(crate) fn servers(
        self: &Arc<Tape>,
        inner: Option<(Arc<dyn Servers>, Arc<Scrubber>)>,
    ) -> TapeServers {
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
    /// Recording: the real model, and the secrets of the attempt that calls it.
    inner: Option<(Arc<dyn Model>, Arc<Scrubber>)>,
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
            "response_schema_name": r.schema_name,
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
                Some((inner, secrets)) => {
                    let reply = inner.complete(request).await?;
                    let answer = serde_json::to_value(&reply)
                        .map_err(|e| ModelError::Fatal(e.to_string()))?;
                    self.tape.record(asked, answer, secrets);
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
    /// Recording: the real servers, and the secrets of the attempt that reaches them.
    inner: Option<(Arc<dyn Servers>, Arc<Scrubber>)>,
}

impl TapeServers {
    /// Records a server's answer: its result, or the JSON-RPC error it answered with (a
    /// link that is gone answers so, and a replay must see it to heal the link).
    fn note<T>(&self, asked: Value, got: &Result<T, McpError>, answer: impl Fn(&T) -> Value) {
        let Some((_, secrets)) = &self.inner else {
            return;
        };
        match got {
            Ok(v) => self.tape.record(asked, answer(v), secrets),
            Err(McpError::Server {
                code,
                message,
                data,
                ..
            }) => self.tape.record(
                asked,
                json!({ "error": { "code": code, "message": message, "data": data } }),
                secrets,
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
                Some((inner, _)) => {
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
                Some((inner, secrets)) => {
                    let asked = tool_request(server, tool, &arguments);
                    let got = inner
                        .call(server, tool, arguments, meta, options, resumption)
                        .await;
                    match &got {
                        Ok(Called::Result(result)) => {
                            self.tape.record(asked, result.to_json(), secrets)
                        }
                        // A tape holds results: a replay could not answer these, so the
                        // recording says so rather than keep a tape that misses.
                        Ok(Called::Task(_)) => self.tape.add_miss(format!(
                            "the call of `{tool}` became a task, which a tape cannot hold: this test cannot be taped"
                        )),
                        Ok(Called::Asked(_)) => self.tape.add_miss(format!(
                            "the server asked a question during `{tool}`, which a tape cannot hold: this test cannot be taped"
                        )),
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
            Some((inner, _)) => inner.await_task(server, task, options, resumption),
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
            Some((inner, _)) => inner.cancel_task(server, task),
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
                Some((inner, _)) => {
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
                Some((inner, secrets)) => {
                    let got = inner.list_tools(server).await;
                    if let Ok(tools) = &got {
                        let mut listed: Vec<Value> = tools.iter().map(|t| t.raw.clone()).collect();
                        for tool in &mut listed {
                            secrets.scrub_value(tool);
                        }
                        crate::child::note(json!({ "listing": [server, listed] }));
                        self.tape.add_listing(server, listed);
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
            if let Some((inner, _)) = &self.inner {
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
    pipec_base::digest::sha256_tagged(canonical(request))
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
/// URIs that differ in one id are near), by lines when they are not (prompts); a diff
/// that takes too long stops at a rough answer.
fn nearness(a: &str, b: &str) -> f32 {
    let mut config = similar::TextDiff::configure();
    config.timeout(std::time::Duration::from_millis(20));
    if a.len() + b.len() <= 16 * 1024 {
        config.diff_chars(a, b).ratio()
    } else {
        config.diff_lines(a, b).ratio()
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
