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
//! `nodes.rs` (each node's state, one owner), `tasks.rs` (pure nodes, and the nodes that
//! run as tasks), `gates.rs`, `each.rs`, `cancel.rs`, `end.rs` (how an attempt ends).
//! What the attempt's tasks share, and the one way to write, is `crate::context`.

mod cancel;
mod each;
mod end;
mod gates;
mod heartbeat;
mod nodes;
mod recovery;
mod tasks;
mod units;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinSet;

use nodes::{NodeTable, Slot};
use tasks::TaskDone;

use super::bind::{self, Entry};
use super::error::RuntimeError;
use super::eval::{self, Env};
use super::options::{RunOptions, StopSignal};
use super::outcome::Outcome;
use crate::context::AttemptContext;
use pipec_diagnostic as codes;
use pipec_plan::NodeKind;
use pipec_store::{NodeState, RecordedEvent, ThreadRec, ThreadState, Write};

/// How often a running attempt looks for a cancel request.
const CANCEL_POLL: Duration = Duration::from_millis(200);

pub(crate) enum Start {
    Fresh,
    Resume { plan_changes: Vec<String> },
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
    shared: Arc<AttemptContext>,
    thread: ThreadRec,
    /// The loaded rows: items, gates, calls and attempts stay here; node rows move into
    /// `nodes` once recovery is done.
    state: ThreadState,
    nodes: NodeTable,
    config: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    /// Writes waiting for the next commit.
    buffer: Vec<Write>,
    start: Start,
    /// A worker's stop (`RunOptions::stop`).
    stop: Option<StopSignal>,
}

/// What sources read during an attempt: the thread's inputs and configuration, the
/// attempt's secrets, and the values of finished nodes.
struct Scope<'a> {
    nodes: &'a NodeTable,
    /// The thread's inputs (an object).
    inputs: &'a Value,
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
    fn manifest(&self, node: &str) -> Option<Vec<pipec_store::ResourceRef>> {
        self.nodes.manifest_of(node)
    }
}

