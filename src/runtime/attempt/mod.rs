//! One attempt: a process working on a thread until it completes, pauses, fails or
//! blocks. Scheduling is dataflow: a node starts as soon as what it reads is committed.
//!
//! The write-ahead rule: nothing derived from a result (a dependent's start, a model
//! request, an event, stdout) happens before the row holding that result commits. Pure
//! nodes (`return`) are the exception: they are recomputed from committed inputs after a
//! crash, so they run inline and their rows join the next commit. A finished node's row,
//! the pure nodes it unblocks, and the start rows of the effects it unblocks go in one
//! commit; a chain of effects costs one commit per step.
//!
//! The parts: `recovery.rs` (the stored rows brought in line before anything runs),
//! `nodes.rs` (each node's state, one owner), `gates.rs`, `each.rs`, `end.rs` (how an
//! attempt ends), `commit.rs` (the one way to write).

mod commit;
mod each;
mod end;
mod gates;
mod nodes;
mod recovery;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub(crate) use commit::{Shared, commit, event_write};
use nodes::{NodeTable, Slot};

use super::bind::{self, Entry, Params};
use super::error::RuntimeError;
use super::eval::{self, Env};
use super::executor;
use super::journal;
use super::options::RunOptions;
use super::outcome::Outcome;
use super::runner::Runner;
use super::secrets::Scrubber;
use super::tries::{self, Unit, UnitEnd};
use crate::diagnostic as codes;
use crate::llm::Model;
use crate::plan::{Body, NodeKind};
use crate::store::{
    CallState, Event, ItemRec, Lease, NodeState, Status, StoreError, ThreadRec, ThreadState, Write,
};

/// How often a running attempt looks for a cancel request.
const CANCEL_POLL: Duration = Duration::from_millis(200);

pub(crate) enum Start {
    Fresh,
    Resume { plan_changes: Vec<String> },
}

/// A started task's result, as the scheduler sees it.
struct TaskDone {
    idx: usize,
    end: UnitEnd,
    items: Option<u32>,
}

/// Why the drive loop stopped without an outcome.
enum Stop {
    Cancelled,
    Error(RuntimeError),
}

impl From<RuntimeError> for Stop {
    fn from(e: RuntimeError) -> Stop {
        if e.is(&codes::THREAD_CANCELLED) {
            Stop::Cancelled
        } else {
            Stop::Error(e)
        }
    }
}

pub(crate) struct Attempt {
    shared: Arc<Shared>,
    thread: ThreadRec,
    /// The loaded rows: items, gates, calls and attempts stay here; node rows move into
    /// `nodes` once recovery is done.
    state: ThreadState,
    nodes: NodeTable,
    inputs: Map<String, Value>,
    config: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    /// Writes waiting for the next commit.
    buffer: Vec<Write>,
    start: Start,
}

/// What sources read during an attempt: the thread's inputs and configuration, the
/// attempt's secrets, and the values of finished nodes.
struct Scope<'a> {
    nodes: &'a NodeTable,
    inputs: &'a Map<String, Value>,
    config: &'a BTreeMap<String, String>,
    secrets: &'a BTreeMap<String, String>,
}

impl Env for Scope<'_> {
    fn input(&self, name: &str) -> Option<Value> {
        self.inputs.get(name).cloned()
    }
    fn node(&self, name: &str) -> Option<eval::Slot> {
        self.nodes.source_slot(name)
    }
    fn env_var(&self, var: &str) -> Option<String> {
        self.config.get(var).cloned()
    }
    fn secret(&self, var: &str) -> Option<String> {
        self.secrets.get(var).cloned()
    }
}

