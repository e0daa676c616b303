//! The conversation as journal rows. Every model turn and every tool call of a loop is a
//! row keyed `node:gG:iI:sTURN:cN` (N = 0 for the model's reply); a retry or a resume
//! rebuilds the conversation from those rows and never asks the model again for a turn
//! it answered, nor makes again a call that finished. A model turn's row commits
//! before any of the turn's tool calls runs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::{TryContext, TryError, fatal};
use crate::journal;
use crate::llm::ModelReply;
use pipec_diagnostic as codes;
use pipec_store::{CallDecision, CallKey, CallKind, CallRec, CallState, ResourceRef, Write, ids};

/// The most of a tool result's text kept in its row (what the model saw, to rebuild the
/// conversation).
const KEPT_TOOL_TEXT: usize = 256 * 1024;

/// The key of a loop's row: turn `turn`, call `call` (0 is the model's reply).
pub(super) fn key(cx: &TryContext<'_>, turn: u32, call: u32) -> CallKey {
    CallKey {
        node: cx.unit.node.name.clone(),
        generation: cx.unit.generation,
        item: cx.unit.item,
        seq: turn,
        call,
    }
}

/// The model's reply as its row keeps it.
pub(super) fn reply_value(reply: &ModelReply) -> Value {
    serde_json::to_value(reply).unwrap_or(Value::Null)
}

/// What a row of the loop records about one call.
pub(super) struct Row<'a> {
    pub kind: CallKind,
    pub target: &'a str,
    /// The arguments, secrets as placeholders.
    pub args: Option<Value>,
    pub idempotent: bool,
    pub idem_key: String,
    pub state: CallState,
    pub result: Option<Value>,
    pub error: Option<String>,
}

impl Row<'_> {
    /// The journal row, written by this attempt now.
    pub(super) fn rec(self, cx: &TryContext<'_>) -> CallRec {
        let hash = self
            .args
            .as_ref()
            .map(journal::args_hash)
            .unwrap_or_default();
        CallRec {
            kind: self.kind,
            target: self.target.into(),
            args: self.args,
            args_hash: hash,
            idempotent: self.idempotent,
            idem_key: self.idem_key,
            state: self.state,
            result: self.result,
            error: self.error,
            attempt: cx.shared.attempt_no,
            started_ms: ids::now_ms(),
            finished_ms: ids::now_ms(),
            decision: None,
            watched_by: None,
            task: None,
        }
    }
}

/// The model's reply of turn `turn`, when its row holds one (the turn was answered
/// before a retry or a resume).
pub(super) fn stored_reply(
    cx: &TryContext<'_>,
    rows: &Rows<'_>,
    turn: u32,
) -> Option<Result<ModelReply, TryError>> {
    let stored = rows.get(&(turn, 0))?.result.clone()?;
    Some(serde_json::from_value(stored).map_err(|e| {
        fatal(
            cx,
            &codes::INTERNAL_ERROR,
            format!(
                "the stored turn {turn} of `{}` cannot be read: {e}",
                cx.unit.node.name
            ),
        )
    }))
}

/// Stores the reply of turn `turn` (its row and `model_turn` event), committed before
/// anything it asks for runs; a reply nested deeper than the store reads back is
/// refused first.
pub(super) async fn store_reply(
    cx: &TryContext<'_>,
    model: &str,
    turn: u32,
    reply: &ModelReply,
    started: std::time::Instant,
    rows: &mut Rows<'_>,
) -> Result<(), TryError> {
    let value = reply_value(reply);
    if pipec_base::nesting::value_too_deep(&value) {
        return Err(fatal(
            cx,
            &codes::MODEL_OUTPUT_INVALID,
            format!(
                "the reply of the model `{model}` nests more than {} levels of arrays and objects",
                pipec_base::nesting::MAX_VALUE_NESTING
            ),
        ));
    }
    let unit = cx.unit;
    let rec = Row {
        kind: CallKind::Model,
        target: model,
        args: None,
        idempotent: true,
        idem_key: unit.idem_key.clone(),
        state: CallState::Ok,
        result: Some(value),
        error: None,
    }
    .rec(cx);
    let writes = vec![
        Write::Call(key(cx, turn, 0), rec.clone()),
        Write::Event(super::super::think::turn_event(
            cx, model, turn, reply, started,
        )),
    ];
    cx.shared
        .commit(writes)
        .await
        .map_err(|e| TryError::Fatal(e.stored(Some(&unit.node.name))))?;
    rows.insert((turn, 0), rec);
    Ok(())
}

/// The rows of the conversation, kept in the unit too, so that a retry of the node goes
/// on from what an earlier try committed.
pub(super) struct Rows<'a> {
    local: BTreeMap<(u32, u32), CallRec>,
    shared: &'a std::sync::Mutex<BTreeMap<(u32, u32), CallRec>>,
}

