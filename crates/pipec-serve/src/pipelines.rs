//! Pipelines served as tools. Each pipeline is a tool whose arguments are its inputs; a
//! call starts a thread in the project's store and waits for it a while. A run that
//! completes in that time answers its outputs as structured content. One that pauses at a
//! gate, or still runs, answers a `resource_link` to `pipec://runs/{thread}`, with the
//! gates' messages. That run resource is readable (status, outputs, pending gates with
//! the schemas their answers must fit) and subscribable: every event of the run is an
//! update. It is never listed and never expires. `resume_run` answers a gate and
//! continues the thread the same way.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Map, Value, json};

use pipec_mcp::server::{
    Abilities, Block, Body, CallContext, CallFailure, LinkOut, ListedTemplate, Progress,
    ProgressUpdate, ReadContent, ReadFailure, TaskSupport, ToolAnswer, ToolReply, ToolSpec,
};
use pipec_plan::{NodeKind, Plan};
use pipec_runtime::{Outcome, RunOptions, Runner};
use pipec_store::{GateState, Store};

use super::call_span::CallSpan;
use super::gate_forms::{Said, Waiting, gate_form, questions, rooted, said, sampled};
use super::matcher::Template;
use super::registry::{ReadHandler, Registry, ToolHandler, template_matcher};
use super::run_tasks::task_support;

/// The URI template of a run.
pub const RUN_TEMPLATE: &str = "pipec://runs/{thread}";

/// The JSON Schema dialect of the tools' input schemas.
pub const JSON_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The tool that answers a gate of a run.
pub const RESUME_TOOL: &str = "resume_run";

/// How long a call waits for its run before answering with the run's link.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// How long the call of a client that follows tasks waits for its run before it answers
/// the run's task: a run that ends (or asks its client) within it answers in the call.
pub const TASK_GRACE: Duration = Duration::from_millis(250);

/// A pipeline to serve, with where it runs from.
#[derive(Clone)]
pub struct ServedPipeline {
    pub plan: Arc<Plan>,
    /// Its project root (relative paths of the plan resolve against it).
    pub root: PathBuf,
    /// The `.pipe` source it came from, recorded with each thread.
    pub source: String,
}

/// `runner`, its attempt linked to the client's call when the call is traced.
fn called_from(runner: Runner, span: Option<&CallSpan>) -> Runner {
    match span {
        Some(span) => runner.called_from(span.id()),
        None => runner,
    }
}

/// The link a call answers for its run.
pub(crate) fn run_link(thread: &str) -> LinkOut {
    LinkOut {
        uri: run_uri(thread),
        name: format!("run {thread}"),
        description: Some("the run: status, outputs, pending gates".into()),
        mime_type: Some("application/json".into()),
    }
}

fn run_uri(thread: &str) -> String {
    format!("pipec://runs/{thread}")
}

