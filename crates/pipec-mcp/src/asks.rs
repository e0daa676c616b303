//! What pipec answers when a server asks something in the middle of a request: an
//! `elicitation/create` sent to it (2025-11-25), or the input requests of an
//! `input_required` result (2026-07-28), which pipec answers and sends again with the
//! server's `requestState`. Also the client pipec is to rmcp, with the capabilities those
//! answers imply. Sampling is not offered; the roots pipec lists are none.

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, InputRequest,
    InputRequests, InputResponses,
};
use rmcp::service::{RequestContext, RoleClient};
use serde_json::{Map, Value};

/// How a session answers a server's elicitation (a form it asks the user to fill in
/// during a tool call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Elicitation {
    /// Decline every request, and do not declare the capability (the default).
    #[default]
    Decline,
    /// Accept a form with the defaults its schema declares, when every required field
    /// has one; decline it otherwise, and decline every URL request. For servers whose
    /// questions have a safe answer written into them.
    Defaults,
}

/// pipec as rmcp's client: who it says it is, what it declares, what it answers.
#[derive(Clone, Debug)]
pub(crate) struct Asks {
    pub(crate) elicitation: Elicitation,
}

impl ClientHandler for Asks {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitation != Elicitation::Decline {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("pipec", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.elicit(&request))
    }
}

impl Asks {
    /// The answer to one elicitation, by the policy.
    fn elicit(&self, request: &ElicitRequestParams) -> ElicitResult {
        let declined = ElicitResult::new(ElicitationAction::Decline);
        match (self.elicitation, request) {
            (
                Elicitation::Defaults,
                ElicitRequestParams::FormElicitationParams {
                    requested_schema, ..
                },
            ) => {
                let schema = serde_json::to_value(requested_schema).unwrap_or(Value::Null);
                match defaults(&schema) {
                    Some(content) => ElicitResult::new(ElicitationAction::Accept)
                        .with_content(Value::Object(content)),
                    None => declined,
                }
            }
            _ => declined,
        }
    }

    /// The answers to an `input_required` result's requests, keyed as they were; `None`
    /// when one of them is a request pipec does not answer (sampling).
    pub(crate) fn answer(&self, requests: &InputRequests) -> Option<InputResponses> {
        requests
            .iter()
            .map(|(key, request)| {
                let answer = match request {
                    InputRequest::Elicitation(request) => {
                        serde_json::to_value(self.elicit(&request.params)).ok()?
                    }
                    InputRequest::ListRoots(_) => serde_json::json!({ "roots": [] }),
                    // Sampling, and what later revisions add.
                    _ => return None,
                };
                Some((key.clone(), answer))
            })
            .collect()
    }
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
        let declines = Asks {
            elicitation: Elicitation::Decline,
        }
        .get_info();
        assert_eq!(declines.client_info.name, "pipec");
        assert_eq!(declines.client_info.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            serde_json::to_value(&declines.capabilities).expect("JSON"),
            json!({})
        );
        let answers = Asks {
            elicitation: Elicitation::Defaults,
        }
        .get_info();
        assert_eq!(
            serde_json::to_value(&answers.capabilities).expect("JSON"),
            json!({"elicitation": {"form": {}}})
        );
    }
}
