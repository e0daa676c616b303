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
    Abilities, CallContext, CallFailure, Progress, PromptArgumentSpec, PromptSpec, Question,
    TaskSupport, TaskView, ToolAnswer, ToolReply,
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
    /// The call goes on as a task.
    Task(TaskView),
}

/// What a client that declared `capabilities` can be asked.
pub(super) fn abilities(capabilities: &ClientCapabilities) -> Abilities {
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
pub(super) fn request_of(question: &Question) -> Value {
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

/// The first protocol revision whose forms have titled choices (`oneOf` of `const` and
/// `title`) and multi-select fields (SEP-1330) and a `mode`.
const TITLED_FORMS: &str = "2025-11-25";

/// A form's schema as revisions before [`TITLED_FORMS`] spell it (2025-06-18's
/// `PrimitiveSchemaDefinition`): a titled choice is `enum` with the titles as
/// `enumNames`; `None` when a field has no such spelling (a multi-select list), and the
/// form cannot be asked of such a client.
fn legacy_form(schema: &Map<String, Value>) -> Option<Map<String, Value>> {
    let mut schema = schema.clone();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for field in properties.values_mut() {
            let field = field.as_object_mut()?;
            if field.get("type").and_then(Value::as_str) == Some("array") {
                return None;
            }
            if let Some(Value::Array(choices)) = field.remove("oneOf") {
                let values = choices.iter().map(|c| c.get("const").cloned());
                let titles = choices.iter().map(|c| c.get("title").cloned());
                field.insert("enum".into(), Value::Array(values.collect::<Option<_>>()?));
                field.insert(
                    "enumNames".into(),
                    Value::Array(titles.collect::<Option<_>>()?),
                );
            }
        }
    }
    Some(schema)
}

/// The request `question` is for a client speaking `version` on the call's own stream:
/// a form as that revision spells it; `None` for a form it cannot be asked.
fn streamed_request(question: &Question, version: Option<&str>) -> Option<Value> {
    match question {
        Question::Form { message, schema } if version.is_some_and(|v| v < TITLED_FORMS) => {
            Some(json!({
                "method": "elicitation/create",
                "params": { "message": message, "requestedSchema": legacy_form(schema)? },
            }))
        }
        _ => Some(request_of(question)),
    }
}

/// The client's answer to `question`, asked on the request's own stream; one it did not
/// give (an error, a request it does not know, a form its revision cannot spell) is
/// `{"action": "cancel"}`.
async fn on_stream(
    context: &RequestContext<RoleServer>,
    question: &Question,
) -> Result<Value, ErrorData> {
    let version = context.protocol_version();
    let Some(request) = streamed_request(question, version.as_ref().map(|v| v.as_str()))
        .and_then(|r| serde_json::from_value::<ServerRequest>(r).ok())
    else {
        return Ok(json!({ "action": "cancel" }));
    };
    tokio::select! {
        sent = context.peer.send_request(request) => Ok(sent
            .ok()
            .and_then(|r| serde_json::to_value(r).ok())
            .unwrap_or_else(|| json!({ "action": "cancel" }))),
        () = context.ct.cancelled() => Err(ErrorData::internal_error("the request was cancelled", None)),
    }
}

/// The key of the form that asks a prompt's missing arguments.
const ARGUMENTS: &str = "arguments";

/// The form asking for the arguments `missing` of the prompt `name`: a text field each
/// (a choice for one of a set), all required.
fn arguments_form(name: &str, missing: &[&PromptArgumentSpec]) -> Question {
    let mut properties = Map::new();
    for a in missing {
        let mut field = json!({ "type": "string", "title": a.name });
        if let Some(d) = &a.description {
            field["description"] = json!(d);
        }
        if !a.values.is_empty() {
            field["enum"] = json!(a.values);
        }
        properties.insert(a.name.clone(), field);
    }
    let names: Vec<&str> = missing.iter().map(|a| a.name.as_str()).collect();
    let schema = json!({ "type": "object", "properties": properties, "required": names });
    Question::Form {
        message: format!("The prompt `{name}` needs: {}.", names.join(", ")),
        schema: schema.as_object().cloned().unwrap_or_default(),
    }
}

/// The fields of an accepted form as arguments (text, as prompt arguments are).
fn accepted_arguments(result: &Value) -> Option<BTreeMap<String, String>> {
    if result.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    let content = result.get("content")?.as_object()?;
    Some(
        content
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect(),
    )
}

fn refused(message: &str) -> ErrorData {
    ErrorData::invalid_params(message.to_string(), None)
}

impl Served {
    /// The arguments of the prompt `spec` with those a client that answers forms gave
    /// for the required ones it left out: asked on the request's stream (before
    /// 2026-07-28), or taken from `responses` and else asked with an `input_required`
    /// result, which needs no state (the client sends its arguments again). A client
    /// that cannot answer, or declines, is asked nothing more: the prompt refuses the
    /// arguments it lacks.
    pub(super) async fn prompt_arguments(
        &self,
        spec: &PromptSpec,
        arguments: &mut BTreeMap<String, String>,
        context: &RequestContext<RoleServer>,
        responses: Option<&BTreeMap<String, Value>>,
    ) -> Result<Option<InputRequiredResult>, ErrorData> {
        if let Some(given) = responses
            .and_then(|r| r.get(ARGUMENTS))
            .and_then(accepted_arguments)
        {
            for (k, v) in given {
                arguments.entry(k).or_insert(v);
            }
        }
        let missing: Vec<&PromptArgumentSpec> = spec
            .arguments
            .iter()
            .filter(|a| a.required && !arguments.contains_key(&a.name))
            .collect();
        let can = abilities(&context.client_capabilities().unwrap_or_default());
        if missing.is_empty() || !can.forms || responses.is_some() {
            return Ok(None);
        }
        let question = arguments_form(&spec.name, &missing);
        if context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ROUNDS_ERA)
        {
            let request: InputRequest = serde_json::from_value(request_of(&question))
                .map_err(|e| ErrorData::internal_error(format!("the arguments form: {e}"), None))?;
            let mut requests = InputRequests::new();
            requests.insert(ARGUMENTS.to_string(), request);
            return Ok(Some(InputRequiredResult::new(Some(requests), None)));
        }
        if let Some(given) = accepted_arguments(&on_stream(context, &question).await?) {
            for (k, v) in given {
                arguments.entry(k).or_insert(v);
            }
        }
        Ok(None)
    }

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
        let spec = self.provider.tools().into_iter().find(|t| t.name == name);
        let needs = spec.as_ref().map(|t| t.needs).unwrap_or_default();
        let tasks = declared.supports_tasks();
        if spec.is_some_and(|t| t.task == TaskSupport::Required) && !tasks {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
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
            tasks,
            // A traceparent is 55 characters; anything far longer is not one.
            traceparent: context
                .meta
                .get_traceparent()
                .filter(|t| t.len() <= 256)
                .map(str::to_string),
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
                Ok(ToolAnswer::Task(view)) => return Ok(Asked::Task(view)),
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
                answers.insert(key.clone(), on_stream(context, question).await?);
            }
            call = CallContext {
                progress: call.progress,
                abilities: can,
                answers,
                state: Some(needed.state),
                tasks,
                traceparent: call.traceparent,
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

    /// A client of 2025-06-18 reads titled choices as `enum` and `enumNames` (it has no
    /// `oneOf` form), and is not asked a form with a multi-select field; a client of
    /// 2025-11-25 or later gets the form as it is.
    #[test]
    fn a_form_is_spelled_in_the_clients_revision() {
        let form = |properties: Value| Question::Form {
            message: "Pick".into(),
            schema: json!({ "type": "object", "properties": properties, "required": [] })
                .as_object()
                .cloned()
                .unwrap_or_default(),
        };
        let titled = form(json!({
            "tone": { "type": "string", "oneOf": [
                { "const": "warm", "title": "Warm" }, { "const": "dry", "title": "Dry" }
            ] },
            "plain": { "type": "string", "enum": ["a", "b"] }
        }));
        let old = streamed_request(&titled, Some("2025-06-18")).expect("askable");
        assert_eq!(
            old["params"]["requestedSchema"]["properties"],
            json!({
                "tone": { "type": "string", "enum": ["warm", "dry"], "enumNames": ["Warm", "Dry"] },
                "plain": { "type": "string", "enum": ["a", "b"] }
            })
        );
        assert_eq!(old["params"].get("mode"), None);
        // rmcp keeps the legacy names on the way out.
        let sent: ServerRequest = serde_json::from_value(old).expect("a request");
        let sent = serde_json::to_value(sent).expect("json");
        assert_eq!(
            sent["params"]["requestedSchema"]["properties"]["tone"]["enumNames"],
            json!(["Warm", "Dry"])
        );
        assert_eq!(
            streamed_request(&titled, Some("2025-11-25")),
            Some(request_of(&titled))
        );
        let multi = form(json!({
            "tags": { "type": "array", "items": { "type": "string", "enum": ["x", "y"] } }
        }));
        assert_eq!(streamed_request(&multi, Some("2025-06-18")), None);
        assert!(streamed_request(&multi, Some("2025-11-25")).is_some());
    }
}
