//! Bringing the stored rows in line with a new attempt, before anything runs: renamed
//! nodes keep their rows, kept nodes take their new fingerprint, rerun nodes start a new
//! generation, nodes that were running when the last process died count a crash,
//! decisions on unfinished calls are recorded, answers given ahead are kept, and gates
//! whose deadline passed take their `on_timeout` answer or fail. Everything here was
//! validated before the claim (`preflight.rs`), so nothing here refuses.

use std::collections::BTreeSet;

use serde_json::Value;

use super::commit::event_write;
use super::{Attempt, Start};
use crate::error::RuntimeError;
use crate::options::{Decision, RunOptions};
use crate::plan_change::dependents;
use pipec_diagnostic as codes;
use pipec_plan::Body;
use pipec_store::{
    CallState, Event, GateRec, GateState, ItemRec, ItemState, NodeRec, NodeState, Write, ids,
};

/// How many times a node may be running when its process dies before it fails.
const CRASH_LIMIT: u32 = 3;

impl Attempt {
    /// Rewrites the loaded rows for this attempt; the writes go into the buffer. Returns
    /// the nodes this recovery failed (crash loops, gates past their deadline).
    pub(super) fn recover(&mut self, opts: &RunOptions) -> Vec<String> {
        let plan = self.shared.plan.clone();
        self.rename(opts);
        if let Start::Resume { plan_changes } = &self.start {
            let plan_changes = plan_changes.clone();
            self.keep(&plan_changes, opts);
            self.rerun(opts);
            if self.thread.plan_hash != plan.hash {
                self.buffer.push(event_write(Event::PlanUpgraded {
                    from: self.thread.plan_hash.clone(),
                    to: plan.hash.clone(),
                }));
                self.thread.plan_hash = plan.hash.clone();
            }
        }
        let mut fresh_failures = self.count_crashes();
        let decided = self.decide(opts);
        for (gate, answer) in &opts.pre_answers {
            self.thread.pre_answers.insert(gate.clone(), answer.clone());
        }
        fresh_failures.extend(self.apply_deadlines());
        // Nodes that failed in an earlier attempt run again, with fresh tries (a node a
        // decision retries keeps the tries it has used).
        for (name, rec) in self.state.nodes.iter_mut() {
            if rec.state == NodeState::Failed
                && !fresh_failures.contains(name)
                && !decided.contains(name)
            {
                rec.tries = 0;
                rec.crash_count = 0;
            }
        }
        fresh_failures
    }

    /// Renamed nodes keep everything stored under their name: row, items, journal and
    /// gate row move to the new name, in the store and in the loaded rows. The renames
    /// apply all at once, through names no node can have (they hold a NUL): a chain
    /// (`a=b`, `b=c`) or a swap moves each node's rows to its own new name, never over
    /// another node's.
    fn rename(&mut self, opts: &RunOptions) {
        let staging = |i: usize| format!("\0renamed {i}");
        for (i, (old, _)) in opts.renames.iter().enumerate() {
            self.buffer.push(Write::Rename {
                from: old.clone(),
                to: staging(i),
            });
        }
        for (i, (_, new)) in opts.renames.iter().enumerate() {
            self.buffer.push(Write::Rename {
                from: staging(i),
                to: new.clone(),
            });
        }
        let mut staged = Vec::new();
        for (old, new) in &opts.renames {
            let node = self.state.nodes.remove(old);
            let gate = self.state.gates.remove(old);
            let item_keys: Vec<_> = self
                .state
                .items
                .keys()
                .filter(|(n, _, _)| n == old)
                .cloned()
                .collect();
            let items: Vec<_> = item_keys
                .into_iter()
                .filter_map(|k| self.state.items.remove(&k).map(|r| ((k.1, k.2), r)))
                .collect();
            let call_keys: Vec<_> = self
                .state
                .calls
                .keys()
                .filter(|k| &k.node == old)
                .cloned()
                .collect();
            let calls: Vec<_> = call_keys
                .into_iter()
                .filter_map(|k| self.state.calls.remove(&k).map(|r| (k, r)))
                .collect();
            staged.push((new.clone(), node, gate, items, calls));
        }
        for (new, node, gate, items, calls) in staged {
            if let Some(rec) = node {
                self.state.nodes.insert(new.clone(), rec);
            }
            if let Some(g) = gate {
                let g = GateRec {
                    node: new.clone(),
                    ..g
                };
                self.state.gates.insert(new.clone(), g);
            }
            for ((generation, item), r) in items {
                self.state.items.insert((new.clone(), generation, item), r);
            }
            for (key, r) in calls {
                let moved = pipec_store::CallKey {
                    node: new.clone(),
                    ..key
                };
                self.state.calls.insert(moved, r);
            }
        }
    }

