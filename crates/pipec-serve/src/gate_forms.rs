//! A served pipeline's gates asked in-band: a gate the run waits at becomes a form the
//! calling client shows its user (MCP elicitation), when its answer type can be one
//! (`pipec_schema::form`), keyed by the gate's name. The state a call keeps meanwhile
//! names the thread and the gates asked; the client's answers come back keyed the same
//! way, as elicitation results: `accept` with the form's content is the gate's answer,
//! `decline` and `cancel` leave the gate waiting (the run's link answers the call). A
//! gate that waits for the client itself is asked of a client that declared it: a turn of
//! its model as sampling, a gate of its roots (`ask = "roots"`) as `roots/list`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use pipec_mcp::server::{Abilities, CallFailure, InputNeeded, Question};
use pipec_plan::{Body, Plan};
use pipec_runtime::{ClientAsk, PendingGate};
use pipec_schema::form::{Form, form_of};

/// What a call that asked keeps until the client answers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Waiting {
    pub(crate) thread: String,
    pub(crate) asked: Vec<String>,
}

impl Waiting {
    fn to_bytes(&self) -> Vec<u8> {
        json!({ "thread": self.thread, "asked": self.asked })
            .to_string()
            .into_bytes()
    }

    /// The state back from the client (sealed, so it is what this server made; still
    /// read with care).
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Waiting, CallFailure> {
        let bad = || CallFailure::InvalidArguments("the requestState is not a run's".into());
        let value: Value = serde_json::from_slice(bytes).map_err(|_| bad())?;
        let thread = value
            .get("thread")
            .and_then(Value::as_str)
            .ok_or_else(bad)?;
        let asked = value
            .get("asked")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(|g| g.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Waiting {
            thread: thread.to_string(),
            asked,
        })
    }
}

/// The form a gate is asked with, when its answer type can be one.
pub(crate) fn gate_form(gate: &str, schema: &Value) -> Option<Form> {
    form_of(schema, gate)
}

/// The questions for the gates `thread` (of `plan`) waits at that the client `can`
/// answer: its model's replies, its roots, and the gates a form can ask (filled in with
/// what the gate suggests); `None` when there are none.
pub(crate) fn questions(
    thread: &str,
    plan: &Plan,
    gates: &[PendingGate],
    can: Abilities,
) -> Option<InputNeeded> {
    let mut questions = BTreeMap::new();
    for g in gates {
        match &g.client {
            Some(ClientAsk::Model(params)) => {
                if let (true, Some(params)) = (can.model, params.as_object()) {
                    questions.insert(
                        g.name.clone(),
                        Question::Model {
                            params: params.clone(),
                        },
                    );
                }
                continue;
            }
            Some(ClientAsk::Roots) => {
                if can.roots {
                    questions.insert(g.name.clone(), Question::Roots);
                }
                continue;
            }
            None => {}
        }
        let Some(mut form) = gate_form(&g.name, &g.schema).filter(|_| can.forms) else {
            continue;
        };
        if let Some(Body::Gate {
            suggest: Some(answer),
            ..
        }) = plan.node(&g.name).map(|n| &n.body)
        {
            form = form.suggest(answer);
        }
        let message = if g.message.trim().is_empty() {
            format!("The run {thread} waits for an answer at `{}`.", g.name)
        } else {
            g.message.clone()
        };
        questions.insert(
            g.name.clone(),
            Question::Form {
                message,
                schema: form.schema,
            },
        );
    }
    if questions.is_empty() {
        return None;
    }
    let waiting = Waiting {
        thread: thread.to_string(),
        asked: questions.keys().cloned().collect(),
    };
    Some(InputNeeded {
        questions,
        state: waiting.to_bytes(),
    })
}

/// What a client said to one form.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Said {
    /// The form's content.
    Accepted(Value),
    /// Declined or cancelled: the gate waits on.
    Refused,
}

/// A sampling result as the answer of a gate that waits for the client's model: an
/// object with content (the runtime reads its text); anything else is invalid arguments.
pub(crate) fn sampled(gate: &str, result: &Value) -> Result<Value, CallFailure> {
    match result {
        Value::Object(fields) if fields.contains_key("content") => {
            let mut fields = fields.clone();
            fields.remove("_meta");
            Ok(Value::Object(fields))
        }
        _ => Err(CallFailure::InvalidArguments(format!(
            "the answer for `{gate}` is not a sampling result (`{{\"role\": \"assistant\", \"content\": {{\"type\": \"text\", \"text\": \"...\"}}}}`)"
        ))),
    }
}