impl<'a> Rows<'a> {
    /// The rows of the unit's conversation so far (heal replays are not part of it).
    pub(super) fn of(calls: &'a std::sync::Mutex<BTreeMap<(u32, u32), CallRec>>) -> Rows<'a> {
        Rows {
            local: calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(k, _)| k.1 < crate::hydrate::heal::HEAL_CALL_BASE)
                .map(|(k, r)| (*k, r.clone()))
                .collect(),
            shared: calls,
        }
    }

    pub(super) fn get(&self, k: &(u32, u32)) -> Option<&CallRec> {
        self.local.get(k)
    }

    pub(super) fn insert(&mut self, k: (u32, u32), rec: CallRec) {
        self.shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(k, rec.clone());
        self.local.insert(k, rec);
    }
}

/// How one tool call of a turn ended, as the conversation goes on from it.
pub(super) struct Outcome {
    /// What the model is shown.
    pub text: String,
    /// The links its result carried.
    pub links: Vec<ResourceRef>,
}

impl Outcome {
    /// An outcome the model is told, with no links.
    pub(super) fn told(text: String) -> Outcome {
        Outcome {
            text,
            links: Vec::new(),
        }
    }
}

/// What the row of a call that already ran (or that a person decided) says the
/// conversation goes on with; `None` when the call is made again (a reader's row keeps
/// where it read, not what; a retry a person asked for).
pub(super) fn replayed(
    done: &CallRec,
    shown: &str,
    tool: &str,
) -> Option<Result<Outcome, TryError>> {
    match done.state {
        CallState::Ok if done.kind == CallKind::Read => None,
        // The server asked a person: the call is made again with the answer.
        CallState::Asked => None,
        CallState::Ok | CallState::ToolError | CallState::Refused => Some(Ok(from_row(done))),
        CallState::Resolved => match done.decision {
            Some(CallDecision::RetryRequested) => None,
            Some(CallDecision::ResolvedAsPerformed) | None => {
                let performed = done
                    .result
                    .as_ref()
                    .and_then(|r| r.get("performed"))
                    .cloned()
                    .unwrap_or(Value::Null);
                Some(Ok(Outcome::told(format!(
                    "The call was made, with this result: {}",
                    serde_json::to_string(&performed).unwrap_or_default()
                ))))
            }
        },
        // Recovery blocks a thread whose effect is unfinished before it runs.
        CallState::Started | CallState::Unknown | CallState::Tasked => {
            Some(Err(TryError::Unknown(format!(
                "the call {shown} of `{tool}` was in flight when its process stopped"
            ))))
        }
    }
}

/// What a finished call's row says the model was shown, and its links.
fn from_row(rec: &CallRec) -> Outcome {
    let text = rec
        .result
        .as_ref()
        .and_then(|r| r.get("for_model"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let links = rec
        .result
        .as_ref()
        .and_then(|r| r.get("links"))
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    Outcome { text, links }
}

/// The text a row keeps of what the model was shown, cut at `KEPT_TOOL_TEXT` bytes.
pub(super) fn kept_text(text: &str) -> String {
    pipec_base::source::shorten(text, KEPT_TOOL_TEXT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn done(kind: CallKind, state: CallState, decision: Option<CallDecision>) -> CallRec {
        CallRec {
            kind,
            target: "t".into(),
            args: None,
            args_hash: String::new(),
            idempotent: false,
            idem_key: String::new(),
            state,
            result: Some(json!({ "for_model": "seen", "performed": 7 })),
            error: None,
            attempt: 1,
            started_ms: 0,
            finished_ms: 0,
            decision,
            watched_by: None,
            task: None,
        }
    }

    #[test]
    fn a_stored_call_goes_on_from_its_row_unless_it_is_to_be_made_again() {
        let text = |r: Option<Result<Outcome, TryError>>| match r {
            None => "again".to_string(),
            Some(Result::Ok(o)) => o.text,
            Some(Err(TryError::Unknown(_))) => "unknown".to_string(),
            Some(Err(e)) => format!("{e:?}"),
        };
        let rows = [
            (CallKind::Read, CallState::Ok, None, "again"),
            (CallKind::Tool, CallState::Ok, None, "seen"),
            (CallKind::Tool, CallState::ToolError, None, "seen"),
            (CallKind::Tool, CallState::Refused, None, "seen"),
            (
                CallKind::Tool,
                CallState::Resolved,
                Some(CallDecision::RetryRequested),
                "again",
            ),
            (
                CallKind::Tool,
                CallState::Resolved,
                Some(CallDecision::ResolvedAsPerformed),
                "The call was made, with this result: 7",
            ),
            (CallKind::Tool, CallState::Started, None, "unknown"),
            (CallKind::Tool, CallState::Unknown, None, "unknown"),
        ];
        for (kind, state, decision, expected) in rows {
            let rec = done(kind, state, decision);
            assert_eq!(
                text(replayed(&rec, "n:g0:i0:s0:c1", "t")),
                expected,
                "{kind} {state:?} {decision:?}"
            );
        }
    }
}