    /// Kept nodes (and renamed ones: a rename says the node is the same one): the old
    /// result stands under the new definition.
    fn keep(&mut self, plan_changes: &[String], opts: &RunOptions) {
        let plan = self.shared.plan.clone();
        for name in plan_changes
            .iter()
            .filter(|n| opts.keep.contains(n) || opts.renamed_from(n).is_some())
        {
            if let (Some(rec), Some(node)) = (self.state.nodes.get_mut(name), plan.node(name)) {
                rec.fingerprint = node.fingerprint.clone();
                self.buffer.push(Write::Node(name.clone(), rec.clone()));
            }
        }
    }

    /// `--rerun-from`: those nodes and everything downstream run again as a new
    /// generation; their gates ask again.
    fn rerun(&mut self, opts: &RunOptions) {
        let rerun = dependents(&self.shared.plan, &opts.rerun_from);
        for name in &rerun {
            if let Some(rec) = self.state.nodes.remove(name) {
                let generation = rec.generation + 1;
                // Running with no attempt behind it (no start time): it runs again from
                // scratch, and it is no crash.
                let reset = NodeRec {
                    generation,
                    state: NodeState::Running,
                    value: None,
                    error: None,
                    tries: 0,
                    crash_count: 0,
                    next_retry_ms: None,
                    started_ms: 0,
                    items: None,
                    ..rec
                };
                self.buffer.push(Write::Node(name.clone(), reset.clone()));
                self.buffer.push(event_write(Event::NodeRerun {
                    node: name.clone(),
                    generation,
                }));
                self.state.nodes.insert(name.clone(), reset);
            }
            if self.state.gates.remove(name).is_some() {
                // Asked again: the gate writes a new row when it is reached, with its
                // message and a deadline of then.
                self.buffer.push(Write::RemoveGate(name.clone()));
            }
        }
    }

    /// Nodes that were running when the previous attempt died count a crash; after
    /// [`CRASH_LIMIT`] the node fails instead of taking the machine down in a loop.
    fn count_crashes(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for (name, rec) in self.state.nodes.iter_mut() {
            if rec.state != NodeState::Running || rec.started_ms == 0 {
                continue;
            }
            rec.crash_count += 1;
            if rec.crash_count >= CRASH_LIMIT {
                failed.push(name.clone());
                rec.state = NodeState::Failed;
                let error = RuntimeError::new(
                    &codes::NODE_CRASH_LOOP,
                    format!(
                        "`{name}` was running when the process died {} times",
                        rec.crash_count
                    ),
                )
                .help("look at its inputs and stderr; fix the cause, then resume")
                .stored(Some(name));
                self.buffer.push(event_write(Event::NodeFailed {
                    node: name.clone(),
                    code: error.code.clone(),
                    message: error.message.clone(),
                }));
                rec.error = Some(error);
            }
            self.buffer.push(Write::Node(name.clone(), rec.clone()));
        }
        failed
    }