/// The tool a pipeline is: its inputs as arguments, and annotations that say what a run
/// may do.
pub fn tool_spec(plan: &Plan) -> ToolSpec {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for input in &plan.inputs {
        let mut property = input.schema.clone();
        // An input a client mirrors into an `Mcp-Param-*` header (SEP-2243).
        if let (Some(header), Value::Object(p)) = (
            plan.serve_tool
                .as_ref()
                .and_then(|t| t.headers.get(&input.name)),
            &mut property,
        ) {
            p.insert("x-mcp-header".into(), json!(header));
        }
        properties.insert(input.name.clone(), property);
        if !input.optional {
            required.push(Value::String(input.name.clone()));
        }
    }
    let mut schema = Map::new();
    // The dialect pipec's schemas are written in, said as MCP asks.
    schema.insert("$schema".into(), json!(JSON_SCHEMA_DIALECT));
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    schema.insert("additionalProperties".into(), json!(false));
    if !plan.defs.is_empty() {
        schema.insert("$defs".into(), json!(plan.defs));
    }
    let effects = plan.nodes.iter().any(|n| {
        matches!(n.kind, NodeKind::Act)
            || matches!(
                &n.body,
                pipec_plan::Body::Exec {
                    idempotent: false,
                    ..
                }
            )
    });
    let reaches_out = !plan.models.is_empty() || !plan.servers.is_empty();
    let gates: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Gate))
        .map(|n| n.name.as_str())
        .collect();
    let served = plan.serve_tool.clone().unwrap_or_default();
    let mut description = served
        .description
        .or_else(|| plan.doc.clone())
        .unwrap_or_else(|| format!("Run the pipeline `{}`.", plan.name));
    if !gates.is_empty() {
        description.push_str(&format!(
            " It may pause at a gate ({}): the answer then links the run, pipec://runs/{{thread}}, and `{RESUME_TOOL}` answers the gate.",
            gates.join(", ")
        ));
    }
    // A think node of the client's model cannot run without the client's sampling.
    let client_model = plan.nodes.iter().any(|n| {
        matches!(&n.body, pipec_plan::Body::Model { model, .. }
            if plan.models.iter().any(|m| &m.name == model && m.provider == "client"))
    });
    if client_model {
        description.push_str(" It asks the calling client's model (sampling).");
    }
    ToolSpec {
        name: plan.name.clone(),
        title: served.title,
        description: Some(description),
        input_schema: schema,
        output_schema: Some(output_schema(plan)),
        // A run writes a thread: never read-only; each call is a new run.
        read_only: Some(false),
        destructive: Some(effects),
        idempotent: Some(false),
        open_world: Some(reaches_out),
        // Gates (of a person or of the client's roots) are answered another way too.
        needs: Abilities {
            model: client_model,
            ..Abilities::default()
        },
        task: task_support(plan),
    }
}

/// What a call's structured content is: the outputs of a run that completed, or where a
/// run that did not complete stands (`{thread, status, gates}`).
fn output_schema(plan: &Plan) -> Map<String, Value> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for output in &plan.outputs {
        let schema = if output.optional {
            json!({ "anyOf": [output.schema, { "type": "null" }] })
        } else {
            output.schema.clone()
        };
        properties.insert(output.name.clone(), schema);
        required.push(Value::String(output.name.clone()));
    }
    let mut schema = Map::new();
    schema.insert("$schema".into(), json!(JSON_SCHEMA_DIALECT));
    schema.insert("type".into(), json!("object"));
    schema.insert(
        "anyOf".into(),
        json!([
            { "type": "object", "properties": properties, "required": required },
            run_state_schema(),
        ]),
    );
    if !plan.defs.is_empty() {
        schema.insert("$defs".into(), json!(plan.defs));
    }
    schema
}

/// A run that did not complete within the wait, as a call's structured content says.
fn run_state_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "thread": { "type": "string" },
            "status": { "enum": ["paused", "running", "queued"] },
            "gates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "gate": { "type": "string" },
                        "message": { "type": "string" },
                        "schema": {}
                    },
                    "required": ["gate", "message", "schema"]
                }
            }
        },
        "required": ["thread", "status"]
    })
}

fn resume_spec() -> ToolSpec {
    let schema = json!({
        "$schema": JSON_SCHEMA_DIALECT,
        "type": "object",
        "properties": {
            "thread": { "type": "string", "description": "The run's thread id (from its pipec://runs/ link)" },
            "gate": { "type": "string", "description": "The gate to answer" },
            "answer": { "description": "The answer, fitting the gate's schema (read the run to see it)" }
        },
        "required": ["thread", "gate", "answer"],
        "additionalProperties": false
    });
    ToolSpec {
        name: RESUME_TOOL.into(),
        title: Some("Answer a gate of a run".into()),
        description: Some(
            "Answer a pending gate of a served pipeline's run and continue it.".into(),
        ),
        input_schema: schema.as_object().cloned().unwrap_or_default(),
        output_schema: None,
        read_only: Some(false),
        destructive: Some(true),
        idempotent: Some(false),
        open_world: Some(true),
        needs: Abilities::default(),
        // It answers as the first call did; the run's own task is followed with tasks/get.
        task: TaskSupport::Forbidden,
    }
}

