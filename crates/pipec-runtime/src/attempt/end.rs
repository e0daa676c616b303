//! How an attempt ends, once nothing runs and nothing can start: completed (every node
//! done or skipped, and no gate pending), paused (gates wait), failed, blocked (an
//! effect's outcome is unknown), or released to the queue (a worker's stop). The last
//! commit writes what is still buffered, the thread's status, the thread event and the
//! attempt's end together, and lets the thread go where the store can
//! ([`pipec_store::Store::commit_last`]).

use super::Attempt;
use super::nodes::Slot;
use crate::error::RuntimeError;
use crate::eval;
use crate::outcome::Outcome;
use pipec_diagnostic as codes;
use pipec_store::{Event, GateState, Status, Write, ids};

impl Attempt {
    /// Nothing runs and nothing can start: complete, pause, or end.
    pub(super) async fn quiesce(&mut self) -> Result<Outcome, RuntimeError> {
        // What is buffered goes with the end's commit, in one transaction.
        if self.nodes.stopping() {
            return self.end_badly().await;
        }
        let waiting = self.nodes.with_slot(|s| *s == Slot::Waiting);
        if waiting.is_empty() {
            if self.nodes.all_settled() {
                return self.complete().await;
            }
            // A node that can never run: the plan's graph is not what `compile` makes.
            let stuck = self.nodes.stuck();
            self.nodes.set_failure(
                RuntimeError::new(
                    &codes::INTERNAL_ERROR,
                    format!("these nodes can never run: {}", stuck.join(", ")),
                )
                .stored(None),
            );
            return self.end_badly().await;
        }
        // Gates wait: what is buffered commits before the answers are read.
        self.flush().await?;
        if self.take_new_answers().await? {
            return Box::pin(self.drive()).await;
        }
        self.pause().await
    }

    async fn pause(&mut self) -> Result<Outcome, RuntimeError> {
        let gates = self.pending_gates();
        self.thread.status = Status::Paused;
        self.thread.holder = None;
        self.thread.due_ms = gates.iter().filter_map(|g| g.deadline_ms).min();
        let names: Vec<String> = gates.iter().map(|g| g.name.clone()).collect();
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.buffer
            .push(Write::Event(Event::ThreadPaused { gates: names }));
        self.end_attempt("paused");
        self.flush_last().await?;
        Ok(Outcome::Paused {
            thread: self.shared.thread_id.clone(),
            gates,
        })
    }

    async fn complete(&mut self) -> Result<Outcome, RuntimeError> {
        // A thread with a gate still pending is not complete, whatever its nodes say.
        let pending: Vec<&String> = self
            .state
            .gates
            .iter()
            .filter(|(_, g)| g.state == GateState::Pending)
            .map(|(n, _)| n)
            .collect();
        if !pending.is_empty() {
            let list: Vec<String> = pending.iter().map(|n| format!("`{n}`")).collect();
            self.nodes.set_failure(
                RuntimeError::new(
                    &codes::INTERNAL_ERROR,
                    format!(
                        "every node has run, yet the gates {} are pending",
                        list.join(", ")
                    ),
                )
                .stored(None),
            );
            return self.end_badly().await;
        }
        let plan = self.shared.plan.clone();
        // The attempt ends here: the value of a node an output is made of moves into it.
        let mut taken: std::collections::BTreeMap<&str, crate::value::NodeValue> =
            eval::whole_node_outputs(&plan.outputs)
                .into_iter()
                .filter_map(|n| Some((n, self.nodes.take_value(n)?)))
                .collect();
        let outputs = eval::outputs_taking(&self.scope(), &plan, &mut |n| taken.remove(n));
        let mut outputs = match outputs {
            Ok(o) => o,
            Err((name, e)) => {
                self.nodes.set_failure(
                    RuntimeError::new(e.rule(), format!("the output `{name}`: {e}")).stored(None),
                );
                return self.end_badly().await;
            }
        };
        outputs.scrub(&self.shared.scrubber);
        self.thread.status = Status::Completed;
        self.thread.holder = None;
        // Computed from the node rows whenever they are asked for; not stored again.
        self.thread.outputs = None;
        self.thread.due_ms = None;
        self.buffer.push(Write::Thread(self.thread.clone()));
        // The live event carries the outputs to whoever streams events; without a
        // stream, nothing reads them, and a large output is not copied for it.
        self.buffer.push(Write::Event(Event::ThreadCompleted {
            outputs: self.shared.streams_events().then(|| outputs.to_value()),
        }));
        self.end_attempt("completed");
        self.flush_last().await?;
        Ok(Outcome::Completed {
            thread: self.shared.thread_id.clone(),
            outputs,
        })
    }

    pub(super) async fn end_badly(&mut self) -> Result<Outcome, RuntimeError> {
        self.thread.holder = None;
        if !self.nodes.unknown().is_empty() {
            let reasons = self.nodes.take_unknown();
            self.thread.status = Status::Blocked;
            self.thread.error = reasons.first().cloned();
            self.buffer.push(Write::Thread(self.thread.clone()));
            self.buffer.push(Write::Event(Event::ThreadBlocked {
                calls: reasons.iter().map(|r| r.message.clone()).collect(),
            }));
            self.end_attempt("blocked");
            self.flush_last().await?;
            return Ok(Outcome::Blocked {
                thread: self.shared.thread_id.clone(),
                reasons,
            });
        }
        let error = self.nodes.first_failure().cloned().unwrap_or_else(|| {
            RuntimeError::new(
                &codes::INTERNAL_ERROR,
                "the run failed for no recorded reason",
            )
            .stored(None)
        });
        self.thread.status = Status::Failed;
        self.thread.error = Some(error.clone());
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.buffer.push(Write::Event(Event::ThreadFailed {
            code: error.code.clone(),
            message: error.message.clone(),
            node: error.node.clone(),
        }));
        self.end_attempt("failed");
        self.flush_last().await?;
        Ok(Outcome::Failed {
            thread: self.shared.thread_id.clone(),
            error,
        })
    }

    /// A worker's stop with nothing in flight: the thread goes back to the queue as it
    /// stands (every finished step committed, nothing started), for another worker.
    pub(super) async fn release(&mut self) -> Result<Outcome, RuntimeError> {
        self.thread.status = Status::Queued;
        self.thread.holder = None;
        self.buffer.push(Write::Thread(self.thread.clone()));
        self.buffer.push(Write::Event(Event::ThreadReleased {}));
        self.end_attempt("released");
        self.flush_last().await?;
        Ok(Outcome::Released {
            thread: self.shared.thread_id.clone(),
        })
    }

    /// The attempt's row, ended `how`.
    pub(super) fn end_attempt(&mut self, how: &str) {
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
