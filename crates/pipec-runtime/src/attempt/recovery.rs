//! Bringing the stored rows in line with a new attempt, before anything runs: renamed
//! nodes keep their rows, kept nodes take their new fingerprint, rerun nodes start a new
//! generation, nodes that were running when the last process died count a crash,
//! decisions on unfinished calls are recorded, answers given ahead are kept, and gates
//! whose deadline passed take their `on_timeout` answer or fail. Everything here was
//! validated before the claim (`preflight.rs`), so nothing here refuses.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Attempt, Start};
use crate::error::RuntimeError;
use crate::options::{Decision, RunOptions};
use crate::plan_change::dependents;
use pipec_diagnostic as codes;
use pipec_plan::{Body, Plan};
use pipec_store::{
    CallDecision, CallState, Event, GateRec, GateState, ItemRec, ItemState, NodeRec, NodeState,
    ThreadState, Write, ids,
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
                self.buffer.push(Write::Event(Event::PlanUpgraded {
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
                self.buffer.push(Write::Event(Event::NodeRerun {
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
            // The pending gates of its calls (approvals, a server's questions) belong
            // to the generation that goes: the new one asks its own.
            let calls: Vec<String> = self
                .state
                .gates
                .iter()
                .filter(|(gate, g)| {
                    *gate != name && g.node == *name && g.state == GateState::Pending
                })
                .map(|(gate, _)| gate.clone())
                .collect();
            for gate in calls {
                self.state.gates.remove(&gate);
                self.buffer.push(Write::RemoveGate(gate));
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
                self.buffer.push(Write::Event(Event::NodeFailed {
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

    /// Decisions on unfinished calls ([`decide`]).
    fn decide(&mut self, opts: &RunOptions) -> BTreeSet<String> {
        decide(&self.shared.plan, &mut self.state, opts, &mut self.buffer)
    }

    /// Gates whose (absolute) deadline passed take their `on_timeout` answer, or fail.
    fn apply_deadlines(&mut self) -> Vec<String> {
        let plan = self.shared.plan.clone();
        let now = ids::now_ms().saturating_add(self.shared.clock_ahead_ms);
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
                    self.buffer.push(Write::Event(Event::GateTimedOut {
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
                    self.buffer.push(Write::Event(Event::GateTimedOut {
                        gate: name.clone(),
                        applied: None,
                    }));
                    self.buffer.push(Write::Event(Event::NodeFailed {
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

/// Decisions on unfinished calls: a retry is the call's next try, a performed call's
/// given result becomes the node's (or item's) value. Returns the nodes decided on; the
/// rows it changes are changed in `state` and written to `buffer`.
fn decide(
    plan: &Plan,
    state: &mut ThreadState,
    opts: &RunOptions,
    buffer: &mut Vec<Write>,
) -> BTreeSet<String> {
    let mut decided = BTreeSet::new();
    for (key, call) in state.calls.clone() {
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
                Decision::Retry => resolved.decision = Some(CallDecision::RetryRequested),
                Decision::Performed(value) => {
                    resolved.decision = Some(CallDecision::ResolvedAsPerformed);
                    resolved.result = Some(serde_json::json!({ "performed": value }));
                }
            }
            buffer.push(Write::Event(Event::CallResolved {
                call: shown,
                decision: resolved.decision,
            }));
            buffer.push(Write::Call(key.clone(), resolved.clone()));
            state.calls.insert(key, resolved);
            continue;
        }
        match decision {
            Decision::Retry => {
                resolved.decision = Some(CallDecision::RetryRequested);
                match state.nodes.get_mut(&key.node) {
                    Some(rec) => {
                        rec.tries = rec.tries.max(key.seq + 1);
                        buffer.push(Write::Node(key.node.clone(), rec.clone()));
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
                            buffer.push(Write::Node(key.node.clone(), rec.clone()));
                            state.nodes.insert(key.node.clone(), rec);
                        }
                    }
                }
            }
            Decision::Performed(value) => {
                let Some(node) = plan.node(&key.node) else {
                    continue;
                };
                // The value goes into the node's (or item's) row, not the journal too.
                resolved.decision = Some(CallDecision::ResolvedAsPerformed);
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
                    buffer.push(Write::Node(key.node.clone(), rec.clone()));
                    state.nodes.insert(key.node.clone(), rec);
                } else {
                    let item = ItemRec {
                        state: ItemState::Done,
                        value: Some(value.clone()),
                        error: None,
                        manifest: Vec::new(),
                    };
                    buffer.push(Write::Item(
                        key.node.clone(),
                        key.generation,
                        key.item,
                        item.clone(),
                    ));
                    state
                        .items
                        .insert((key.node.clone(), key.generation, key.item), item);
                }
            }
        }
        buffer.push(Write::Event(Event::CallResolved {
            call: shown,
            decision: resolved.decision,
        }));
        buffer.push(Write::Call(key.clone(), resolved.clone()));
        state.calls.insert(key, resolved);
    }
    decided
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_store::{CallKey, CallKind, CallRec};
    use serde_json::json;

    /// Three kinds of node a decision applies to differently: a plain one, one over
    /// items, and a model node (whose calls past 0 are a loop's tool calls).
    fn plan() -> Plan {
        pipec_check::compile_str(
            "d.pipe",
            "model m {\n  provider = \"openai\"\n  name = \"x\"\n}\n\ninput xs: int[]\n\n\
             node plain(x: int[] = input.xs) -> int {\n  exec = [\"true\"]\n}\n\n\
             node items(x: int = each(input.xs)) -> int {\n  exec = [\"true\"]\n}\n\n\
             think chat(x: int[] = input.xs) -> string {\n  model = m\n  prompt = \"hi\"\n}\n\n\
             output a = plain\noutput b = items\noutput c = chat\n",
        )
        .expect("the plan compiles")
    }

    fn key(node: &str, seq: u32, call: u32) -> CallKey {
        CallKey {
            node: node.into(),
            generation: 0,
            item: 1,
            seq,
            call,
        }
    }

    fn call(state: CallState, idempotent: bool) -> CallRec {
        CallRec {
            kind: CallKind::Exec,
            target: "true".into(),
            args: None,
            args_hash: "h".into(),
            idempotent,
            idem_key: "k".into(),
            state,
            result: None,
            error: None,
            attempt: 1,
            started_ms: 1,
            finished_ms: 0,
            decision: None,
            watched_by: None,
            task: None,
        }
    }

    fn node_row(tries: u32) -> NodeRec {
        NodeRec {
            generation: 0,
            fingerprint: "f".into(),
            state: NodeState::Running,
            value: None,
            error: None,
            tries,
            crash_count: 0,
            next_retry_ms: None,
            started_ms: 1,
            finished_ms: 0,
            items: None,
            manifest: Vec::new(),
        }
    }

    /// The writes, in words.
    fn written(buffer: &[Write]) -> Vec<String> {
        buffer
            .iter()
            .map(|w| match w {
                Write::Call(k, c) => format!(
                    "call {} {} {} {}",
                    k.display(),
                    c.state.as_str(),
                    c.decision.map_or("-", CallDecision::as_str),
                    c.result.as_ref().map_or("-".into(), Value::to_string),
                ),
                Write::Node(n, r) => format!(
                    "node {n} {:?} tries {} {}",
                    r.state,
                    r.tries,
                    r.value.as_ref().map_or("-".into(), Value::to_string)
                ),
                Write::Item(n, g, i, r) => format!(
                    "item {n} g{g} i{i} {:?} {}",
                    r.state,
                    r.value.as_ref().map_or("-".into(), Value::to_string)
                ),
                Write::Event(e) => format!("event {}", e.kind()),
                _ => "something else".into(),
            })
            .collect()
    }

    #[test]
    fn every_decision_on_an_unfinished_call_is_recorded_where_it_belongs() {
        let plan = plan();
        let retry = || Decision::Retry;
        let performed = || Decision::Performed(json!(5));
        struct Case {
            what: &'static str,
            key: CallKey,
            call: CallRec,
            /// The node's row before recovery, with the tries it used.
            row: Option<u32>,
            renames: Vec<(String, String)>,
            decision: Option<(&'static str, Decision)>,
            decided: bool,
            written: &'static [&'static str],
        }
        let cases = [
            Case {
                what: "a finished call is not unfinished",
                key: key("plain", 0, 0),
                call: call(CallState::Ok, false),
                row: None,
                renames: vec![],
                decision: Some(("all", retry())),
                decided: false,
                written: &[],
            },
            Case {
                what: "an idempotent call needs no decision",
                key: key("plain", 0, 0),
                call: call(CallState::Started, true),
                row: None,
                renames: vec![],
                decision: Some(("all", retry())),
                decided: false,
                written: &[],
            },
            Case {
                what: "an unfinished call no one decided waits",
                key: key("plain", 0, 0),
                call: call(CallState::Unknown, false),
                row: None,
                renames: vec![],
                decision: Some(("plain:g0:i1:s9:c0", retry())),
                decided: false,
                written: &[],
            },
            Case {
                what: "a retry of a loop's tool call is the call's",
                key: key("chat", 2, 1),
                call: call(CallState::Started, false),
                row: Some(1),
                renames: vec![],
                decision: Some(("chat:g0:i1:s2:c1", retry())),
                decided: true,
                written: &[
                    "event call_resolved",
                    "call chat:g0:i1:s2:c1 resolved retry requested -",
                ],
            },
            Case {
                what: "a loop's tool call that happened keeps its result in its row",
                key: key("chat", 2, 1),
                call: call(CallState::Unknown, false),
                row: Some(1),
                renames: vec![],
                decision: Some(("all", performed())),
                decided: true,
                written: &[
                    "event call_resolved",
                    "call chat:g0:i1:s2:c1 resolved resolved as performed {\"performed\":5}",
                ],
            },
            Case {
                what: "a retry is the node's next try (its row keeps the tries used)",
                key: key("plain", 3, 0),
                call: call(CallState::Started, false),
                row: Some(1),
                renames: vec![],
                decision: Some(("plain:g0:i1:s3:c0", retry())),
                decided: true,
                written: &[
                    "node plain Running tries 4 -",
                    "event call_resolved",
                    "call plain:g0:i1:s3:c0 resolved retry requested -",
                ],
            },
            Case {
                what: "a retry with no node row writes one",
                key: key("plain", 3, 0),
                call: call(CallState::Started, false),
                row: None,
                renames: vec![],
                decision: Some(("all", retry())),
                decided: true,
                written: &[
                    "node plain Running tries 4 -",
                    "event call_resolved",
                    "call plain:g0:i1:s3:c0 resolved retry requested -",
                ],
            },
            Case {
                what: "a retry of a node the plan no longer has resolves the call alone",
                key: key("gone", 0, 0),
                call: call(CallState::Started, false),
                row: None,
                renames: vec![],
                decision: Some(("all", retry())),
                decided: true,
                written: &[
                    "event call_resolved",
                    "call gone:g0:i1:s0:c0 resolved retry requested -",
                ],
            },
            Case {
                what: "a performed call of a node the plan no longer has is left alone",
                key: key("gone", 0, 0),
                call: call(CallState::Started, false),
                row: None,
                renames: vec![],
                decision: Some(("all", performed())),
                decided: true,
                written: &[],
            },
            Case {
                what: "a performed call's result is its node's value",
                key: key("plain", 0, 0),
                call: call(CallState::Unknown, false),
                row: Some(1),
                renames: vec![],
                decision: Some(("plain:g0:i1:s0:c0", performed())),
                decided: true,
                written: &[
                    "node plain Done tries 0 5",
                    "event call_resolved",
                    "call plain:g0:i1:s0:c0 resolved resolved as performed -",
                ],
            },
            Case {
                what: "a performed call of an item is the item's value",
                key: key("items", 0, 0),
                call: call(CallState::Started, false),
                row: None,
                renames: vec![],
                decision: Some(("items:g0:i1:s0:c0", performed())),
                decided: true,
                written: &[
                    "item items g0 i1 Done 5",
                    "event call_resolved",
                    "call items:g0:i1:s0:c0 resolved resolved as performed -",
                ],
            },
            Case {
                what: "a call stored under a node's old name is decided by either name",
                key: key("plain", 0, 0),
                call: call(CallState::Started, false),
                row: Some(0),
                renames: vec![("plain".into(), "renamed".into())],
                decision: Some(("renamed:g0:i1:s0:c0", retry())),
                decided: true,
                written: &[
                    "node plain Running tries 1 -",
                    "event call_resolved",
                    "call plain:g0:i1:s0:c0 resolved retry requested -",
                ],
            },
            Case {
                what: "a call whose node was renamed before is decided by its stored name",
                key: key("renamed", 0, 0),
                call: call(CallState::Started, false),
                row: None,
                renames: vec![("old".into(), "renamed".into())],
                decision: Some(("old:g0:i1:s0:c0", retry())),
                decided: true,
                written: &[
                    "event call_resolved",
                    "call renamed:g0:i1:s0:c0 resolved retry requested -",
                ],
            },
        ];
        for case in cases {
            let mut state = ThreadState::default();
            state.calls.insert(case.key.clone(), case.call);
            if let Some(tries) = case.row {
                state.nodes.insert(case.key.node.clone(), node_row(tries));
            }
            let opts = RunOptions {
                decisions: case
                    .decision
                    .into_iter()
                    .map(|(k, d)| (k.to_string(), d))
                    .collect(),
                renames: case.renames,
                ..Default::default()
            };
            let mut buffer = Vec::new();
            let decided = decide(&plan, &mut state, &opts, &mut buffer);
            assert_eq!(
                decided.contains(&case.key.node),
                case.decided,
                "{}",
                case.what
            );
            assert_eq!(written(&buffer), case.written, "{}", case.what);
            // What is written is what recovery goes on with.
            for w in &buffer {
                if let Write::Call(k, c) = w {
                    assert_eq!(state.calls.get(k), Some(c), "{}", case.what);
                }
            }
        }
    }
}