impl Attempt {
    pub(crate) fn new(
        runner: &Runner,
        lease: Lease,
        state: ThreadState,
        models: HashMap<String, Arc<dyn Model>>,
        secrets: BTreeMap<String, String>,
        start: Start,
    ) -> Result<Attempt, RuntimeError> {
        let Some(thread) = state.thread.clone() else {
            return Err(RuntimeError::new(
                &codes::THREAD_NOT_FOUND,
                "the thread vanished",
            ));
        };
        let mut scrubber = Scrubber::default();
        for (k, v) in &secrets {
            scrubber.add(k, v);
        }
        let shared = Arc::new(Shared {
            plan: runner.plan.clone(),
            store: runner.store.clone(),
            thread_id: lease.thread.clone(),
            attempt_no: lease.attempt,
            lease,
            project_root: PathBuf::from(&thread.project_root),
            hosts: runner.hosts.clone(),
            models,
            validators: runner.validators.clone(),
            scrubber: scrubber.clone(),
            events: runner.events.clone(),
            progress: runner.progress.clone(),
            permits: Semaphore::new(runner.concurrency),
        });
        let inputs = match &thread.inputs {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let nodes = NodeTable::new(
            runner.plan.clone(),
            &BTreeMap::new(),
            runner.progress.clone(),
            scrubber,
        );
        Ok(Attempt {
            config: thread.config.clone(),
            shared,
            thread,
            state,
            nodes,
            inputs,
            secrets,
            buffer: Vec::new(),
            start,
        })
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            nodes: &self.nodes,
            inputs: &self.inputs,
            config: &self.config,
            secrets: &self.secrets,
        }
    }

    async fn flush(&mut self) -> Result<(), RuntimeError> {
        let writes = std::mem::take(&mut self.buffer);
        self.shared.commit(writes).await
    }

    /// Streams events the store committed for this attempt before it began.
    pub(crate) fn stream(&self, events: &[crate::store::RecordedEvent]) {
        self.shared.stream(events);
    }

    /// The whole attempt.
    pub(crate) async fn run(mut self, opts: RunOptions) -> Result<Outcome, RuntimeError> {
        let fresh_failures = self.recover(&opts);
        self.restore(&fresh_failures);
        if self.nodes.first_failure().is_none() {
            self.thread.error = None;
        }
        self.buffer.push(Write::Thread(self.thread.clone()));
        let result = match self.flush().await {
            Ok(()) => self.drive().await,
            Err(e) => Err(e),
        };
        match result.map_err(Stop::from) {
            Ok(outcome) => Ok(outcome),
            Err(Stop::Cancelled) => Err(self.record_cancel().await),
            Err(Stop::Error(e)) => Err(e),
        }
    }

    /// The node table from the recovered rows: finished nodes hold their values,
    /// failures this recovery decided fail the attempt, everything else is pending.
    fn restore(&mut self, fresh_failures: &[String]) {
        let rows = std::mem::take(&mut self.state.nodes);
        self.nodes = NodeTable::new(
            self.shared.plan.clone(),
            &rows,
            self.shared.progress.clone(),
            self.shared.scrubber.clone(),
        );
        // Values are read with the rows still in the state (each items, gate answers).
        self.state.nodes = rows;
        for i in 0..self.nodes.len() {
            let name = self.nodes.node(i).name.clone();
            let Some(rec) = self.state.nodes.get(&name) else {
                continue;
            };
            let slot = match rec.state {
                NodeState::Done => Slot::Done(self.state.value_of(&name).unwrap_or(Value::Null)),
                NodeState::Skipped => Slot::Skipped,
                NodeState::Failed if fresh_failures.contains(&name) => {
                    if let Some(e) = &rec.error {
                        self.nodes.set_failure(e.clone());
                    }
                    Slot::Failed
                }
                // A failed node runs again with fresh tries; a running one resumes.
                NodeState::Failed | NodeState::Running => Slot::Pending,
            };
            self.nodes.restore(i, slot);
        }
        // The table owns the rows from here on.
        self.state.nodes.clear();
    }

