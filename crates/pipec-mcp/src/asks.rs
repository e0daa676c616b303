//! What pipec answers when a server asks something in the middle of a request: an
//! `elicitation/create` sent to it (2025-11-25), or the input requests of an
//! `input_required` result (2026-07-28), which pipec answers and sends again with the
//! server's `requestState`; a model's reply (sampling) by the session's [`Sampler`]. Also
//! the client pipec is to rmcp, with the capabilities those answers imply. The roots
//! pipec lists are none.

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, ExtensionCapabilities, FormElicitationCapability,
    Implementation, InputRequest, InputRequests, InputResponses, TASKS_EXTENSION_ID,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::sampling::{self, Sampler};

use rmcp::service::{RequestContext, RoleClient};
use serde_json::{Map, Value};

/// How a session answers a server's elicitation (a form it asks the user to fill in
/// during a tool call).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Elicitation {
    /// Decline every request, and do not declare the capability (the default).
    #[default]
    Decline,
    /// Accept a form with the defaults its schema declares, when every required field
    /// has one; decline it otherwise, and decline every URL request. For servers whose
    /// questions have a safe answer written into them.
    Defaults,
    /// Accept every form with these fields (those the form has), when they hold every
    /// field it requires; decline it otherwise.
    Answer(Map<String, Value>),
    /// Leave each form to a person: a tool call the server asks during ends with
    /// [`Called::Asked`], and is made again with the answer ([`Resumption`]).
    Ask,
}

/// A form a server asked for during a tool call, which the session's policy leaves to a
/// person.
#[derive(Clone, Debug, PartialEq)]
pub struct Question {
    /// The input request's key (2026-07-28); empty for an `elicitation/create` request
    /// (2025-11-25).
    pub key: String,
    /// What the server says to the person.
    pub message: String,
    /// The form, as a JSON Schema: an object of primitive fields, as the server sent it
    /// (rmcp reads it into the restricted form the specification allows).
    pub schema: Value,
    /// The SHA-256 of the message and the form: the same question asked again (the
    /// call made again, 2025-11-25) has the same one.
    pub fingerprint: String,
}

/// A person's answer to a [`Question`]: the form's content, or `None` for a refusal.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub key: String,
    pub fingerprint: String,
    pub content: Option<Map<String, Value>>,
}

impl Answer {
    /// The elicitation result it stands for, as an input response.
    pub fn response(&self) -> Value {
        serde_json::to_value(self.result()).unwrap_or(Value::Null)
    }

    /// The elicitation result it stands for.
    pub(crate) fn result(&self) -> ElicitResult {
        match &self.content {
            Some(content) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(Value::Object(content.clone())),
            None => ElicitResult::new(ElicitationAction::Decline),
        }
    }
}

/// What a tool call a server asked during carries when it is made again: every answer
/// given so far (a question asked again is answered with its own), and (2026-07-28) the
/// `requestState` of the last round with that round's responses, the person's answers
/// among them under their keys.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resumption {
    pub request_state: Option<String>,
    pub responses: Map<String, Value>,
    pub answers: Vec<Answer>,
}

/// How a tool call ended: with the server's result, with questions for a person, or
/// as a task the server runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Called {
    Result(super::ToolResult),
    Asked(Asked),
    /// The server runs the call as a task: [`super::Session::await_task`] polls it.
    Task(super::TaskRef),
}

/// The questions a server asked during a tool call, and what the call needs to be made
/// again with their answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Asked {
    pub questions: Vec<Question>,
    /// The round's `requestState` (2026-07-28); `None` for 2025-11-25, where the call is
    /// made again from the start and each question answered as it comes.
    pub request_state: Option<String>,
    /// The responses pipec gave the round's other requests (roots, forms its policy
    /// answered), sent again with the answers.
    pub responses: Map<String, Value>,
}

/// The `elicitation/create` requests (2025-11-25) of the one call in flight on a session
/// whose policy is [`Elicitation::Ask`]: the answers it carries, the questions that came.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    pub(crate) answers: Vec<Answer>,
    pub(crate) asked: Vec<Question>,
}

/// pipec as rmcp's client: who it says it is, what it declares, what it answers.
#[derive(Clone)]
pub(crate) struct Asks {
    pub(crate) elicitation: Elicitation,
    /// The model that answers the server's sampling requests; none declines them.
    pub(crate) sampler: Option<Arc<dyn Sampler>>,
    /// With [`Elicitation::Ask`], the call in flight (calls that may be asked are made
    /// one at a time on a 2025-11-25 session: its requests do not say which call they
    /// belong to).
    pub(crate) in_flight: Arc<Mutex<Option<InFlight>>>,
    /// Sampling requests answered, and tool calls made (each allows
    /// [`SAMPLES_PER_CALL`]): a server cannot spend the model beyond its calls.
    samples: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
}

/// A server may ask for at most this many model replies per tool call made on its
/// session (none before the first).
pub(crate) const SAMPLES_PER_CALL: u64 = 16;

impl Asks {
    pub(crate) fn new(elicitation: Elicitation, sampler: Option<Arc<dyn Sampler>>) -> Asks {
        Asks {
            elicitation,
            sampler,
            in_flight: Arc::default(),
            samples: Arc::default(),
            calls: Arc::default(),
        }
    }

