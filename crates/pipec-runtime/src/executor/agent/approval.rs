//! Approvals: a tool in the node's `approve` list is called only once a person says
//! yes. The call waits at a gate named after it (`node:gG:iI:sTURN:cN`), which shows the
//! exact arguments; once approved, exactly those are sent, once.

use serde_json::Value;

use super::super::{TryContext, TryError};
use super::approval_schema;
use super::tool_call::ToolCall;
use pipec_store::{Event, GateRec, GateState, Write, ids};

impl ToolCall<'_, '_> {
    /// Whether the call may be made: `None` once approved, the text the model is told
    /// when a person refused it, or `TryError::Waiting` while its gate is open (the gate
    /// is written the first time, after everything before the call is committed).
    pub(super) async fn approval(
        &self,
        writes: &mut Vec<Write>,
    ) -> Result<Option<String>, TryError> {
        let node = &self.cx.unit.node;
        let gate = self.key.display();
        match current_gate(self.cx, &gate).await {
            Some(g) if g.state == GateState::Answered => {
                let answer = g.answer.unwrap_or(Value::Null);
                if answer.get("approved") == Some(&Value::Bool(true)) {
                    return Ok(None);
                }
                let note = answer
                    .get("note")
                    .and_then(Value::as_str)
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default();
                Ok(Some(format!("A person did not approve this call{note}.")))
            }
            Some(g) => Err(TryError::Waiting {
                gate,
                rec: Box::new(g),
            }),
            None => {
                // Everything before this call is committed first: the gate shows the
                // state of the conversation as it is.
                self.commit(writes).await?;
                let message = format!(
                    "`{}` wants to call `{}` with these arguments:\n{}\nApprove with {{\"approved\": true}}, or refuse with {{\"approved\": false, \"note\": \"why\"}}.",
                    node.name,
                    self.tool.name,
                    serde_json::to_string_pretty(&self.stored_args).unwrap_or_default()
                );
                let rec = GateRec {
                    node: node.name.clone(),
                    state: GateState::Pending,
                    message: message.clone(),
                    schema: approval_schema(),
                    pending_ms: ids::now_ms(),
                    deadline_ms: None,
                    answer: None,
                    answered_ms: 0,
                    answered_by: None,
                    ask: None,
                };
                self.commit(&mut vec![
                    Write::Gate(gate.clone(), rec.clone()),
                    Write::Event(Event::GatePending {
                        gate: gate.clone(),
                        message,
                        deadline_ms: None,
                    }),
                ])
                .await?;
                Err(TryError::Waiting {
                    gate,
                    rec: Box::new(rec),
                })
            }
        }
    }
}

/// The gate row of an approval, as the store has it now (answers come from other
/// processes).
async fn current_gate(cx: &TryContext<'_>, gate: &str) -> Option<GateRec> {
    match cx.shared.store.load(&cx.shared.thread_id).await {
        Ok(state) => state.gates.get(gate).cloned(),
        Err(_) => None,
    }
}