impl Attempt {
    /// The attempt of `context` on the loaded rows of its thread; `secrets` are the
    /// values `secret()` sources read.
    pub(crate) fn new(
        context: Arc<AttemptContext>,
        mut state: ThreadState,
        secrets: BTreeMap<String, String>,
        start: Start,
    ) -> Result<Attempt, RuntimeError> {
        // The attempt's own copy (its inputs can be a long list): the loaded rows keep
        // none.
        let Some(thread) = state.thread.take() else {
            return Err(RuntimeError::new(
                &codes::THREAD_NOT_FOUND,
                "the thread vanished",
            ));
        };
        Ok(Attempt {
            nodes: NodeTable::empty(context.plan.clone()),
            config: thread.config.clone(),
            shared: context,
            thread,
            state,
            secrets,
            buffer: Vec::new(),
            start,
            stop: None,
        })
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            nodes: &self.nodes,
            inputs: &self.thread.inputs,
            config: &self.config,
            secrets: &self.secrets,
        }
    }

    async fn flush(&mut self) -> Result<(), RuntimeError> {
        let writes = std::mem::take(&mut self.buffer);
        self.shared.commit(writes).await
    }

    /// The attempt's last commit: whatever is buffered, with the thread's end, and the
    /// thread let go in the same transaction where the store can.
    async fn flush_last(&mut self) -> Result<(), RuntimeError> {
        let writes = std::mem::take(&mut self.buffer);
        self.shared.commit_last(writes).await
    }

    /// Streams events the store committed for this attempt before it began.
    pub(crate) fn stream(&self, events: &[RecordedEvent]) {
        self.shared.stream(events);
    }

    /// The whole attempt.
    pub(crate) async fn run(mut self, opts: RunOptions) -> Result<Outcome, RuntimeError> {
        self.stop = opts.stop.clone();
        let fresh_failures = self.recover(&opts);
        self.restore(&fresh_failures);
        if self.nodes.first_failure().is_none() {
            self.thread.error = None;
        }
        // What recovery decided and the thread's record go with the attempt's first
        // commit: the one before its first effect or call starts, or its last.
        self.buffer.push(Write::Thread(self.thread.clone()));
        let heartbeat = heartbeat::Heartbeat::start(&self.shared);
        let result = self.drive().await;
        // The attempt's MCP sessions end with it, however it ends.
        self.shared.resources.close().await;
        let outcome = match result.map_err(Stop::from) {
            Ok(outcome) => Ok(outcome),
            Err(Stop::Cancelled) => Err(self.record_cancel().await),
            Err(Stop::Error(e)) => Err(e),
        };
        drop(heartbeat);
        if let Some(trace) = &self.shared.trace {
            trace.finish();
        }
        outcome
    }

    /// The node table from the recovered rows: finished nodes hold their values,
    /// failures this recovery decided fail the attempt, everything else is pending.
    fn restore(&mut self, fresh_failures: &[String]) {
        self.nodes = NodeTable::new(
            self.shared.plan.clone(),
            &self.state.nodes,
            self.shared.progress.clone(),
            self.shared.scrubber.clone(),
        );
        for i in 0..self.nodes.len() {
            let name = self.nodes.node(i).name.clone();
            let Some(rec) = self.state.nodes.get(&name) else {
                continue;
            };
            // Values are read with the rows still in the state (each items, gate answers).
            if rec.state == NodeState::Done {
                let manifest = match rec.items {
                    // An `each` node's links are its done items', in item order.
                    Some(n) => (0..n)
                        .filter_map(|k| self.state.items.get(&(name.clone(), rec.generation, k)))
                        .filter(|r| r.state == pipec_store::ItemState::Done)
                        .flat_map(|r| r.manifest.clone())
                        .collect(),
                    None => rec.manifest.clone(),
                };
                self.nodes.restore_manifest(i, manifest);
            }
            let slot = match rec.state {
                NodeState::Done => {
                    Slot::Done(self.state.value_of(&name).unwrap_or(Value::Null).into())
                }
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

    /// Whether a worker's stop was given: nothing new starts.
    fn stop_requested(&self) -> bool {
        self.stop.as_ref().is_some_and(StopSignal::is_stopped)
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
                    let kind = self.nodes.node(i).kind;
                    if kind == NodeKind::Gate {
                        self.enter_gate(i);
                        progressed = true;
                    } else if tasks::is_pure(self.nodes.node(i)) && self.run_pure(i) {
                        progressed = true;
                    } else {
                        to_start.push(i);
                    }
                }
            }
            // Start effects and model calls: their start rows commit first. A node that
            // runs as one unit takes a run permit now, so its `started` row is written
            // only when it can start; the others wait for the next round.
            let mut units = Vec::new();
            let wanted = to_start.len();
            let mut deferred = false;
            let now = pipec_store::ids::now_ms();
            for i in to_start {
                // A node that failed or blocked this round stops the attempt, and so does
                // a worker's stop: nothing else starts.
                if self.nodes.stopping() || self.stop_requested() {
                    break;
                }
                // A node still in a retry's backoff (a resume during the wait) takes its
                // permit, and writes its `started` row, when the wait is over.
                let waiting = self
                    .nodes
                    .row(i)
                    .and_then(|r| r.next_retry_ms)
                    .is_some_and(|due| due > now);
                let permit = if self.nodes.node(i).each.is_none() && !waiting {
                    match self.shared.permits.clone().try_acquire_owned() {
                        Ok(p) => Some(p),
                        Err(_) => {
                            deferred = true;
                            continue;
                        }
                    }
                } else {
                    None
                };
                if let Some(work) = self.prepare_task(i, permit) {
                    units.push((i, work));
                }
            }
            // Started rows commit before their work starts; what pure nodes and gates
            // wrote meanwhile goes with them, or with a later commit (a pure node is
            // run again after a crash, the same way).
            if !units.is_empty() {
                self.flush().await?;
            }
            // With nothing else in flight, a lone unit runs in this task: the scheduler
            // would only wait for it, and a task of its own costs two thread wake-ups.
            let inline = running == 0 && units.len() == 1 && !deferred;
            let mut done: Vec<Result<TaskDone, String>> = Vec::new();
            for (i, work) in units {
                self.nodes.mark_running(i);
                running += 1;
                let task = self.task(i, work);
                if inline {
                    let mut task = std::pin::pin!(tasks::CatchPanic(Box::pin(task)));
                    loop {
                        tokio::select! {
                            r = &mut task => {
                                done.push(r);
                                break;
                            }
                            _ = cancel_check.tick() => {
                                if self.cancel_requested().await {
                                    return Err(cancel::cancelled(&self.shared.thread_id));
                                }
                            }
                        }
                    }
                } else {
                    tasks.spawn(task);
                }
            }
            if running == 0 {
                // Stopped with work left to start: the thread goes back to the queue.
                if wanted > 0 && self.stop_requested() && !self.nodes.stopping() {
                    return self.release().await;
                }
                // A node skipped (or failed) while preparing may unblock others.
                if wanted > 0 && !self.nodes.stopping() {
                    continue;
                }
                return self.quiesce().await;
            }
            if done.is_empty() {
                // Wait for a task, then take every other one that finished meanwhile; a
                // node waiting for a permit is started as soon as one frees up (a task
                // may release its permit while it waits out a retry's backoff).
                let permits = self.shared.permits.clone();
                let stop = self.stop.clone().filter(|s| !s.is_stopped());
                let first = loop {
                    tokio::select! {
                        r = tasks.join_next() => break Some(r),
                        p = permits.clone().acquire_owned(), if deferred => {
                            drop(p);
                            break None;
                        }
                        // A worker's stop: schedule again, which starts nothing new.
                        _ = async { if let Some(s) = &stop { s.stopped().await } }, if stop.is_some() => {
                            break None;
                        }
                        _ = cancel_check.tick() => {
                            if self.cancel_requested().await {
                                cancel::stop_all(&mut tasks).await;
                                return Err(cancel::cancelled(&self.shared.thread_id));
                            }
                        }
                    }
                };
                let Some(first) = first else {
                    // A permit is free: schedule again.
                    continue;
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
                self.joined(d);
            }
            if self.nodes.stopping() {
                // Drain: in-flight work finishes and is committed as it ends (a crash
                // meanwhile loses none of it); nothing new starts; a cancel still stops
                // it.
                self.flush().await?;
                loop {
                    tokio::select! {
                        r = tasks.join_next() => match r {
                            None => break,
                            Some(d) => {
                                self.joined(d.map_err(|e| e.to_string()));
                                self.flush().await?;
                            }
                        },
                        _ = cancel_check.tick() => {
                            if self.cancel_requested().await {
                                cancel::stop_all(&mut tasks).await;
                                return Err(cancel::cancelled(&self.shared.thread_id));
                            }
                        }
                    }
                }
                return self.end_badly().await;
            }
        }
    }

    /// A task that ended, or one that stopped unexpectedly.
    fn joined(&mut self, d: Result<TaskDone, String>) {
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

    /// A gate whose inputs are committed enters like any node.
    fn enter_gate(&mut self, i: usize) {
        let node = self.nodes.node(i).clone();
        match bind::enter(&node, &self.scope()) {
            Entry::Run(params) => self.gate_ready(i, params),
            Entry::Skip => self.skip_gate(i),
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
    }
}
