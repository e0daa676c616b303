//! A served pipeline's runs as MCP tasks (the tasks extension): the task of a call is
//! its run, its id the thread's. `tasks/get` reads the thread: working while it runs;
//! `input_required` while it waits at gates the polling client can answer (the same
//! questions a call asks, keyed by gate name); completed with the call's result once it
//! completed, failed in a node (a tool error, `isError`), is blocked, or waits at a gate
//! the client cannot answer (the paused run and its link, as a call answers it); failed
//! when the server could not carry it on; cancelled. `tasks/update` answers the gates
//! and continues the run; `tasks/cancel` cancels the thread.

use std::collections::BTreeMap;

use serde_json::Value;

use pipec_mcp::server::{Abilities, ProviderFuture, TaskFailure, TaskState, TaskSupport, TaskView};
use pipec_plan::Plan;
use pipec_runtime::{ClientAsk, Outcome, PendingGate};
use pipec_store::{GateState, Status};

use super::gate_forms::questions;
use super::pipelines::{PipelineTools, answer_of, reply, run_link};
use super::registry::Tasks;

/// Whether a pipeline's calls run as tasks: its `tool` entry's `task`, optional when
/// it says nothing.
pub(crate) fn task_support(plan: &Plan) -> TaskSupport {
    match plan.serve_tool.as_ref().and_then(|t| t.task.as_deref()) {
        Some("required") => TaskSupport::Required,
        Some("forbidden") => TaskSupport::Forbidden,
        _ => TaskSupport::Optional,
    }
}

impl PipelineTools {
    /// The run of a served pipeline whose thread is `id`, named whole (a thread id's
    /// prefix names no task).
    async fn served_task(
        &self,
        id: &str,
    ) -> Result<(pipec_store::ThreadState, &super::pipelines::ServedPipeline), TaskFailure> {
        self.served_run(id)
            .await
            .filter(|(state, _)| state.thread.as_ref().is_some_and(|t| t.id == id))
            .ok_or_else(|| TaskFailure::Unknown(id.to_string()))
    }

