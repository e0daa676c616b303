//! One attempt: a process working on a thread until it completes, pauses, fails or
//! blocks. Scheduling is dataflow: a node starts as soon as what it reads is committed.
//!
//! The write-ahead rule: nothing derived from a result (a dependent's start, a model
//! request, an event, stdout) happens before the row holding that result commits. Pure
//! nodes (`return`) are the exception: they are recomputed from committed inputs after a
//! crash, so they run inline and their rows join the next commit. A finished node's row,
//! the pure nodes it unblocks, and the start rows of the effects it unblocks go in one
//! commit; a chain of effects costs one commit per step.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::eval::{self, Env, Slot};
use super::progress::{Progress, Step};
use super::runner::{
    Decision, EventSink, HostFn, Outcome, PendingGate, RunOptions, Runner, RuntimeError,
};
use super::secrets::Scrubber;
use super::tasks::{self, Unit, UnitEnd};
use super::validate::Validators;
use crate::diagnostic as codes;
use crate::llm::Model;
use crate::plan::{Body, Node, NodeKind, Plan};
use crate::store::{
    CallState, GateRec, GateState, ItemRec, ItemState, Lease, NodeRec, NodeState, Status, Store,
    StoreError, StoredError, ThreadRec, ThreadState, Write, ids,
};

pub(crate) enum Start {
    Fresh,
    Resume { plan_changes: Vec<String> },
}

/// What tasks share with the scheduler.
pub(crate) struct Shared {
    pub plan: Arc<Plan>,
    pub store: Arc<dyn Store>,
    pub lease: Lease,
    pub thread_id: String,
    pub attempt_no: u32,
    pub project_root: PathBuf,
    pub hosts: HashMap<String, HostFn>,
    pub models: HashMap<String, Arc<dyn Model>>,
    pub validators: Arc<Validators>,
    pub scrubber: Scrubber,
    pub events: Option<EventSink>,
    pub progress: Option<Arc<dyn Progress>>,
    pub permits: Semaphore,
}

impl Shared {
    /// Commits writes (scrubbed of secrets), then streams their events.
    pub(crate) async fn commit(&self, mut writes: Vec<Write>) -> Result<(), RuntimeError> {
        if writes.is_empty() {
            return Ok(());
        }
        let now = ids::now_ms();
        for w in &mut writes {
            scrub_write(&self.scrubber, w);
            if let Write::Event(Value::Object(m)) = w {
                m.entry("ts").or_insert(Value::from(now));
            }
        }
        let events: Vec<Value> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect();
        // The live `thread_completed` event carries the outputs; the stored one does not,
        // since they are the node rows' values (`pipec show` computes them again).
        for w in &mut writes {
            if let Write::Event(Value::Object(m)) = w
                && m.get("type").and_then(Value::as_str) == Some("thread_completed")
            {
                m.remove("outputs");
            }
        }
        let seqs = self
            .store
            .commit(&self.lease, writes)
            .await
            .map_err(|e| match e {
                StoreError::Fenced { .. } => RuntimeError::new(&codes::LEASE_LOST, e.to_string()),
                other => RuntimeError::from(other),
            })?;
        if let Some(sink) = &self.events {
            for (mut e, seq) in events.into_iter().zip(seqs) {
                if let Value::Object(m) = &mut e {
                    m.insert("seq".into(), Value::from(seq));
                    m.insert("thread".into(), Value::String(self.thread_id.clone()));
                    m.insert("v".into(), Value::from(1));
                }
                sink(&e);
            }
        }
        Ok(())
    }
}

fn scrub_write(s: &Scrubber, w: &mut Write) {
    if s.is_empty() {
        return;
    }
    let scrub_err = |e: &mut Option<StoredError>| {
        if let Some(e) = e {
            e.message = s.scrub(&e.message);
        }
    };
    match w {
        Write::Node(_, n) => {
            if let Some(v) = &mut n.value {
                s.scrub_value(v);
            }
            scrub_err(&mut n.error);
        }
        Write::Item(_, _, _, i) => {
            if let Some(v) = &mut i.value {
                s.scrub_value(v);
            }
            scrub_err(&mut i.error);
        }
        Write::Call(_, c) => {
            if let Some(a) = &mut c.args {
                s.scrub_value(a);
            }
            if let Some(r) = &mut c.result {
                s.scrub_value(r);
            }
            if let Some(e) = &mut c.error {
                *e = s.scrub(e);
            }
        }
        Write::Gate(_, g) => {
            g.message = s.scrub(&g.message);
            if let Some(a) = &mut g.answer {
                s.scrub_value(a);
            }
        }
        Write::Thread(t) => {
            if let Some(o) = &mut t.outputs {
                s.scrub_value(o);
            }
            scrub_err(&mut t.error);
        }
        Write::Event(e) => s.scrub_value(e),
        Write::Attempt(_) => {}
    }
}

#[derive(Clone, Debug, PartialEq)]
enum NodeSlot {
    Pending,
    Running,
    Done(Value),
    Skipped,
    Failed,
    /// A gate waiting for its answer.
    Waiting,
}

/// A started task's result, as the scheduler sees it.
struct TaskDone {
    idx: usize,
    end: UnitEnd,
    took: std::time::Duration,
    items: Option<u32>,
}

pub(crate) struct Attempt {
    shared: Arc<Shared>,
    thread: ThreadRec,
    state: ThreadState,
    slots: Vec<NodeSlot>,
    index: HashMap<String, usize>,
    inputs: Map<String, Value>,
    config: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    buffer: Vec<Write>,
    start: Start,
    started_at: HashMap<usize, Instant>,
    generations: HashMap<String, u32>,
    failure: Option<StoredError>,
    unknown: Vec<StoredError>,
}