    /// Decisions on unfinished calls: a retry is the call's next try, a performed call's
    /// given result becomes the node's (or item's) value. Returns the nodes decided on.
    fn decide(&mut self, opts: &RunOptions) -> BTreeSet<String> {
        let plan = self.shared.plan.clone();
        let mut decided = BTreeSet::new();
        for (key, call) in self.state.calls.clone() {
            if !matches!(call.state, CallState::Started | CallState::Unknown) || call.idempotent {
                continue;
            }
            let shown = key.display();
            // Decisions name a call by its stored key or by the one a rename gave it.
            let stored_key = pipec_store::CallKey {
                node: opts
                    .renamed_from(&key.node)
                    .unwrap_or(&key.node)
                    .to_string(),
                ..key.clone()
            };
            let Some(decision) = opts.decision_for(&stored_key) else {
                continue;
            };
            decided.insert(key.node.clone());
            let mut resolved = call.clone();
            resolved.state = CallState::Resolved;
            resolved.finished_ms = ids::now_ms();
            // A tool call of an `act` loop: the decision is the call's, and the loop
            // goes on from it (calls it again, or takes the given result).
            let in_loop = key.call > 0
                && plan
                    .node(&key.node)
                    .is_some_and(|n| matches!(n.body, Body::Model { .. }));
            if in_loop {
                match decision {
                    Decision::Retry => resolved.decision = Some("retry requested".into()),
                    Decision::Performed(value) => {
                        resolved.decision = Some("resolved as performed".into());
                        resolved.result = Some(serde_json::json!({ "performed": value }));
                    }
                }
                self.buffer.push(event_write(Event::CallResolved {
                    call: shown,
                    decision: resolved.decision.clone(),
                }));
                self.buffer.push(Write::Call(key.clone(), resolved.clone()));
                self.state.calls.insert(key, resolved);
                continue;
            }
            match decision {
                Decision::Retry => {
                    resolved.decision = Some("retry requested".into());
                    match self.state.nodes.get_mut(&key.node) {
                        Some(rec) => {
                            rec.tries = rec.tries.max(key.seq + 1);
                            self.buffer.push(Write::Node(key.node.clone(), rec.clone()));
                        }
                        None => {
                            if let Some(node) = plan.node(&key.node) {
                                let rec = NodeRec {
                                    generation: key.generation,
                                    fingerprint: node.fingerprint.clone(),
                                    state: NodeState::Running,
                                    value: None,
                                    error: None,
                                    tries: key.seq + 1,
                                    crash_count: 0,
                                    next_retry_ms: None,
                                    started_ms: 0,
                                    finished_ms: 0,
                                    items: None,
                                    manifest: Vec::new(),
                                };
                                self.buffer.push(Write::Node(key.node.clone(), rec.clone()));
                                self.state.nodes.insert(key.node.clone(), rec);
                            }
                        }
                    }
                }
                Decision::Performed(value) => {
                    let Some(node) = plan.node(&key.node) else {
                        continue;
                    };
                    // The value goes into the node's (or item's) row, not the journal too.
                    resolved.decision = Some("resolved as performed".into());
                    if node.each.is_none() {
                        let rec = NodeRec {
                            generation: key.generation,
                            fingerprint: node.fingerprint.clone(),
                            state: NodeState::Done,
                            value: Some(value.clone()),
                            error: None,
                            tries: 0,
                            crash_count: 0,
                            next_retry_ms: None,
                            started_ms: 0,
                            finished_ms: ids::now_ms(),
                            items: None,
                            manifest: Vec::new(),
                        };
                        self.buffer.push(Write::Node(key.node.clone(), rec.clone()));
                        self.state.nodes.insert(key.node.clone(), rec);
                    } else {
                        let item = ItemRec {
                            state: ItemState::Done,
                            value: Some(value.clone()),
                            error: None,
                            manifest: Vec::new(),
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
            self.buffer.push(event_write(Event::CallResolved {
                call: shown,
                decision: resolved.decision.clone(),
            }));
            self.buffer.push(Write::Call(key.clone(), resolved.clone()));
            self.state.calls.insert(key, resolved);
        }
        decided
    }

    /// Gates whose (absolute) deadline passed take their `on_timeout` answer, or fail.
    fn apply_deadlines(&mut self) -> Vec<String> {
        let plan = self.shared.plan.clone();
        let now = ids::now_ms();
        let mut failed = Vec::new();
        let due: BTreeSet<String> = self
            .state
            .gates
            .iter()
            .filter(|(_, g)| {
                g.state == GateState::Pending && g.deadline_ms.is_some_and(|d| d <= now)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            let Some(g) = self.state.gates.get(&name).cloned() else {
                continue;
            };
            let on_timeout: Option<Value> = match plan.node(&name).map(|n| &n.body) {
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
                    self.buffer.push(event_write(Event::GateTimedOut {
                        gate: name.clone(),
                        applied: Some("on_timeout".into()),
                    }));
                    self.state.gates.insert(name, rec);
                }
                None => {
                    let error = RuntimeError::new(
                        &codes::GATE_TIMED_OUT,
                        format!(
                            "the gate `{name}` was not answered before its deadline, and has no `on_timeout`"
                        ),
                    )
                    .stored(Some(&name));
                    if let Some(node) = plan.node(&name) {
                        let old = self.state.nodes.get(&name);
                        let rec = NodeRec {
                            generation: old.map_or(0, |o| o.generation),
                            fingerprint: node.fingerprint.clone(),
                            state: NodeState::Failed,
                            value: None,
                            error: Some(error.clone()),
                            tries: 0,
                            crash_count: 0,
                            next_retry_ms: None,
                            started_ms: old.map_or(0, |o| o.started_ms),
                            finished_ms: now,
                            items: None,
                            manifest: Vec::new(),
                        };
                        self.buffer.push(Write::Node(name.clone(), rec.clone()));
                        self.state.nodes.insert(name.clone(), rec);
                    }
                    self.buffer.push(event_write(Event::GateTimedOut {
                        gate: name.clone(),
                        applied: None,
                    }));
                    self.buffer.push(event_write(Event::NodeFailed {
                        node: name.clone(),
                        code: error.code.clone(),
                        message: error.message.clone(),
                    }));
                    failed.push(name);
                }
            }
        }
        failed
    }
}