    /// A tool call is made (or a task's result awaited): the server may ask for
    /// [`SAMPLES_PER_CALL`] more model replies.
    pub(crate) fn calling(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// The model, when the server may ask it once more.
    fn may_sample(&self) -> Result<&Arc<dyn Sampler>, String> {
        let Some(sampler) = &self.sampler else {
            return Err("pipec answers no sampling requests for this server".into());
        };
        let allowed = self
            .calls
            .load(Ordering::Relaxed)
            .saturating_mul(SAMPLES_PER_CALL);
        // A refused request does not count.
        let taken = self
            .samples
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < allowed).then_some(n + 1)
            });
        if taken.is_err() {
            return Err(format!(
                "pipec answers at most {SAMPLES_PER_CALL} sampling requests per tool call"
            ));
        }
        Ok(sampler)
    }

    /// The answers to a round's sampling requests (2026-07-28), by the session's model,
    /// keyed as they were; those it cannot answer are left out (and fail the call).
    pub(crate) async fn sample(&self, requests: &InputRequests) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, request) in requests.iter() {
            if let InputRequest::CreateMessage(request) = request
                && let Ok(params) = serde_json::to_value(&request.params)
                && let Ok(sampler) = self.may_sample()
                && let Ok(answer) = sampling::answer(&**sampler, &params).await
            {
                out.insert(key.clone(), answer);
            }
        }
        out
    }
}

impl std::fmt::Debug for Asks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asks")
            .field("elicitation", &self.elicitation)
            .field("samples", &self.sampler.is_some())
            .finish()
    }
}

impl ClientHandler for Asks {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Tool calls may become tasks (2026-07-28's extension): pipec polls them.
        let mut extensions = ExtensionCapabilities::new();
        extensions.insert(TASKS_EXTENSION_ID.to_string(), Map::new());
        capabilities.extensions = Some(extensions);
        if self.sampler.is_some() {
            #[allow(deprecated)] // SEP-2577 deprecates sampling; 2025-11-25 servers ask for it
            let sampling = rmcp::model::SamplingCapability::default();
            capabilities.sampling = Some(sampling);
        }
        if self.elicitation != Elicitation::Decline {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("pipec", env!("CARGO_PKG_VERSION")),
        )
    }

    #[allow(deprecated)] // SEP-2577 deprecates sampling; 2025-11-25 servers ask for it
    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        let sampler = self
            .may_sample()
            .map_err(|e| ErrorData::invalid_request(e, None))?;
        let params = serde_json::to_value(&params)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let answer = sampling::answer(&**sampler, &params)
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        serde_json::from_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if self.elicitation != Elicitation::Ask {
            return Ok(self.elicit(&request));
        }
        let Some(question) = question("", &request) else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let mut guard = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        let Some(call) = guard.as_mut() else {
            // Not during a tool call (a read, a listing): nobody waits to be asked.
            return Ok(ElicitResult::new(ElicitationAction::Cancel));
        };
        // Each answer is given once: the same question asked again later in the call is
        // a question of its own.
        if let Some(at) = call
            .answers
            .iter()
            .position(|a| a.fingerprint == question.fingerprint)
        {
            return Ok(call.answers.remove(at).result());
        }
        // Asked of a person: the call ends, and is made again once they answered.
        if call.asked.len() < MAX_QUESTIONS {
            call.asked.push(question);
        }
        Ok(ElicitResult::new(ElicitationAction::Cancel))
    }
}

/// At most this many questions are kept from one call.
const MAX_QUESTIONS: usize = 16;

/// A form request as a question for a person; `None` for a URL request (pipec declares
/// forms only).
fn question(key: &str, request: &ElicitRequestParams) -> Option<Question> {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = request
    else {
        return None;
    };
    let mut schema = serde_json::to_value(requested_schema).ok()?;
    // The dialect is the form's (a flat object of primitives), whatever it names.
    if let Some(o) = schema.as_object_mut() {
        o.remove("$schema");
    }
    Some(Question::new(key.to_string(), message.clone(), schema))
}

impl Question {
    /// A question with its fingerprint: the SHA-256 of its message and form, which a
    /// question asked again shares.
    pub fn new(key: String, message: String, schema: Value) -> Question {
        let fingerprint = pipec_base::digest::sha256_hex(
            serde_json::to_vec(&serde_json::json!([message, schema])).unwrap_or_default(),
            16,
        );
        Question {
            key,
            message,
            schema,
            fingerprint,
        }
    }
}

/// What one round of input requests (2026-07-28) gets from the policy.
pub(crate) enum Round {
    /// Every request answered: the call is sent again with these.
    Answered(InputResponses),
    /// Some are for a person.
    Asked(Vec<Question>, Map<String, Value>),
    /// A request pipec does not answer (sampling).
    Unanswerable,
}

