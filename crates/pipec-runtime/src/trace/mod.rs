//! A thread's trace: what an attempt did, as spans a tracing backend shows, made from
//! the events it commits (the journal is the record; the trace is a view of it) and from
//! its MCP calls. The runtime makes plain span records ([`SpanRec`]) and hands them to a
//! [`SpanSink`] its embedder gives (`pipec` exports them over OTLP); with no sink, nothing
//! is made.
//!
//! Ids are derived, never drawn: the trace id is the thread's id (a ULID is 128 bits, as a
//! trace id is), and each span id is a digest of the thread and what the span is (the
//! attempt, the node, the model turn, the call key). So every attempt of a thread, in
//! any process, adds to one trace; a later attempt links to the one before it; a gate's
//! wait, answered in another process, is a child of the attempt that asked; and the
//! `traceparent` an MCP server or a model endpoint receives names the span the backend
//! gets for that request.
//!
//! The names follow OpenTelemetry's GenAI and MCP conventions: an attempt is
//! `invoke_workflow {pipeline}`, an `agent`/`act` node `invoke_agent {node}`, a model turn
//! `chat {model}`, a tool call `execute_tool {tool}` with the MCP attributes, a read
//! `resources/read`; other nodes are `{kind} {node}`, a heal `heal {kind}`, a gate's wait
//! `gate {name}`. Content (prompts, replies, tool arguments and results) goes in a span
//! only when the sink asks for it ([`SpanSink::with_content`]), scrubbed of secrets
//! (`content`).

mod content;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pipec_plan::{Body, Plan};
use pipec_store::{Event, RecordedEvent};
use serde_json::{Map, Value};

/// Where finished spans go, and whether they carry content.
#[derive(Clone)]
pub struct SpanSink {
    emit: Arc<dyn Fn(SpanRec) + Send + Sync>,
    content: bool,
}

impl SpanSink {
    /// Spans handed to `emit`, without content.
    pub fn new(emit: impl Fn(SpanRec) + Send + Sync + 'static) -> SpanSink {
        SpanSink {
            emit: Arc::new(emit),
            content: false,
        }
    }

    /// With `on`, model turns carry their messages (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`, `gen_ai.system_instructions`) and tool calls their
    /// arguments and results (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`),
    /// secrets replaced by their placeholders.
    pub fn with_content(mut self, on: bool) -> SpanSink {
        self.content = on;
        self
    }

    /// Whether spans carry content.
    pub fn content(&self) -> bool {
        self.content
    }

    /// Hands a finished span on.
    pub fn emit(&self, span: SpanRec) {
        (self.emit)(span);
    }
}

/// A finished span.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanRec {
    pub trace_id: u128,
    pub span_id: u64,
    pub parent: Option<u64>,
    pub name: String,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Attr)>,
    /// Spans this one follows from: an attempt's earlier attempt, the client's request
    /// that started a served run, the run a served request started.
    pub links: Vec<SpanRef>,
    /// The parent is another process's span (a client's request).
    pub parent_remote: bool,
    /// Why it failed (the span's status is an error with this description).
    pub error: Option<String>,
}

/// What a span stands for, as OpenTelemetry's span kinds say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal,
    /// A request to another process: a model endpoint, an MCP server.
    Client,
    /// A request another process made: an MCP client's call of `pipec serve`.
    Server,
}

/// A span by its ids, in any trace: a link's target, or a parent in another process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanRef {
    pub trace_id: u128,
    pub span_id: u64,
}

impl SpanRef {
    /// The span a W3C `traceparent` names (version `00`, or a later version read as
    /// `00` as the recommendation asks); `None` for one that is not well formed or
    /// names no span (all-zero ids).
    pub fn from_traceparent(text: &str) -> Option<SpanRef> {
        let text = text.trim_matches(|c| c == ' ' || c == '\t');
        let b = text.as_bytes();
        let lower_hex = |s: &str| s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
        if b.len() < 55 || !text.is_char_boundary(55) {
            return None;
        }
        let version = &text[..2];
        // Version 00 is exactly 55 characters; a later one may add fields after a dash.
        let fits = match version {
            "00" => b.len() == 55,
            "ff" => false,
            _ => b.len() == 55 || b[55] == b'-',
        };
        if !fits || !lower_hex(version) || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
            return None;
        }
        let (trace, span, flags) = (&text[3..35], &text[36..52], &text[53..55]);
        if !(lower_hex(trace) && lower_hex(span) && lower_hex(flags)) {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok().filter(|n| *n != 0)?;
        let span_id = u64::from_str_radix(span, 16).ok().filter(|n| *n != 0)?;
        Some(SpanRef { trace_id, span_id })
    }
}

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Strs(Vec<String>),
}

