//! The embedding API: a `Runner` holds a plan, a store, host functions and models, and
//! starts or resumes threads. Everything that can be refused (inputs, configuration,
//! answers, options, plan changes, unfinished effects) is refused *before* anything is
//! written (`preflight.rs`, `plan_change.rs`, `config.rs`). `resume.rs` continues a thread
//! from what is committed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Semaphore;

mod preflight;
mod resume;

pub use preflight::DEFAULT_MAX_ANSWER_BYTES;
pub(crate) use resume::give_back;
use resume::{Decided, Unrun};

use crate::attempt::{Attempt, Start};
use crate::config;
use crate::context::{AttemptContext, EventSink};
use crate::error::RuntimeError;
use crate::hosts::{HostFn, check_host_types};
use crate::llm::Model;
use crate::models;
use crate::options::RunOptions;
use crate::outcome::Outcome;
use crate::plan_change;
use crate::progress::{Progress, ScrubbedProgress, Step};
use crate::resources::servers::{Fetcher, McpServers, Replayer, Servers, WithOverrides};
use crate::resources::{Resources, tools_check};
use crate::secrets::Scrubber;
use crate::tap::Tap;
use crate::validate::Validators;
use pipec_diagnostic as codes;
use pipec_plan::{Body, Plan};
use pipec_store::{
    AttemptRec, GateState, Holder, Lease, Status, Store, StoreError, ThreadRec, ThreadState, ids,
};

/// Where configuration and secrets are read from (the process environment by default).
pub type Environment = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A new thread's record and the secrets its start read.
struct NewThread {
    rec: ThreadRec,
    secrets: BTreeMap<String, String>,
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
    /// Where the attempts' spans go (`crate::trace`); none are made without it.
    pub(crate) spans: Option<crate::trace::SpanSink>,
    pub(crate) called_from: Option<crate::trace::SpanRef>,
    pub(crate) progress: Option<Arc<dyn Progress>>,
    pub(crate) concurrency: usize,
    pub(crate) validators: Arc<Validators>,
    pub(crate) max_answer_bytes: usize,
    /// The process environment, read through this so tests and embedders can replace it.
    pub(crate) environment: Environment,
    /// MCP servers supplied by the embedder instead of the plan's (`servers`).
    pub(crate) servers: Option<Arc<dyn Servers>>,
    pub(crate) fetchers: HashMap<String, Fetcher>,
    pub(crate) replayers: HashMap<String, Replayer>,
    /// A resume reads `env()` values from this process and takes scripted model
    /// replacements only from beneath the project root, instead of trusting what the
    /// thread recorded (a worker serving a folder: whoever submitted the thread does not
    /// choose where its requests, and the secrets they carry, go).
    pub(crate) own_configuration: bool,
    /// Who answers gates through this runner, as the store records it (`cli` by default).
    pub(crate) answerer: &'static str,
    /// Link kinds a test kills ([`Runner::dead_links`]).
    pub(crate) dead_links: Vec<String>,
    /// Nodes whose effects end the process ([`Runner::kill_after`]).
    pub(crate) kill_after: Vec<String>,
    /// The recorded thread a replay takes every call's result from ([`Runner::replaying`]).
    pub(crate) replay: Option<Arc<crate::replay::Recorded>>,
    /// How far ahead of the real clock gate deadlines are judged ([`Runner::clock_ahead`]).
    pub(crate) clock_ahead_ms: u64,
    /// What sees each attempt's models and servers ([`Runner::tap`]).
    pub(crate) tap: Option<Arc<dyn Tap>>,
}

impl Runner {
    /// A runner for `plan` on `store`; the project root is the current folder.
    pub fn new(plan: Plan, store: impl Store + 'static) -> Runner {
        Self::with_store(plan, Arc::new(store))
    }