/// A client's `ListRootsResult` as the answer of a gate of its roots, `{roots: [{uri,
/// name}]}`, each root with the fields the gate's type (`schema`, with its `$defs`)
/// declares; `None` for a request the client did not answer, as its `{"action":
/// "cancel"}` (the gate waits on).
pub(crate) fn rooted(
    gate: &str,
    result: &Value,
    schema: &Value,
) -> Result<Option<Value>, CallFailure> {
    if result.get("action").is_some() {
        return Ok(None);
    }
    let Some(roots) = result.get("roots").and_then(Value::as_array) else {
        return Err(CallFailure::InvalidArguments(format!(
            "the answer for `{gate}` is not a roots/list result (`{{\"roots\": [{{\"uri\": \"file:///...\"}}]}}`)"
        )));
    };
    let kept = root_fields(schema);
    let roots: Vec<Value> = roots
        .iter()
        .map(|root| {
            let mut fields = serde_json::Map::new();
            for key in ["uri", "name"] {
                if let Some(v) = root.get(key).filter(|_| kept.iter().any(|k| k == key)) {
                    fields.insert(key.into(), v.clone());
                }
            }
            Value::Object(fields)
        })
        .collect();
    Ok(Some(json!({ "roots": roots })))
}

/// The fields a root has in a roots gate's type: those its item schema lists (`uri` and
/// `name` when the schema cannot be read so far).
fn root_fields(schema: &Value) -> Vec<String> {
    use pipec_schema::refs::resolved;
    let defs: std::collections::BTreeMap<String, Value> = schema
        .get("$defs")
        .and_then(Value::as_object)
        .map(|d| d.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    // A nullable schema is `anyOf` the value and null: the value's.
    let present = |s: &Value| -> Value {
        let s = resolved(s, &defs);
        s.get("anyOf")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|v| v.get("type") != Some(&json!("null"))))
            .map_or_else(|| s.clone(), |v| resolved(v, &defs).clone())
    };
    let item = present(schema)
        .get("properties")
        .and_then(|p| p.get("roots"))
        .map(&present)
        .and_then(|roots| roots.get("items").map(&present));
    match item
        .as_ref()
        .and_then(|i| i.get("properties"))
        .and_then(Value::as_object)
    {
        Some(props) => props.keys().cloned().collect(),
        None => vec!["uri".into(), "name".into()],
    }
}