impl From<&str> for Attr {
    fn from(s: &str) -> Attr {
        Attr::Str(s.to_string())
    }
}
impl From<String> for Attr {
    fn from(s: String) -> Attr {
        Attr::Str(s)
    }
}
impl From<u64> for Attr {
    fn from(n: u64) -> Attr {
        Attr::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Attr {
    fn from(n: u32) -> Attr {
        Attr::Int(i64::from(n))
    }
}
impl From<f64> for Attr {
    fn from(n: f64) -> Attr {
        Attr::Float(n)
    }
}
impl From<bool> for Attr {
    fn from(b: bool) -> Attr {
        Attr::Bool(b)
    }
}

/// The trace id of `thread`: its ULID's 128 bits (a digest of it for an id that is not
/// one, as an embedder may choose).
pub fn trace_id(thread: &str) -> u128 {
    pipec_store::ids::decode(thread)
        .filter(|n| *n != 0)
        .unwrap_or_else(|| {
            let hex = pipec_base::digest::sha256_hex(thread, 16);
            u128::from_str_radix(&hex, 16).unwrap_or(1).max(1)
        })
}

/// The span id of what `parts` name in `thread` (never 0, which means none).
pub fn span_id(thread: &str, parts: &[&str]) -> u64 {
    let mut text = String::from(thread);
    for p in parts {
        text.push('\u{1f}');
        text.push_str(p);
    }
    let hex = pipec_base::digest::sha256_hex(&text, 8);
    u64::from_str_radix(&hex, 16).unwrap_or(1).max(1)
}

/// The W3C `traceparent` of a span (sampled).
pub fn traceparent(trace_id: u128, span_id: u64) -> String {
    format!("00-{trace_id:032x}-{span_id:016x}-01")
}

/// The span of attempt `attempt` of `thread`.
pub(crate) fn attempt_span(thread: &str, attempt: u32) -> u64 {
    span_id(thread, &["attempt", &attempt.to_string()])
}

/// The `invoke_workflow` span of attempt `attempt` of `thread`, for a link to it.
pub fn attempt_ref(thread: &str, attempt: u32) -> SpanRef {
    SpanRef {
        trace_id: trace_id(thread),
        span_id: attempt_span(thread, attempt),
    }
}

/// The span of a node's work in one attempt.
pub(crate) fn node_span(thread: &str, attempt: u32, node: &str) -> u64 {
    span_id(thread, &["node", &attempt.to_string(), node])
}

/// The span of a model turn.
pub(crate) fn turn_span(thread: &str, attempt: u32, node: &str, item: u32, turn: u32) -> u64 {
    span_id(
        thread,
        &[
            "turn",
            &attempt.to_string(),
            node,
            &item.to_string(),
            &turn.to_string(),
        ],
    )
}

/// The span of a tool call, by its journal key.
pub(crate) fn call_span(thread: &str, attempt: u32, call: &str) -> u64 {
    span_id(thread, &["call", &attempt.to_string(), call])
}

/// US dollars to the nano-dollar (float noise out of sums).
fn dollars(x: f64) -> Attr {
    Attr::Float((x * 1e9).round() / 1e9)
}

fn time_of(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// The tool call a span is made for.
pub(crate) struct CallOf<'a> {
    pub(crate) node: &'a str,
    /// The call's key in the journal.
    pub(crate) call: &'a str,
    pub(crate) server: &'a str,
    pub(crate) tool: &'a str,
    /// Its arguments as the journal keeps them, for a sink that asks for content.
    pub(crate) arguments: Option<&'a Value>,
}

/// One attempt's trace: the spans its committed events describe, made as the events
/// stream past in order.
pub(crate) struct AttemptTrace {
    sink: SpanSink,
    plan: Arc<Plan>,
    thread: String,
    trace: u128,
    attempt: u32,
    span: u64,
    started: SystemTime,
    /// The request of another process this attempt was started for (an MCP client's
    /// call of a served pipeline), linked from the attempt's span.
    called_from: Option<SpanRef>,
    state: Mutex<Open>,
}

/// What is open while the attempt runs.
#[derive(Default)]
struct Open {
    /// Nodes started, with when.
    nodes: HashMap<String, SystemTime>,
    /// Model calls, tokens and cost per node in this attempt.
    usage: HashMap<String, NodeUsage>,
    /// Gates waiting: when each began to wait, and the attempt that asked.
    gates: HashMap<String, (SystemTime, u32)>,
    /// Content of model turns not yet committed, by their span (only when the sink
    /// asks for content).
    turns: HashMap<u64, Vec<(&'static str, Attr)>>,
    ended: bool,
    outcome: Option<(&'static str, Option<String>)>,
    cost: f64,
    calls: u64,
}

#[derive(Default, Clone, Copy)]
struct NodeUsage {
    turns: u64,
    tokens_in: u64,
    tokens_out: u64,
    cost: f64,
}

impl AttemptTrace {
    /// The trace of attempt `attempt` of `thread`; `waiting` are the gates that were
    /// already waiting when it began: their name, since when (ms) and who asked.
    pub(crate) fn new(
        sink: SpanSink,
        plan: Arc<Plan>,
        thread: &str,
        attempt: u32,
        waiting: Vec<(String, u64, u32)>,
        called_from: Option<SpanRef>,
    ) -> AttemptTrace {
        let open = Open {
            gates: waiting
                .into_iter()
                .map(|(g, ms, asked)| (g, (time_of(ms), asked)))
                .collect(),
            ..Open::default()
        };
        AttemptTrace {
            sink,
            plan,
            thread: thread.to_string(),
            trace: trace_id(thread),
            attempt,
            span: attempt_span(thread, attempt),
            started: SystemTime::now(),
            called_from,
            state: Mutex::new(open),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn base(&self, name: String, kind: SpanKind, span_id: u64, parent: u64) -> SpanRec {
        SpanRec {
            trace_id: self.trace,
            span_id,
            parent: Some(parent),
            name,
            kind,
            start: self.started,
            end: self.started,
            attributes: vec![("gen_ai.conversation.id", self.thread.as_str().into())],
            links: Vec::new(),
            parent_remote: false,
            error: None,
        }
    }

    /// The kind a node is, as its span names it.
    fn kind_of(&self, node: &str) -> &'static str {
        use pipec_plan::NodeKind;
        match self.plan.node(node).map(|n| n.kind) {
            Some(NodeKind::Think) => "think",
            Some(NodeKind::Agent) => "agent",
            Some(NodeKind::Act) => "act",
            Some(NodeKind::Gate) => "gate",
            Some(NodeKind::Node) | None => "node",
        }
    }

    /// One committed event of the thread.
    pub(crate) fn event(&self, e: &RecordedEvent) {
        let at = time_of(e.ts);
        let mut open = self.lock();
        match &e.event {
            Event::NodeStarted { node, .. } => {
                open.nodes.entry(node.clone()).or_insert(at);
            }
            Event::NodeFinished { node, .. } => {
                self.node_ends(&mut open, node, at, None);
            }
            Event::NodeFailed {
                node,
                code,
                message,
            } => {
                self.node_ends(&mut open, node, at, Some(format!("{code}: {message}")));
            }
            Event::NodeSkipped { node } => {
                self.node_ends(&mut open, node, at, None);
            }
            Event::ModelTurn {
                node,
                item,
                turn,
                model,
                tokens_in,
                tokens_out,
                tokens_cached,
                ms,
                cost_usd,
            } => {
                let id = turn_span(&self.thread, self.attempt, node, *item, *turn);
                let content = open.turns.remove(&id);
                let u = open.usage.entry(node.clone()).or_default();
                u.turns += 1;
                u.tokens_in += tokens_in;
                u.tokens_out += tokens_out;
                u.cost += cost_usd.unwrap_or(0.0);
                open.cost += cost_usd.unwrap_or(0.0);
                open.calls += 1;
                drop(open);
                let declared = self.model_of(node);
                let request_model = declared
                    .as_ref()
                    .and_then(|m| m.model.clone())
                    .unwrap_or_else(|| model.clone());
                let response_model = model.split_once(':').map_or(model.as_str(), |(_, m)| m);
                let mut s = self.base(
                    format!("chat {request_model}"),
                    SpanKind::Client,
                    id,
                    node_span(&self.thread, self.attempt, node),
                );
                s.start = at.checked_sub(Duration::from_millis(*ms)).unwrap_or(at);
                s.end = at;
                // Who answered: the reply says (`openai:...`, or `scripted:...` for a model
                // a test or `--model` replaced).
                let provider = match model.split_once(':').map(|(p, _)| p) {
                    Some("openai") => "openai".to_string(),
                    Some(other) => format!("pipec.{other}"),
                    None => declared
                        .as_ref()
                        .map_or_else(|| "unknown".to_string(), |m| m.provider.clone()),
                };
                s.attributes.extend([
                    ("gen_ai.operation.name", "chat".into()),
                    ("gen_ai.provider.name", provider.into()),
                    ("gen_ai.request.model", request_model.into()),
                    ("gen_ai.response.model", response_model.into()),
                    ("gen_ai.usage.input_tokens", (*tokens_in).into()),
                    ("gen_ai.usage.output_tokens", (*tokens_out).into()),
                    (
                        "gen_ai.usage.cache_read.input_tokens",
                        (*tokens_cached).into(),
                    ),
                    ("pipec.node", node.as_str().into()),
                    ("pipec.item", (*item).into()),
                    ("pipec.turn", (*turn).into()),
                ]);
                if let Some(c) = cost_usd {
                    s.attributes.push(("pipec.cost_usd", dollars(*c)));
                }
                s.attributes.extend(content.into_iter().flatten());
                self.sink.emit(s);
            }
            Event::ModelFailed {
                node,
                item,
                turn,
                model,
                code,
                message,
            } => {
                drop(open);
                let mut s = self.base(
                    format!("chat {model}"),
                    SpanKind::Client,
                    turn_span(&self.thread, self.attempt, node, *item, *turn),
                    node_span(&self.thread, self.attempt, node),
                );
                s.start = at;
                s.end = at;
                s.attributes.extend([
                    ("gen_ai.operation.name", "chat".into()),
                    ("gen_ai.request.model", model.as_str().into()),
                    ("error.type", code.as_str().into()),
                    ("pipec.node", node.as_str().into()),
                ]);
                s.error = Some(message.clone());
                self.sink.emit(s);
            }
            Event::ResourceRead {
                node,
                item,
                server,
                uri,
                bytes,
                cached,
                ms,
            } => {
                drop(open);
                let mut s = self.base(
                    "resources/read".into(),
                    SpanKind::Client,
                    span_id(
                        &self.thread,
                        &["read", &e.seq.to_string(), &self.attempt.to_string()],
                    ),
                    node_span(&self.thread, self.attempt, node),
                );
                s.start = at.checked_sub(Duration::from_millis(*ms)).unwrap_or(at);
                s.end = at;
                s.attributes.extend([
                    ("mcp.method.name", "resources/read".into()),
                    ("mcp.resource.uri", uri.as_str().into()),
                    ("pipec.server", server.as_str().into()),
                    ("pipec.bytes", (*bytes).into()),
                    ("pipec.cache_hit", (*cached).into()),
                    ("pipec.node", node.as_str().into()),
                    ("pipec.item", (*item).into()),
                ]);
                self.sink.emit(s);
            }
            Event::LinkHealed {
                node,
                kind,
                tool,
                from_uri,
                to_uri,
                call,
            } => {
                drop(open);
                let mut s = self.base(
                    format!("heal {}", kind.as_deref().unwrap_or("link")),
                    SpanKind::Internal,
                    span_id(&self.thread, &["heal", &e.seq.to_string()]),
                    node_span(&self.thread, self.attempt, node),
                );
                s.start = at;
                s.end = at;
                s.attributes.extend([
                    ("pipec.heal.tool", tool.as_str().into()),
                    ("pipec.heal.from_uri", from_uri.as_str().into()),
                    ("pipec.heal.to_uri", to_uri.as_str().into()),
                    ("pipec.heal.call", call.as_str().into()),
                    ("pipec.node", node.as_str().into()),
                ]);
                self.sink.emit(s);
            }
            Event::GatePending { gate, .. } => {
                open.gates.insert(gate.clone(), (at, self.attempt));
            }
            // An answer given up front is this attempt's to trace; one given from outside
            // is traced by whoever gave it ([`answered_gates`]).
            Event::GateAnswered { gate, by } if by == "pre-answer" => {
                let asked = open.gates.remove(gate);
                drop(open);
                self.gate_waited(gate, asked, at, Some(by), None);
            }
            Event::GateAnswered { gate, .. } => {
                open.gates.remove(gate);
            }
            Event::GateTimedOut { gate, applied } => {
                let asked = open.gates.remove(gate);
                drop(open);
                let why = applied.is_none().then(|| "the gate timed out".to_string());
                self.gate_waited(gate, asked, at, Some("timeout"), why);
            }
            Event::ThreadPaused { .. } => open.outcome = Some(("paused", None)),
            Event::ThreadCompleted { .. } => open.outcome = Some(("completed", None)),
            Event::ThreadBlocked { .. } => open.outcome = Some(("blocked", None)),
            Event::ThreadCancelled {} => open.outcome = Some(("cancelled", None)),
            Event::ThreadReleased {} => open.outcome = Some(("released", None)),
            Event::ThreadFailed { code, message, .. } => {
                open.outcome = Some(("failed", Some(format!("{code}: {message}"))));
            }
            _ => {}
        }
    }

    fn model_of(&self, node: &str) -> Option<pipec_plan::Model> {
        let n = self.plan.node(node)?;
        let model = match &n.body {
            Body::Model { model, .. } => model,
            _ => return None,
        };
        self.plan.models.iter().find(|m| &m.name == model).cloned()
    }

    fn node_ends(&self, open: &mut Open, node: &str, at: SystemTime, error: Option<String>) {
        let start = open.nodes.remove(node).unwrap_or(at);
        let usage = open.usage.remove(node);
        let kind = self.kind_of(node);
        // A gate's span is its wait, from when it was asked to its answer.
        if kind == "gate" {
            return;
        }
        let agent = matches!(kind, "agent" | "act");
        let name = if agent {
            format!("invoke_agent {node}")
        } else {
            format!("{kind} {node}")
        };
        let mut s = self.base(
            name,
            SpanKind::Internal,
            node_span(&self.thread, self.attempt, node),
            self.span,
        );
        s.start = start;
        s.end = at;
        s.attributes.extend([
            ("pipec.node", node.into()),
            ("pipec.node.kind", kind.into()),
        ]);
        if agent {
            s.attributes.extend([
                ("gen_ai.operation.name", "invoke_agent".into()),
                ("gen_ai.agent.name", node.into()),
            ]);
        }
        if let Some(u) = usage {
            s.attributes.extend([
                ("pipec.model_calls", u.turns.into()),
                ("gen_ai.usage.input_tokens", u.tokens_in.into()),
                ("gen_ai.usage.output_tokens", u.tokens_out.into()),
                ("pipec.cost_usd", dollars(u.cost)),
            ]);
        }
        s.error = error;
        self.sink.emit(s);
    }

    /// A gate's wait, from when it was asked (in this attempt or an earlier one) to its
    /// answer.
    fn gate_waited(
        &self,
        gate: &str,
        asked: Option<(SystemTime, u32)>,
        at: SystemTime,
        by: Option<&str>,
        error: Option<String>,
    ) {
        let (start, attempt) = asked.unwrap_or((at, self.attempt));
        let mut s = self.base(
            format!("gate {gate}"),
            SpanKind::Internal,
            span_id(&self.thread, &["gate", gate, &attempt.to_string()]),
            attempt_span(&self.thread, attempt),
        );
        s.start = start;
        s.end = at.max(start);
        s.attributes.push(("pipec.gate", gate.into()));
        if let Some(by) = by {
            s.attributes.push(("pipec.gate.answered_by", by.into()));
        }
        let waited = at.duration_since(start).unwrap_or_default();
        s.attributes
            .push(("pipec.gate.wait_ms", (waited.as_millis() as u64).into()));
        s.error = error;
        self.sink.emit(s);
    }

    /// The attempt's own span, once it ends (the first call; later ones do nothing):
    /// nodes still open end with it.
    pub(crate) fn finish(&self) {
        let now = SystemTime::now();
        let mut open = self.lock();
        if open.ended {
            return;
        }
        open.ended = true;
        open.turns.clear();
        let nodes: Vec<String> = open.nodes.keys().cloned().collect();
        for node in nodes {
            self.node_ends(&mut open, &node, now, None);
        }
        let (outcome, error) = open.outcome.clone().unwrap_or(("ended", None));
        let mut s = self.base(
            format!("invoke_workflow {}", self.plan.name),
            SpanKind::Internal,
            self.span,
            0,
        );
        s.parent = None;
        s.start = self.started;
        s.end = now;
        s.attributes.extend([
            ("gen_ai.operation.name", "invoke_workflow".into()),
            ("gen_ai.agent.name", self.plan.name.as_str().into()),
            ("pipec.attempt", self.attempt.into()),
            ("pipec.outcome", outcome.into()),
            ("pipec.model_calls", open.calls.into()),
            ("pipec.cost_usd", dollars(open.cost)),
        ]);
        if self.attempt > 1 {
            s.links.push(attempt_ref(&self.thread, self.attempt - 1));
        }
        s.links.extend(self.called_from);
        s.error = error;
        drop(open);
        self.sink.emit(s);
    }

    /// Makes a tool call under its span: `send` is given the request's `_meta` with the
    /// span's `traceparent` beside what `meta` holds, and the span ends when it answers,
    /// with the MCP attributes of its last request, when it failed its error type and
    /// `scrub`bed message, and when the sink asks for content the arguments and result.
    pub(crate) async fn tool_call<F, Fut>(
        &self,
        of: CallOf<'_>,
        mut meta: Map<String, Value>,
        scrub: impl Fn(&str) -> String,
        send: F,
    ) -> Result<pipec_mcp::Called, pipec_mcp::McpError>
    where
        F: FnOnce(Map<String, Value>) -> Fut,
        Fut: std::future::Future<Output = Result<pipec_mcp::Called, pipec_mcp::McpError>>,
    {
        let CallOf {
            node,
            call,
            server,
            tool,
            arguments,
        } = of;
        let span_id = call_span(&self.thread, self.attempt, call);
        meta.insert(
            "traceparent".into(),
            Value::String(traceparent(self.trace, span_id)),
        );
        let start = SystemTime::now();
        let (result, wire) = pipec_mcp::observed(send(meta)).await;
        let mut s = self.base(
            format!("execute_tool {tool}"),
            SpanKind::Client,
            span_id,
            node_span(&self.thread, self.attempt, node),
        );
        s.start = start;
        s.end = SystemTime::now();
        s.attributes.extend([
            ("gen_ai.operation.name", "execute_tool".into()),
            ("gen_ai.tool.name", tool.into()),
            ("gen_ai.tool.call.id", call.into()),
            ("mcp.method.name", "tools/call".into()),
            ("pipec.server", server.into()),
        ]);
        if let Some(id) = wire.request_id {
            s.attributes.push(("jsonrpc.request.id", id.into()));
        }
        if let Some(version) = wire.protocol_version {
            s.attributes.push(("mcp.protocol.version", version.into()));
        }
        if let Some(transport) = wire.transport {
            s.attributes.push(("network.transport", transport.into()));
        }
        if let Err(pipec_mcp::McpError::Server { code, .. }) = &result {
            s.attributes
                .push(("rpc.response.status_code", code.to_string().into()));
        }
        if let Some((kind, message)) = call_failure(&result, &scrub) {
            s.attributes.push(("error.type", kind.into()));
            s.error = Some(message);
        }
        if let Some(arguments) = arguments.filter(|_| self.sink.content()) {
            let answered = match &result {
                Ok(pipec_mcp::Called::Result(r)) => Some(r),
                _ => None,
            };
            s.attributes
                .extend(content::tool(arguments, answered, &scrub));
        }
        self.sink.emit(s);
        result
    }

    /// Keeps the content of model turn `turn` of `node` (item `item`) for its span, when
    /// the sink asks for content: the `messages` it was sent and its `reply`.
    pub(crate) fn turn_content(
        &self,
        node: &str,
        item: u32,
        turn: u32,
        messages: &[crate::llm::Message],
        reply: &crate::llm::ModelReply,
        scrub: &dyn Fn(&str) -> String,
    ) {
        if !self.sink.content() {
            return;
        }
        let attrs = content::turn(messages, reply, scrub);
        let id = turn_span(&self.thread, self.attempt, node, item, turn);
        self.lock().turns.insert(id, attrs);
    }

    /// Whether the sink asks for content.
    pub(crate) fn content(&self) -> bool {
        self.sink.content()
    }

    /// The `traceparent` of model turn `turn` (its request's header).
    pub(crate) fn turn_parent(&self, node: &str, item: u32, turn: u32) -> String {
        traceparent(
            self.trace,
            turn_span(&self.thread, self.attempt, node, item, turn),
        )
    }
}

/// The attempt that asked a gate which began to wait at `pending_ms`: the last one begun
/// by then.
pub(crate) fn asking_attempt(attempts: &[pipec_store::AttemptRec], pending_ms: u64) -> Option<u32> {
    attempts
        .iter()
        .filter(|a| a.started_ms <= pending_ms)
        .map(|a| a.number)
        .max()
}

/// The waits of the gates `committed` answers (a `pipec answer`, a resume's answers, a
/// client of `pipec serve`), each a child of the attempt that asked, from `state` as it
/// was before the answers: the gates' rows and the thread's attempts.
pub(crate) fn answered_gates(
    sink: &SpanSink,
    thread: &str,
    state: &pipec_store::ThreadState,
    committed: &[RecordedEvent],
) {
    let trace = trace_id(thread);
    for e in committed {
        let Event::GateAnswered { gate, by } = &e.event else {
            continue;
        };
        let Some(row) = state.gates.get(gate) else {
            continue;
        };
        let asked = asking_attempt(&state.attempts, row.pending_ms).unwrap_or(1);
        let start = time_of(row.pending_ms);
        let end = time_of(e.ts).max(start);
        let waited = end.duration_since(start).unwrap_or_default();
        sink.emit(SpanRec {
            trace_id: trace,
            span_id: span_id(thread, &["gate", gate, &asked.to_string()]),
            parent: Some(attempt_span(thread, asked)),
            name: format!("gate {gate}"),
            kind: SpanKind::Internal,
            start,
            end,
            attributes: vec![
                ("gen_ai.conversation.id", thread.into()),
                ("pipec.gate", gate.as_str().into()),
                ("pipec.gate.answered_by", by.as_str().into()),
                ("pipec.gate.wait_ms", (waited.as_millis() as u64).into()),
            ],
            links: Vec::new(),
            parent_remote: false,
            error: None,
        });
    }
}

/// How a tool call failed, as a span says it: the JSON-RPC code or `tool_error` (a result
/// marked as an error) or the kind of failure, and the message (scrubbed of secrets).
fn call_failure(
    result: &Result<pipec_mcp::Called, pipec_mcp::McpError>,
    scrub: impl Fn(&str) -> String,
) -> Option<(String, String)> {
    match result {
        Ok(pipec_mcp::Called::Result(r)) if r.is_error => Some((
            "tool_error".into(),
            "the tool answered with an error result".into(),
        )),
        Ok(_) => None,
        Err(pipec_mcp::McpError::Server { code, message, .. }) => {
            Some((code.to_string(), scrub(message)))
        }
        Err(e) => {
            let kind = match e {
                pipec_mcp::McpError::Timeout { .. } | pipec_mcp::McpError::StartTimeout { .. } => {
                    "timeout"
                }
                pipec_mcp::McpError::TooLarge { .. } => "too_large",
                pipec_mcp::McpError::Authorization { .. } => "authorization",
                _ => "_OTHER",
            };
            Some((kind.into(), scrub(&e.to_string())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_names_its_span_or_nothing() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            SpanRef::from_traceparent(tp),
            Some(SpanRef {
                trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
                span_id: 0x00f067aa0ba902b7,
            })
        );
        // What pipec sends reads back as the same span.
        assert_eq!(
            SpanRef::from_traceparent(&traceparent(0xabc, 0xdef)),
            Some(SpanRef {
                trace_id: 0xabc,
                span_id: 0xdef
            })
        );
        // A later version may carry more after a dash; it is read as version 00.
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert!(SpanRef::from_traceparent(later).is_some());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
        ] {
            assert_eq!(SpanRef::from_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_are_the_threads_and_stable() {
        let thread = "01M94TDR35MJPX8HN6G43PEZZS";
        let t = trace_id(thread);
        assert_eq!(Some(t), pipec_store::ids::decode(thread));
        assert_eq!(attempt_span(thread, 1), attempt_span(thread, 1));
        assert_ne!(attempt_span(thread, 1), attempt_span(thread, 2));
        assert_ne!(node_span(thread, 1, "a"), node_span(thread, 1, "b"));
        let tp = traceparent(t, attempt_span(thread, 1));
        assert_eq!(tp.len(), 55);
        assert!(tp.starts_with("00-") && tp.ends_with("-01"), "{tp}");
        assert_ne!(trace_id("not-a-ulid"), 0);
    }
}