/// What `pipec serve` needs to run pipelines.
pub struct PipelineTools {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) pipelines: Vec<ServedPipeline>,
    pub(crate) wait: Duration,
    /// Why a run of this server could not go on, by thread, for the errors a thread does
    /// not record (its task has failed).
    pub(crate) failures: Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
    /// The registry the tools are in (for the runs' updates), once installed.
    registry: std::sync::OnceLock<Weak<Registry>>,
    /// Where the runs' spans go, when traces are on.
    spans: Option<pipec_runtime::trace::SpanSink>,
}

/// A run in the background, its end kept.
type RunHandle = tokio::task::JoinHandle<Result<Outcome, pipec_runtime::RuntimeError>>;

impl PipelineTools {
    /// `pipelines` served from `store`; a call waits up to `wait` for its run.
    pub fn new(store: Arc<dyn Store>, pipelines: Vec<ServedPipeline>, wait: Duration) -> Self {
        PipelineTools {
            store,
            pipelines,
            wait,
            failures: Arc::default(),
            registry: std::sync::OnceLock::new(),
            spans: None,
        }
    }

    /// Traces every run ([`pipec_runtime::trace`]), its spans handed to `sink`.
    pub fn traced(mut self, sink: pipec_runtime::trace::SpanSink) -> Self {
        self.spans = Some(sink);
        self
    }

    /// The registry the tools were installed in.
    pub(crate) fn registry(&self) -> Weak<Registry> {
        self.registry.get().cloned().unwrap_or_default()
    }

    /// Runs `run` for `thread` in the background; an error it ends with is kept as the
    /// thread's failure.
    pub(crate) fn spawn_run(
        &self,
        thread: &str,
        run: impl Future<Output = Result<Outcome, pipec_runtime::RuntimeError>> + Send + 'static,
    ) -> RunHandle {
        let (failures, thread) = (self.failures.clone(), thread.to_string());
        tokio::spawn(async move {
            let ended = run.await;
            let mut failures = failures.lock().unwrap_or_else(|p| p.into_inner());
            match &ended {
                // Another attempt holds it, or it ended: not this run's failure.
                Err(e)
                    if e.code == pipec_diagnostic::THREAD_LOCKED.code
                        || e.code == pipec_diagnostic::THREAD_ENDED.code => {}
                Err(e) => {
                    failures.insert(thread, format!("error[{}]: {}", e.code, e.message));
                }
                Ok(_) => {
                    failures.remove(&thread);
                }
            }
            ended
        })
    }

    /// Adds the pipelines' tools, `resume_run` and the run resource to `registry`.
    pub fn install(self, registry: &Arc<Registry>) -> Result<(), String> {
        let _ = self.registry.set(Arc::downgrade(registry));
        let shared = Arc::new(self);
        registry.set_tasks(shared.clone());
        for p in &shared.pipelines {
            let spec = tool_spec(&p.plan);
            let (shared2, pipeline, weak) = (shared.clone(), p.clone(), Arc::downgrade(registry));
            let call: ToolHandler = Arc::new(move |arguments, context| {
                let (shared, pipeline, weak) = (shared2.clone(), pipeline.clone(), weak.clone());
                Box::pin(async move { shared.start(pipeline, arguments, weak, context).await })
            });
            registry.add_tool(spec, call);
        }
        let (s, weak) = (shared.clone(), Arc::downgrade(registry));
        let resume: ToolHandler = Arc::new(move |arguments, context| {
            let (shared, weak) = (s.clone(), weak.clone());
            Box::pin(async move { shared.resume(arguments, weak, context).await })
        });
        registry.add_tool(resume_spec(), resume);
        let template = Arc::new(Template::parse(RUN_TEMPLATE).map_err(|e| e.message.clone())?);
        let matcher = template_matcher(template);
        let viewer = shared.clone();
        let read: ReadHandler = Arc::new(move |request| {
            let viewer = viewer.clone();
            Box::pin(async move {
                let thread = request.vars.get("thread").cloned().unwrap_or_default();
                let view = viewer.run_view(&thread).await?;
                Ok(vec![ReadContent {
                    uri: request.uri,
                    mime_type: Some("application/json".into()),
                    body: Body::Text(view.to_string()),
                }])
            })
        });
        registry.add_hidden_template(
            ListedTemplate {
                uri_template: RUN_TEMPLATE.into(),
                name: "run".into(),
                title: Some("A run of a served pipeline".into()),
                mime_type: Some("application/json".into()),
                ..ListedTemplate::default()
            },
            matcher,
            read,
        );
        Ok(())
    }

