//! Validating values against the plan's JSON Schemas (model output, exec output, gate
//! answers, host results). Schemas refer to the plan's `$defs`; they are compiled once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::plan::Plan;

/// Compiled validators, keyed by (schema, closed).
pub struct Validators {
    defs: Value,
    cache: Mutex<HashMap<(String, bool), Arc<jsonschema::Validator>>>,
}

impl Validators {
    pub fn new(plan: &Plan) -> Validators {
        Validators {
            defs: Value::Object(plan.defs.clone().into_iter().collect()),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The schema with the plan's definitions attached, as a model or validator needs it.
    /// `closed` forbids properties a record does not declare and makes every property
    /// required (optional ones are nullable), as strict structured output wants.
    pub fn full_schema(&self, schema: &Value, closed: bool) -> Value {
        let mut root = match schema {
            Value::Object(m) => Value::Object(m.clone()),
            _ => json!({}),
        };
        let mut defs = self.defs.clone();
        if closed {
            close(&mut root);
            close(&mut defs);
        }
        if let Value::Object(m) = &mut root
            && let Value::Object(d) = &defs
            && !d.is_empty()
        {
            m.insert("$defs".into(), defs);
        }
        root
    }

    fn validator(
        &self,
        schema: &Value,
        closed: bool,
    ) -> Result<Arc<jsonschema::Validator>, String> {
        let key = (schema.to_string(), closed);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache.get(&key) {
            return Ok(v.clone());
        }
        let full = self.full_schema(schema, closed);
        let v = Arc::new(
            jsonschema::validator_for(&full)
                .map_err(|e| format!("the plan holds an invalid schema: {e}"))?,
        );
        cache.insert(key, v.clone());
        Ok(v)
    }

    /// Checks a value; the error lists the first few problems with their paths.
    pub fn check(&self, schema: &Value, value: &Value, closed: bool) -> Result<(), String> {
        let v = self.validator(schema, closed)?;
        let errors: Vec<String> = v
            .iter_errors(value)
            .take(5)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("at {path}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// Makes object schemas closed and all their properties required.
fn close(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if m.get("type").and_then(Value::as_str) == Some("object")
                && m.contains_key("properties")
            {
                m.insert("additionalProperties".into(), Value::Bool(false));
                let names: Vec<Value> = m
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().map(|k| Value::String(k.clone())).collect())
                    .unwrap_or_default();
                m.insert("required".into(), Value::Array(names));
            }
            for (_, v) in m.iter_mut() {
                close(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(close),
        _ => {}
    }
}

/// A JSON object of the given map.
pub fn object(map: Map<String, Value>) -> Value {
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closing_a_schema_forbids_extra_fields() {
        let mut s = json!({ "type": "object", "properties": { "a": { "type": "string" } }, "required": [] });
        close(&mut s);
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(s["required"], json!(["a"]));
    }
}
