//! What a test's runner shows each attempt's models and servers to: every tool call
//! that reaches a server (a `call` node's, a loop's, a heal's replay) is noted with its
//! arguments, secrets scrubbed, for the test's `calls` and `arguments`; and with a tape,
//! the tape is put between the attempt and the real models and servers while it is
//! recorded.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::tape::Tape;
use pipec_mcp::{
    Called, McpError, RequestOptions, ResourceContent, Resumption, TaskRef, ToolInfo, ToolResult,
};
use pipec_plan::{Plan, ToolKind};
use pipec_runtime::llm::Model;
use pipec_runtime::secrets::Scrubber;
use pipec_runtime::{ServerFuture, Servers, Tap};

/// The tool calls of a test's run, in the order they were sent.
#[derive(Default)]
pub(crate) struct Calls {
    /// The declared tool of each `(server, name on the server)`.
    tools: HashMap<(String, String), Declared>,
    sent: Mutex<Sent>,
}

/// A declared tool: its name and its parameters' names by their names on the server.
struct Declared {
    name: String,
    params: HashMap<String, String>,
}

#[derive(Default)]
struct Sent {
    calls: Vec<(String, Value)>,
    /// How many of `calls` came from a killed process (they come first).
    taken: usize,
    scrubber: Arc<Scrubber>,
}