    /// A runner of `pipeline` whose events update the run's subscribers and, for a call
    /// that asked to hear, report each node that ended as progress (of `total` nodes, when
    /// the run starts from the beginning).
    pub(crate) fn runner(
        &self,
        pipeline: &ServedPipeline,
        registry: Weak<Registry>,
        progress: Option<Progress>,
        total: Option<usize>,
    ) -> Runner {
        let ended = std::sync::atomic::AtomicU64::new(0);
        let sink = Arc::new(move |event: &pipec_store::RecordedEvent| {
            if let Some(r) = registry.upgrade() {
                r.notify_updated(&run_uri(&event.thread));
            }
            let Some(progress) = &progress else { return };
            let (node, how) = match &event.event {
                pipec_store::Event::NodeFinished { node, .. } => (node, "finished"),
                pipec_store::Event::NodeSkipped { node } => (node, "was skipped"),
                pipec_store::Event::NodeFailed { node, .. } => (node, "failed"),
                _ => return,
            };
            let n = ended.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            progress(ProgressUpdate {
                progress: n as f64,
                total: total.map(|t| t as f64),
                message: Some(format!("the node `{node}` {how}")),
            });
        });
        let runner = Runner::with_store((*pipeline.plan).clone(), self.store.clone())
            .project_root(pipeline.root.clone())
            .source(&pipeline.source)
            .answered_by("mcp")
            .events(sink);
        match &self.spans {
            Some(spans) => runner.spans(spans.clone()),
            None => runner,
        }
    }

    /// A call of a pipeline's tool: a new run (with the answers the client gave up
    /// front for gates of its name), or, with the state of a call that asked, the
    /// client's answers to the gates it was asked.
    async fn start(
        &self,
        pipeline: ServedPipeline,
        arguments: Map<String, Value>,
        registry: Weak<Registry>,
        context: CallContext,
    ) -> Result<ToolAnswer, CallFailure> {
        if let Some(state) = &context.state {
            let waiting = Waiting::from_bytes(state)?;
            return self.answered(pipeline, waiting, registry, context).await;
        }
        let pre_answers = up_front(&pipeline.plan, &context.answers)?;
        let thread = pipec_store::ids::new_thread_id();
        let total = Some(pipeline.plan.nodes.len());
        let span = CallSpan::start(self.spans.as_ref(), &context, &pipeline.plan.name);
        let runner = self.runner(&pipeline, registry, context.progress.clone(), total);
        let runner = called_from(runner, span.as_ref());
        let options = RunOptions {
            thread_id: Some(thread.clone()),
            pre_answers,
            ..RunOptions::default()
        };
        let inputs = Value::Object(arguments);
        let run = self.spawn_run(
            &thread,
            async move { runner.start_with(inputs, options).await },
        );
        let answer = self
            .answer(thread.clone(), run, &pipeline.plan, &context)
            .await;
        self.end_span(span, &thread, &answer).await;
        answer
    }

    /// Sends the span of a client's call of `thread` (when it has one), linked to the
    /// thread's latest attempt.
    async fn end_span(
        &self,
        span: Option<CallSpan>,
        thread: &str,
        answer: &Result<ToolAnswer, CallFailure>,
    ) {
        let Some(span) = span else { return };
        // The thread's record alone (not its rows and events): what names the attempt.
        let attempt = match self.store.thread_rec(thread).await {
            Ok(rec) => rec.map(|t| t.attempts).filter(|n| *n > 0),
            Err(_) => None,
        };
        span.end(thread, attempt, answer);
    }

