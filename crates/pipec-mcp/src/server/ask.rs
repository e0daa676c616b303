//! A tool call that asks its client: the [`Provider`] answers [`ToolAnswer::Ask`] with
//! its questions and a state, and the era the client speaks decides how they reach it.
//! In the 2026-07-28 era the call answers an `input_required` result: the questions as
//! `inputRequests`, the state sealed (HMAC, rmcp's `RequestStateCodec`, bound to the
//! tool) as `requestState`; the client calls again with `inputResponses` and the state,
//! which is opened, and refused when it was changed or made for another tool. In earlier
//! eras the questions are requests to the client on the call's own stream
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`), answered before the
//! call goes on; a client that fails to answer one has cancelled it. The provider sees
//! one model: questions out, answers and its state back.

use std::collections::BTreeMap;

use rmcp::model::{
    ClientCapabilities, InputRequest, InputRequests, InputRequiredResult, RequestStateCodec,
    SealOptions, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value, json};

use super::handler::Served;
use super::provider::{
    Abilities, CallContext, CallFailure, Progress, Question, ToolAnswer, ToolReply,
};

/// At most this many rounds of questions in one call of an era that asks on the call's
/// stream; the last call is made with nothing to ask, so the provider answers.
const MAX_ROUNDS: usize = 16;

/// The first protocol revision whose servers ask through `input_required` results.
const ROUNDS_ERA: &str = "2026-07-28";

/// A call's end: its reply, or the questions a client of the 2026-07-28 era answers
/// by calling again.
pub(super) enum Asked {
    Done(Result<ToolReply, CallFailure>),
    Rounds(InputRequiredResult),
}

/// What a client that declared `capabilities` can be asked.
fn abilities(capabilities: &ClientCapabilities) -> Abilities {
    Abilities {
        // `elicitation: {}` is forms (the revisions before URL elicitation had no modes).
        forms: capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none()),
        model: capabilities.sampling.is_some(),
        roots: capabilities.roots.is_some(),
    }
}

/// What the state of a call to `tool` is bound to: a state made for another tool is
/// refused.
fn bound_to(tool: &str) -> Vec<u8> {
    format!("tools/call {tool}").into_bytes()
}

/// The request a question is, as MCP spells it.
fn request_of(question: &Question) -> Value {
    match question {
        Question::Form { message, schema } => json!({
            "method": "elicitation/create",
            "params": { "mode": "form", "message": message, "requestedSchema": schema },
        }),
        Question::Model { params } => json!({
            "method": "sampling/createMessage",
            "params": params,
        }),
        Question::Roots => json!({ "method": "roots/list", "params": {} }),
    }
}

fn refused(message: &str) -> ErrorData {
    ErrorData::invalid_params(message.to_string(), None)
}

impl Served {
    /// Calls the tool `name`, asking the client what the provider asks, in the client's
    /// era; `answers` and `sealed` are what a client of the 2026-07-28 era sent back.
    pub(super) async fn asked_call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        progress: Option<Progress>,
        context: &RequestContext<RoleServer>,
        answers: Option<BTreeMap<String, Value>>,
        sealed: Option<String>,
    ) -> Result<Asked, ErrorData> {
        let rounds = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ROUNDS_ERA);
        let codec = self
            .provider
            .state_key()
            .and_then(|key| RequestStateCodec::try_new(key).ok());
        let declared = context.client_capabilities().unwrap_or_default();
        let mut can = abilities(&declared);
        let needs = self
            .provider
            .tools()
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.needs)
            .unwrap_or_default();
        if needs.model && !can.model {
            #[allow(deprecated)] // SEP-2577 deprecates sampling; both eras pipec serves have it
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_sampling().build(),
            ));
        }
        if needs.forms && !can.forms {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_elicitation().build(),
            ));
        }
        if rounds && codec.is_none() {
            // Without a key there is no state to trust: ask nothing.
            can = Abilities::default();
        }
        let state = match (sealed, &codec) {
            (None, _) => None,
            (Some(sealed), Some(codec)) if rounds => Some(
                codec
                    .open_with(&sealed, &bound_to(name))
                    .map_err(|_| refused("the requestState was not made by this server for this tool, or it was changed: call the tool again without it"))?,
            ),
            (Some(_), _) => {
                return Err(refused(
                    "this server asked nothing: a requestState is not expected",
                ));
            }
        };
        let mut call = CallContext {
            progress,
            abilities: can,
            answers: answers.unwrap_or_default(),
            state,
        };
        for round in 0..MAX_ROUNDS {
            if round + 1 == MAX_ROUNDS {
                call.abilities = Abilities::default();
            }
            let needed = match self
                .provider
                .call(name, arguments.clone(), call.clone())
                .await
            {
                Ok(ToolAnswer::Reply(reply)) => return Ok(Asked::Done(Ok(reply))),
                Err(e) => return Ok(Asked::Done(Err(e))),
                Ok(ToolAnswer::Ask(needed)) => needed,
            };
            if rounds {
                let Some(codec) = &codec else {
                    return Err(ErrorData::internal_error(
                        "the tool asked its client with no key to seal the state",
                        None,
                    ));
                };
                let mut requests = InputRequests::new();
                for (key, question) in &needed.questions {
                    let request: InputRequest = serde_json::from_value(request_of(question))
                        .map_err(|e| {
                            ErrorData::internal_error(format!("a question of `{key}`: {e}"), None)
                        })?;
                    requests.insert(key.clone(), request);
                }
                let state = codec.seal_with(
                    &needed.state,
                    &SealOptions::new().associated_data(&bound_to(name)),
                );
                return Ok(Asked::Rounds(InputRequiredResult::new(
                    Some(requests),
                    Some(state),
                )));
            }
            // Ask on the call's stream, one question after another.
            let mut answers = BTreeMap::new();
            for (key, question) in &needed.questions {
                let answer = match serde_json::from_value::<ServerRequest>(request_of(question)) {
                    Ok(request) => tokio::select! {
                        sent = context.peer.send_request(request) => sent
                            .ok()
                            .and_then(|r| serde_json::to_value(r).ok())
                            .unwrap_or_else(|| json!({ "action": "cancel" })),
                        () = context.ct.cancelled() => return Err(ErrorData::internal_error("the call was cancelled", None)),
                    },
                    Err(_) => json!({ "action": "cancel" }),
                };
                answers.insert(key.clone(), answer);
            }
            call = CallContext {
                progress: call.progress,
                abilities: can,
                answers,
                state: Some(needed.state),
            };
        }
        Err(ErrorData::internal_error(
            "the tool kept asking its client",
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every question is a request both eras can send: an input request of an
    /// `input_required` result, and a request on the call's stream.
    #[test]
    fn each_question_reads_as_an_input_request_and_a_server_request() {
        let schema = json!({
            "type": "object",
            "properties": { "go": { "type": "boolean" } },
            "required": ["go"]
        })
        .as_object()
        .cloned()
        .unwrap_or_default();
        let questions = [
            Question::Form {
                message: "Go?".into(),
                schema,
            },
            Question::Model {
                params: json!({ "messages": [], "maxTokens": 5 })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            },
            Question::Roots,
        ];
        for q in &questions {
            let request = request_of(q);
            let input: Result<InputRequest, _> = serde_json::from_value(request.clone());
            assert!(input.is_ok(), "{request}: {input:?}");
            let server: Result<ServerRequest, _> = serde_json::from_value(request.clone());
            assert!(server.is_ok(), "{request}: {server:?}");
        }
        assert_eq!(request_of(&Question::Roots)["method"], "roots/list");
    }
}