    /// The run `id` as a task; its questions those a client that `can` is asked.
    pub(crate) async fn task_view(
        &self,
        id: &str,
        can: Abilities,
    ) -> Result<TaskView, TaskFailure> {
        let (state, served) = self.served_task(id).await?;
        let rec = state
            .thread
            .as_ref()
            .ok_or_else(|| TaskFailure::Unknown(id.to_string()))?;
        let plan = &served.plan;
        let link = run_link(id);
        let failure = self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        let any_pending = state.gates.values().any(|g| g.state == GateState::Pending);
        // The rows read here are not scrubbed as a run's own answer is: only the
        // pipeline's gates (whose messages take no secret, P0603) and the client's own
        // questions are shown, never a server's question or a tool call's approval.
        let gates: Vec<PendingGate> = state
            .gates
            .iter()
            .filter(|(name, g)| {
                g.state == GateState::Pending
                    && (ClientAsk::of(g).is_some()
                        || plan
                            .node(name)
                            .is_some_and(|n| n.kind == pipec_plan::NodeKind::Gate))
            })
            .map(|(name, g)| PendingGate::of(name, g))
            .collect();
        let waits = format!(
            "waits at {}",
            gates
                .iter()
                .map(|g| g.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let (task, message) = match rec.status {
            Status::Running | Status::Queued => match (failure, questions(id, plan, &gates, can)) {
                (Some(why), _) => (TaskState::Failed(why), None),
                // Still working on what does not wait for them, and waiting for answers.
                (None, Some(needed)) => (TaskState::InputRequired(needed.questions), Some(waits)),
                (None, None) => (TaskState::Working, Some("running".to_string())),
            },
            Status::Completed => {
                let outputs = pipec_runtime::eval::outputs_of(plan, &state)
                    .ok()
                    .or_else(|| rec.outputs.clone())
                    .unwrap_or(Value::Null);
                let outcome = Outcome::Completed {
                    thread: id.to_string(),
                    outputs: outputs.into(),
                };
                (TaskState::Completed(reply(outcome, link, plan)), None)
            }
            Status::Failed | Status::Blocked => {
                let errors: Vec<_> = rec.error.iter().cloned().collect();
                let outcome = match (rec.status, errors.first()) {
                    (Status::Failed, Some(error)) => Outcome::Failed {
                        thread: id.to_string(),
                        error: error.clone(),
                    },
                    _ => Outcome::Blocked {
                        thread: id.to_string(),
                        reasons: errors,
                    },
                };
                (TaskState::Completed(reply(outcome, link, plan)), None)
            }
            Status::Cancelled => (TaskState::Cancelled, None),
            // Its gates all answered: it goes on at once.
            Status::Paused if !any_pending => match failure {
                Some(why) => (TaskState::Failed(why), None),
                None => (TaskState::Working, Some("resuming".into())),
            },
            Status::Paused => match questions(id, plan, &gates, can) {
                Some(needed) => (TaskState::InputRequired(needed.questions), Some(waits)),
                None => {
                    let outcome = Outcome::Paused {
                        thread: id.to_string(),
                        gates,
                    };
                    (
                        TaskState::Completed(reply(outcome, link, plan)),
                        Some(waits),
                    )
                }
            },
        };
        Ok(TaskView {
            id: id.to_string(),
            state: task,
            message,
            created_ms: rec.created_ms,
            updated_ms: rec.updated_ms,
        })
    }

    /// The client's answers to the gates a task waits at: stored (all or none, checked
    /// as `pipec answer` checks them), then the run goes on in the background once
    /// nothing runs it.
    async fn task_update(
        &self,
        id: &str,
        answers: BTreeMap<String, Value>,
    ) -> Result<(), TaskFailure> {
        let (state, served) = self.served_task(id).await?;
        let mut given = Vec::new();
        for (gate, result) in &answers {
            // An answer to nothing the task asks (any more) is ignored.
            let Some(row) = state
                .gates
                .get(gate)
                .filter(|g| g.state == GateState::Pending)
            else {
                continue;
            };
            match answer_of(gate, row, result) {
                Ok(Some(answer)) => given.push((gate.clone(), answer)),
                Ok(None) => {}
                Err(e) => return Err(TaskFailure::Invalid(format!("{e:?}"))),
            }
        }
        if given.is_empty() {
            return Ok(());
        }
        let runner = self.runner(served, self.registry(), None, None);
        runner
            .answer(id, given)
            .await
            .map_err(|e| TaskFailure::Invalid(format!("error[{}]: {}", e.code, e.message)))?;
        // The run goes on once nothing runs it: an attempt still going may pause without
        // having seen the answers, so the thread is resumed when it is paused next.
        let (store, t) = (self.store.clone(), id.to_string());
        drop(self.spawn_run(id, async move {
            loop {
                let status = store
                    .load(&t)
                    .await
                    .ok()
                    .and_then(|s| s.thread)
                    .map(|r| r.status);
                match status {
                    Some(Status::Running | Status::Queued) => {
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    }
                    _ => break,
                }
            }
            runner.resume(&t, Vec::new()).await
        }));
        Ok(())
    }

    /// Cancels the run: at once when nothing runs it, else at its next step.
    async fn task_cancel(&self, id: &str) -> Result<(), TaskFailure> {
        self.served_task(id).await?;
        let (_, events) = self
            .store
            .request_cancel(id)
            .await
            .map_err(|e| TaskFailure::Failed(e.to_string()))?;
        if !events.is_empty()
            && let Some(registry) = self.registry().upgrade()
        {
            registry.notify_updated(&run_link(id).uri);
        }
        Ok(())
    }
}

impl Tasks for PipelineTools {
    fn task<'a>(
        &'a self,
        id: &'a str,
        can: Abilities,
    ) -> ProviderFuture<'a, Result<TaskView, TaskFailure>> {
        Box::pin(self.task_view(id, can))
    }

    fn update<'a>(
        &'a self,
        id: &'a str,
        answers: BTreeMap<String, Value>,
    ) -> ProviderFuture<'a, Result<(), TaskFailure>> {
        Box::pin(self.task_update(id, answers))
    }

    fn cancel<'a>(&'a self, id: &'a str) -> ProviderFuture<'a, Result<(), TaskFailure>> {
        Box::pin(self.task_cancel(id))
    }
}