    /// The client's answers to the gates of `waiting`: the accepted ones answer their
    /// gates and the run goes on; one it declined leaves the run waiting, and the call
    /// answers where it stands; one it left out is asked again.
    async fn answered(
        &self,
        pipeline: ServedPipeline,
        waiting: Waiting,
        registry: Weak<Registry>,
        mut context: CallContext,
    ) -> Result<ToolAnswer, CallFailure> {
        let thread = waiting.thread.clone();
        let Some((state, served)) = self.served_run(&thread).await else {
            return Err(CallFailure::InvalidArguments(no_run(&thread)));
        };
        if served.plan.name != pipeline.plan.name {
            return Err(CallFailure::InvalidArguments(no_run(&thread)));
        }
        let mut answers = Vec::new();
        for gate in &waiting.asked {
            // A gate answered meanwhile (another way, or by this same state sent twice)
            // is not answered again.
            let Some(row) = state
                .gates
                .get(gate)
                .filter(|g| g.state == GateState::Pending)
            else {
                continue;
            };
            let Some(result) = context.answers.get(gate) else {
                continue;
            };
            match answer_of(gate, row, result)? {
                Some(answer) => answers.push((gate.clone(), answer)),
                // Declined: the client is asked nothing more in this call.
                None => context.abilities = Abilities::default(),
            }
        }
        let span = CallSpan::start(self.spans.as_ref(), &context, &pipeline.plan.name);
        let runner = self.runner(&served.clone(), registry, context.progress.clone(), None);
        let runner = called_from(runner, span.as_ref());
        let t = thread.clone();
        let run = self.spawn_run(&thread, async move { runner.resume(&t, answers).await });
        let plan = served.plan.clone();
        let answer = self.answer(thread.clone(), run, &plan, &context).await;
        self.end_span(span, &thread, &answer).await;
        answer
    }