impl Env for Attempt {
    fn input(&self, name: &str) -> Option<Value> {
        self.inputs.get(name).cloned()
    }
    fn node(&self, name: &str) -> Option<Slot> {
        match self.index.get(name).map(|i| &self.slots[*i]) {
            Some(NodeSlot::Done(v)) => Some(Slot::Value(v.clone())),
            Some(NodeSlot::Skipped) => Some(Slot::Skipped),
            _ => None,
        }
    }
    fn env_var(&self, var: &str) -> Option<String> {
        self.config.get(var).cloned()
    }
    fn secret(&self, var: &str) -> Option<String> {
        self.secrets.get(var).cloned()
    }
}

/// A node's parameters, bound.
struct Bound {
    params: BTreeMap<String, Value>,
    skipped: bool,
    each: Option<(String, Vec<Value>)>,
}

fn event(kind: &str, node: Option<&str>) -> Value {
    let mut e = json!({ "type": kind });
    if let (Some(n), Value::Object(m)) = (node, &mut e) {
        m.insert("node".into(), Value::String(n.to_string()));
    }
    e
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
            scrubber,
            events: runner.events.clone(),
            progress: runner.progress.clone(),
            permits: Semaphore::new(runner.concurrency),
        });
        let index: HashMap<String, usize> = runner
            .plan
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let inputs = match &thread.inputs {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let config = thread.config.clone();
        Ok(Attempt {
            slots: vec![NodeSlot::Pending; runner.plan.nodes.len()],
            index,
            inputs,
            config,
            secrets,
            shared,
            thread,
            state,
            buffer: Vec::new(),
            start,
            started_at: HashMap::new(),
            generations: HashMap::new(),
            failure: None,
            unknown: Vec::new(),
        })
    }

    /// The next unused journal sequence number of a node's item.
    fn next_seq(&self, node: &str, generation: u32, item: u32) -> u32 {
        self.state
            .calls
            .keys()
            .filter(|k| k.node == node && k.generation == generation && k.item == item)
            .map(|k| k.seq + 1)
            .max()
            .unwrap_or(0)
    }

    fn plan(&self) -> Arc<Plan> {
        self.shared.plan.clone()
    }

    fn generation(&self, node: &str) -> u32 {
        self.generations.get(node).copied().unwrap_or(0)
    }

    async fn flush(&mut self) -> Result<(), RuntimeError> {
        let writes = std::mem::take(&mut self.buffer);
        self.shared.commit(writes).await
    }

    fn node_row(
        &self,
        node: &Node,
        state: NodeState,
        value: Option<Value>,
        error: Option<StoredError>,
    ) -> NodeRec {
        let old = self.state.nodes.get(&node.name);
        NodeRec {
            generation: self.generation(&node.name),
            fingerprint: node.fingerprint.clone(),
            state,
            value,
            error,
            tries: old.map_or(0, |o| o.tries),
            crash_count: old.map_or(0, |o| o.crash_count),
            next_retry_ms: None,
            started_ms: old.map_or(0, |o| o.started_ms),
            finished_ms: ids::now_ms(),
            items: None,
        }
    }

    /// Brings the stored rows in line with this attempt: plan changes, crashes, decisions,
    /// answers given before their gate, due timeouts.
    fn prepare(&mut self, opts: &RunOptions) -> Result<(), RuntimeError> {
        let plan = self.plan();
        for (name, rec) in &self.state.nodes {
            self.generations.insert(name.clone(), rec.generation);
        }
        // Renamed nodes keep their rows.
        for (old, new) in &opts.renames {
            if let Some(rec) = self.state.nodes.remove(old) {
                // An `each` node's items go with it, under the new name.
                let items: Vec<_> = self
                    .state
                    .items
                    .iter()
                    .filter(|((n, g, _), _)| n == old && *g == rec.generation)
                    .map(|((_, g, i), r)| (*g, *i, r.clone()))
                    .collect();
                for (g, i, r) in items {
                    self.buffer.push(Write::Item(new.clone(), g, i, r.clone()));
                    self.state.items.insert((new.clone(), g, i), r);
                }
                self.buffer.push(Write::Node(new.clone(), rec.clone()));
                self.state.nodes.insert(new.clone(), rec);
            }
        }
        if let Start::Resume { plan_changes } = &self.start {
            let rerun = self.dependents(&opts.rerun_from);
            for name in plan_changes.iter().filter(|n| opts.keep.contains(n)) {
                // Kept: the old result, re-checked against the new type.
                if let (Some(rec), Some(node)) =
                    (self.state.nodes.get(name).cloned(), plan.node(name))
                {
                    if let Some(v) = &self.state.value_of(name) {
                        self.shared.validators.check(&node.output, v, false).map_err(|e| {
                            RuntimeError::new(&codes::PLAN_CHANGED, format!("the kept result of `{name}` does not fit its new type `{}`: {e}", node.output_type))
                        })?;
                    }
                    let mut rec = rec;
                    rec.fingerprint = node.fingerprint.clone();
                    self.buffer.push(Write::Node(name.clone(), rec.clone()));
                    self.state.nodes.insert(name.clone(), rec);
                }
            }
            for name in &rerun {
                if let Some(rec) = self.state.nodes.remove(name) {
                    let generation = rec.generation + 1;
                    self.generations.insert(name.clone(), generation);
                    let reset = NodeRec {
                        generation,
                        state: NodeState::Running,
                        value: None,
                        error: None,
                        tries: 0,
                        crash_count: 0,
                        next_retry_ms: None,
                        ..rec
                    };
                    // Running with no attempt behind it: it runs again from scratch.
                    self.buffer.push(Write::Node(name.clone(), reset));
                    self.buffer.push(Write::Event(
                        json!({ "type": "node_rerun", "node": name, "generation": generation }),
                    ));
                }
                if let Some(g) = self.state.gates.remove(name) {
                    self.buffer.push(Write::Gate(
                        name.clone(),
                        GateRec {
                            state: GateState::Pending,
                            answer: None,
                            answered_by: None,
                            ..g
                        },
                    ));
                }
            }
            if self.thread.plan_hash != plan.hash {
                self.buffer.push(Write::Event(json!({ "type": "plan_upgraded", "from": self.thread.plan_hash, "to": plan.hash })));
                self.thread.plan_hash = plan.hash.clone();
            }
        }
        // Nodes that were running when the previous attempt died.
        // Failures this claim decides; older failed nodes run again on resume.
        let mut fresh_failures: Vec<String> = Vec::new();
        let crashed: Vec<String> = self
            .state
            .nodes
            .iter()
            .filter(|(_, r)| r.state == NodeState::Running && r.started_ms > 0)
            .map(|(n, _)| n.clone())
            .collect();
        for name in crashed {
            let Some(mut rec) = self.state.nodes.get(&name).cloned() else {
                continue;
            };
            rec.crash_count += 1;
            if rec.crash_count >= 3 {
                fresh_failures.push(name.clone());
                rec.state = NodeState::Failed;
                rec.error = Some(
                    RuntimeError::new(
                        &codes::NODE_CRASH_LOOP,
                        format!(
                            "`{name}` was running when the process died {} times",
                            rec.crash_count
                        ),
                    )
                    .help("look at its inputs and stderr; fix the cause, then resume")
                    .stored(Some(&name)),
                );
            }
            self.buffer.push(Write::Node(name.clone(), rec.clone()));
            self.state.nodes.insert(name, rec);
        }
        // Decisions on unfinished calls.
        for (key, call) in self.state.calls.clone() {
            if !matches!(call.state, CallState::Started | CallState::Unknown) || call.idempotent {
                continue;
            }
            let shown = key.display();
            let Some((_, decision)) = opts
                .decisions
                .iter()
                .find(|(k, _)| k == "all" || *k == shown)
            else {
                continue;
            };
            let mut resolved = call.clone();
            resolved.state = CallState::Resolved;
            resolved.finished_ms = ids::now_ms();
            match decision {
                Decision::Retry => {
                    resolved.decision = Some("retry requested".into());
                    if let Some(rec) = self.state.nodes.get_mut(&key.node) {
                        rec.tries = rec.tries.max(key.seq + 1);
                        self.buffer.push(Write::Node(key.node.clone(), rec.clone()));
                    } else if let Some(node) = plan.node(&key.node) {
                        let mut rec = self.node_row(node, NodeState::Running, None, None);
                        rec.tries = key.seq + 1;
                        rec.started_ms = 0;
                        self.buffer.push(Write::Node(key.node.clone(), rec.clone()));
                        self.state.nodes.insert(key.node.clone(), rec);
                    }
                }
                Decision::Performed(value) => {
                    let Some(node) = plan.node(&key.node) else {
                        continue;
                    };
                    self.shared
                        .validators
                        .check(&node.output, value, false)
                        .map_err(|e| {
                            RuntimeError::new(
                                &codes::EXEC_OUTPUT_INVALID,
                                format!(
                                    "the result given for {shown} does not fit `{}`: {e}",
                                    node.output_type
                                ),
                            )
                        })?;
                    // The value goes into the node's (or item's) row, not the journal too.
                    resolved.decision = Some("resolved as performed".into());
                    if node.each.is_none() {
                        let rec = self.node_row(node, NodeState::Done, Some(value.clone()), None);
                        self.buffer.push(Write::Node(key.node.clone(), rec.clone()));
                        self.state.nodes.insert(key.node.clone(), rec);
                    } else {
                        let item = ItemRec {
                            state: ItemState::Done,
                            value: Some(value.clone()),
                            error: None,
                        };
                        self.buffer.push(Write::Item(
                            key.node.clone(),
                            key.generation,
                            key.item,
                            item.clone(),
                        ));
                        self.state
                            .items
                            .insert((key.node.clone(), key.generation, key.item), item);
                    }
                }
            }
            self.buffer.push(Write::Event(
                json!({ "type": "call_resolved", "call": shown, "decision": resolved.decision }),
            ));
            self.buffer.push(Write::Call(key.clone(), resolved.clone()));
            self.state.calls.insert(key, resolved);
        }
        for (gate, answer) in &opts.pre_answers {
            self.thread.pre_answers.insert(gate.clone(), answer.clone());
        }
        // Gates whose deadline passed take their `on_timeout` answer, or fail.
        let now = ids::now_ms();
        for (name, g) in self.state.gates.clone() {
            if g.state != GateState::Pending || g.deadline_ms.is_none_or(|d| d > now) {
                continue;
            }
            let on_timeout = match plan.node(&name).map(|n| &n.body) {
                Some(Body::Gate { on_timeout, .. }) => on_timeout.clone(),
                _ => None,
            };
            match on_timeout {
                Some(answer) => {
                    let rec = GateRec {
                        state: GateState::Answered,
                        answer: Some(answer),
                        answered_ms: now,
                        answered_by: Some("timeout".into()),
                        ..g
                    };
                    self.buffer.push(Write::Gate(name.clone(), rec.clone()));
                    self.buffer.push(Write::Event(
                        json!({ "type": "gate_timed_out", "gate": name, "applied": "on_timeout" }),
                    ));
                    self.state.gates.insert(name, rec);
                }
                None => {
                    let error = RuntimeError::new(&codes::GATE_TIMED_OUT, format!("the gate `{name}` was not answered before its deadline, and has no `on_timeout`")).stored(Some(&name));
                    if let Some(node) = plan.node(&name) {
                        let rec = self.node_row(node, NodeState::Failed, None, Some(error.clone()));
                        self.buffer.push(Write::Node(name.clone(), rec.clone()));
                        self.state.nodes.insert(name.clone(), rec);
                    }
                    self.buffer.push(Write::Event(
                        json!({ "type": "gate_timed_out", "gate": name }),
                    ));
                    fresh_failures.push(name.clone());
                    self.failure.get_or_insert(error);
                }
            }
        }
        // Slots from rows.
        for (i, node) in plan.nodes.iter().enumerate() {
            let Some(rec) = self.state.nodes.get(&node.name) else {
                continue;
            };
            self.slots[i] = match rec.state {
                NodeState::Done => {
                    NodeSlot::Done(self.state.value_of(&node.name).unwrap_or(Value::Null))
                }
                NodeState::Skipped => NodeSlot::Skipped,
                NodeState::Failed if fresh_failures.contains(&node.name) => {
                    self.failure
                        .get_or_insert(rec.error.clone().unwrap_or_else(|| {
                            RuntimeError::new(&codes::NODE_CRASH_LOOP, "crash loop")
                                .stored(Some(&node.name))
                        }));
                    NodeSlot::Failed
                }
                // A failed node runs again with fresh tries; a running one resumes.
                NodeState::Failed | NodeState::Running => NodeSlot::Pending,
            };
        }
        // Fresh tries for nodes that failed in an earlier attempt.
        for rec in self.state.nodes.values_mut() {
            if rec.state == NodeState::Failed {
                rec.tries = 0;
                rec.crash_count = 0;
            }
        }
        if self.failure.is_none() {
            self.thread.error = None;
        }
        Ok(())
    }

    fn dependents(&self, roots: &[String]) -> Vec<String> {
        let mut set: Vec<String> = roots.to_vec();
        for node in &self.shared.plan.nodes {
            if node.deps.iter().any(|d| set.contains(d)) && !set.contains(&node.name) {
                set.push(node.name.clone());
            }
        }
        set
    }

    /// The whole attempt.
    pub(crate) async fn run(mut self, opts: RunOptions) -> Result<Outcome, RuntimeError> {
        self.prepare(&opts)?;
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.flush().await?;
        let result = self.drive().await;
        match result {
            Ok(outcome) => Ok(outcome),
            Err(e) if e.code == codes::LEASE_LOST.code && e.message.contains("cancelled") => {
                // The one write allowed past the fence: recording the cancellation.
                self.thread.status = Status::Cancelled;
                self.thread.holder = None;
                let _ = self
                    .shared
                    .commit(vec![
                        Write::Thread(self.thread.clone()),
                        Write::Event(event("thread_cancelled", None)),
                    ])
                    .await;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    async fn drive(&mut self) -> Result<Outcome, RuntimeError> {
        let plan = self.plan();
        let mut tasks: JoinSet<TaskDone> = JoinSet::new();
        let mut running = 0usize;
        loop {
            // Schedule everything that can run, pure nodes inline.
            let mut to_start: Vec<usize> = Vec::new();
            let mut progressed = true;
            while progressed && self.failure.is_none() && self.unknown.is_empty() {
                progressed = false;
                for i in 0..plan.nodes.len() {
                    if self.slots[i] != NodeSlot::Pending || to_start.contains(&i) || !self.ready(i)
                    {
                        continue;
                    }
                    let node = &plan.nodes[i];
                    if node.kind == NodeKind::Gate {
                        self.gate_ready(i)?;
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
                if let Some(work) = self.prepare_task(i) {
                    units.push((i, work.0, work.1));
                }
            }
            self.flush().await?;
            // With nothing else in flight, a lone unit runs in this task: the scheduler
            // would only wait for it, and a task of its own costs two thread wake-ups.
            let inline = running == 0 && units.len() == 1;
            let mut done: Vec<Result<TaskDone, String>> = Vec::new();
            for (i, work, items) in units {
                self.slots[i] = NodeSlot::Running;
                self.started_at.insert(i, Instant::now());
                running += 1;
                let shared = self.shared.clone();
                let node = Arc::new(plan.nodes[i].clone());
                let item_rows: BTreeMap<u32, ItemRec> = self
                    .state
                    .items
                    .iter()
                    .filter(|((n, g, _), _)| *n == node.name && *g == self.generation(&node.name))
                    .map(|((_, _, it), r)| (*it, r.clone()))
                    .collect();
                let task = async move {
                    let start = Instant::now();
                    let end = if items.is_some() {
                        run_each(shared, node, work, item_rows).await
                    } else {
                        run_single(shared, work).await
                    };
                    TaskDone {
                        idx: i,
                        end,
                        took: start.elapsed(),
                        items,
                    }
                };
                if inline {
                    done.push(CatchPanic(Box::pin(task)).await);
                } else {
                    tasks.spawn(task);
                }
            }
            if running == 0 {
                // A node skipped (or failed) while preparing may unblock others.
                if wanted > 0 && self.failure.is_none() {
                    continue;
                }
                return self.quiesce().await;
            }
            if done.is_empty() {
                // Wait for a task, then take every other one that finished meanwhile.
                let Some(first) = tasks.join_next().await else {
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
                    Err(e) => {
                        self.failure.get_or_insert(
                            RuntimeError::new(
                                &codes::EXEC_FAILED,
                                format!("a task stopped unexpectedly: {e}"),
                            )
                            .stored(None),
                        );
                    }
                }
            }
            if self.failure.is_some() || !self.unknown.is_empty() {
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

    /// Every dependency committed (done or skipped).
    fn ready(&self, i: usize) -> bool {
        self.shared.plan.nodes[i].deps.iter().all(|d| {
            matches!(
                self.index.get(d).map(|j| &self.slots[*j]),
                Some(NodeSlot::Done(_) | NodeSlot::Skipped)
            )
        })
    }

    fn bind(&self, node: &Node) -> Result<Bound, StoredError> {
        let mut params = BTreeMap::new();
        let mut skipped = false;
        let mut each = None;
        for p in &node.params {
            if eval::is_resource(&p.source) {
                return Err(RuntimeError::new(&codes::MCP_SERVER_FAILED, format!("the parameter `{}` reads a resource, and this version of pipec does not read MCP resources yet", p.name)).stored(Some(&node.name)));
            }
            let slot = eval::source(self, &p.source, &p.schema).map_err(|m| {
                let rule = if m.contains("environment variable") || m.contains("secret") {
                    &codes::CONFIG_MISSING
                } else {
                    &codes::INPUT_INVALID
                };
                RuntimeError::new(
                    rule,
                    format!("the parameter `{}` of `{}`: {m}", p.name, node.name),
                )
                .stored(Some(&node.name))
            })?;
            let is_each = node.each.as_deref() == Some(p.name.as_str());
            match slot {
                Slot::Skipped if p.optional && !is_each => {
                    params.insert(p.name.clone(), Value::Null);
                }
                Slot::Skipped => skipped = true,
                Slot::Value(v) if is_each => match v {
                    Value::Array(items) => each = Some((p.name.clone(), items)),
                    Value::Null => skipped = true,
                    other => {
                        return Err(RuntimeError::new(
                            &codes::INPUT_INVALID,
                            format!("`each` of `{}` needs a list, and got {other}", node.name),
                        )
                        .stored(Some(&node.name)));
                    }
                },
                Slot::Value(v) => {
                    params.insert(p.name.clone(), v);
                }
            }
        }
        Ok(Bound {
            params,
            skipped,
            each,
        })
    }

    fn when_holds(node: &Node, params: &BTreeMap<String, Value>) -> Result<bool, StoredError> {
        match &node.when {
            None => Ok(true),
            Some(w) => match eval::expr(params, w) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(Value::Null) => Ok(false),
                Ok(other) => Err(RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!("`when` of `{}` gave {other}, not true or false", node.name),
                )
                .stored(Some(&node.name))),
                Err(m) => Err(RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!("`when` of `{}`: {m}", node.name),
                )
                .stored(Some(&node.name))),
            },
        }
    }

    fn skip(&mut self, i: usize) {
        let node = self.shared.plan.nodes[i].clone();
        self.slots[i] = NodeSlot::Skipped;
        let rec = self.node_row(&node, NodeState::Skipped, None, None);
        self.state.nodes.insert(node.name.clone(), rec.clone());
        self.buffer.push(Write::Node(node.name.clone(), rec));
        self.buffer
            .push(Write::Event(event("node_skipped", Some(&node.name))));
        if let Some(p) = &self.shared.progress {
            p.step(Step::Skipped { node: &node.name });
        }
    }

    fn fail_node(&mut self, i: usize, error: StoredError) {
        let node = self.shared.plan.nodes[i].clone();
        self.slots[i] = NodeSlot::Failed;
        let rec = self.node_row(&node, NodeState::Failed, None, Some(error.clone()));
        self.state.nodes.insert(node.name.clone(), rec.clone());
        self.buffer.push(Write::Node(node.name.clone(), rec));
        self.buffer.push(Write::Event(json!({ "type": "node_failed", "node": node.name, "code": error.code, "message": error.message })));
        if let Some(p) = &self.shared.progress {
            p.step(Step::Failed {
                node: &node.name,
                message: &error.message,
            });
        }
        self.failure.get_or_insert(error);
    }

    fn finish_node(&mut self, i: usize, value: Value, items: Option<u32>) {
        let node = self.shared.plan.nodes[i].clone();
        // An `each` node's list is in its item rows already; its row only counts them.
        let stored = if items.is_some() {
            None
        } else {
            Some(value.clone())
        };
        let mut rec = self.node_row(&node, NodeState::Done, stored, None);
        rec.items = items;
        self.state.nodes.insert(node.name.clone(), rec.clone());
        self.buffer.push(Write::Node(node.name.clone(), rec));
        let ms = self
            .started_at
            .get(&i)
            .map(|t| t.elapsed().as_millis() as u64);
        self.buffer.push(Write::Event(
            json!({ "type": "node_finished", "node": node.name, "ms": ms }),
        ));
        self.slots[i] = NodeSlot::Done(value);
    }

    /// A `return` node: computed here, its row joins the next commit.
    fn run_pure(&mut self, i: usize) {
        let node = self.shared.plan.nodes[i].clone();
        let bound = match self.bind(&node) {
            Ok(b) => b,
            Err(e) => return self.fail_node(i, e),
        };
        if bound.skipped {
            return self.skip(i);
        }
        let Body::Return { value } = &node.body else {
            return;
        };
        let eval_one = |params: &BTreeMap<String, Value>| -> Result<Option<Value>, StoredError> {
            if !Self::when_holds(&node, params)? {
                return Ok(None);
            }
            eval::expr(params, value).map(Some).map_err(|m| {
                RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!("`return` of `{}`: {m}", node.name),
                )
                .stored(Some(&node.name))
            })
        };
        match bound.each {
            None => match eval_one(&bound.params) {
                Ok(Some(v)) => {
                    self.started_at.entry(i).or_insert_with(Instant::now);
                    self.finish_node(i, v, None);
                }
                Ok(None) => self.skip(i),
                Err(e) => self.fail_node(i, e),
            },
            Some((name, items)) => {
                let mut out = Vec::new();
                for item in &items {
                    let mut params = bound.params.clone();
                    params.insert(name.clone(), item.clone());
                    match eval_one(&params) {
                        Ok(Some(v)) => out.push(v),
                        Ok(None) => {}
                        Err(e) => return self.fail_node(i, e),
                    }
                }
                self.finish_node(i, Value::Array(out), Some(items.len() as u32));
            }
        }
    }

    /// A gate became ready: answered already, pre-answered, or now pending.
    fn gate_ready(&mut self, i: usize) -> Result<(), RuntimeError> {
        let node = self.shared.plan.nodes[i].clone();
        let bound = match self.bind(&node) {
            Ok(b) => b,
            Err(e) => {
                self.fail_node(i, e);
                return Ok(());
            }
        };
        if bound.skipped {
            self.skip(i);
            return Ok(());
        }
        match Self::when_holds(&node, &bound.params) {
            Ok(false) => {
                self.skip(i);
                return Ok(());
            }
            Err(e) => {
                self.fail_node(i, e);
                return Ok(());
            }
            Ok(true) => {}
        }
        if let Some(g) = self.state.gates.get(&node.name)
            && g.state == GateState::Answered
        {
            let answer = g.answer.clone().unwrap_or(Value::Null);
            self.finish_node(i, answer, None);
            return Ok(());
        }
        let Body::Gate {
            message,
            timeout_ms,
            ..
        } = &node.body
        else {
            return Ok(());
        };
        let now = ids::now_ms();
        let text = match message {
            Some(t) => crate::prompt::render_text(t, &bound.params).map_err(|e| {
                RuntimeError::new(
                    &codes::GATE_ANSWER_INVALID,
                    format!("the message of `{}` does not render: {e}", node.name),
                )
            })?,
            None => format!("Answer the gate `{}`.", node.name),
        };
        let schema = self.shared.validators.full_schema(&node.output, false);
        if let Some(answer) = self.thread.pre_answers.remove(&node.name) {
            let rec = GateRec {
                node: node.name.clone(),
                state: GateState::Answered,
                message: text,
                schema,
                pending_ms: now,
                deadline_ms: None,
                answer: Some(answer.clone()),
                answered_ms: now,
                answered_by: Some("pre-answer".into()),
            };
            self.buffer
                .push(Write::Gate(node.name.clone(), rec.clone()));
            self.buffer.push(Write::Event(
                json!({ "type": "gate_answered", "gate": node.name, "by": "pre-answer" }),
            ));
            self.buffer.push(Write::Thread(self.thread.clone()));
            self.state.gates.insert(node.name.clone(), rec);
            self.finish_node(i, answer, None);
            return Ok(());
        }
        let deadline = timeout_ms.map(|t| now + t);
        let rec = GateRec {
            node: node.name.clone(),
            state: GateState::Pending,
            message: text.clone(),
            schema,
            pending_ms: now,
            deadline_ms: deadline,
            answer: None,
            answered_ms: 0,
            answered_by: None,
        };
        self.buffer
            .push(Write::Gate(node.name.clone(), rec.clone()));
        self.buffer.push(Write::Event(json!({ "type": "gate_pending", "gate": node.name, "message": text, "deadline_ms": deadline })));
        self.state.gates.insert(node.name.clone(), rec);
        self.slots[i] = NodeSlot::Waiting;
        if let Some(p) = &self.shared.progress {
            p.step(Step::Waiting { gate: &node.name });
        }
        Ok(())
    }

    /// Binds a node that runs as a task and writes its start rows. `None` when it was
    /// skipped or failed right away.
    fn prepare_task(&mut self, i: usize) -> Option<(Vec<Unit>, Option<u32>)> {
        let node = Arc::new(self.shared.plan.nodes[i].clone());
        let bound = match self.bind(&node) {
            Ok(b) => b,
            Err(e) => {
                self.fail_node(i, e);
                return None;
            }
        };
        if bound.skipped {
            self.skip(i);
            return None;
        }
        let generation = self.generation(&node.name);
        let old = self.state.nodes.get(&node.name).cloned();
        let tries = old.as_ref().map_or(0, |o| o.tries);
        let mut marker = self.node_row(&node, NodeState::Running, None, None);
        marker.started_ms = ids::now_ms();
        marker.finished_ms = 0;
        marker.next_retry_ms = old.as_ref().and_then(|o| o.next_retry_ms);
        match bound.each {
            Some((name, items)) => {
                if let Some(max) = each_max(&node)
                    && items.len() as u64 > max
                {
                    self.fail_node(
                        i,
                        RuntimeError::new(
                            &codes::INPUT_INVALID,
                            format!(
                                "`{}` fans out over {} items, more than its `max` of {max}",
                                node.name,
                                items.len()
                            ),
                        )
                        .stored(Some(&node.name)),
                    );
                    return None;
                }
                marker.items = Some(items.len() as u32);
                let units = items
                    .into_iter()
                    .enumerate()
                    .map(|(k, item)| {
                        let mut params = bound.params.clone();
                        params.insert(name.clone(), item);
                        Unit {
                            node: node.clone(),
                            item: k as u32,
                            is_item: true,
                            params,
                            generation,
                            tries: 0,
                            seq: self.next_seq(&node.name, generation, k as u32),
                            started: None,
                            wait_until_ms: None,
                        }
                    })
                    .collect::<Vec<_>>();
                let n = units.len() as u32;
                self.buffer
                    .push(Write::Node(node.name.clone(), marker.clone()));
                self.state.nodes.insert(node.name.clone(), marker);
                self.buffer.push(Write::Event(
                    json!({ "type": "node_started", "node": node.name, "items": n }),
                ));
                Some((units, Some(n)))
            }
            None => {
                match Self::when_holds(&node, &bound.params) {
                    Ok(false) => {
                        self.skip(i);
                        return None;
                    }
                    Err(e) => {
                        self.fail_node(i, e);
                        return None;
                    }
                    Ok(true) => {}
                }
                let mut unit = Unit {
                    node: node.clone(),
                    item: 0,
                    is_item: false,
                    params: bound.params,
                    generation,
                    tries,
                    seq: self.next_seq(&node.name, generation, 0),
                    started: None,
                    wait_until_ms: old.as_ref().and_then(|o| o.next_retry_ms),
                };
                self.buffer
                    .push(Write::Node(node.name.clone(), marker.clone()));
                self.state.nodes.insert(node.name.clone(), marker);
                self.buffer.push(Write::Event(
                    json!({ "type": "node_started", "node": node.name }),
                ));
                if tasks::needs_started_row(&node) {
                    let (key, rec) = tasks::started_row(&self.shared, &unit, unit.seq);
                    // A retried effect must be the same call as the one it retries.
                    let mut retried = self.state.calls.iter().filter(|(k, c)| {
                        k.node == node.name
                            && k.generation == generation
                            && k.item == 0
                            && c.decision.as_deref() == Some("retry requested")
                    });
                    if let Some((old_key, old)) = retried.next_back()
                        && old.args_hash != rec.args_hash
                    {
                        let error = RuntimeError::new(&codes::JOURNAL_DIVERGENCE, format!(
                                "the retry of {} would send different arguments ({} ≠ {}) than the call it retries",
                                old_key.display(), rec.args_hash, old.args_hash
                            ))
                            .help("its inputs changed; check them with `pipec show --internal`, then run it from scratch with `--rerun-from`")
                            .stored(Some(&node.name));
                        self.slots[i] = NodeSlot::Failed;
                        self.unknown.push(error);
                        return None;
                    }
                    self.buffer.push(Write::Event(json!({ "type": "call_started", "node": node.name, "call": key.display(), "args_hash": rec.args_hash })));
                    self.buffer.push(Write::Call(key.clone(), rec));
                    unit.started = Some(key);
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
                self.finish_node(i, value, td.items);
                let node = &self.shared.plan.nodes[i];
                if let Some(Write::Event(e)) = self.buffer.last_mut()
                    && let Value::Object(m) = e
                {
                    m.insert("ms".into(), Value::from(td.took.as_millis() as u64));
                }
                let _ = node;
            }
            UnitEnd::Failed { error, writes } => {
                self.buffer.extend(writes);
                self.fail_node(i, error);
            }
            UnitEnd::Unknown { error, writes } => {
                self.buffer.extend(writes);
                let node = self.shared.plan.nodes[i].clone();
                self.slots[i] = NodeSlot::Failed;
                self.buffer.push(Write::Event(
                    json!({ "type": "call_unknown", "node": node.name, "message": error.message }),
                ));
                self.unknown.push(error);
            }
        }
    }

    /// Nothing runs and nothing can start: complete, pause, or end.
    async fn quiesce(&mut self) -> Result<Outcome, RuntimeError> {
        self.flush().await?;
        if self.failure.is_some() || !self.unknown.is_empty() {
            return self.end_badly().await;
        }
        let waiting: Vec<usize> = (0..self.slots.len())
            .filter(|i| self.slots[*i] == NodeSlot::Waiting)
            .collect();
        if waiting.is_empty() {
            if self
                .slots
                .iter()
                .all(|s| matches!(s, NodeSlot::Done(_) | NodeSlot::Skipped))
            {
                return self.complete().await;
            }
            // Some node can never run (a dependency failed earlier): fail.
            let stuck: Vec<String> = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| **s == NodeSlot::Pending)
                .map(|(i, _)| self.shared.plan.nodes[i].name.clone())
                .collect();
            self.failure = Some(
                RuntimeError::new(
                    &codes::EXEC_FAILED,
                    format!("these nodes cannot run: {}", stuck.join(", ")),
                )
                .stored(None),
            );
            return self.end_badly().await;
        }
        // Answers may have arrived while this attempt ran (`pipec answer`).
        let fresh = self.shared.store.load(&self.shared.thread_id).await?;
        let mut answered = false;
        for i in waiting {
            let name = self.shared.plan.nodes[i].name.clone();
            if let Some(g) = fresh
                .gates
                .get(&name)
                .filter(|g| g.state == GateState::Answered)
            {
                self.state.gates.insert(name.clone(), g.clone());
                self.finish_node(i, g.answer.clone().unwrap_or(Value::Null), None);
                answered = true;
            }
        }
        if answered {
            return Box::pin(self.drive()).await;
        }
        self.pause().await
    }

    async fn pause(&mut self) -> Result<Outcome, RuntimeError> {
        let gates: Vec<PendingGate> = self
            .state
            .gates
            .iter()
            .filter(|(_, g)| g.state == GateState::Pending)
            .map(|(name, g)| PendingGate {
                name: name.clone(),
                message: g.message.clone(),
                schema: g.schema.clone(),
                deadline_ms: g.deadline_ms,
            })
            .collect();
        self.thread.status = Status::Paused;
        self.thread.holder = None;
        self.thread.due_ms = gates.iter().filter_map(|g| g.deadline_ms).min();
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.buffer.push(Write::Event(
            json!({ "type": "thread_paused", "gates": names }),
        ));
        self.end_attempt("paused");
        self.flush().await?;
        Ok(Outcome::Paused {
            thread: self.shared.thread_id.clone(),
            gates,
        })
    }

    async fn complete(&mut self) -> Result<Outcome, RuntimeError> {
        let plan = self.plan();
        let mut outputs =
            eval::outputs(self, &plan).map_err(|m| RuntimeError::new(&codes::INPUT_INVALID, m))?;
        self.shared.scrubber.scrub_value(&mut outputs);
        self.thread.status = Status::Completed;
        self.thread.holder = None;
        // Computed from the node rows whenever they are asked for; not stored again.
        self.thread.outputs = None;
        self.thread.due_ms = None;
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.buffer.push(Write::Event(
            json!({ "type": "thread_completed", "outputs": outputs }),
        ));
        self.end_attempt("completed");
        self.flush().await?;
        Ok(Outcome::Completed {
            thread: self.shared.thread_id.clone(),
            outputs,
        })
    }

    async fn end_badly(&mut self) -> Result<Outcome, RuntimeError> {
        self.thread.holder = None;
        if !self.unknown.is_empty() {
            self.thread.status = Status::Blocked;
            self.thread.error = self.unknown.first().cloned();
            self.buffer.push(Write::Thread(self.thread.clone()));
            self.buffer
                .push(Write::Event(json!({ "type": "thread_blocked" })));
            self.end_attempt("blocked");
            self.flush().await?;
            let reasons = std::mem::take(&mut self.unknown);
            return Ok(Outcome::Blocked {
                thread: self.shared.thread_id.clone(),
                reasons,
            });
        }
        let error = self.failure.clone().unwrap_or_else(|| {
            RuntimeError::new(&codes::EXEC_FAILED, "the run failed").stored(None)
        });
        self.thread.status = Status::Failed;
        self.thread.error = Some(error.clone());
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.buffer.push(Write::Event(json!({ "type": "thread_failed", "code": error.code, "message": error.message, "node": error.node })));
        self.end_attempt("failed");
        self.flush().await?;
        Ok(Outcome::Failed {
            thread: self.shared.thread_id.clone(),
            error,
        })
    }

    fn end_attempt(&mut self, how: &str) {
        if let Some(mut a) = self
            .state
            .attempts
            .iter()
            .find(|a| a.number == self.shared.attempt_no)
            .cloned()
        {
            a.ended_ms = ids::now_ms();
            a.end = Some(how.to_string());
            self.buffer.push(Write::Attempt(a));
        }
    }
}

fn is_pure(node: &Node) -> bool {
    matches!(node.body, Body::Return { .. })
        && !node.params.iter().any(|p| eval::is_resource(&p.source))
}

fn each_max(node: &Node) -> Option<u64> {
    let name = node.each.as_deref()?;
    node.params
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| match &p.source {
            crate::plan::Source::Each { max, .. } => *max,
            _ => None,
        })
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

/// An item's index and how it ended (the error, and whether its outcome is unknown).
type ItemOutcome = (u32, Result<ItemRec, (StoredError, bool)>);

async fn run_single(shared: Arc<Shared>, mut work: Vec<Unit>) -> UnitEnd {
    match work.pop() {
        Some(unit) => tasks::run_unit(shared, unit).await,
        None => UnitEnd::Failed {
            error: RuntimeError::new(&codes::EXEC_FAILED, "nothing to run").stored(None),
            writes: Vec::new(),
        },
    }
}

/// An `each` node: items run concurrently (within the node's `concurrency`), each
/// committed as it finishes; items already stored are not run again.
async fn run_each(
    shared: Arc<Shared>,
    node: Arc<Node>,
    units: Vec<Unit>,
    done: BTreeMap<u32, ItemRec>,
) -> UnitEnd {
    let limit = node.concurrency.map_or(usize::MAX, |c| c.max(1) as usize);
    let local = Arc::new(Semaphore::new(limit.min(4096)));
    let total = units.len();
    let node_generation = units.first().map_or(0, |u| u.generation);
    let mut results: BTreeMap<u32, ItemRec> = done;
    let mut set: JoinSet<ItemOutcome> = JoinSet::new();
    for unit in units {
        if results
            .get(&unit.item)
            .is_some_and(|r| r.state != ItemState::Failed)
        {
            continue;
        }
        match Attempt::when_holds(&node, &unit.params) {
            Ok(false) => {
                let rec = ItemRec {
                    state: ItemState::Skipped,
                    value: None,
                    error: None,
                };
                let _ = shared
                    .commit(vec![Write::Item(
                        node.name.clone(),
                        unit.generation,
                        unit.item,
                        rec.clone(),
                    )])
                    .await;
                results.insert(unit.item, rec);
                continue;
            }
            Err(e) => {
                return UnitEnd::Failed {
                    error: e,
                    writes: Vec::new(),
                };
            }
            Ok(true) => {}
        }
        let shared = shared.clone();
        let local = local.clone();
        let node = node.clone();
        set.spawn(async move {
            let _p = local.acquire_owned().await;
            let item = unit.item;
            let generation = unit.generation;
            let mut unit = unit;
            if tasks::needs_started_row(&node) {
                let (key, rec) = tasks::started_row(&shared, &unit, unit.seq);
                if let Err(e) = shared.commit(vec![Write::Call(key.clone(), rec)]).await {
                    return (item, Err((e.stored(Some(&node.name)), false)));
                }
                unit.started = Some(key);
            }
            let end = tasks::run_unit(shared.clone(), unit).await;
            let (rec, mut writes, outcome) = match end {
                UnitEnd::Value { value, writes } => (
                    ItemRec {
                        state: ItemState::Done,
                        value: Some(value),
                        error: None,
                    },
                    writes,
                    Ok(()),
                ),
                UnitEnd::Failed { error, writes } => (
                    ItemRec {
                        state: ItemState::Failed,
                        value: None,
                        error: Some(error.clone()),
                    },
                    writes,
                    Err((error, false)),
                ),
                UnitEnd::Unknown { error, writes } => (
                    ItemRec {
                        state: ItemState::Failed,
                        value: None,
                        error: Some(error.clone()),
                    },
                    writes,
                    Err((error, true)),
                ),
            };
            writes.push(Write::Item(
                node.name.clone(),
                generation,
                item,
                rec.clone(),
            ));
            if let Err(e) = shared.commit(writes).await {
                return (item, Err((e.stored(Some(&node.name)), false)));
            }
            match outcome {
                Ok(()) => (item, Ok(rec)),
                Err(e) => (item, Err(e)),
            }
        });
    }
    let mut failure: Option<(StoredError, bool)> = None;
    while let Some(r) = set.join_next().await {
        match r {
            Ok((item, Ok(rec))) => {
                results.insert(item, rec);
            }
            Ok((item, Err((error, unknown)))) => {
                if node.drop_failed_items && !unknown {
                    let rec = ItemRec {
                        state: ItemState::Dropped,
                        value: None,
                        error: Some(error),
                    };
                    let _ = shared
                        .commit(vec![Write::Item(
                            node.name.clone(),
                            node_generation,
                            item,
                            rec.clone(),
                        )])
                        .await;
                    results.insert(item, rec);
                } else if failure.is_none() {
                    failure = Some((error, unknown));
                    // Stop starting items; the ones running finish and are recorded.
                }
            }
            Err(e) => {
                failure.get_or_insert((
                    RuntimeError::new(
                        &codes::EXEC_FAILED,
                        format!("an item stopped unexpectedly: {e}"),
                    )
                    .stored(Some(&node.name)),
                    false,
                ));
            }
        }
    }
    if let Some((error, unknown)) = failure {
        return if unknown {
            UnitEnd::Unknown {
                error,
                writes: Vec::new(),
            }
        } else {
            UnitEnd::Failed {
                error,
                writes: Vec::new(),
            }
        };
    }
    let values: Vec<Value> = (0..total as u32)
        .filter_map(|i| results.get(&i))
        .filter(|r| r.state == ItemState::Done)
        .filter_map(|r| r.value.clone())
        .collect();
    UnitEnd::Value {
        value: Value::Array(values),
        writes: Vec::new(),
    }
}
