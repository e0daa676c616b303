//! Tool calls a server runs as tasks: the call is answered with a task id at once, and
//! the client polls until the task ends. Two forms: MCP 2025-11-25's (a `tools/call`
//! with `task: {ttl}` for a tool whose `execution.taskSupport` is `required`;
//! `tasks/get` for the status, `tasks/result` for the result) and 2026-07-28's
//! `io.modelcontextprotocol/tasks` extension (a `tools/call` answered with
//! `resultType: "task"`; `tasks/get` carries the result, `tasks/update` the answers to
//! the task's questions). A [`TaskRef`] is plain data: a caller keeps it (the runtime
//! journals it) and polls it again from another process with [`Session::await_task`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::asks::{Asked, Called, Resumption, Round};
use super::convert;
use super::{McpError, RequestOptions, Session};

/// How long a server is asked to keep a task (2025-11-25's `task.ttl`): a thread may
/// wait a day.
pub(crate) const TASK_TTL_MS: u64 = 86_400_000;
/// Polls are this far apart at least, whatever the server suggests.
const MIN_POLL: Duration = Duration::from_millis(100);
/// ... and at most.
const MAX_POLL: Duration = Duration::from_secs(60);
/// Without a suggestion.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// A task whose questions (2026-07-28) keep coming stops after this many rounds.
const MAX_TASK_ROUNDS: usize = 8;
/// One wait for a task ends after this long (the time a server is asked to keep it):
/// a server that says `working` for ever does not hold a thread for ever.
const MAX_TASK_WAIT: Duration = Duration::from_millis(TASK_TTL_MS);

/// A task a server runs for a tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// The server's id for it.
    pub id: String,
    /// The server's suggested time between polls, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_ms: Option<u64>,
    /// Which form: MCP 2025-11-25's (`tasks/result` gives the result) or the
    /// 2026-07-28 extension's (`tasks/get` carries it).
    pub form: TaskForm,
}

/// The two forms of MCP tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskForm {
    /// MCP 2025-11-25's tasks.
    V2025,
    /// The `io.modelcontextprotocol/tasks` extension (2026-07-28).
    Extension,
}

impl TaskRef {
    fn interval(&self) -> Duration {
        self.poll_ms
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL)
    }
}

/// A task from a `CreateTaskResult`: nested under `task` (2025-11-25), or flat with
/// `resultType: "task"` (the extension). `None` when the value is not one.
pub(crate) fn created(raw: &Value) -> Option<TaskRef> {
    let (task, form, poll) = match raw.get("task") {
        Some(task) if raw.get("resultType").is_none() => (task, TaskForm::V2025, "pollInterval"),
        _ if raw.get("resultType").and_then(Value::as_str) == Some("task") => {
            (raw, TaskForm::Extension, "pollIntervalMs")
        }
        _ => return None,
    };
    Some(TaskRef {
        id: task.get("taskId")?.as_str()?.to_string(),
        poll_ms: task.get(poll).and_then(Value::as_u64),
        form,
    })
}

