//! The schemas a model is shown: a node's output schema with the plan's definitions
//! attached (what a prompt's `output_schema` renders), a tool's parameters with the
//! definitions they reach, and a tool as the OpenAI chat API lists it.
//!
//! The runtime sends these and the checker sizes them (`pipec budget`, P0408), so both
//! read them from here and a prompt is never sized against a schema it does not send.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::refs::referenced_defs;

/// How strictly records are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Extra fields are allowed (tool results, `exec` output, resources).
    Open,
    /// No field a record does not declare (gate answers, inputs given by people).
    Closed,
    /// Closed, and every field required (optional ones nullable), as strict structured
    /// model output wants.
    Strict,
}

/// The schema with every one of `defs` attached, as a model or a validator needs it;
/// see [`Mode`].
pub fn full_schema(defs: &BTreeMap<String, Value>, schema: &Value, mode: Mode) -> Value {
    let mut root = match schema {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    };
    let mut defs = Value::Object(defs.clone().into_iter().collect());
    if mode != Mode::Open {
        close(&mut root, mode == Mode::Strict);
        close(&mut defs, mode == Mode::Strict);
    }
    if let Value::Object(m) = &mut root
        && let Value::Object(d) = &defs
        && !d.is_empty()
    {
        m.insert("$defs".into(), defs);
    }
    root
}

/// The schema with only the definitions it reaches, for showing (an answer's shape, a
/// tool's parameters), not every type of the plan.
pub fn shown_schema(defs: &BTreeMap<String, Value>, schema: &Value) -> Value {
    let mut reached = BTreeSet::new();
    referenced_defs(schema, defs, &mut reached);
    let mut root = match schema {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    };
    if !reached.is_empty()
        && let Value::Object(m) = &mut root
    {
        let defs: serde_json::Map<String, Value> = reached
            .iter()
            .filter_map(|n| defs.get(n).map(|d| (n.clone(), d.clone())))
            .collect();
        m.insert("$defs".into(), Value::Object(defs));
    }
    root
}

/// The text a prompt's `output_schema` renders: the strict schema of the output, pretty.
pub fn output_schema_text(defs: &BTreeMap<String, Value>, output: &Value) -> String {
    serde_json::to_string_pretty(&full_schema(defs, output, Mode::Strict)).unwrap_or_default()
}

/// A tool as a chat request lists it (`tools: [...]` of the OpenAI chat API).
pub fn function_tool(name: &str, description: Option<&str>, parameters: &Value) -> Value {
    json!({ "type": "function", "function": { "name": name, "description": description, "parameters": parameters } })
}

/// Forbids properties a record does not declare; `all_required` also makes every
/// property required (optional ones are nullable in the plan's schemas).
fn close(schema: &mut Value, all_required: bool) {
    match schema {
        Value::Object(m) => {
            if m.get("type").and_then(Value::as_str) == Some("object")
                && m.contains_key("properties")
            {
                m.insert("additionalProperties".into(), Value::Bool(false));
                if all_required {
                    let names: Vec<Value> = m
                        .get("properties")
                        .and_then(Value::as_object)
                        .map(|p| p.keys().map(|k| Value::String(k.clone())).collect())
                        .unwrap_or_default();
                    m.insert("required".into(), Value::Array(names));
                }
            }
            for (_, v) in m.iter_mut() {
                close(v, all_required);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| close(v, all_required)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_schemas_forbid_extra_fields_and_require_all() {
        let mut s = json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": [] });
        close(&mut s, true);
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["required"], json!(["a"]));
        let mut c = json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": [] });
        close(&mut c, false);
        assert_eq!(c["additionalProperties"], json!(false));
        assert_eq!(c["required"], json!([]));
    }
}
