//! A cancel while the attempt runs (`pipec cancel` sets the thread's cancel flag; the
//! drive loop polls it, and a commit refused as cancelled says so too): every task is
//! stopped, which kills its commands with their process groups, and the cancellation is
//! recorded in the one commit the cancel fence lets through, with what was in flight:
//! each node whose stored row says `running` fails with `R0406`, and each call of this
//! attempt still `started` becomes `unknown`, as does a call the server runs as a task
//! (which it is asked to cancel, with `tasks/cancel`). The stored rows decide, not the attempt's
//! memory, so a result that was lost with a refused commit is not taken for done.

use tokio::task::JoinSet;

use super::Attempt;
use super::tasks::TaskDone;
use crate::context::scrub_error;
use crate::error::RuntimeError;
use crate::journal;
use crate::resources::servers::Servers;
use pipec_diagnostic as codes;
use pipec_store::{CallState, Event, NodeState, Status, StoreError, Write, ids};

/// How long a server is given to take the cancel of a task.
const TASK_CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The error of a thread found cancelled.
pub(super) fn cancelled(thread: &str) -> RuntimeError {
    RuntimeError::from(StoreError::Cancelled {
        thread: thread.to_string(),
    })
}

/// Stops every task and waits until each is gone (a task's commands die as it is
/// dropped).
pub(super) async fn stop_all(tasks: &mut JoinSet<TaskDone>) {
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

impl Attempt {
    /// Whether someone asked to cancel the thread (`pipec cancel`).
    pub(super) async fn cancel_requested(&self) -> bool {
        self.shared
            .store
            .cancel_requested(&self.shared.thread_id)
            .await
            .unwrap_or(false)
    }

    /// Records the cancellation; returns the error the run ends with.
    pub(super) async fn record_cancel(&mut self) -> RuntimeError {
        // What stopped tasks committed before they were stopped, and the request
        // itself, reach the stream first.
        self.shared.catch_up().await;
        let error = RuntimeError::new(
            &codes::THREAD_CANCELLED,
            format!(
                "thread {} was cancelled while it ran",
                self.shared.thread_id
            ),
        );
        let mut writes = Vec::new();
        if let Ok(stored) = self.shared.store.load(&self.shared.thread_id).await {
            for (name, rec) in &stored.nodes {
                if rec.state != NodeState::Running {
                    continue;
                }
                let mut rec = rec.clone();
                rec.state = NodeState::Failed;
                rec.error = Some(error.stored(Some(name)));
                rec.finished_ms = ids::now_ms();
                writes.push(Write::Node(name.clone(), rec));
                writes.push(Write::Event(Event::NodeFailed {
                    node: name.clone(),
                    code: error.code.into(),
                    message: error.message.clone(),
                }));
            }
            for (key, call) in stored.calls {
                // A task a call became is the server's to stop: it is asked to (for a
                // few seconds at most), and what became of the call is unknown.
                if call.state == CallState::Tasked
                    && let Some(task) = call
                        .task
                        .clone()
                        .and_then(|t| serde_json::from_value::<pipec_mcp::TaskRef>(t).ok())
                    && let Some(tool) = self
                        .shared
                        .plan
                        .tools
                        .iter()
                        .find(|t| t.name == call.target)
                {
                    let asked = self
                        .shared
                        .resources
                        .servers
                        .cancel_task(&tool.server, &task);
                    let _ = tokio::time::timeout(TASK_CANCEL_WAIT, asked).await;
                } else if call.state != CallState::Started || call.attempt != self.shared.attempt_no
                {
                    continue;
                }
                let message = "cancelled while it ran; whether it took effect is unknown";
                writes.push(Write::Event(Event::CallUnknown {
                    node: key.node.clone(),
                    call: Some(key.display()),
                    message: message.into(),
                }));
                writes.push(Write::Call(
                    key,
                    journal::finished_row(&call, CallState::Unknown, Some(message.into())),
                ));
            }
        }
        self.thread.status = Status::Cancelled;
        self.thread.holder = None;
        let mut stored_error = error.stored(None);
        scrub_error(&self.shared.scrubber, &mut stored_error);
        self.thread.error = Some(stored_error);
        writes.push(Write::Thread(self.thread.clone()));
        writes.push(Write::Event(Event::ThreadCancelled {}));
        self.buffer = writes;
        self.end_attempt("cancelled");
        let writes = std::mem::take(&mut self.buffer);
        // The one commit allowed past the cancel fence: it records the cancellation. A
        // failure to write it is not the run's error (the cancel is): the thread's cancel
        // flag stays stored, so whoever takes the thread next ends it as cancelled
        // (`end_unrun`), and a lost lease means another process holds it already.
        let _ = self.shared.commit_last(writes).await;
        error
    }
}
