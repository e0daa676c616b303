//! Gates in an attempt: a gate that becomes ready is answered already, pre-answered, or
//! written as pending with its message, its answer's schema and an absolute deadline,
//! which stays what it was when the gate first became pending (a resume never re-arms
//! it). Answers given meanwhile (`pipec answer`) are picked up before the attempt pauses.

use serde_json::Value;

use super::Attempt;
use super::nodes::ValueAt;
use crate::bind::Params;
use crate::error::RuntimeError;
use crate::outcome::PendingGate;
use pipec_diagnostic as codes;
use pipec_plan::Body;
use pipec_store::{Event, GateRec, GateState, Write, ids};

impl Attempt {
    /// A gate whose inputs are ready (and whose `when` holds).
    pub(super) fn gate_ready(&mut self, i: usize, params: Params) {
        let node = self.nodes.node(i).clone();
        if let Some(g) = self.state.gates.get(&node.name) {
            match g.state {
                GateState::Answered => {
                    let answer = g.answer.clone().unwrap_or(Value::Null);
                    self.nodes.finish(
                        i,
                        answer.into(),
                        ValueAt::Gate,
                        Vec::new(),
                        &mut self.buffer,
                    );
                    return;
                }
                GateState::Pending if !self.thread.pre_answers.contains_key(&node.name) => {
                    // Pending since an earlier attempt: its row (and deadline) stands.
                    self.nodes.wait(i);
                    return;
                }
                GateState::Pending => {}
            }
        }
        let Body::Gate {
            message,
            timeout_ms,
            ask,
            ..
        } = &node.body
        else {
            return;
        };
        // A test that skipped time (`Runner::clock_ahead`) sets deadlines on its clock.
        let now = ids::now_ms().saturating_add(self.shared.clock_ahead_ms);
        let text = match message {
            Some(t) => match crate::prompt::render_text(
                t,
                &crate::prompt::template_context(&node, &params, &self.shared.plan.defs),
            ) {
                Ok(text) => text,
                Err(e) => {
                    let mut error = RuntimeError::new(
                        &codes::TEMPLATE_RENDER_FAILED,
                        format!("the message of `{}` does not render: {e}", node.name),
                    );
                    if let Some(help) = e.help() {
                        error = error.help(help);
                    }
                    let error = error.stored(Some(&node.name));
                    self.nodes.fail(i, error, &mut self.buffer);
                    return;
                }
            },
            None if ask.as_deref() == Some("roots") => format!(
                "`{}` asks for the client's roots: the folders it works in, as {{\"roots\": [{{\"uri\": \"file:///...\", \"name\": \"...\"}}]}}.",
                node.name
            ),
            None => format!("Answer the gate `{}`.", node.name),
        };
        let schema = self.shared.validators.shown_schema(&node.output);
        let existing = self.state.gates.get(&node.name).cloned();
        if let Some(answer) = self.thread.pre_answers.remove(&node.name) {
            let rec = GateRec {
                node: node.name.clone(),
                state: GateState::Answered,
                message: text,
                schema,
                pending_ms: existing.as_ref().map_or(now, |g| g.pending_ms),
                deadline_ms: existing.as_ref().and_then(|g| g.deadline_ms),
                answer: Some(answer.clone()),
                answered_ms: now,
                answered_by: Some("pre-answer".into()),
                ask: None,
            };
            self.buffer
                .push(Write::Gate(node.name.clone(), rec.clone()));
            self.buffer.push(Write::Event(Event::GateAnswered {
                gate: node.name.clone(),
                by: "pre-answer".into(),
            }));
            self.buffer.push(Write::Thread(self.thread.clone()));
            self.state.gates.insert(node.name.clone(), rec);
            self.nodes.finish(
                i,
                answer.into(),
                ValueAt::Gate,
                Vec::new(),
                &mut self.buffer,
            );
            return;
        }
        let deadline = timeout_ms.map(|t| now.saturating_add(t));
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
            // A gate of the client's roots says so in its row, for whoever answers it.
            ask: (ask.as_deref() == Some("roots")).then(|| crate::ClientAsk::Roots.row()),
        };
        self.buffer
            .push(Write::Gate(node.name.clone(), rec.clone()));
        self.buffer.push(Write::Event(Event::GatePending {
            gate: node.name.clone(),
            message: text,
            deadline_ms: deadline,
        }));
        self.state.gates.insert(node.name.clone(), rec);
        self.nodes.wait(i);
    }

    /// A gate that is skipped (an edit of the pipeline made its `when` false, or skipped
    /// what it reads): a row left pending from before goes, so nothing waits for it.
    pub(super) fn skip_gate(&mut self, i: usize) {
        let name = self.nodes.node(i).name.clone();
        if self
            .state
            .gates
            .get(&name)
            .is_some_and(|g| g.state == GateState::Pending)
        {
            self.state.gates.remove(&name);
            self.buffer.push(Write::RemoveGate(name));
        }
        self.nodes.skip(i, &mut self.buffer);
    }

    /// Gates answered while this attempt ran: their nodes finish. Returns whether any did.
    pub(super) async fn take_new_answers(&mut self) -> Result<bool, RuntimeError> {
        let waiting = self.nodes.with_slot(|s| *s == super::nodes::Slot::Waiting);
        if waiting.is_empty() {
            return Ok(false);
        }
        let fresh = self.shared.store.load(&self.shared.thread_id).await?;
        let mut answered = false;
        for i in waiting {
            let name = self.nodes.node(i).name.clone();
            if self.nodes.node(i).kind != pipec_plan::NodeKind::Gate {
                // A node whose call waits for approval goes on once one is answered.
                let approved: Vec<(String, GateRec)> = fresh
                    .gates
                    .iter()
                    .filter(|(g, r)| {
                        r.node == name
                            && r.state == GateState::Answered
                            && self
                                .state
                                .gates
                                .get(*g)
                                .is_some_and(|old| old.state == GateState::Pending)
                    })
                    .map(|(g, r)| (g.clone(), r.clone()))
                    .collect();
                if !approved.is_empty() {
                    for (g, r) in approved {
                        self.state.gates.insert(g, r);
                    }
                    self.nodes.restore(i, super::nodes::Slot::Pending);
                    answered = true;
                }
                continue;
            }
            if let Some(g) = fresh
                .gates
                .get(&name)
                .filter(|g| g.state == GateState::Answered)
            {
                self.state.gates.insert(name.clone(), g.clone());
                let answer = g.answer.clone().unwrap_or(Value::Null);
                self.nodes.finish(
                    i,
                    answer.into(),
                    ValueAt::Gate,
                    Vec::new(),
                    &mut self.buffer,
                );
                answered = true;
            }
        }
        Ok(answered)
    }

    /// The gates the thread waits at.
    pub(super) fn pending_gates(&self) -> Vec<PendingGate> {
        self.state
            .gates
            .iter()
            .filter(|(_, g)| g.state == GateState::Pending)
            .map(|(name, g)| {
                // A server's question brings its own form, which may echo a secret.
                let mut gate = PendingGate::of(name, g);
                self.shared.scrubber.scrub_value(&mut gate.schema);
                gate.message = self.shared.scrubber.scrub(&gate.message);
                gate
            })
            .collect()
    }
}
