//! The embedding API: a `Runner` holds a plan, a store, host functions and models, and
//! starts or resumes threads. Everything that can be refused (inputs, configuration,
//! answers, plan changes, unfinished effects) is refused *before* anything is written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::attempt::{Attempt, Start};
use super::progress::Progress;
use super::validate::Validators;
use crate::diagnostic::{self as codes, Rule};
use crate::llm::{Model, OpenAiModel, ScriptedModel};
use crate::plan::{Body, ConfigValue, Plan, Source};
use crate::store::{
    AttemptRec, CallState, Status, Store, StoreError, StoredError, ThreadRec, ThreadState, Write,
    ids,
};

/// A host function: JSON in (the node's parameters), JSON out.
pub type HostFn =
    Arc<dyn Fn(Value) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send>> + Send + Sync>;

/// Where configuration and secrets are read from (the process environment by default).
pub type Environment = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A sink for `--events`: every event, after it is committed.
pub type EventSink = Arc<dyn Fn(&Value) + Send + Sync>;

/// How a run ended (for now).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Completed {
        thread: String,
        outputs: Value,
    },
    /// Waiting for answers at these gates.
    Paused {
        thread: String,
        gates: Vec<PendingGate>,
    },
    Failed {
        thread: String,
        error: StoredError,
    },
    /// Needs a person's decision (an unfinished effect, a diverging journal).
    Blocked {
        thread: String,
        reasons: Vec<StoredError>,
    },
}