/// An elicitation result as what it says; a value that is none is invalid arguments.
pub(crate) fn said(gate: &str, result: &Value) -> Result<Said, CallFailure> {
    let wrong = || {
        CallFailure::InvalidArguments(format!(
            "the answer for `{gate}` is not an elicitation result (`{{\"action\": \"accept\", \"content\": {{...}}}}`, or the action `decline` or `cancel`)"
        ))
    };
    match result.get("action").and_then(Value::as_str) {
        Some("accept") => match result.get("content") {
            Some(content @ Value::Object(_)) => Ok(Said::Accepted(content.clone())),
            _ => Err(wrong()),
        },
        Some("decline" | "cancel") => Ok(Said::Refused),
        _ => Err(wrong()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &str, schema: Value) -> PendingGate {
        PendingGate {
            name: name.into(),
            message: String::new(),
            schema,
            deadline_ms: None,
            client: None,
        }
    }

    /// A plan whose gate `ok` suggests `true`.
    fn plan() -> Plan {
        let source = "gate ok() -> bool {\n  suggest = true\n}\n\noutput ok = ok\n";
        let loader = pipec_base::source::MemoryLoader::new().with("p/ok.pipe", source);
        match pipec_check::compile_with(&loader, std::path::Path::new("p/ok.pipe")) {
            Ok(plan) => plan,
            Err(e) => panic!("{}", e.render(Default::default())),
        }
    }

    const ALL: Abilities = Abilities {
        forms: true,
        model: true,
        roots: true,
    };

    #[test]
    fn only_gates_a_form_can_ask_are_asked_and_the_state_names_them() {
        let gates = [
            gate("ok", json!({ "type": "boolean" })),
            gate(
                "blob",
                json!({ "type": "string", "contentEncoding": "base64" }),
            ),
        ];
        let needed = questions("t1", &plan(), &gates, ALL).expect("one question");
        assert_eq!(needed.questions.keys().collect::<Vec<_>>(), ["ok"]);
        // The gate's suggestion is the form's default.
        assert!(matches!(
            needed.questions.get("ok"),
            Some(Question::Form { schema, .. })
                if schema["properties"]["ok"] == json!({ "type": "boolean", "default": true })
        ));
        let back = Waiting::from_bytes(&needed.state).expect("its own state");
        assert_eq!(
            back,
            Waiting {
                thread: "t1".into(),
                asked: vec!["ok".into()]
            }
        );
        assert_eq!(questions("t1", &plan(), &gates[1..], ALL), None);
        assert_eq!(
            questions(
                "t1",
                &plan(),
                &gates,
                Abilities {
                    forms: false,
                    ..ALL
                }
            ),
            None
        );
    }

    #[test]
    fn a_gate_of_the_clients_model_is_asked_of_a_client_that_samples() {
        let mut g = gate("think:g0:i0:model1", json!({}));
        g.client = Some(ClientAsk::Model(json!({ "messages": [], "maxTokens": 10 })));
        let model_only = Abilities {
            model: true,
            ..Abilities::default()
        };
        let needed = questions("t", &plan(), std::slice::from_ref(&g), model_only).expect("asked");
        assert!(matches!(
            needed.questions.get("think:g0:i0:model1"),
            Some(Question::Model { .. })
        ));
        assert_eq!(
            questions(
                "t",
                &plan(),
                &[g],
                Abilities {
                    model: false,
                    ..ALL
                }
            ),
            None
        );
        assert_eq!(
            sampled(
                "m",
                &json!({ "content": { "type": "text", "text": "Paris" }, "_meta": {} })
            ),
            Ok(json!({ "content": { "type": "text", "text": "Paris" } }))
        );
        assert!(sampled("m", &json!("Paris")).is_err());
    }

    #[test]
    fn a_gate_of_the_clients_roots_is_asked_of_a_client_with_roots() {
        let mut g = gate("workspace", json!({}));
        g.client = Some(ClientAsk::Roots);
        let needed = questions("t", &plan(), std::slice::from_ref(&g), ALL).expect("asked");
        assert_eq!(needed.questions.get("workspace"), Some(&Question::Roots));
        let no_roots = Abilities {
            roots: false,
            ..ALL
        };
        assert_eq!(questions("t", &plan(), &[g], no_roots), None);
    }

    #[test]
    fn roots_keep_the_fields_the_gates_type_declares() {
        let result = json!({ "roots": [
            { "uri": "file:///src", "name": "src", "_meta": { "x": 1 } },
            { "uri": "file:///docs" }
        ] });
        // The type written out, and through `$defs` with the list optional.
        let both = json!({ "type": "object", "properties": { "roots": { "type": "array",
            "items": { "type": "object", "properties": { "uri": { "type": "string" },
            "name": { "type": "string" } } } } } });
        assert_eq!(
            rooted("r", &result, &both),
            Ok(Some(json!({ "roots": [
                { "uri": "file:///src", "name": "src" },
                { "uri": "file:///docs" }
            ] })))
        );
        let uri_only = json!({ "$ref": "#/$defs/Ws", "$defs": {
            "Ws": { "type": "object", "properties": { "roots": { "anyOf": [
                { "type": "array", "items": { "$ref": "#/$defs/Root" } }, { "type": "null" } ] } } },
            "Root": { "type": "object", "properties": { "uri": { "type": "string" } } } } });
        assert_eq!(
            rooted("r", &result, &uri_only),
            Ok(Some(
                json!({ "roots": [{ "uri": "file:///src" }, { "uri": "file:///docs" }] })
            ))
        );
        assert_eq!(rooted("r", &json!({ "action": "cancel" }), &both), Ok(None));
        assert!(matches!(
            rooted("r", &json!(["file:///src"]), &both),
            Err(CallFailure::InvalidArguments(_))
        ));
    }

    #[test]
    fn an_answer_is_an_elicitation_result_or_invalid() {
        assert_eq!(
            said("g", &json!({ "action": "accept", "content": { "a": 1 } })),
            Ok(Said::Accepted(json!({ "a": 1 })))
        );
        assert_eq!(
            said("g", &json!({ "action": "decline" })),
            Ok(Said::Refused)
        );
        for wrong in [
            json!(12345),
            json!(null),
            json!({ "action": "accept" }),
            json!({ "action": "maybe" }),
        ] {
            assert!(
                matches!(said("g", &wrong), Err(CallFailure::InvalidArguments(_))),
                "{wrong}"
            );
        }
    }
}
