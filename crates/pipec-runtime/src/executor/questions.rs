//! A server's questions during a tool call, as gates: when a server whose `elicitation`
//! is `"ask"` asks for a form (MCP elicitation, 2025-11-25; a form request of an
//! `input_required` result, 2026-07-28), the call ends and each question becomes a
//! pending gate named after the call (`CALL:ask1`, `CALL:ask2`, ...), its answer the form
//! (or `null` to decline). The thread pauses there like at any gate; once answered, in
//! this process or another, the call is made again carrying the answers: with the
//! round's `requestState` (2026-07-28), or answering the same question when the server
//! asks it again (2025-11-25). What the call needs to go on is kept in the gate's row.

use serde_json::{Map, Value, json};

use super::{TryContext, TryError};
use pipec_mcp::{Answer, Asked, Question, Resumption};
use pipec_store::{Event, GateRec, GateState, Write, ids};

/// A question's text is cut to this many bytes in its gate's message.
const MAX_MESSAGE_BYTES: usize = 4096;

/// At most this many questions are asked during one call; a server that asks more
/// fails the call.
pub(crate) const MAX_QUESTIONS_PER_CALL: usize = 16;

/// Whether calls to `server` may end with questions for a person (its `elicitation` is
/// `"ask"`); calls to other servers read no gates.
pub(crate) fn asks_people(plan: &pipec_plan::Plan, server: &str) -> bool {
    plan.servers
        .iter()
        .any(|s| s.name == server && s.elicitation == pipec_plan::Elicitation::Ask)
}

/// The question gates of one call.
pub(crate) struct Questions<'c, 'a> {
    pub cx: &'c TryContext<'a>,
    /// The call, as its gates are named: `node:gG:iI` for a `call` node (the same for
    /// its every try), the call's key in a tool loop.
    pub call: String,
    pub server: &'c str,
    pub tool: &'c str,
}

/// What a question gate's row keeps for the call (`GateRec::ask`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    round: u32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    key: String,
    fingerprint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    request_state: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    responses: Map<String, Value>,
}

impl Questions<'_, '_> {
    fn prefix(&self) -> String {
        format!("{}:ask", self.call)
    }

    /// This call's question gates, as the store has them now (answers come from other
    /// processes), in the order they were asked.
    async fn rows(&self) -> Result<Vec<(String, GateRec, Kept)>, TryError> {
        let state = self
            .cx
            .shared
            .store
            .load(&self.cx.shared.thread_id)
            .await
            .map_err(|e| {
                TryError::Fatal(
                    crate::error::RuntimeError::from(e).stored(Some(&self.cx.unit.node.name)),
                )
            })?;
        let prefix = self.prefix();
        let mut rows: Vec<(u32, String, GateRec, Kept)> = state
            .gates
            .into_iter()
            .filter_map(|(name, rec)| {
                let n: u32 = name.strip_prefix(&prefix)?.parse().ok()?;
                let kept = serde_json::from_value(rec.ask.clone()?).ok()?;
                Some((n, name, rec, kept))
            })
            .collect();
        rows.sort_by_key(|(n, ..)| *n);
        Ok(rows
            .into_iter()
            .map(|(_, name, rec, kept)| (name, rec, kept))
            .collect())
    }

    /// What the call carries when it is made: the answers to its questions so far, and
    /// the state of the last round. `Err(Waiting)` while a question is unanswered.
    pub(crate) async fn resumption(&self) -> Result<Resumption, TryError> {
        let rows = self.rows().await?;
        if let Some((gate, rec, _)) = rows.iter().find(|(_, r, _)| r.state == GateState::Pending) {
            return Err(TryError::Waiting {
                gate: gate.clone(),
                rec: Box::new(rec.clone()),
            });
        }
        let last = rows.iter().map(|(_, _, k)| k.round).max().unwrap_or(0);
        let mut resumption = Resumption::default();
        for (_, rec, kept) in rows {
            let content = match rec.answer {
                Some(Value::Object(content)) => Some(content),
                _ => None,
            };
            let answer = Answer {
                key: kept.key,
                fingerprint: kept.fingerprint,
                content,
            };
            // The last round's state goes back with that round's responses, the
            // person's answers under their keys (2026-07-28).
            if kept.round == last && kept.request_state.is_some() {
                resumption.request_state = kept.request_state;
                resumption.responses.extend(kept.responses);
                if !answer.key.is_empty() {
                    resumption
                        .responses
                        .insert(answer.key.clone(), answer.response());
                }
            }
            resumption.answers.push(answer);
        }
        Ok(resumption)
    }

    /// The questions a server asked: each a pending gate, committed with `writes` (the
    /// call's row among them); the try waits at the first.
    pub(crate) async fn ask(&self, asked: Asked, writes: &mut Vec<Write>) -> TryError {
        let node = &self.cx.unit.node.name;
        let rows = match self.rows().await {
            Ok(rows) => rows,
            Err(e) => return e,
        };
        if rows.len() + asked.questions.len() > MAX_QUESTIONS_PER_CALL {
            return super::fatal(
                self.cx,
                &pipec_diagnostic::TOOL_FAILED,
                format!(
                    "`{node}` calling `{}`: the server `{}` asked more than {MAX_QUESTIONS_PER_CALL} questions during one call",
                    self.tool, self.server
                ),
            );
        }
        let round = rows.iter().map(|(_, _, k)| k.round).max().unwrap_or(0) + 1;
        let now = ids::now_ms();
        let mut first = None;
        for (i, question) in asked.questions.into_iter().enumerate() {
            let gate = format!("{}{}", self.prefix(), rows.len() + i + 1);
            let message = self.message(&question);
            let kept = Kept {
                round,
                key: question.key.clone(),
                fingerprint: question.fingerprint.clone(),
                request_state: asked.request_state.clone(),
                responses: asked.responses.clone(),
            };
            let rec = GateRec {
                node: node.clone(),
                state: GateState::Pending,
                message: message.clone(),
                schema: json!({ "anyOf": [question.schema, { "type": "null" }] }),
                pending_ms: now,
                deadline_ms: None,
                answer: None,
                answered_ms: 0,
                answered_by: None,
                ask: serde_json::to_value(kept).ok(),
            };
            writes.push(Write::Gate(gate.clone(), rec.clone()));
            writes.push(Write::Event(Event::GatePending {
                gate: gate.clone(),
                message,
                deadline_ms: None,
            }));
            first.get_or_insert((gate, rec));
        }
        if let Err(e) = self.cx.shared.commit(std::mem::take(writes)).await {
            return TryError::Fatal(e.stored(Some(node)));
        }
        match first {
            Some((gate, rec)) => TryError::Waiting {
                gate,
                rec: Box::new(rec),
            },
            None => super::fatal(
                self.cx,
                &pipec_diagnostic::INTERNAL_ERROR,
                format!("`{node}`: the server `{}` asked nothing", self.server),
            ),
        }
    }

    /// What the gate shows: who asks, during what, the server's words (cut), and how
    /// to answer.
    fn message(&self, question: &Question) -> String {
        let text = pipec_base::source::shorten(&question.message, MAX_MESSAGE_BYTES);
        format!(
            "The server `{}` asks, while `{}` calls `{}`:\n{text}\nAnswer with the form's fields as JSON, or null to decline.",
            self.server, self.cx.unit.node.name, self.tool
        )
    }
}