impl Asks {
    /// The answer to one elicitation, by a policy that does not ask a person.
    fn elicit(&self, request: &ElicitRequestParams) -> ElicitResult {
        let declined = ElicitResult::new(ElicitationAction::Decline);
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        else {
            return declined;
        };
        let schema = serde_json::to_value(requested_schema).unwrap_or(Value::Null);
        let content = match &self.elicitation {
            Elicitation::Defaults => defaults(&schema),
            Elicitation::Answer(given) => fitted(given, &schema),
            Elicitation::Decline | Elicitation::Ask => None,
        };
        match content {
            Some(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
            }
            None => declined,
        }
    }

    /// The answers to an `input_required` result's requests, keyed as they were: by the
    /// policy, by a person's earlier `answers` (the same question; each answer is given
    /// once, and taken out), or left to a person.
    pub(crate) fn answer(
        &self,
        requests: &InputRequests,
        answers: &mut Vec<Answer>,
        sampled: &Map<String, Value>,
    ) -> Round {
        let mut responses = Map::new();
        let mut questions = Vec::new();
        for (key, request) in requests.iter() {
            let answer = match request {
                InputRequest::Elicitation(request) if self.elicitation == Elicitation::Ask => {
                    match question(key, &request.params) {
                        Some(q) => {
                            match answers.iter().position(|a| a.fingerprint == q.fingerprint) {
                                Some(at) => answers.remove(at).response(),
                                None => {
                                    questions.push(q);
                                    continue;
                                }
                            }
                        }
                        None => serde_json::to_value(ElicitResult::new(ElicitationAction::Decline))
                            .unwrap_or(Value::Null),
                    }
                }
                InputRequest::Elicitation(request) => {
                    serde_json::to_value(self.elicit(&request.params)).unwrap_or(Value::Null)
                }
                InputRequest::ListRoots(_) => serde_json::json!({ "roots": [] }),
                InputRequest::CreateMessage(_) => match sampled.get(key) {
                    Some(answer) => answer.clone(),
                    None => return Round::Unanswerable,
                },
                // What later revisions add.
                _ => return Round::Unanswerable,
            };
            responses.insert(key.clone(), answer);
        }
        if questions.is_empty() {
            Round::Answered(responses.into_iter().collect())
        } else {
            Round::Asked(questions, responses)
        }
    }
}

/// The fields of `given` the form has, when they hold every field it requires.
fn fitted(given: &Map<String, Value>, schema: &Value) -> Option<Map<String, Value>> {
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let answer: Map<String, Value> = given
        .iter()
        .filter(|(name, _)| properties.contains_key(*name))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let required = schema.get("required").and_then(Value::as_array);
    let complete = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .all(|name| answer.contains_key(name));
    complete.then_some(answer)
}

/// The answer a form's schema writes into it: each property's `default`; `None` when a
/// required property has none.
fn defaults(schema: &Value) -> Option<Map<String, Value>> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let answer: Map<String, Value> = properties
        .into_iter()
        .flatten()
        .filter_map(|(name, property)| Some((name.clone(), property.get("default")?.clone())))
        .collect();
    let required = schema.get("required").and_then(Value::as_array);
    let complete = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .all(|name| answer.contains_key(name));
    complete.then_some(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Echo;

    impl Sampler for Echo {
        fn sample(&self, _: sampling::SamplingRequest) -> sampling::SampleFuture<'_> {
            Box::pin(async {
                Ok(sampling::SamplingReply {
                    text: "hi".into(),
                    model: "echo".into(),
                    stop_reason: None,
                })
            })
        }
    }

    #[test]
    fn a_server_samples_only_during_calls_and_at_most_so_often_per_call() {
        let asks = Asks::new(Elicitation::Decline, Some(Arc::new(Echo)));
        assert!(asks.may_sample().is_err(), "no call made yet");
        asks.calling();
        for _ in 0..SAMPLES_PER_CALL {
            assert!(asks.may_sample().is_ok());
        }
        let refused = asks.may_sample().err().expect("past the cap");
        assert!(refused.contains("at most 16"), "{refused}");
        asks.calling();
        assert!(asks.may_sample().is_ok(), "a second call allows more");
        let without = Asks::new(Elicitation::Decline, None);
        without.calling();
        assert!(without.may_sample().is_err());
    }

    #[test]
    fn a_form_is_answered_with_its_defaults() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "tags": {"type": "array", "default": ["a"]},
                "note": {"type": "string"}
            },
            "required": ["name"]
        });
        let answer = defaults(&schema).expect("every required field has a default");
        assert_eq!(
            Value::Object(answer),
            json!({"name": "John Doe", "age": 30, "tags": ["a"]})
        );
    }

    #[test]
    fn a_required_field_without_a_default_declines_the_form() {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        });
        assert_eq!(defaults(&schema), None);
    }

    #[test]
    fn pipec_names_itself_and_declares_elicitation_only_when_it_answers() {
        let declines = Asks::new(Elicitation::Decline, None).get_info();
        assert_eq!(declines.client_info.name, "pipec");
        assert_eq!(declines.client_info.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            serde_json::to_value(&declines.capabilities).expect("JSON"),
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
        let answers = Asks::new(Elicitation::Defaults, None).get_info();
        assert_eq!(
            serde_json::to_value(&answers.capabilities).expect("JSON"),
            json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
    }
}