    async fn drive(&mut self) -> Result<Outcome, RuntimeError> {
        let mut tasks: JoinSet<TaskDone> = JoinSet::new();
        let mut running = 0usize;
        let mut cancel_check =
            tokio::time::interval_at(tokio::time::Instant::now() + CANCEL_POLL, CANCEL_POLL);
        loop {
            // Schedule everything that can run; pure nodes and gates inline.
            let mut to_start: Vec<usize> = Vec::new();
            let mut progressed = true;
            while progressed && !self.nodes.stopping() {
                progressed = false;
                for i in 0..self.nodes.len() {
                    if *self.nodes.slot(i) != Slot::Pending
                        || to_start.contains(&i)
                        || !self.nodes.ready(i)
                    {
                        continue;
                    }
                    let node = self.nodes.node(i);
                    if node.kind == NodeKind::Gate {
                        match bind::enter(node, &self.scope()) {
                            Entry::Run(params) => self.gate_ready(i, params),
                            Entry::Skip => self.nodes.skip(i, &mut self.buffer),
                            Entry::Fail(e) => self.nodes.fail(i, e, &mut self.buffer),
                            Entry::Each { .. } => self.nodes.fail(
                                i,
                                RuntimeError::new(
                                    &codes::INTERNAL_ERROR,
                                    format!("the gate `{}` has an `each` parameter", node.name),
                                )
                                .stored(Some(&node.name)),
                                &mut self.buffer,
                            ),
                        }
                        progressed = true;
                    } else if is_pure(node) {
                        self.run_pure(i);
                        progressed = true;
                    } else {
                        to_start.push(i);
                    }
                }
            }
            // Start effects and model calls: their start rows commit first.
            let mut units: Vec<(usize, Vec<Unit>, Option<u32>)> = Vec::new();
            let wanted = to_start.len();
            for i in to_start {
                if let Some((work, items)) = self.prepare_task(i) {
                    units.push((i, work, items));
                }
            }
            self.flush().await?;
            // With nothing else in flight, a lone unit runs in this task: the scheduler
            // would only wait for it, and a task of its own costs two thread wake-ups.
            let inline = running == 0 && units.len() == 1;
            let mut done: Vec<Result<TaskDone, String>> = Vec::new();
            for (i, work, items) in units {
                self.nodes.mark_running(i);
                running += 1;
                let task = self.task(i, work, items);
                if inline {
                    let mut task = std::pin::pin!(CatchPanic(Box::pin(task)));
                    loop {
                        tokio::select! {
                            r = &mut task => {
                                done.push(r);
                                break;
                            }
                            _ = cancel_check.tick() => {
                                if self.cancel_requested().await {
                                    return Err(cancelled(&self.shared.thread_id));
                                }
                            }
                        }
                    }
                } else {
                    tasks.spawn(task);
                }
            }
            if running == 0 {
                // A node skipped (or failed) while preparing may unblock others.
                if wanted > 0 && !self.nodes.stopping() {
                    continue;
                }
                return self.quiesce().await;
            }
            if done.is_empty() {
                // Wait for a task, then take every other one that finished meanwhile.
                let first = loop {
                    tokio::select! {
                        r = tasks.join_next() => break r,
                        _ = cancel_check.tick() => {
                            if self.cancel_requested().await {
                                stop_all(&mut tasks).await;
                                return Err(cancelled(&self.shared.thread_id));
                            }
                        }
                    }
                };
                let Some(first) = first else {
                    running = 0;
                    continue;
                };
                done.push(first.map_err(|e| e.to_string()));
                while let Some(more) = tasks.try_join_next() {
                    done.push(more.map_err(|e| e.to_string()));
                }
            }
            for d in done {
                running -= 1;
                match d {
                    Ok(td) => self.task_done(td),
                    Err(e) => self.nodes.set_failure(
                        RuntimeError::new(
                            &codes::INTERNAL_ERROR,
                            format!("a task stopped unexpectedly: {e}"),
                        )
                        .stored(None),
                    ),
                }
            }
            if self.nodes.stopping() {
                // Drain: in-flight work finishes and is recorded; nothing new starts.
                while let Some(d) = tasks.join_next().await {
                    if let Ok(td) = d {
                        self.task_done(td);
                    }
                }
                self.flush().await?;
                return self.end_badly().await;
            }
        }
    }