    pub fn with_store(plan: Plan, store: Arc<dyn Store>) -> Runner {
        let validators = Arc::new(Validators::new(plan.defs.clone()));
        Runner {
            plan: Arc::new(plan),
            store,
            hosts: HashMap::new(),
            models: HashMap::new(),
            project_root: PathBuf::from("."),
            source: String::new(),
            model_overrides: BTreeMap::new(),
            events: None,
            spans: None,
            called_from: None,
            progress: None,
            concurrency: 8,
            validators,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            environment: Arc::new(|k| std::env::var(k).ok()),
            servers: None,
            fetchers: HashMap::new(),
            replayers: HashMap::new(),
            own_configuration: false,
            answerer: "cli",
            dead_links: Vec::new(),
            kill_after: Vec::new(),
            replay: None,
            clock_ahead_ms: 0,
            tap: None,
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

    /// `--model NAME=scripted:FILE`: recorded on the thread, so a resume uses it too. A
    /// name the plan does not declare is refused when the run starts.
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

    /// Makes a trace of every attempt, its spans handed to `sink` as they end
    /// ([`crate::trace`]).
    pub fn spans(mut self, sink: crate::trace::SpanSink) -> Runner {
        self.spans = Some(sink);
        self
    }

    /// The attempt is made for a request of another process (an MCP client's call of a
    /// served pipeline, whose span `pipec serve` makes): its `invoke_workflow` span
    /// links to `request`.
    pub fn called_from(mut self, request: crate::trace::SpanRef) -> Runner {
        self.called_from = Some(request);
        self
    }

    pub fn progress(mut self, p: Arc<dyn Progress>) -> Runner {
        self.progress = Some(p);
        self
    }

    /// Who the answers this runner's resumes carry come from, as `pipec show` reports
    /// it (`cli` by default; `pipec serve` answers as `mcp`).
    pub fn answered_by(mut self, who: &'static str) -> Runner {
        self.answerer = who;
        self
    }

    pub fn concurrency(mut self, n: usize) -> Runner {
        self.concurrency = n.max(1);
        self
    }

    /// The largest gate answer accepted, in bytes of JSON (default 1 MiB).
    pub fn max_answer_bytes(mut self, n: usize) -> Runner {
        self.max_answer_bytes = n;
        self
    }

    /// A fault for tests (`pipec test`'s `faults { dead_links = [...] }`): in the
    /// attempts of this runner, the first read of each link of these kinds is answered as
    /// a resource that no longer exists, so the link is healed by calling its producer
    /// again, as when a link expires while a thread waits.
    pub fn dead_links(mut self, kinds: Vec<String>) -> Runner {
        self.dead_links = kinds;
        self
    }

    /// Shows each attempt's models and servers to `tap`, which may wrap or replace them
    /// (`pipec test` records and replays tapes so).
    pub fn tap(mut self, tap: Arc<dyn Tap>) -> Runner {
        self.tap = Some(tap);
        self
    }

    /// A fault for tests (`pipec test`'s `faults { kill_after = [...] }`): right after an
    /// effect of one of these nodes has run, before its result is committed, the process
    /// ends as by `kill -9`, so that a resume meets the effect unfinished.
    pub fn kill_after(mut self, nodes: Vec<String>) -> Runner {
        self.kill_after = nodes;
        self
    }

    /// Skips time for tests (`pipec test`'s `timeouts`): in this runner's attempts, gate
    /// deadlines are judged as if the clock were `ms` ahead, so a gate whose deadline
    /// falls before then has timed out (its `on_timeout` answer applies) without anyone
    /// waiting.
    pub fn clock_ahead(mut self, ms: u64) -> Runner {
        self.clock_ahead_ms = ms;
        self
    }

    /// Replays a recorded thread (`pipec replay`): in this runner's attempts, every node
    /// that calls something takes the result `recorded` holds for it instead of running,
    /// and fails with R0415 where it holds none; what the scheduler computes is computed.
    pub fn replaying(mut self, recorded: crate::replay::Recorded) -> Runner {
        self.replay = Some(Arc::new(recorded));
        self
    }

    /// Reaches MCP servers through `servers` instead of starting the plan's own (tests,
    /// programs that hold their sessions themselves).
    pub fn servers(mut self, servers: Arc<dyn Servers>) -> Runner {
        self.servers = Some(servers);
        self
    }

    /// Reads the resources of the server `name` with `f` (`uri → bytes + MIME type`)
    /// instead of over MCP.
    pub fn fetcher(mut self, name: &str, f: Fetcher) -> Runner {
        self.fetchers.insert(name.to_string(), f);
        self
    }

    /// Re-derives dead links of the server `name` with `f` (`tool, arguments → the raw
    /// tool result`) instead of calling the tool over MCP.
    pub fn replayer(mut self, name: &str, f: Replayer) -> Runner {
        self.replayers.insert(name.to_string(), f);
        self
    }

    /// Resumes threads with this process's configuration: `env()` values are read from
    /// its environment (and recorded on the thread) instead of the ones the thread
    /// recorded, and a scripted model replacement the thread recorded is refused unless
    /// its replies file is beneath the project root. For a worker that serves a folder,
    /// so that a thread submitted by someone else cannot point a model's `base_url` or a
    /// server's address, and the secrets sent with them, somewhere else.
    pub fn own_configuration(mut self) -> Runner {
        self.own_configuration = true;
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
        let new = self.new_thread(inputs, &opts).await?;
        let secrets = new.secrets;
        let models = self.tapped(
            models::build(
                &self.plan,
                None,
                &self.models,
                &self.model_overrides,
                &secrets,
                &new.rec.config,
                &self.project_root,
            )?,
            &secrets,
        );
        let servers = self.servers_for(&new.rec.config, &secrets, &models);
        self.check_servers(&servers, None).await?;
        let plan_json = serde_json::to_string(&*self.plan).unwrap_or_default();
        self.store.put_plan(&self.plan.hash, &plan_json).await?;
        let attempt = self.attempt_rec(1);
        let mut thread = new.rec;
        thread.holder = Some(Holder {
            run_id: attempt.run_id.clone(),
            pid: std::process::id(),
            host: host_name(),
            since_ms: thread.created_ms,
        });
        let (lease, created) = self
            .store
            .create_thread(thread.clone(), attempt.clone())
            .await?;
        let pre = thread.pre_answers.clone();
        let state = ThreadState {
            thread: Some(thread),
            attempts: vec![attempt],
            ..Default::default()
        };
        let attempt = self.new_attempt(lease, state, models, secrets, servers, Start::Fresh)?;
        attempt.stream(&created);
        let mut opts = opts;
        opts.pre_answers = pre.into_iter().collect();
        attempt.run(opts).await
    }

    /// Creates a thread for the workers (`pipec run --submit`) and runs nothing: its plan
    /// and inputs are stored and it waits, `queued`, for a worker to take it. It is
    /// checked as a start is (options, inputs, configuration, models) before anything is
    /// written; the tools of its servers are checked by the worker that takes it.
    /// Returns the new thread's id.
    pub async fn submit_with(
        &self,
        inputs: Value,
        opts: RunOptions,
    ) -> Result<String, RuntimeError> {
        let new = self.new_thread(inputs, &opts).await?;
        models::build(
            &self.plan,
            None,
            &self.models,
            &self.model_overrides,
            &new.secrets,
            &new.rec.config,
            &self.project_root,
        )?;
        let plan_json = serde_json::to_string(&*self.plan).unwrap_or_default();
        self.store.put_plan(&self.plan.hash, &plan_json).await?;
        let mut rec = new.rec;
        rec.status = Status::Queued;
        rec.epoch = 0;
        rec.attempts = 0;
        let id = rec.id.clone();
        let committed = self.store.submit(rec).await?;
        if let Some(sink) = &self.events {
            committed.iter().for_each(|e| sink(e));
        }
        Ok(id)
    }

    /// What a start and a submit check before anything is written, and the new thread's
    /// record (running, epoch 1, no holder yet).
    async fn new_thread(
        &self,
        inputs: Value,
        opts: &RunOptions,
    ) -> Result<NewThread, RuntimeError> {
        // Everything up to `create_thread` only reads: a refused start writes nothing.
        self.check_start_options(opts)?;
        let id = match &opts.thread_id {
            Some(id) => {
                let id = normalize_thread_id(id)?;
                match self.store.load(&id).await {
                    Ok(_) => {
                        return Err(RuntimeError::new(
                            &codes::THREAD_EXISTS,
                            format!("thread {id} already exists"),
                        )
                        .help(format!(
                            "continue it with `pipec resume {id}`, or choose another id"
                        )));
                    }
                    Err(StoreError::NotFound { .. }) => id,
                    Err(e) => return Err(e.into()),
                }
            }
            None => ids::new_thread_id(),
        };
        self.check_overrides(&self.model_overrides)?;
        let inputs = self.check_inputs(inputs)?;
        self.check_runnable(None)?;
        let overrides = self.model_overrides.clone();
        let needs = config::needs(
            &self.plan,
            None,
            &|m| self.models.contains_key(m) || overrides.contains_key(m),
            self.servers.is_none(),
        );
        let config::Values { config, secrets } =
            config::read(&needs, &BTreeMap::new(), &*self.environment)?;
        let pre: BTreeMap<String, Value> = opts.pre_answers.iter().cloned().collect();
        let now = ids::now_ms();
        let rec = ThreadRec {
            id: id.clone(),
            pipeline: self.plan.name.clone(),
            plan_hash: self.plan.hash.clone(),
            source: self.source.clone(),
            project_root: self.project_root.display().to_string(),
            status: Status::Running,
            cancel_requested: false,
            epoch: 1,
            holder: None,
            created_ms: now,
            updated_ms: now,
            inputs,
            config,
            model_overrides: self.model_overrides.clone(),
            // With the thread from its first commit: a crash before the first step does
            // not lose them.
            pre_answers: pre,
            outputs: None,
            error: None,
            next_seq: 0,
            attempts: 1,
            due_ms: None,
        };
        Ok(NewThread { rec, secrets })
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
        match rec.status {
            Status::Completed if opts.changes_results() => {
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
        // The stored row of the gate the plan calls `gate`: through a rename, and none
        // for a gate `--rerun-from` asks again (its row goes).
        let reopened = plan_change::dependents(&self.plan, &opts.rerun_from);
        let row_of = |gate: &str| {
            if reopened.contains(gate) {
                return None;
            }
            state.gates.get(opts.renamed_from(gate).unwrap_or(gate))
        };
        for (gate, answer) in &answers {
            if let Some(g) = row_of(gate)
                && g.state == GateState::Answered
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
            // Nothing to change: the outputs again, as the plan the thread ran computes
            // them (answers equal to the stored ones are fine).
            let ran = if rec.plan_hash == self.plan.hash {
                (*self.plan).clone()
            } else {
                super::stored_plan(&*self.store, &rec).await?
            };
            let outputs = crate::eval::outputs_of(&ran, &state).map_err(|(name, e)| {
                RuntimeError::new(e.rule(), format!("the output `{name}`: {e}"))
            })?;
            return Ok(Outcome::Completed {
                thread: rec.id,
                outputs: outputs.into(),
            });
        }
        let mut ready = match self.decide(&state, &answers, &opts).await? {
            Decided::Ready(ready) => ready,
            Decided::Blocked(blocked) => {
                if rec.status != Status::Blocked {
                    self.record_blocked(&rec, &blocked).await?;
                }
                return Ok(Outcome::Blocked {
                    thread: rec.id,
                    reasons: blocked,
                });
            }
        };
        // Answers to pending gates go in without a lease (so a live holder sees them too);
        // an answer equal to the one a gate has changes nothing; the rest wait for their
        // gate.
        let (now_answers, later): (Vec<_>, Vec<_>) = answers
            .into_iter()
            .filter(|(g, _)| !row_of(g).is_some_and(|r| r.state == GateState::Answered))
            .partition(|(g, _)| row_of(g).is_some_and(|r| r.state == GateState::Pending));
        // A pending gate is answered under the name its row has until the rename moves it.
        let now_answers: Vec<(String, Value)> = now_answers
            .into_iter()
            .map(|(g, v)| (opts.renamed_from(&g).unwrap_or(&g).to_string(), v))
            .collect();
        let servers = self.servers_for(&ready.config, &ready.secrets, &ready.models);
        self.check_servers(&servers, Some(&ready.to_run)).await?;
        // The answers and the claim are one commit. A thread another process holds gets
        // the answers alone (its holder sees them), and the resume is refused.
        let attempt_rec = self.attempt_rec(rec.attempts + 1);
        let claimed = if now_answers.is_empty() {
            self.store.claim(&rec.id, attempt_rec).await
        } else {
            self.store
                .claim_answering(&rec.id, attempt_rec, now_answers.clone(), self.answerer)
                .await
        };
        let (lease, loaded, committed) = match claimed {
            Ok(claimed) => claimed,
            Err(e @ pipec_store::StoreError::Locked { .. }) if !now_answers.is_empty() => {
                Servers::close(&servers).await;
                let answered = self
                    .store
                    .answer(&rec.id, now_answers, self.answerer)
                    .await?;
                if let Some(sink) = &self.spans {
                    crate::trace::answered_gates(sink, &rec.id, &state, &answered);
                }
                if let Some(sink) = &self.events {
                    answered.iter().for_each(|e| sink(e));
                }
                return Err(e.into());
            }
            Err(e) => {
                Servers::close(&servers).await;
                return Err(e.into());
            }
        };
        // What the store wrote for this resume (answers, the claim), for the live stream.
        if let Some(sink) = &self.spans {
            crate::trace::answered_gates(sink, &rec.id, &state, &committed);
        }
        let state = loaded;
        // Another attempt may have run between the look above and this claim (a worker
        // that took the thread and died): what it left decides, not what was there
        // before. An effect it started and did not finish blocks the thread here as it
        // would have above; run again, it would happen twice.
        if state
            .thread
            .as_ref()
            .is_some_and(|t| t.epoch != rec.epoch + 1)
        {
            let blocked = match self.what_the_state_decides(&state, &opts).await {
                Ok((changes, blocked)) => {
                    ready.plan_changes = changes;
                    blocked
                }
                Err(e) => {
                    Servers::close(&servers).await;
                    return Err(e);
                }
            };
            if !blocked.is_empty() {
                Servers::close(&servers).await;
                if let Some(sink) = &self.events {
                    committed.iter().for_each(|e| sink(e));
                }
                self.end_blocked(lease, state, &blocked).await?;
                return Ok(Outcome::Blocked {
                    thread: rec.id,
                    reasons: blocked,
                });
            }
        }
        let mut opts = opts;
        opts.pre_answers.extend(later);
        self.start_resumed(lease, state, ready, servers, &committed, opts)
            .await
    }

    /// What a thread's stored state decides for a resume: the nodes the plan changed,
    /// and the calls that started, may or may not have happened and wait for a person
    /// (looked at once what they started is gone).
    pub(super) async fn what_the_state_decides(
        &self,
        state: &ThreadState,
        opts: &RunOptions,
    ) -> Result<(Vec<String>, Vec<pipec_store::StoredError>), RuntimeError> {
        let changes = plan_change::changed_nodes(&self.plan, state, opts, &self.validators)?;
        self.wait_for_unfinished_effects(state).await?;
        Ok((changes, self.unfinished_calls(state, opts)))
    }

    /// The models of an attempt, as the tap (if any) would have them.
    pub(super) fn tapped(
        &self,
        models: HashMap<String, Arc<dyn Model>>,
        secrets: &BTreeMap<String, String>,
    ) -> HashMap<String, Arc<dyn Model>> {
        let Some(tap) = &self.tap else {
            return models;
        };
        let scrubber = scrubber_of(secrets);
        models
            .into_iter()
            .map(|(name, model)| {
                let model = tap.model(&name, model, &scrubber);
                (name, model)
            })
            .collect()
    }

    /// The MCP servers of an attempt: the embedder's, or the plan's own (started when
    /// first used, a server's sampling requests answered by the model it names), with the
    /// embedder's fetchers and replayers in front.
    pub(super) fn servers_for(
        &self,
        config: &BTreeMap<String, String>,
        secrets: &BTreeMap<String, String>,
        models: &HashMap<String, Arc<dyn Model>>,
    ) -> WithOverrides {
        let scrubber = scrubber_of(secrets);
        let inner: Arc<dyn Servers> = match &self.servers {
            Some(s) => s.clone(),
            None => Arc::new(McpServers::new(
                &self.plan,
                &self.project_root,
                config,
                secrets,
                &scrubber,
                models,
            )),
        };
        let inner = match &self.tap {
            Some(tap) => tap.servers(inner, &scrubber),
            None => inner,
        };
        WithOverrides {
            inner,
            fetchers: self.fetchers.clone(),
            replayers: self.replayers.clone(),
        }
    }

    /// The declared tools of the nodes still to run, against what their servers list,
    /// before anything is written: a missing or changed tool refuses the run.
    pub(super) async fn check_servers(
        &self,
        servers: &WithOverrides,
        to_run: Option<&BTreeSet<String>>,
    ) -> Result<(), RuntimeError> {
        let mut which = BTreeSet::new();
        for node in &self.plan.nodes {
            if to_run.is_some_and(|set| !set.contains(&node.name)) {
                continue;
            }
            let tools: Vec<&String> = match &node.body {
                Body::Call { tool, .. } => vec![tool],
                Body::Model { tools, .. } => tools.iter().collect(),
                _ => Vec::new(),
            };
            for t in tools {
                if let Some(t) = self.plan.tools.iter().find(|x| &x.name == t) {
                    which.insert(t.server.clone());
                }
            }
        }
        if which.is_empty() {
            return Ok(());
        }
        let report = tools_check::check_tools(&self.plan, servers, &which).await;
        let result = report.into_error();
        if result.is_err() {
            // A refused run leaves no server running.
            Servers::close(servers).await;
        }
        for w in result? {
            if let Some(p) = &self.progress {
                p.step(super::progress::Step::Warning { message: &w });
            }
        }
        Ok(())
    }

    /// Answers pending gates of a thread without running anything (no lock needed):
    /// each answer is validated like a resume's, and all are applied or none.
    pub async fn answer(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
    ) -> Result<String, RuntimeError> {
        let state = self.store.load(thread).await?;
        let Some(rec) = state.thread.clone() else {
            return Err(RuntimeError::new(
                &codes::THREAD_NOT_FOUND,
                format!("no thread `{thread}`"),
            ));
        };
        // A failed thread may still wait at a gate of a branch that did not fail.
        if matches!(rec.status, Status::Completed | Status::Cancelled) {
            return Err(RuntimeError::new(
                &codes::THREAD_ENDED,
                format!("thread {} has ended ({})", rec.id, rec.status.as_str()),
            ));
        }
        plan_change::check_identity(&self.plan, &state, &[], &self.validators)?;
        self.check_answers(&answers, Some(&state.gates))?;
        let committed = self.store.answer(&rec.id, answers, self.answerer).await?;
        if let Some(sink) = &self.spans {
            crate::trace::answered_gates(sink, &rec.id, &state, &committed);
        }
        if let Some(sink) = &self.events {
            committed.iter().for_each(|e| sink(e));
        }
        Ok(rec.id)
    }

    /// Records that the thread waits for a decision, so `runs` and `show` say so.
    async fn record_blocked(
        &self,
        rec: &ThreadRec,
        blocked: &[pipec_store::StoredError],
    ) -> Result<(), RuntimeError> {
        let (lease, state, claimed) = self
            .store
            .claim(&rec.id, self.attempt_rec(rec.attempts + 1))
            .await?;
        if let Some(sink) = &self.events {
            claimed.iter().for_each(|e| sink(e));
        }
        self.end_blocked(lease, state, blocked).await
    }

    /// Ends the claimed attempt as blocked on `blocked`, and lets the thread go.
    pub(super) async fn end_blocked(
        &self,
        lease: pipec_store::Lease,
        state: ThreadState,
        blocked: &[pipec_store::StoredError],
    ) -> Result<(), RuntimeError> {
        let (committed, cancelled) =
            resume::end_unrun(&*self.store, lease, state, Unrun::Blocked(blocked)).await?;
        if let Some(sink) = &self.events {
            committed.iter().for_each(|e| sink(e));
        }
        cancelled.map_or(Ok(()), Err)
    }

    pub(super) fn attempt_rec(&self, number: u32) -> AttemptRec {
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
}

/// A scrubber of every secret value read.
fn scrubber_of(secrets: &BTreeMap<String, String>) -> Scrubber {
    let mut scrubber = Scrubber::default();
    for (k, v) in secrets {
        scrubber.add(k, v);
    }
    scrubber
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
            &codes::OPTION_INVALID,
            format!("`{id}` is not a thread id"),
        )
        .help("thread ids are 26-character ULIDs, as `pipec runs` shows them")),
    }
}

impl Runner {
    /// An attempt of this runner on the loaded rows of a thread under `lease`, with the
    /// context its tasks share: the secrets in a scrubber (a secret too short to scrub is
    /// warned about), the thread's heals, and a run permit per `--concurrency`.
    pub(crate) fn new_attempt(
        &self,
        lease: Lease,
        state: ThreadState,
        models: HashMap<String, Arc<dyn Model>>,
        secrets: BTreeMap<String, String>,
        servers: WithOverrides,
        start: Start,
    ) -> Result<Attempt, RuntimeError> {
        let Some(thread) = &state.thread else {
            return Err(RuntimeError::new(
                &codes::THREAD_NOT_FOUND,
                "the thread vanished",
            ));
        };
        let mut scrubber = Scrubber::default();
        for (k, v) in &secrets {
            scrubber.add(k, v);
        }
        if let Some(p) = &self.progress {
            for name in scrubber.too_short() {
                p.step(Step::Warning {
                    message: &format!(
                        "the secret `{name}` is shorter than {} bytes: it is never stored, but a command that prints it is not scrubbed",
                        crate::secrets::MIN_SCRUBBED_LEN
                    ),
                });
            }
        }
        let mut resources = Resources::new(servers, state.heals.clone(), secrets.clone());
        resources.dead_links =
            crate::resources::DeadLinks::new(self.dead_links.iter().cloned().collect());
        let trace = self.spans.clone().map(|sink| {
            // The gates already asked: since when, and which attempt asked.
            let waiting = state
                .gates
                .iter()
                .map(|(name, g)| {
                    let asked = crate::trace::asking_attempt(&state.attempts, g.pending_ms)
                        .unwrap_or(lease.attempt);
                    (name.clone(), g.pending_ms, asked)
                })
                .collect();
            Arc::new(crate::trace::AttemptTrace::new(
                sink,
                self.plan.clone(),
                &lease.thread,
                lease.attempt,
                waiting,
                self.called_from,
            ))
        });
        // The trace reads the committed events as they stream, beside `--events`.
        let events = match (&trace, &self.events) {
            (None, events) => events.clone(),
            (Some(t), events) => {
                let t = t.clone();
                let events = events.clone();
                let both: EventSink = Arc::new(move |e| {
                    t.event(e);
                    if let Some(sink) = &events {
                        sink(e);
                    }
                });
                Some(both)
            }
        };
        let context = AttemptContext {
            plan: self.plan.clone(),
            store: self.store.clone(),
            thread_id: lease.thread.clone(),
            attempt_no: lease.attempt,
            lease,
            project_root: PathBuf::from(&thread.project_root),
            hosts: self.hosts.clone(),
            models,
            validators: self.validators.clone(),
            scrubber: scrubber.clone(),
            events,
            trace,
            progress: self
                .progress
                .clone()
                .map(|p| ScrubbedProgress::wrap(p, scrubber.clone())),
            permits: Arc::new(Semaphore::new(self.concurrency)),
            concurrency: self.concurrency,
            stream: Default::default(),
            resources: Arc::new(resources),
            kill_after: self.kill_after.clone(),
            replay: self.replay.clone(),
            clock_ahead_ms: self.clock_ahead_ms,
            deferred: Default::default(),
            flushes: Default::default(),
            links_read: self.plan.links_read(),
        };
        Attempt::new(Arc::new(context), state, secrets, start)
    }
}