impl Outcome {
    pub fn thread(&self) -> &str {
        match self {
            Outcome::Completed { thread, .. }
            | Outcome::Paused { thread, .. }
            | Outcome::Failed { thread, .. }
            | Outcome::Blocked { thread, .. } => thread,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PendingGate {
    pub name: String,
    pub message: String,
    pub schema: Value,
    pub deadline_ms: Option<u64>,
}

/// Why a run was refused or could not go on: a coded diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    pub code: &'static str,
    pub name: &'static str,
    pub message: String,
    pub help: Option<String>,
}

impl RuntimeError {
    pub fn new(rule: &'static Rule, message: impl Into<String>) -> RuntimeError {
        RuntimeError {
            code: rule.code,
            name: rule.name,
            message: message.into(),
            help: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> RuntimeError {
        self.help = Some(help.into());
        self
    }

    pub fn stored(&self, node: Option<&str>) -> StoredError {
        StoredError {
            code: self.code.into(),
            name: self.name.into(),
            message: self.message.clone(),
            node: node.map(str::to_string),
            help: self.help.clone(),
        }
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.name, self.message)?;
        if let Some(h) = &self.help {
            write!(f, "\n  help: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuntimeError {}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> RuntimeError {
        let rule = match &e {
            StoreError::NotFound { .. } | StoreError::Ambiguous { .. } => &codes::THREAD_NOT_FOUND,
            StoreError::Locked { .. } => &codes::THREAD_LOCKED,
            StoreError::Fenced { .. } => &codes::LEASE_LOST,
            StoreError::NoSuchGate { .. } => &codes::GATE_ANSWER_INVALID,
            StoreError::AlreadyAnswered { .. } => &codes::GATE_ALREADY_ANSWERED,
            StoreError::NewerFormat { .. } => &codes::STORE_FORMAT_UNSUPPORTED,
            StoreError::Corrupt { .. } | StoreError::Io(_) => &codes::STORE_UNREADABLE,
        };
        let help = match &e {
            StoreError::Locked { .. } => Some(
                "wait for it to finish, or stop that process; `pipec answer` works meanwhile"
                    .to_string(),
            ),
            StoreError::NotFound { .. } => {
                Some("`pipec runs` lists the threads of this store".to_string())
            }
            StoreError::NewerFormat { .. } => Some("use a newer pipec".to_string()),
            _ => None,
        };
        RuntimeError {
            code: rule.code,
            name: rule.name,
            message: e.to_string(),
            help,
        }
    }
}

/// A person's decision on an unfinished call (`pipec resume --retry-unfinished`/`--resolve`).
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Make the call again.
    Retry,
    /// It happened, with this result.
    Performed(Value),
}

/// Choices for one start or resume.
#[derive(Clone, Default)]
pub struct RunOptions {
    pub concurrency: Option<usize>,
    /// A chosen thread id (`run --thread ID`): created, or attached to if it exists.
    pub thread_id: Option<String>,
    /// Answers given up front (`run --answer`).
    pub pre_answers: Vec<(String, Value)>,
    /// Decisions on unfinished calls, by call key (`node[item]#seq.call`) or `all`.
    pub decisions: Vec<(String, Decision)>,
    /// After a plan change: nodes whose stored results stay valid (`--keep`).
    pub keep: Vec<String>,
    /// Nodes to compute again, with everything downstream (`--rerun-from`).
    pub rerun_from: Vec<String>,
    /// Nodes renamed by a plan change, old name to new (`--rename`).
    pub renames: Vec<(String, String)>,
}

/// Runs plans on a store.
pub struct Runner {
    pub(crate) plan: Arc<Plan>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) hosts: HashMap<String, HostFn>,
    pub(crate) models: HashMap<String, Arc<dyn Model>>,
    pub(crate) project_root: PathBuf,
    pub(crate) source: String,
    pub(crate) model_overrides: BTreeMap<String, String>,
    pub(crate) events: Option<EventSink>,
    pub(crate) progress: Option<Arc<dyn Progress>>,
    pub(crate) concurrency: usize,
    pub(crate) validators: Arc<Validators>,
    /// The process environment, read through this so tests and embedders can replace it.
    pub(crate) environment: Environment,
}

impl Runner {
    /// A runner for `plan` on `store`; the project root is the current folder.
    pub fn new(plan: Plan, store: impl Store + 'static) -> Runner {
        Self::with_store(plan, Arc::new(store))
    }

    pub fn with_store(plan: Plan, store: Arc<dyn Store>) -> Runner {
        let validators = Arc::new(Validators::new(&plan));
        Runner {
            plan: Arc::new(plan),
            store,
            hosts: HashMap::new(),
            models: HashMap::new(),
            project_root: PathBuf::from("."),
            source: String::new(),
            model_overrides: BTreeMap::new(),
            events: None,
            progress: None,
            concurrency: 8,
            validators,
            environment: Arc::new(|k| std::env::var(k).ok()),
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Registers a host function with typed input and output. The types are checked
    /// against every `host = "name"` node's declared parameters and output.
    pub fn host_fn<I, O, F, Fut>(mut self, name: &str, f: F) -> Result<Runner, RuntimeError>
    where
        I: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize + JsonSchema + Send + 'static,
        F: Fn(I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, String>> + Send + 'static,
    {
        let input_schema = serde_json::to_value(schemars::schema_for!(I)).unwrap_or(Value::Null);
        let output_schema = serde_json::to_value(schemars::schema_for!(O)).unwrap_or(Value::Null);
        for node in &self.plan.nodes {
            if let Body::Host { function } = &node.body
                && function == name
            {
                check_host_types(node, &input_schema, &output_schema, &self.plan).map_err(|m| {
                    RuntimeError::new(
                        &codes::HOST_FUNCTION_MISSING,
                        format!(
                            "the host function `{name}` does not fit the node `{}`: {m}",
                            node.name
                        ),
                    )
                })?;
            }
        }
        let f = Arc::new(f);
        let wrapped: HostFn = Arc::new(move |v: Value| {
            let f = f.clone();
            Box::pin(async move {
                let input: I = serde_json::from_value(v).map_err(|e| {
                    format!("the node's parameters do not fit the host function's input: {e}")
                })?;
                let out = f(input).await?;
                serde_json::to_value(out).map_err(|e| e.to_string())
            })
        });
        self.hosts.insert(name.to_string(), wrapped);
        Ok(self)
    }

    /// Registers an untyped host function (JSON in, JSON out).
    pub fn host_fn_json<F, Fut>(mut self, name: &str, f: F) -> Runner
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let f = Arc::new(f);
        self.hosts.insert(
            name.to_string(),
            Arc::new(move |v| {
                let f = f.clone();
                Box::pin(async move { f(v).await })
            }),
        );
        self
    }

    /// Uses `model` for the plan's model `name` (instead of what the plan declares).
    pub fn model(mut self, name: &str, model: impl Model + 'static) -> Runner {
        self.models.insert(name.to_string(), Arc::new(model));
        self
    }

    /// `--model NAME=scripted:FILE`: recorded on the thread, so a resume uses it too.
    pub fn model_override(mut self, name: &str, spec: &str) -> Runner {
        self.model_overrides
            .insert(name.to_string(), spec.to_string());
        self
    }

    pub fn project_root(mut self, root: impl Into<PathBuf>) -> Runner {
        self.project_root = root.into();
        self
    }

    /// What the thread records as its source (the `.pipe` or plan file).
    pub fn source(mut self, source: &str) -> Runner {
        self.source = source.to_string();
        self
    }

    pub fn events(mut self, sink: EventSink) -> Runner {
        self.events = Some(sink);
        self
    }

    pub fn progress(mut self, p: Arc<dyn Progress>) -> Runner {
        self.progress = Some(p);
        self
    }

    pub fn concurrency(mut self, n: usize) -> Runner {
        self.concurrency = n.max(1);
        self
    }

    /// Reads configuration and secrets through `f` instead of the process environment.
    pub fn environment(
        mut self,
        f: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Runner {
        self.environment = Arc::new(f);
        self
    }

    /// Starts a thread with these inputs (a JSON object).
    pub async fn start(&self, inputs: Value) -> Result<Outcome, RuntimeError> {
        self.start_with(inputs, RunOptions::default()).await
    }

    pub async fn start_with(
        &self,
        inputs: Value,
        opts: RunOptions,
    ) -> Result<Outcome, RuntimeError> {
        if let Some(id) = &opts.thread_id {
            match self.store.load(id).await {
                Ok(_) => return self.resume_with(id, Vec::new(), opts.clone()).await,
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let inputs = self.check_inputs(inputs)?;
        self.check_hosts()?;
        let config = self.read_config(&BTreeMap::new(), &self.model_overrides)?;
        let secrets = self.read_secrets(&self.model_overrides)?;
        let mut pre = BTreeMap::new();
        for (gate, answer) in &opts.pre_answers {
            self.check_answer(gate, answer, true)?;
            pre.insert(gate.clone(), answer.clone());
        }
        let models = self.build_models(&self.model_overrides, &secrets, &config)?;
        let now = ids::now_ms();
        let id = match &opts.thread_id {
            Some(id) => normalize_thread_id(id)?,
            None => ids::new_thread_id(),
        };
        let plan_json = serde_json::to_string(&*self.plan).unwrap_or_default();
        self.store.put_plan(&self.plan.hash, &plan_json).await?;
        let thread = ThreadRec {
            id: id.clone(),
            pipeline: self.plan.name.clone(),
            plan_hash: self.plan.hash.clone(),
            source: self.source.clone(),
            project_root: self.project_root.display().to_string(),
            status: Status::Running,
            cancel_requested: false,
            epoch: 1,
            holder: Some(crate::store::Holder {
                run_id: String::new(),
                pid: std::process::id(),
                host: host_name(),
                since_ms: now,
            }),
            created_ms: now,
            updated_ms: now,
            inputs,
            config,
            model_overrides: self.model_overrides.clone(),
            pre_answers: pre,
            outputs: None,
            error: None,
            next_seq: 0,
            attempts: 1,
            due_ms: None,
        };
        let attempt = self.attempt_rec(1);
        let mut thread = thread;
        if let Some(h) = &mut thread.holder {
            h.run_id = attempt.run_id.clone();
        }
        let lease = self
            .store
            .create_thread(thread.clone(), attempt.clone())
            .await?;
        let state = ThreadState {
            thread: Some(thread),
            attempts: vec![attempt],
            ..Default::default()
        };
        let attempt = Attempt::new(self, lease, state, models, secrets, Start::Fresh)?;
        attempt.run(opts).await
    }

    /// Resumes a thread, applying answers first.
    /// A completed thread's outputs, computed with the plan it ran.
    async fn outputs_of(
        &self,
        rec: &crate::store::ThreadRec,
        state: &crate::store::ThreadState,
    ) -> Result<Value, RuntimeError> {
        let stored;
        let plan = if rec.plan_hash == self.plan.hash {
            &*self.plan
        } else {
            let json = self.store.get_plan(&rec.plan_hash).await?.ok_or_else(|| {
                RuntimeError::new(
                    &codes::STORE_UNREADABLE,
                    format!("the plan {} of thread {} is missing", rec.plan_hash, rec.id),
                )
            })?;
            stored = Plan::from_json(&json)
                .map_err(|e| RuntimeError::new(&codes::STORE_UNREADABLE, e))?;
            &stored
        };
        super::eval::outputs_of(plan, state)
            .map_err(|m| RuntimeError::new(&codes::STORE_UNREADABLE, m))
    }

    pub async fn resume(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
    ) -> Result<Outcome, RuntimeError> {
        self.resume_with(thread, answers, RunOptions::default())
            .await
    }

    pub async fn resume_with(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
        opts: RunOptions,
    ) -> Result<Outcome, RuntimeError> {
        // Everything below up to the claim only reads: a refused resume changes nothing.
        let state = self.store.load(thread).await?;
        let Some(rec) = state.thread.clone() else {
            return Err(RuntimeError::new(
                &codes::THREAD_NOT_FOUND,
                format!("no thread `{thread}`"),
            ));
        };
        if rec.status == Status::Running && self.store.is_held(&rec.id) {
            return Err(StoreError::Locked {
                thread: rec.id.clone(),
                holder: rec.holder.clone(),
            }
            .into());
        }
        let changes = !opts.rerun_from.is_empty()
            || !opts.keep.is_empty()
            || !opts.renames.is_empty()
            || !opts.decisions.is_empty();
        match rec.status {
            Status::Completed if changes => {
                return Err(RuntimeError::new(
                    &codes::THREAD_ENDED,
                    format!(
                        "thread {} has completed; its results are final and cannot be recomputed",
                        rec.id
                    ),
                )
                .help("start a new run with `pipec run` (give its gates the same answers with `--answer`)"));
            }
            Status::Cancelled => {
                return Err(RuntimeError::new(
                    &codes::THREAD_ENDED,
                    format!("thread {} was cancelled", rec.id),
                )
                .help("start a new run with `pipec run`"));
            }
            _ => {}
        }
        // Answers: valid, for gates that exist in this plan.
        for (gate, answer) in &answers {
            let pending = state
                .gates
                .get(gate)
                .is_some_and(|g| g.state == crate::store::GateState::Pending);
            self.check_answer(gate, answer, !pending)?;
            if let Some(g) = state.gates.get(gate)
                && g.state == crate::store::GateState::Answered
                && g.answer.as_ref() != Some(answer)
            {
                return Err(RuntimeError::new(
                    &codes::GATE_ALREADY_ANSWERED,
                    format!(
                        "the gate `{gate}` was already answered ({})",
                        g.answered_by.clone().unwrap_or_default()
                    ),
                ));
            }
        }
        if rec.status == Status::Completed {
            // Nothing to change: the outputs again (answers equal to the stored ones are fine).
            let outputs = self.outputs_of(&rec, &state).await?;
            return Ok(Outcome::Completed {
                thread: rec.id,
                outputs,
            });
        }
        // Plan changes under finished nodes.
        let plan_changes = self.check_plan_change(&state, &opts)?;
        // Unfinished effects need a decision.
        let blocked = self.unfinished_calls(&state, &opts);
        if !blocked.is_empty() {
            // Record what the thread is waiting for, so `runs` and `show` say so.
            if rec.status != Status::Blocked {
                let (lease, state) = self
                    .store
                    .claim(&rec.id, self.attempt_rec(rec.attempts + 1))
                    .await?;
                if let Some(mut t) = state.thread {
                    t.status = Status::Blocked;
                    t.holder = None;
                    t.error = blocked.first().cloned();
                    let mut attempt = state.attempts.last().cloned();
                    if let Some(a) = &mut attempt {
                        a.ended_ms = ids::now_ms();
                        a.end = Some("blocked".into());
                    }
                    let calls: Vec<String> = blocked.iter().map(|b| b.message.clone()).collect();
                    let mut writes = vec![
                        Write::Thread(t),
                        Write::Event(
                            serde_json::json!({ "type": "thread_blocked", "calls": calls }),
                        ),
                    ];
                    writes.extend(attempt.map(Write::Attempt));
                    self.store.commit(&lease, writes).await?;
                }
            }
            return Ok(Outcome::Blocked {
                thread: rec.id,
                reasons: blocked,
            });
        }
        self.check_hosts()?;
        let secrets = self.read_secrets(&rec.model_overrides)?;
        let config = self.read_config(&rec.config, &rec.model_overrides)?;
        let models = self.build_models(&rec.model_overrides, &secrets, &config)?;
        // Answers to pending gates go in without a lease (so a live holder sees them too).
        let (now_answers, later): (Vec<_>, Vec<_>) = answers.into_iter().partition(|(g, _)| {
            state
                .gates
                .get(g)
                .is_some_and(|r| r.state == crate::store::GateState::Pending)
        });
        if !now_answers.is_empty() {
            self.store.answer(&rec.id, now_answers, "cli").await?;
        }
        let attempt_rec = self.attempt_rec(rec.attempts + 1);
        let (lease, state) = self.store.claim(&rec.id, attempt_rec).await?;
        let mut opts = opts;
        opts.pre_answers.extend(later);
        let attempt = Attempt::new(
            self,
            lease,
            state,
            models,
            secrets,
            Start::Resume { plan_changes },
        )?;
        attempt.run(opts).await
    }

    fn attempt_rec(&self, number: u32) -> AttemptRec {
        AttemptRec {
            number,
            run_id: ids::new_thread_id(),
            pid: std::process::id(),
            host: host_name(),
            started_ms: ids::now_ms(),
            ended_ms: 0,
            end: None,
            plan_hash: self.plan.hash.clone(),
            pipec: env!("CARGO_PKG_VERSION").into(),
        }
    }

    /// Validates inputs against the plan and fills defaults.
    pub fn check_inputs(&self, inputs: Value) -> Result<Value, RuntimeError> {
        let Value::Object(given) = inputs else {
            return Err(RuntimeError::new(
                &codes::INPUT_INVALID,
                "inputs are a JSON object of input names",
            ));
        };
        for name in given.keys() {
            if !self.plan.inputs.iter().any(|i| &i.name == name) {
                let known: Vec<&str> = self.plan.inputs.iter().map(|i| i.name.as_str()).collect();
                let help =
                    crate::names::did_you_mean(name, known.iter().copied()).unwrap_or_else(|| {
                        if known.is_empty() {
                            "this pipeline takes no inputs".into()
                        } else {
                            format!("its inputs are {}", known.join(", "))
                        }
                    });
                return Err(RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!("the pipeline has no input `{name}`"),
                )
                .help(help));
            }
        }
        let mut out = Map::new();
        for input in &self.plan.inputs {
            let value = match given.get(&input.name) {
                Some(v) => v.clone(),
                None => match &input.default {
                    Some(d) => d.clone(),
                    None if input.optional => Value::Null,
                    None => {
                        return Err(RuntimeError::new(
                            &codes::INPUT_INVALID,
                            format!(
                                "the input `{}` ({}) is required",
                                input.name, input.type_name
                            ),
                        )
                        .help(format!("give it: `--input {}=...`", input.name)));
                    }
                },
            };
            if let Err(e) = self.validators.check(&input.schema, &value, false) {
                return Err(RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!(
                        "the input `{}` does not fit `{}`: {e}",
                        input.name, input.type_name
                    ),
                ));
            }
            out.insert(input.name.clone(), value);
        }
        Ok(Value::Object(out))
    }

    /// An answer must fit its gate's type; `allow_future` accepts gates not yet reached.
    fn check_answer(
        &self,
        gate: &str,
        answer: &Value,
        allow_future: bool,
    ) -> Result<(), RuntimeError> {
        let Some(node) = self
            .plan
            .node(gate)
            .filter(|n| n.kind == crate::plan::NodeKind::Gate)
        else {
            let gates: Vec<&str> = self
                .plan
                .nodes
                .iter()
                .filter(|n| n.kind == crate::plan::NodeKind::Gate)
                .map(|n| n.name.as_str())
                .collect();
            let help = crate::names::did_you_mean(gate, gates.iter().copied())
                .unwrap_or_else(|| format!("the gates are {}", gates.join(", ")));
            return Err(RuntimeError::new(
                &codes::GATE_ANSWER_INVALID,
                format!("the pipeline has no gate `{gate}`"),
            )
            .help(help));
        };
        let _ = allow_future;
        self.validators
            .check(&node.output, answer, false)
            .map_err(|e| {
                RuntimeError::new(
                    &codes::GATE_ANSWER_INVALID,
                    format!(
                        "the answer to `{gate}` does not fit `{}`: {e}",
                        node.output_type
                    ),
                )
                .help(format!(
                    "answer with JSON of this schema: {}",
                    serde_json::to_string(&self.validators.full_schema(&node.output, false))
                        .unwrap_or_default()
                ))
            })
    }

    /// Every `host` node needs its function.
    fn check_hosts(&self) -> Result<(), RuntimeError> {
        for node in &self.plan.nodes {
            if let Body::Host { function } = &node.body
                && !self.hosts.contains_key(function)
            {
                return Err(RuntimeError::new(&codes::HOST_FUNCTION_MISSING, format!("the node `{}` calls the host function `{function}`, which is not registered", node.name))
                        .help("host functions are registered by a program that embeds pipec: `Runner::host_fn(...)`"));
            }
        }
        Ok(())
    }

    /// The models that are used and not replaced, and what they need.
    fn used_models(&self, overrides: &BTreeMap<String, String>) -> BTreeSet<String> {
        let mut used = BTreeSet::new();
        for node in &self.plan.nodes {
            if let Body::Model { model, .. } = &node.body
                && !self.models.contains_key(model)
                && !overrides.contains_key(model)
            {
                used.insert(model.clone());
            }
        }
        used
    }

    /// `env()` values: recorded ones on resume, else read now; missing ones refuse.
    fn read_config(
        &self,
        recorded: &BTreeMap<String, String>,
        overrides: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, RuntimeError> {
        let mut needed: BTreeMap<String, Option<String>> = BTreeMap::new();
        for node in &self.plan.nodes {
            for p in &node.params {
                collect_env(&p.source, &mut needed);
            }
        }
        let used = self.used_models(overrides);
        for m in self.plan.models.iter().filter(|m| used.contains(&m.name)) {
            for v in [&m.base_url, &m.api_key].into_iter().flatten() {
                if let ConfigValue::Env { var, default } = v {
                    needed.insert(var.clone(), default.clone());
                }
            }
        }
        let mut out = BTreeMap::new();
        for (var, default) in needed {
            let value = recorded
                .get(&var)
                .cloned()
                .or_else(|| (self.environment)(&var))
                .or(default);
            match value {
                Some(v) => {
                    out.insert(var, v);
                }
                None => {
                    return Err(RuntimeError::new(
                        &codes::CONFIG_MISSING,
                        format!("the environment variable `{var}` is not set"),
                    )
                    .help(format!(
                        "set it, or give a default: `env(\"{var}\", default: \"...\")`"
                    )));
                }
            }
        }
        Ok(out)
    }

    /// Secrets the run needs, read from the environment now (never stored).
    fn read_secrets(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, RuntimeError> {
        let mut needed = BTreeSet::new();
        for node in &self.plan.nodes {
            for p in &node.params {
                collect_secrets(&p.source, &mut needed);
            }
        }
        let used = self.used_models(overrides);
        for m in self.plan.models.iter().filter(|m| used.contains(&m.name)) {
            for v in [&m.base_url, &m.api_key].into_iter().flatten() {
                if let ConfigValue::Secret { var } = v {
                    needed.insert(var.clone());
                }
            }
        }
        let mut out = BTreeMap::new();
        for var in needed {
            match (self.environment)(&var) {
                Some(v) => {
                    out.insert(var, v);
                }
                None => {
                    return Err(RuntimeError::new(&codes::CONFIG_MISSING, format!("the secret `{var}` is not set"))
                        .help(format!("set the environment variable `{var}`; secrets are read at every start and resume, and never stored")));
                }
            }
        }
        Ok(out)
    }

    /// The model instances: registered ones, overrides, then what the plan declares.
    fn build_models(
        &self,
        overrides: &BTreeMap<String, String>,
        secrets: &BTreeMap<String, String>,
        config: &BTreeMap<String, String>,
    ) -> Result<HashMap<String, Arc<dyn Model>>, RuntimeError> {
        let mut out: HashMap<String, Arc<dyn Model>> = HashMap::new();
        let used: BTreeSet<String> = self
            .plan
            .nodes
            .iter()
            .filter_map(|n| match &n.body {
                Body::Model { model, .. } => Some(model.clone()),
                _ => None,
            })
            .collect();
        let bad = |m: String| RuntimeError::new(&codes::CONFIG_MISSING, m);
        for name in used {
            if let Some(m) = self.models.get(&name) {
                out.insert(name, m.clone());
                continue;
            }
            if let Some(spec) = overrides.get(&name) {
                let Some(file) = spec.strip_prefix("scripted:") else {
                    return Err(bad(format!(
                        "`{spec}` is not a model override; write `scripted:FILE`"
                    )));
                };
                out.insert(
                    name.clone(),
                    Arc::new(ScriptedModel::from_file(&name, &PathBuf::from(file)).map_err(bad)?),
                );
                continue;
            }
            let Some(decl) = self.plan.models.iter().find(|m| m.name == name) else {
                return Err(bad(format!("the plan declares no model `{name}`")));
            };
            let resolve = |v: &Option<ConfigValue>| -> Option<String> {
                match v {
                    Some(ConfigValue::Literal { value }) => Some(value.clone()),
                    Some(ConfigValue::Env { var, default }) => {
                        config.get(var).cloned().or_else(|| default.clone())
                    }
                    Some(ConfigValue::Secret { var }) => secrets.get(var).cloned(),
                    None => None,
                }
            };
            let model: Arc<dyn Model> = match decl.provider.as_str() {
                "scripted" => {
                    let file = decl.replies.clone().unwrap_or_default();
                    Arc::new(
                        ScriptedModel::from_file(&name, &self.project_root.join(file))
                            .map_err(bad)?,
                    )
                }
                _ => {
                    let m = OpenAiModel::new(
                        resolve(&decl.base_url).as_deref(),
                        resolve(&decl.api_key),
                        decl.model.as_deref().unwrap_or(""),
                    )
                    .map_err(bad)?;
                    Arc::new(m.with_settings(
                        decl.temperature,
                        decl.max_tokens,
                        decl.retries,
                        decl.timeout_ms,
                        &decl.extra,
                    ))
                }
            };
            out.insert(name, model);
        }
        Ok(out)
    }

    /// Finished nodes whose definition changed are refused unless kept or rerun.
    fn check_plan_change(
        &self,
        state: &ThreadState,
        opts: &RunOptions,
    ) -> Result<Vec<String>, RuntimeError> {
        let renamed: HashMap<&str, &str> = opts
            .renames
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let mut changed = Vec::new();
        for (name, rec) in &state.nodes {
            if !matches!(
                rec.state,
                crate::store::NodeState::Done | crate::store::NodeState::Skipped
            ) {
                continue;
            }
            let current = renamed.get(name.as_str()).copied().unwrap_or(name.as_str());
            match self.plan.node(current) {
                Some(n)
                    if crate::store::fingerprint_key(&n.fingerprint)
                        == crate::store::fingerprint_key(&rec.fingerprint) => {}
                Some(_) => changed.push(current.to_string()),
                None => {}
            }
        }
        let rerun: BTreeSet<String> = self.dependents_of(&opts.rerun_from);
        let unresolved: Vec<&String> = changed
            .iter()
            .filter(|n| !opts.keep.contains(n) && !rerun.contains(*n))
            .collect();
        if !unresolved.is_empty() {
            let list: Vec<String> = unresolved.iter().map(|n| format!("`{n}`")).collect();
            return Err(RuntimeError::new(&codes::PLAN_CHANGED, format!("the plan changed under finished nodes: {}", list.join(", ")))
                .help(format!("resume with `--rerun-from {}` to compute them again (with what depends on them), or `--keep {}` to keep the old result", unresolved[0], unresolved[0])));
        }
        Ok(changed)
    }

    /// The named nodes and everything downstream of them.
    pub(crate) fn dependents_of(&self, roots: &[String]) -> BTreeSet<String> {
        let mut set: BTreeSet<String> = roots.iter().cloned().collect();
        // Nodes are in topological order: one pass finds every dependent.
        for node in &self.plan.nodes {
            if node.deps.iter().any(|d| set.contains(d)) {
                set.insert(node.name.clone());
            }
        }
        set
    }

    /// Calls whose outcome nobody knows and nobody decided on.
    fn unfinished_calls(&self, state: &ThreadState, opts: &RunOptions) -> Vec<StoredError> {
        let mut out = Vec::new();
        for (key, call) in &state.calls {
            if !matches!(call.state, CallState::Started | CallState::Unknown) || call.idempotent {
                continue;
            }
            let shown = key.display();
            let decided = opts
                .decisions
                .iter()
                .any(|(k, _)| k == "all" || *k == shown);
            if decided {
                continue;
            }
            let node_done = state
                .nodes
                .get(&key.node)
                .is_some_and(|n| n.state == crate::store::NodeState::Done);
            if node_done {
                continue;
            }
            out.push(StoredError {
                code: codes::UNFINISHED_EFFECT.code.into(),
                name: codes::UNFINISHED_EFFECT.name.into(),
                message: format!("the call {shown} ({} {}) started and may or may not have happened", call.kind, call.target),
                node: Some(key.node.clone()),
                help: Some(format!("run it again with `--retry-unfinished {shown}`, or record that it happened with `--resolve {shown}=<result JSON>`")),
            });
        }
        out
    }
}

fn collect_env(src: &Source, out: &mut BTreeMap<String, Option<String>>) {
    match src {
        Source::Env { var, default } => {
            out.insert(var.clone(), default.clone());
        }
        Source::Join { sides } | Source::List { items: sides } => {
            sides.iter().for_each(|s| collect_env(s, out))
        }
        Source::Record { fields } => fields.values().for_each(|s| collect_env(s, out)),
        Source::Each { list, .. } => collect_env(list, out),
        _ => {}
    }
}

fn collect_secrets(src: &Source, out: &mut BTreeSet<String>) {
    match src {
        Source::Secret { var } => {
            out.insert(var.clone());
        }
        Source::Join { sides } | Source::List { items: sides } => {
            sides.iter().for_each(|s| collect_secrets(s, out))
        }
        Source::Record { fields } => fields.values().for_each(|s| collect_secrets(s, out)),
        Source::Each { list, .. } => collect_secrets(list, out),
        _ => {}
    }
}

pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn normalize_thread_id(id: &str) -> Result<String, RuntimeError> {
    let upper = id.trim().to_ascii_uppercase();
    match ids::decode(&upper) {
        Some(n) => Ok(ids::encode(n)),
        None => Err(RuntimeError::new(
            &codes::THREAD_NOT_FOUND,
            format!("`{id}` is not a thread id"),
        )
        .help("thread ids are 26-character ULIDs, as `pipec runs` shows them")),
    }
}

/// The host function's input must provide the node's required parameters, with fitting
/// JSON types, and its output must have every field the node's output requires.
fn check_host_types(
    node: &crate::plan::Node,
    input: &Value,
    output: &Value,
    plan: &Plan,
) -> Result<(), String> {
    let props = |s: &Value| -> BTreeMap<String, Value> {
        s.get("properties")
            .and_then(Value::as_object)
            .map(|m| m.clone().into_iter().collect())
            .unwrap_or_default()
    };
    let required = |s: &Value| -> Vec<String> {
        s.get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let in_props = props(input);
    for field in required(input) {
        let Some(param) = node.params.iter().find(|p| p.name == field) else {
            return Err(format!(
                "its input needs `{field}`, which the node has no parameter for"
            ));
        };
        if let Some(expected) = in_props.get(&field).and_then(|s| s.get("type")) {
            let declared = resolve_type(&param.schema, plan);
            if let Some(declared) = declared.get("type")
                && !types_overlap(declared, expected)
            {
                return Err(format!(
                    "`{field}` is {declared} in the node and {expected} in the function"
                ));
            }
        }
    }
    let node_out = resolve_type(&node.output, plan);
    let fn_props = props(output);
    for field in required(&node_out) {
        if !fn_props.contains_key(&field) {
            return Err(format!(
                "the node's output needs `{field}`, which the function's output lacks"
            ));
        }
    }
    if let (Some(a), Some(b)) = (node_out.get("type"), output.get("type"))
        && !types_overlap(a, b)
    {
        return Err(format!("the node returns {a} and the function {b}"));
    }
    Ok(())
}

fn resolve_type(schema: &Value, plan: &Plan) -> Value {
    match schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => plan.defs.get(name).cloned().unwrap_or(Value::Null),
        None => schema.clone(),
    }
}

fn types_overlap(a: &Value, b: &Value) -> bool {
    let set = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => vec![],
        }
    };
    let (a, b) = (set(a), set(b));
    a.iter().any(|x| {
        b.contains(x)
            || (x == "number" && b.iter().any(|y| y == "integer"))
            || (x == "integer" && b.iter().any(|y| y == "number"))
    })
}