    /// The future that runs a started node: its one unit, or its items.
    fn task(
        &self,
        i: usize,
        work: Vec<Unit>,
        items: Option<u32>,
    ) -> impl std::future::Future<Output = TaskDone> + Send + 'static {
        let shared = self.shared.clone();
        let node = Arc::new(self.nodes.node(i).clone());
        let generation = self.nodes.generation(i);
        let item_rows: BTreeMap<u32, ItemRec> = self
            .state
            .items
            .iter()
            .filter(|((n, g, _), _)| *n == node.name && *g == generation)
            .map(|((_, _, it), r)| (*it, r.clone()))
            .collect();
        async move {
            let end = if items.is_some() {
                each::run_each(shared, node, work, item_rows).await
            } else {
                let mut work = work;
                match work.pop() {
                    Some(unit) => tries::run_unit(shared, unit).await,
                    None => UnitEnd::Failed {
                        error: RuntimeError::new(&codes::INTERNAL_ERROR, "nothing to run")
                            .stored(Some(&node.name)),
                        writes: Vec::new(),
                    },
                }
            };
            TaskDone { idx: i, end, items }
        }
    }

    /// Whether someone asked to cancel the thread (`pipec cancel`).
    async fn cancel_requested(&self) -> bool {
        self.shared
            .store
            .cancel_requested(&self.shared.thread_id)
            .await
            .unwrap_or(false)
    }

    /// A `return` node: computed here, its row joins the next commit.
    fn run_pure(&mut self, i: usize) {
        let node = self.nodes.node(i).clone();
        let Body::Return { value } = &node.body else {
            return;
        };
        let eval_one = |params: &Params| -> Result<Value, crate::store::StoredError> {
            eval::expr(params, value).map_err(|e| {
                RuntimeError::new(e.rule(), format!("`return` of `{}`: {e}", node.name))
                    .stored(Some(&node.name))
            })
        };
        let entry = bind::enter(&node, &self.scope());
        match entry {
            Entry::Skip => self.nodes.skip(i, &mut self.buffer),
            Entry::Fail(e) => self.nodes.fail(i, e, &mut self.buffer),
            Entry::Run(params) => match eval_one(&params) {
                Ok(v) => {
                    self.nodes.mark_running(i);
                    self.nodes.finish(i, v, None, false, &mut self.buffer);
                }
                Err(e) => self.nodes.fail(i, e, &mut self.buffer),
            },
            Entry::Each { name, base, items } => {
                let count = items.len() as u32;
                let mut out = Vec::new();
                for item in items {
                    let params = bind::item_params(&base, &name, item);
                    match bind::when_holds(&node, &params) {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => return self.nodes.fail(i, e, &mut self.buffer),
                    }
                    match eval_one(&params) {
                        Ok(v) => out.push(v),
                        Err(e) => return self.nodes.fail(i, e, &mut self.buffer),
                    }
                }
                self.nodes.mark_running(i);
                self.nodes
                    .finish(i, Value::Array(out), Some(count), false, &mut self.buffer);
            }
        }
    }

    /// Binds a node that runs as a task and writes its start rows. `None` when it was
    /// skipped or failed right away.
    fn prepare_task(&mut self, i: usize) -> Option<(Vec<Unit>, Option<u32>)> {
        let node = Arc::new(self.nodes.node(i).clone());
        let Some(executor) = executor::for_node(&node) else {
            self.nodes.fail(
                i,
                RuntimeError::new(
                    &codes::INTERNAL_ERROR,
                    format!("`{}` has no executor", node.name),
                )
                .stored(Some(&node.name)),
                &mut self.buffer,
            );
            return None;
        };
        let entry = bind::enter(&node, &self.scope());
        let generation = self.nodes.generation(i);
        let old = self.nodes.row(i).cloned();
        let unit = |item: u32, is_item: bool, params: Params, state: &ThreadState| {
            let step = journal::next_step(state, &node.name, generation, item);
            let key = journal::key(&node.name, generation, item, step);
            Unit {
                node: node.clone(),
                executor,
                item,
                is_item,
                params,
                generation,
                tries: if is_item {
                    0
                } else {
                    old.as_ref().map_or(0, |o| o.tries)
                },
                step,
                idem_key: journal::idempotency_key(
                    state,
                    &self.shared.thread_id,
                    &key,
                    executor.key_per_step(),
                ),
                started: None,
                wait_until_ms: if is_item {
                    None
                } else {
                    old.as_ref().and_then(|o| o.next_retry_ms)
                },
            }
        };
        match entry {
            Entry::Skip => {
                self.nodes.skip(i, &mut self.buffer);
                None
            }
            Entry::Fail(e) => {
                self.nodes.fail(i, e, &mut self.buffer);
                None
            }
            Entry::Each { name, base, items } => {
                let n = items.len() as u32;
                let units: Vec<Unit> = items
                    .into_iter()
                    .enumerate()
                    .map(|(k, item)| {
                        unit(
                            k as u32,
                            true,
                            bind::item_params(&base, &name, item),
                            &self.state,
                        )
                    })
                    .collect();
                self.nodes.start(i, Some(n), &mut self.buffer);
                Some((units, Some(n)))
            }
            Entry::Run(params) => {
                let mut unit = unit(0, false, params, &self.state);
                self.nodes.start(i, None, &mut self.buffer);
                if executor.journaled(&node) {
                    let (key, rec) = unit.started_row(self.shared.attempt_no);
                    // A retried effect must be the same call as the one it retries.
                    let retried = self.state.calls.iter().rfind(|(k, c)| {
                        k.node == node.name
                            && k.generation == generation
                            && k.item == 0
                            && c.decision.as_deref() == Some("retry requested")
                    });
                    if let Some((old_key, old)) = retried
                        && old.args_hash != rec.args_hash
                    {
                        let error = RuntimeError::new(
                            &codes::JOURNAL_DIVERGENCE,
                            format!(
                                "the retry of {} would send different arguments ({} ≠ {}) than the call it retries",
                                old_key.display(),
                                rec.args_hash,
                                old.args_hash
                            ),
                        )
                        .help("its inputs changed; check them with `pipec show --internal`, then run it from scratch with `--rerun-from`")
                        .stored(Some(&node.name));
                        self.nodes
                            .block(i, error, Some(old_key.display()), &mut self.buffer);
                        return None;
                    }
                    self.buffer.push(event_write(Event::CallStarted {
                        node: node.name.clone(),
                        call: key.display(),
                        args_hash: rec.args_hash.clone(),
                    }));
                    self.buffer.push(Write::Call(key.clone(), rec.clone()));
                    self.state.calls.insert(key.clone(), rec.clone());
                    unit.started = Some((key, rec));
                }
                Some((vec![unit], None))
            }
        }
    }

    fn task_done(&mut self, td: TaskDone) {
        let i = td.idx;
        match td.end {
            UnitEnd::Value { value, writes } => {
                self.buffer.extend(writes);
                self.nodes
                    .finish(i, value, td.items, false, &mut self.buffer);
            }
            UnitEnd::Failed { error, writes } => {
                self.buffer.extend(writes);
                self.nodes.fail(i, error, &mut self.buffer);
            }
            UnitEnd::Unknown { error, writes } => {
                self.buffer.extend(writes);
                self.nodes.block(i, error, None, &mut self.buffer);
            }
        }
    }

    /// The thread was cancelled while this attempt ran: tasks are stopped (their
    /// commands killed with their groups), then the cancellation is recorded with the
    /// nodes that were running (failed, `R0406`) and their journaled calls (outcome
    /// unknown). Returns the error the run ends with.
    async fn record_cancel(&mut self) -> RuntimeError {
        let error = RuntimeError::new(
            &codes::THREAD_CANCELLED,
            format!(
                "thread {} was cancelled while it ran",
                self.shared.thread_id
            ),
        );
        let mut writes = Vec::new();
        let running = self.nodes.with_slot(|s| *s == Slot::Running);
        let running_names: BTreeSet<String> = running
            .iter()
            .map(|i| self.nodes.node(*i).name.clone())
            .collect();
        for i in running {
            self.nodes.fail(
                i,
                error.stored(Some(&self.nodes.node(i).name.clone())),
                &mut writes,
            );
        }
        // Calls this attempt started and did not end.
        if let Ok(fresh) = self.shared.store.load(&self.shared.thread_id).await {
            for (key, call) in fresh.calls {
                if call.state == CallState::Started
                    && call.attempt == self.shared.attempt_no
                    && running_names.contains(&key.node)
                {
                    writes.push(Write::Call(
                        key,
                        journal::finished_row(
                            &call,
                            CallState::Unknown,
                            Some(
                                "cancelled while it ran; whether it took effect is unknown".into(),
                            ),
                        ),
                    ));
                }
            }
        }
        self.thread.status = Status::Cancelled;
        self.thread.holder = None;
        self.thread.error = Some(error.stored(None));
        writes.push(Write::Thread(self.thread.clone()));
        writes.push(event_write(Event::ThreadCancelled {}));
        self.buffer = writes;
        self.end_attempt("cancelled");
        let writes = std::mem::take(&mut self.buffer);
        // The one commit allowed past the cancel fence: it records the cancellation.
        let _ = self.shared.commit(writes).await;
        error
    }
}

/// The error of a thread found cancelled.
fn cancelled(thread: &str) -> RuntimeError {
    RuntimeError::from(StoreError::Cancelled {
        thread: thread.to_string(),
    })
}

/// Stops every task and waits until each is gone (a task's commands die as it is
/// dropped).
async fn stop_all(tasks: &mut JoinSet<TaskDone>) {
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

fn is_pure(node: &crate::plan::Node) -> bool {
    matches!(node.body, Body::Return { .. })
        && !node.params.iter().any(|p| eval::is_resource(&p.source))
}

/// Runs a future in place, turning a panic into an error as a spawned task's would be.
struct CatchPanic<F>(std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                std::task::Poll::Ready(Err(format!("panicked: {message}")))
            }
        }
    }
}