impl Calls {
    pub(crate) fn new(plan: &Plan) -> Calls {
        let mut tools = HashMap::new();
        for t in plan.tools.iter().filter(|t| t.kind == ToolKind::Tool) {
            tools
                .entry((t.server.clone(), t.wire_name.clone()))
                .or_insert_with(|| Declared {
                    name: t.name.clone(),
                    params: t
                        .params
                        .iter()
                        .map(|p| (p.wire_name.clone(), p.name.clone()))
                        .collect(),
                });
        }
        Calls {
            tools,
            sent: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sent> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call the killed process of a `kill_after` test made, as the first ones.
    pub(crate) fn push(&self, tool: String, args: Value) {
        let mut sent = self.lock();
        let at = sent.taken;
        sent.calls.insert(at, (tool, args));
        sent.taken += 1;
    }

    /// The declared name of a server's tool.
    fn declared_name(&self, server: &str, tool: &str) -> String {
        self.tools
            .get(&(server.to_string(), tool.to_string()))
            .map_or_else(|| tool.to_string(), |d| d.name.clone())
    }

    /// Notes a call, by the declared names of the tool and its arguments.
    fn note(&self, server: &str, tool: &str, arguments: &Map<String, Value>) {
        let declared = self.tools.get(&(server.to_string(), tool.to_string()));
        let name = self.declared_name(server, tool);
        let mut args: Map<String, Value> = arguments
            .iter()
            .map(|(k, v)| {
                let k = declared
                    .and_then(|d| d.params.get(k))
                    .cloned()
                    .unwrap_or_else(|| k.clone());
                (k, v.clone())
            })
            .collect::<Map<_, _>>();
        let mut sent = self.lock();
        let mut value = Value::Object(std::mem::take(&mut args));
        sent.scrubber.scrub_value(&mut value);
        crate::child::note(serde_json::json!({ "call": [&name, &value] }));
        sent.calls.push((name, value));
    }

    /// The calls, tool by tool, in the order they were sent.
    pub(crate) fn by_tool(&self) -> Vec<(String, Value)> {
        self.lock().calls.clone()
    }
}

/// The server faults of a test: the first call of each tool named fails so.
#[derive(Default)]
pub(crate) struct ServerFaults {
    /// The call reaches the server, which then goes away before it answers.
    crash: Mutex<HashSet<String>>,
    /// The server never answers the call (until the request's timeout).
    hang: Mutex<HashSet<String>>,
    /// The call ends with a question for a person (`input_required`), as if its server
    /// asked one.
    ask: Mutex<HashSet<String>>,
    /// The servers whose questions wait for a person (`elicitation = "ask"`); a question
    /// from another is refused, as its session would refuse it.
    asking_servers: HashSet<String>,
}

/// What the question a test's `input_required` fault asks says: `tool` is named in it,
/// so that the test's answer can be found again from the gate.
pub(crate) fn question_message(tool: &str) -> String {
    format!("The server asks before `{tool}` goes on (a test's `input_required` fault): go on?")
}

/// The tool a question gate of a test's fault is about, from its message (which quotes
/// the question).
pub(crate) fn questioned_tool(message: &str) -> Option<&str> {
    const MARK: &str = "The server asks before `";
    let at = message.find(MARK)? + MARK.len();
    message[at..].split('`').next()
}

impl ServerFaults {
    pub(crate) fn new(faults: &pipec_plan::testing::Faults, plan: &Plan) -> ServerFaults {
        let set = |names: &[String]| Mutex::new(names.iter().cloned().collect());
        ServerFaults {
            crash: set(&faults.server_crash),
            hang: set(&faults.server_hang),
            ask: set(&faults.input_required),
            asking_servers: plan
                .servers
                .iter()
                .filter(|s| s.elicitation == pipec_plan::Elicitation::Ask)
                .map(|s| s.name.clone())
                .collect(),
        }
    }

    /// The question the first call of `tool` ends with, or the refusal a session that
    /// does not ask people gives.
    fn asked(&self, server: &str, tool: &str) -> Result<Called, McpError> {
        if !self.asking_servers.contains(server) {
            return Err(McpError::InputRequired {
                server: server.to_string(),
            });
        }
        let message = question_message(tool);
        let schema = serde_json::json!({
            "type": "object",
            "properties": { "go_on": { "type": "boolean", "description": "Whether the call goes on" } },
            "required": ["go_on"],
        });
        Ok(Called::Asked(pipec_mcp::Asked {
            questions: vec![pipec_mcp::Question::new("go_on".into(), message, schema)],
            request_state: Some("pipec-test-fault".into()),
            responses: Map::new(),
        }))
    }

    /// Whether the call of `tool` is the first of a tool in `set` (which forgets it);
    /// `kind` names the set in the killed process's log.
    fn first(set: &Mutex<HashSet<String>>, kind: &str, tool: &str) -> bool {
        let fired = set.lock().unwrap_or_else(|e| e.into_inner()).remove(tool);
        if fired {
            crate::child::note(serde_json::json!({ "fault": [kind, tool] }));
        }
        fired
    }

    /// A fault the killed process fired (`[kind, tool]`): it does not fire again.
    pub(crate) fn forget(&self, fired: &Value) {
        let (Some(kind), Some(tool)) = (fired[0].as_str(), fired[1].as_str()) else {
            return;
        };
        let set = match kind {
            "crash" => &self.crash,
            "hang" => &self.hang,
            "ask" => &self.ask,
            _ => return,
        };
        set.lock().unwrap_or_else(|e| e.into_inner()).remove(tool);
    }

    /// The faults that never fired: their tools were never called.
    pub(crate) fn unfired(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        for (kind, set) in [
            ("server_crash", &self.crash),
            ("server_hang", &self.hang),
            ("input_required", &self.ask),
        ] {
            let left = set.lock().unwrap_or_else(|e| e.into_inner());
            out.extend(left.iter().map(|t| (kind, t.clone())));
        }
        out.sort();
        out
    }
}

/// How long a hung call waits when its request has no timeout of its own: the MCP
/// session's default.
const HANG: Duration = Duration::from_secs(60);

/// The runner's tap for one test.
pub(crate) struct TestTap {
    pub(crate) calls: Arc<Calls>,
    pub(crate) faults: Arc<ServerFaults>,
    pub(crate) tape: Option<Arc<Tape>>,
    /// Whether the models are taped (a test with `replies` scripts them instead).
    pub(crate) taped_models: bool,
}

impl TestTap {
    /// A recording with a secret too short to scrub writes no tape.
    fn check_secrets(tape: &Tape, secrets: &Scrubber) {
        if !secrets.too_short().is_empty() {
            tape.refuse_to_write(format!(
                "the secrets {} are shorter than 4 bytes, too short to be found and scrubbed, so the tape {} is not written; record with longer values",
                secrets
                    .too_short()
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                tape.shown()
            ));
        }
    }
}

impl Tap for TestTap {
    fn model(&self, name: &str, model: Arc<dyn Model>, secrets: &Scrubber) -> Arc<dyn Model> {
        match &self.tape {
            Some(tape) if tape.recording() && self.taped_models => {
                Self::check_secrets(tape, secrets);
                Arc::new(tape.model(name, Some((model, Arc::new(secrets.clone())))))
            }
            Some(tape) => {
                tape.take_secrets(secrets);
                model
            }
            None => model,
        }
    }

    fn servers(&self, servers: Arc<dyn Servers>, secrets: &Scrubber) -> Arc<dyn Servers> {
        self.calls.lock().scrubber = Arc::new(secrets.clone());
        let servers = match &self.tape {
            Some(tape) if tape.recording() => {
                Self::check_secrets(tape, secrets);
                Arc::new(tape.servers(Some((servers, Arc::new(secrets.clone())))))
            }
            Some(tape) => {
                tape.take_secrets(secrets);
                servers
            }
            None => servers,
        };
        Arc::new(Noted {
            inner: servers,
            calls: self.calls.clone(),
            faults: self.faults.clone(),
        })
    }
}

/// Servers whose tool calls are noted on their way, and fail as the test's faults say.
struct Noted {
    inner: Arc<dyn Servers>,
    calls: Arc<Calls>,
    faults: Arc<ServerFaults>,
}

impl Noted {
    /// The call made, or failed as a fault says: a crash lets it reach the server and
    /// loses the answer (the effect happened, nobody heard of it); a hang never answers.
    async fn faulted<T>(
        &self,
        server: &str,
        tool: &str,
        timeout: Option<Duration>,
        call: impl std::future::Future<Output = Result<T, McpError>>,
    ) -> Result<T, McpError> {
        let name = self.calls.declared_name(server, tool);
        if ServerFaults::first(&self.faults.hang, "hang", &name) {
            let after = timeout.unwrap_or(HANG);
            tokio::time::sleep(after).await;
            return Err(McpError::Timeout {
                server: server.to_string(),
                request: format!("tools/call {tool}"),
                after,
            });
        }
        let got = call.await;
        if ServerFaults::first(&self.faults.crash, "crash", &name) {
            return Err(McpError::Closed {
                server: server.to_string(),
                stderr: format!("(the test's fault: the server went away during `{tool}`)"),
            });
        }
        got
    }
}

impl Servers for Noted {
    fn call_tool<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult> {
        self.calls.note(server, tool, &arguments);
        let timeout = options.timeout;
        Box::pin(self.faulted(
            server,
            tool,
            timeout,
            self.inner.call_tool(server, tool, arguments, meta, options),
        ))
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
        self.calls.note(server, tool, &arguments);
        let name = self.calls.declared_name(server, tool);
        if ServerFaults::first(&self.faults.ask, "ask", &name) {
            let asked = self.faults.asked(server, &name);
            return Box::pin(async move { asked });
        }
        let timeout = options.timeout;
        Box::pin(
            self.faulted(
                server,
                tool,
                timeout,
                self.inner
                    .call(server, tool, arguments, meta, options, resumption),
            ),
        )
    }

    fn await_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        self.inner.await_task(server, task, options, resumption)
    }

    fn cancel_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        self.inner.cancel_task(server, task)
    }

    fn read<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>> {
        self.inner.read(server, uri, options)
    }

    fn list_tools<'a>(&'a self, server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>> {
        self.inner.list_tools(server)
    }

    fn close(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        self.inner.close()
    }
}
