//! Tool calls as MCP tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663): a
//! call the provider answers with [`ToolAnswer::Task`](super::provider::ToolAnswer) is a
//! `CreateTaskResult`; `tasks/get` shows the task as the provider sees it (its questions
//! as `inputRequests` while it waits, its result inlined once it completed), `tasks/update`
//! hands the provider the client's answers, `tasks/cancel` cancels it. rmcp refuses the
//! three methods to a client that did not declare the extension.

use rmcp::model::{
    CancelTaskParams, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, InputRequest,
    InputRequests, JsonObject, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::json;

use super::ask::{abilities, request_of};
use super::handler::{Served, tool_result};
use super::provider::{TaskFailure, TaskState, TaskView};

/// How often a client is asked to look again, in milliseconds.
const POLL_INTERVAL_MS: u64 = 500;

/// A time in milliseconds since the Unix epoch as ISO 8601 (UTC, milliseconds).
fn iso(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A task's base fields. Its TTL is none: a run stays in the store until `pipec prune`.
fn task(view: &TaskView, status: TaskStatus) -> Task {
    let mut task = Task::new(
        view.id.clone(),
        status,
        iso(view.created_ms),
        iso(view.updated_ms),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    if let Some(m) = &view.message {
        task = task.with_status_message(m.clone());
    }
    task
}

/// What a call that became a task answers.
pub(super) fn created(view: &TaskView) -> CreateTaskResult {
    let status = match &view.state {
        TaskState::Working => TaskStatus::Working,
        TaskState::InputRequired(_) => TaskStatus::InputRequired,
        TaskState::Completed(_) => TaskStatus::Completed,
        TaskState::Failed(_) => TaskStatus::Failed,
        TaskState::Cancelled => TaskStatus::Cancelled,
    };
    CreateTaskResult::new(task(view, status))
}

/// A task as `tasks/get` shows it.
fn detailed(view: TaskView) -> Result<DetailedTask, ErrorData> {
    let payload = match &view.state {
        TaskState::Working => TaskPayload::Working,
        TaskState::InputRequired(questions) => {
            let mut requests = InputRequests::new();
            for (key, question) in questions {
                let request: InputRequest =
                    serde_json::from_value(request_of(question)).map_err(|e| {
                        ErrorData::internal_error(format!("a question of `{key}`: {e}"), None)
                    })?;
                requests.insert(key.clone(), request);
            }
            TaskPayload::InputRequired {
                input_requests: requests,
            }
        }
        TaskState::Completed(reply) => {
            let result = serde_json::to_value(tool_result(reply.clone()))
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default();
            TaskPayload::Completed { result }
        }
        TaskState::Failed(why) => {
            let error: JsonObject = json!({ "code": -32603, "message": why })
                .as_object()
                .cloned()
                .unwrap_or_default();
            TaskPayload::Failed { error }
        }
        TaskState::Cancelled => TaskPayload::Cancelled,
    };
    let status = payload.status();
    Ok(DetailedTask::new(task(&view, status), payload))
}

fn refused(e: TaskFailure) -> ErrorData {
    match e {
        TaskFailure::Unknown(id) => ErrorData::invalid_params(
            format!("no task `{id}` on this server"),
            Some(json!({ "taskId": id })),
        ),
        TaskFailure::Invalid(why) => ErrorData::invalid_params(why, None),
        TaskFailure::Failed(why) => ErrorData::internal_error(why, None),
    }
}

impl Served {
    pub(super) async fn task_of(
        &self,
        request: GetTaskParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let can = abilities(&context.client_capabilities().unwrap_or_default());
        let view = self
            .provider
            .task(&request.task_id, can)
            .await
            .map_err(refused)?;
        Ok(GetTaskResult::new(detailed(view)?))
    }

    pub(super) async fn task_answered(&self, request: UpdateTaskParams) -> Result<(), ErrorData> {
        let answers = request.input_responses.into_iter().collect();
        self.provider
            .update_task(&request.task_id, answers)
            .await
            .map_err(refused)
    }

    pub(super) async fn task_cancelled(&self, request: CancelTaskParams) -> Result<(), ErrorData> {
        self.provider
            .cancel_task(&request.task_id)
            .await
            .map_err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::provider::ToolReply;

    fn view(state: TaskState) -> TaskView {
        TaskView {
            id: "t1".into(),
            state,
            message: None,
            created_ms: 1_796_500_000_123,
            updated_ms: 1_796_500_001_000,
        }
    }

    #[test]
    fn a_task_is_flat_with_iso_times_and_a_completed_one_inlines_its_result() {
        let created = serde_json::to_value(created(&view(TaskState::Working))).expect("json");
        assert_eq!(created["resultType"], "task", "{created}");
        assert_eq!(created["taskId"], "t1", "{created}");
        assert_eq!(created["status"], "working", "{created}");
        assert_eq!(
            created["createdAt"], "2026-12-05T19:46:40.123Z",
            "{created}"
        );
        assert_eq!(created["pollIntervalMs"], 500, "{created}");
        assert!(created.get("task").is_none() && created.get("result").is_none());

        let reply = ToolReply {
            text: Some("done".into()),
            is_error: true,
            ..ToolReply::default()
        };
        let got = detailed(view(TaskState::Completed(reply))).expect("a task");
        let got = serde_json::to_value(GetTaskResult::new(got)).expect("json");
        assert_eq!(got["status"], "completed", "{got}");
        assert_eq!(got["result"]["isError"], true, "{got}");
        assert_eq!(got["result"]["content"][0]["text"], "done", "{got}");

        let failed = detailed(view(TaskState::Failed("store gone".into()))).expect("a task");
        let failed = serde_json::to_value(GetTaskResult::new(failed)).expect("json");
        assert_eq!(failed["error"]["code"], -32603, "{failed}");
        assert!(failed.get("result").is_none(), "{failed}");
    }
}