    async fn resume(
        &self,
        arguments: Map<String, Value>,
        registry: Weak<Registry>,
        context: CallContext,
    ) -> Result<ToolAnswer, CallFailure> {
        let text = |k: &str| arguments.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(thread), Some(gate)) = (text("thread"), text("gate")) else {
            return Err(CallFailure::InvalidArguments(
                "`resume_run` needs `thread` and `gate` (strings) and `answer`".into(),
            ));
        };
        let answer = arguments.get("answer").cloned().unwrap_or(Value::Null);
        let Some((_, pipeline)) = self.served_run(&thread).await else {
            return Err(CallFailure::InvalidArguments(no_run(&thread)));
        };
        let pipeline = pipeline.clone();
        let span = CallSpan::start(self.spans.as_ref(), &context, RESUME_TOOL);
        let runner = self.runner(&pipeline, registry, context.progress.clone(), None);
        let runner = called_from(runner, span.as_ref());
        let t = thread.clone();
        let run = self.spawn_run(&thread, async move {
            runner.resume(&t, vec![(gate, answer)]).await
        });
        // Gates further on are answered with resume_run too: a state of this tool's
        // would not be this pipeline's.
        let context = CallContext {
            abilities: Abilities::default(),
            ..context
        };
        let answer = self
            .answer(thread.clone(), run, &pipeline.plan, &context)
            .await;
        self.end_span(span, &thread, &answer).await;
        answer
    }

    /// Waits up to `wait` for the run; then answers what it did (or asks the client
    /// the gates it waits at, where the client can be asked), or its link.
    async fn answer(
        &self,
        thread: String,
        run: RunHandle,
        plan: &Plan,
        context: &CallContext,
    ) -> Result<ToolAnswer, CallFailure> {
        // A client that follows tasks gets one for a run that outlives a moment (or for
        // every run of a pipeline that requires it), instead of the run's link.
        let task = if context.tasks {
            task_support(plan)
        } else {
            TaskSupport::Forbidden
        };
        let link = run_link(&thread);
        let mut run = run;
        let wait = match task {
            TaskSupport::Forbidden => self.wait,
            TaskSupport::Optional | TaskSupport::Required => TASK_GRACE,
        };
        let waited = tokio::time::sleep(wait);
        tokio::pin!(waited);
        tokio::select! {
            done = &mut run => {
                let answer = self.ended(&thread, done, &link, plan, context).await?;
                // A run that requires a task is one even when it ended at once (a call
                // that asks its client still asks, in the call).
                if task == TaskSupport::Required
                    && matches!(answer, ToolAnswer::Reply(_))
                    && self.store.load(&thread).await.is_ok()
                {
                    return self.as_task(&thread, context.abilities).await;
                }
                return Ok(answer);
            }
            () = &mut waited => {}
        }
        // Still running: answer its link (or its task) once the thread is in the store,
        // so the link reads at once.
        loop {
            if self.store.load(&thread).await.is_ok() {
                if task != TaskSupport::Forbidden {
                    return self.as_task(&thread, context.abilities).await;
                }
                return Ok(ToolAnswer::Reply(ToolReply {
                    structured: Some(json!({ "thread": thread, "status": "running" })),
                    text: Some(format!(
                        "The run {thread} is still going; read or subscribe to {} for its progress.",
                        link.uri
                    )),
                    blocks: Vec::new(),
                    links: vec![link],
                    is_error: false,
                }));
            }
            tokio::select! {
                done = &mut run => return self.ended(&thread, done, &link, plan, context).await,
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
    }

    /// The run `thread` as the task a call answers.
    async fn as_task(&self, thread: &str, can: Abilities) -> Result<ToolAnswer, CallFailure> {
        self.task_view(thread, can)
            .await
            .map(ToolAnswer::Task)
            .map_err(|e| CallFailure::Failed(format!("the run {thread} is no task: {e:?}")))
    }

    /// The answer of a run that ended: the gates it waits at asked of the client (where
    /// it can be asked), what it did, or, for an answer the run refused (which changed
    /// nothing), the error with the run's link, so the run that still waits is reached.
    async fn ended(
        &self,
        thread: &str,
        done: Result<Result<Outcome, pipec_runtime::RuntimeError>, tokio::task::JoinError>,
        link: &LinkOut,
        plan: &Plan,
        context: &CallContext,
    ) -> Result<ToolAnswer, CallFailure> {
        if let Ok(Ok(Outcome::Paused { thread, gates })) = &done
            && let Some(needed) = questions(thread, plan, gates, context.abilities)
        {
            return Ok(ToolAnswer::Ask(needed));
        }
        if let Ok(Err(e)) = &done
            && self.store.load(thread).await.is_ok()
        {
            return Ok(ToolAnswer::Reply(ToolReply {
                structured: None,
                text: Some(format!(
                    "error[{}]: {}\nThe run {thread} is kept: read {} for where it stands, and answer a gate it waits at with `{RESUME_TOOL}`.",
                    e.code, e.message, link.uri
                )),
                blocks: Vec::new(),
                links: vec![link.clone()],
                is_error: true,
            }));
        }
        finished(thread, done, link.clone(), plan).map(ToolAnswer::Reply)
    }
}

/// A client's answer to the question of the gate `gate` (its row `row`) as the gate's
/// answer: a form's content, a sampling result, roots; `None` when it gave none (a
/// declined or cancelled form, a request it did not answer).
pub(crate) fn answer_of(
    gate: &str,
    row: &pipec_store::GateRec,
    result: &Value,
) -> Result<Option<Value>, CallFailure> {
    match pipec_runtime::ClientAsk::of(row) {
        // A request the client did not answer on the call's stream (2025-11-25).
        Some(_) if result.get("action").is_some() => Ok(None),
        Some(pipec_runtime::ClientAsk::Model(_)) => sampled(gate, result).map(Some),
        Some(pipec_runtime::ClientAsk::Roots) => rooted(gate, result, &row.schema),
        None => match said(gate, result)? {
            Said::Accepted(content) => {
                let form = gate_form(gate, &row.schema).ok_or_else(|| {
                    CallFailure::InvalidArguments(format!(
                        "the gate `{gate}` is not answered with a form"
                    ))
                })?;
                Ok(Some(form.answer(content)))
            }
            Said::Refused => Ok(None),
        },
    }
}

/// The answers a client gave up front, with no state: those keyed by a gate of the
/// pipeline and accepted, as the gates' answers (keys that name no gate are ignored).
fn up_front(
    plan: &Plan,
    given: &std::collections::BTreeMap<String, Value>,
) -> Result<Vec<(String, Value)>, CallFailure> {
    let mut answers = Vec::new();
    for node in plan.nodes.iter().filter(|n| n.kind == NodeKind::Gate) {
        let Some(result) = given.get(&node.name) else {
            continue;
        };
        if let Said::Accepted(content) = said(&node.name, result)? {
            let schema = json!(node.output)
                .as_object()
                .cloned()
                .map(|mut s| {
                    if !plan.defs.is_empty() {
                        s.insert("$defs".into(), json!(plan.defs));
                    }
                    Value::Object(s)
                })
                .unwrap_or_default();
            let Some(form) = gate_form(&node.name, &schema) else {
                continue;
            };
            answers.push((node.name.clone(), form.answer(content)));
        }
    }
    Ok(answers)
}

/// The answer of a run that ended (or could not start).
fn finished(
    thread: &str,
    done: Result<Result<Outcome, pipec_runtime::RuntimeError>, tokio::task::JoinError>,
    link: LinkOut,
    plan: &Plan,
) -> Result<ToolReply, CallFailure> {
    match done {
        Err(e) => Err(CallFailure::Failed(format!(
            "the run {thread} stopped: {e}"
        ))),
        Ok(Err(e)) => Ok(ToolReply {
            structured: None,
            text: Some(format!("error[{}]: {}", e.code, e.message)),
            blocks: Vec::new(),
            links: Vec::new(),
            is_error: true,
        }),
        Ok(Ok(outcome)) => Ok(reply(outcome, link, plan)),
    }
}

pub(crate) fn reply(outcome: Outcome, link: LinkOut, plan: &Plan) -> ToolReply {
    match outcome {
        Outcome::Completed {
            outputs, thread, ..
        } => {
            let outputs = outputs.into_value();
            let (text, blocks) = content_of(plan, &outputs, &thread);
            ToolReply {
                text,
                blocks,
                structured: Some(outputs),
                links: Vec::new(),
                is_error: false,
            }
        }
        Outcome::Paused { thread, gates } => {
            let messages: Vec<String> = gates
                .iter()
                .map(|g| format!("{}: {}", g.name, g.message))
                .collect();
            ToolReply {
                structured: Some(json!({
                    "thread": thread,
                    "status": "paused",
                    "gates": gates.iter().map(|g| json!({ "gate": g.name, "message": g.message, "schema": g.schema })).collect::<Vec<_>>(),
                })),
                text: Some(format!(
                    "The run {thread} waits at a gate. {} Answer with `{RESUME_TOOL}`.",
                    messages.join(" ")
                )),
                blocks: Vec::new(),
                links: vec![link],
                is_error: false,
            }
        }
        Outcome::Failed { thread, error } => ToolReply {
            structured: None,
            text: Some(format!(
                "The run {thread} failed: error[{}]: {}",
                error.code, error.message
            )),
            blocks: Vec::new(),
            links: vec![link],
            is_error: true,
        },
        Outcome::Released { thread } => ToolReply {
            structured: Some(json!({ "thread": thread, "status": "queued" })),
            text: Some(format!("The run {thread} waits for a worker.")),
            blocks: Vec::new(),
            links: vec![link],
            is_error: false,
        },
        Outcome::Blocked { thread, reasons } => ToolReply {
            structured: None,
            text: Some(format!(
                "The run {thread} needs a person's decision: {}",
                reasons
                    .iter()
                    .map(|r| r.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
            blocks: Vec::new(),
            links: vec![link],
            is_error: true,
        },
    }
}

/// A completed run's outputs as content: each output whose type is a record of a
/// block's parts (`{ data: bytes, mime: string }`, `{ text, uri, mime }`, or a list of
/// them) as image, audio or embedded-resource blocks, and the other outputs as one text
/// block (none when every output is such a record): the string itself when they are one
/// string, as a function's answer reads, else their JSON object (the structured content
/// says the same either way).
fn content_of(plan: &Plan, outputs: &Value, thread: &str) -> (Option<String>, Vec<Block>) {
    let Some(all) = outputs.as_object() else {
        return (Some(outputs.to_string()), Vec::new());
    };
    let mut rest = Map::new();
    let mut blocks = Vec::new();
    for output in &plan.outputs {
        let Some(value) = all.get(&output.name) else {
            continue;
        };
        match pipec_runtime::media_shape(plan, &output.schema) {
            Some(shape) => {
                let parts: Vec<&Value> = match (shape.many, value) {
                    (true, Value::Array(items)) => items.iter().collect(),
                    (true, _) => Vec::new(),
                    (false, one) => vec![one],
                };
                let at = format!("{}#{}", run_uri(thread), output.name);
                blocks.extend(parts.into_iter().filter_map(|p| block_of(p, &at)));
            }
            None => {
                rest.insert(output.name.clone(), value.clone());
            }
        }
    }
    let text = match rest.values().next() {
        Some(Value::String(one)) if rest.len() == 1 => Some(one.clone()),
        _ => (!rest.is_empty() || blocks.is_empty()).then(|| Value::Object(rest).to_string()),
    };
    (text, blocks)
}

/// A record of a block's parts as its block: with a `uri`, an embedded resource; else an
/// image or audio by its MIME type; else a resource embedded at `at` (the run's output).
fn block_of(part: &Value, at: &str) -> Option<Block> {
    let text = |k: &str| part.get(k).and_then(Value::as_str).map(str::to_string);
    let data = text("data").and_then(|d| pipec_base::base64::decode(&d).ok());
    let mime = text("mime");
    let uri = text("uri");
    let media = mime
        .as_deref()
        .is_some_and(|m| m.starts_with("image/") || m.starts_with("audio/"));
    match (uri, data, text("text")) {
        (None, Some(data), _) if media => Some(Block::Media {
            mime_type: mime.unwrap_or_default(),
            data,
        }),
        (uri, Some(data), _) => Some(Block::Resource(ReadContent {
            uri: uri.unwrap_or_else(|| at.to_string()),
            mime_type: mime,
            body: Body::Blob(data),
        })),
        (uri, None, Some(t)) => Some(Block::Resource(ReadContent {
            uri: uri.unwrap_or_else(|| at.to_string()),
            mime_type: mime,
            body: Body::Text(t),
        })),
        _ => None,
    }
}

/// The answer for a thread that is not a run of a served pipeline. It says the same
/// whether the store has no such thread or has one of another pipeline, so a client
/// learns nothing of the runs this server does not serve.
fn no_run(thread: &str) -> String {
    format!("no run {thread} of a pipeline this server serves")
}

impl PipelineTools {
    /// The thread's state and the served pipeline it is a run of; `None` when the store
    /// has no such thread, or has it of a pipeline not served here (the store may be
    /// shared with `pipec run` and other servers, whose runs are not this server's to
    /// show or continue).
    pub(crate) async fn served_run(
        &self,
        thread: &str,
    ) -> Option<(pipec_store::ThreadState, &ServedPipeline)> {
        let state = self.store.load(thread).await.ok()?;
        let name = state.thread.as_ref()?.pipeline.clone();
        let pipeline = self.pipelines.iter().find(|p| p.plan.name == name)?;
        Some((state, pipeline))
    }

    /// A run as its resource shows it: its outputs are computed from its rows with the
    /// plan it ran (the served pipeline of that name and hash).
    async fn run_view(&self, thread: &str) -> Result<Value, ReadFailure> {
        let Some((state, _)) = self.served_run(thread).await else {
            return Err(ReadFailure::NotFound(no_run(thread)));
        };
        let Some(t) = state.thread.as_ref() else {
            return Err(ReadFailure::NotFound(no_run(thread)));
        };
        let gates: Vec<Value> = state
            .gates
            .iter()
            .filter(|(_, g)| g.state == GateState::Pending)
            .map(|(name, g)| json!({ "gate": name, "message": g.message, "schema": g.schema }))
            .collect();
        let plan = self
            .pipelines
            .iter()
            .find(|p| p.plan.hash == t.plan_hash)
            .map(|p| p.plan.clone());
        let outputs = match &plan {
            Some(p) if t.status == pipec_store::Status::Completed => {
                pipec_runtime::eval::outputs_of(p, &state).ok()
            }
            _ => t.outputs.clone(),
        };
        Ok(json!({
            "thread": t.id,
            "pipeline": t.pipeline,
            "status": t.status.as_str(),
            "outputs": outputs,
            "gates": gates,
            "error": t.error,
        }))
    }
}