impl Session {
    /// Polls a task until it ends, and gives its result. A task that failed is the
    /// server's error; one the server no longer tells about (`tasks/get` refused) is
    /// [`McpError::TaskLost`], as its outcome is unknown. Its questions are answered by the
    /// session's policy (2025-11-25: as requests while `tasks/result` waits; the
    /// extension: `tasks/update`), or with `resumption`'s answers when asked again; those
    /// the policy leaves to a person end the wait with [`Called::Asked`] (the extension's
    /// form), and the task is polled again with their answers.
    pub async fn await_task(
        &self,
        task: &TaskRef,
        options: RequestOptions,
        resumption: &Resumption,
    ) -> Result<Called, McpError> {
        let what = format!("task {}", task.id);
        // Awaited in another process than the call's, the task may still ask for replies.
        self.asks.calling();
        // A person's answers to the task's earlier questions, each given once.
        let mut unspent = resumption.answers.clone();
        let mut rounds = 0;
        let mut answered = std::collections::BTreeSet::new();
        let deadline = tokio::time::Instant::now() + MAX_TASK_WAIT;
        loop {
            if tokio::time::Instant::now() >= deadline {
                return Err(McpError::Timeout {
                    server: self.name().to_string(),
                    request: what,
                    after: MAX_TASK_WAIT,
                });
            }
            let status = match self
                .raw_request(&what, "tasks/get", json!({ "taskId": task.id }), options)
                .await
            {
                // A server that refuses to tell (it restarted, or the task outlived its
                // time to live): what became of the call is not known.
                Err(McpError::Server { message, .. }) => {
                    return Err(McpError::TaskLost {
                        server: self.name().to_string(),
                        task: task.id.clone(),
                        message,
                    });
                }
                other => other?,
            };
            let state = status.get("status").and_then(Value::as_str).unwrap_or("");
            match (task.form, state) {
                (TaskForm::V2025, "completed" | "failed" | "cancelled" | "input_required") => {
                    // `tasks/result` waits for the end, and brings the task's questions
                    // (as requests the policy answers) meanwhile.
                    let raw = self
                        .raw_request(
                            &what,
                            "tasks/result",
                            json!({ "taskId": task.id }),
                            RequestOptions {
                                timeout: Some(Duration::from_millis(TASK_TTL_MS)),
                                ..options
                            },
                        )
                        .await?;
                    return self.tool_result(raw);
                }
                (TaskForm::Extension, "completed") => {
                    let result = status.get("result").cloned().unwrap_or(Value::Null);
                    return self.tool_result(result);
                }
                (TaskForm::Extension, "failed") => {
                    let error = status.get("error").cloned().unwrap_or(Value::Null);
                    return Err(McpError::Server {
                        server: self.name().to_string(),
                        code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: self.redacted(
                            error
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("the task failed"),
                        ),
                        data: error.get("data").cloned(),
                    });
                }
                (TaskForm::Extension, "cancelled") => {
                    return Err(self.protocol_error(format!("{what} was cancelled by the server")));
                }
                (TaskForm::Extension, "input_required") => {
                    let mut requests: rmcp::model::InputRequests = status
                        .get("inputRequests")
                        .cloned()
                        .and_then(|r| serde_json::from_value(r).ok())
                        .unwrap_or_default();
                    // A request answered at an earlier poll (that the server has not
                    // taken yet) is not answered, nor its model asked, again.
                    requests.retain(|key, _| !answered.contains(key));
                    match self.answer_requests(&requests, &mut unspent).await {
                        Round::Answered(responses) => {
                            // Each request is answered once; one the server still lists
                            // waits for it to take the answer.
                            let responses: Map<String, Value> = responses
                                .into_iter()
                                .filter(|(key, _)| answered.insert(key.clone()))
                                .collect();
                            if !responses.is_empty() {
                                rounds += 1;
                                if rounds > MAX_TASK_ROUNDS {
                                    return Err(self.protocol_error(format!(
                                        "{what} still asks for input after {MAX_TASK_ROUNDS} rounds"
                                    )));
                                }
                                self.raw_request(
                                    &what,
                                    "tasks/update",
                                    json!({ "taskId": task.id, "inputResponses": responses }),
                                    options,
                                )
                                .await?;
                            }
                        }
                        // Left to a person: the task waits for them (the caller keeps
                        // it, and polls it again with the answers).
                        Round::Asked(questions, responses) => {
                            return Ok(Called::Asked(Asked {
                                questions,
                                request_state: None,
                                responses,
                            }));
                        }
                        Round::Unanswerable => {
                            return Err(McpError::InputRequired {
                                server: self.name().to_string(),
                            });
                        }
                    }
                }
                (_, "working") => {}
                (_, other) => {
                    return Err(self.protocol_error(format!(
                        "{what} has a status pipec does not know: `{other}`"
                    )));
                }
            }
            let wait = status
                .get(match task.form {
                    TaskForm::V2025 => "pollInterval",
                    TaskForm::Extension => "pollIntervalMs",
                })
                .and_then(Value::as_u64)
                .map(|ms| TaskRef {
                    poll_ms: Some(ms),
                    ..task.clone()
                })
                .unwrap_or_else(|| task.clone())
                .interval();
            tokio::time::sleep(wait).await;
        }
    }

    /// Asks the server to cancel a task; what it answers does not matter.
    pub async fn cancel_task(&self, task: &TaskRef) {
        let _ = self
            .raw_request(
                &format!("task {}", task.id),
                "tasks/cancel",
                json!({ "taskId": task.id }),
                RequestOptions::default(),
            )
            .await;
    }

    fn tool_result(&self, raw: Value) -> Result<Called, McpError> {
        convert::tool_result(raw)
            .map(Called::Result)
            .map_err(|u| self.unusable_error(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_of_a_created_task_are_read() {
        let v2025 = json!({"task": {"taskId": "t1", "status": "working", "pollInterval": 500}});
        assert_eq!(
            created(&v2025),
            Some(TaskRef {
                id: "t1".into(),
                poll_ms: Some(500),
                form: TaskForm::V2025
            })
        );
        let extension = json!({"resultType": "task", "taskId": "t2", "status": "working", "pollIntervalMs": 250, "ttlMs": null});
        assert_eq!(
            created(&extension),
            Some(TaskRef {
                id: "t2".into(),
                poll_ms: Some(250),
                form: TaskForm::Extension
            })
        );
        assert_eq!(created(&json!({"content": []})), None);
        assert_eq!(
            created(&json!({"task": {"status": "working"}})),
            None,
            "no id"
        );
    }

    #[test]
    fn polls_keep_to_bounds() {
        let task = |ms| TaskRef {
            id: "t".into(),
            poll_ms: ms,
            form: TaskForm::Extension,
        };
        assert_eq!(task(None).interval(), DEFAULT_POLL);
        assert_eq!(task(Some(0)).interval(), MIN_POLL);
        assert_eq!(task(Some(10_000_000)).interval(), MAX_POLL);
        assert_eq!(task(Some(2000)).interval(), Duration::from_secs(2));
    }
}
