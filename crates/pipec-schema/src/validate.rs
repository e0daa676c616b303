//! Validating values against schemas that refer to a set of `$defs` (a plan's: inputs,
//! gate answers, model, host and `exec` outputs). Validators are compiled once per schema
//! and [`Mode`], with the jsonschema crate (this module is the `validate` feature's).
//!
//! Every integer of a schema is bounded to 64 bits when it is compiled: pipec's `int` is
//! an `i64`, and JSON parsers turn a longer integer literal into a float (`1e+23`), which
//! JSON Schema would otherwise still call an integer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

pub use crate::shown::Mode;

/// Why a value was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum ValidationError {
    /// The value does not fit: the first few problems, with their paths.
    Mismatch { problems: Vec<String> },
    /// The plan holds a schema the validator cannot compile.
    Schema { problem: String },
}

impl std::fmt::Display for ValidationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValidationError::Mismatch { problems } => f.write_str(&problems.join("; ")),
            ValidationError::Schema { problem } => {
                write!(f, "the plan holds an invalid schema: {problem}")
            }
        }
    }
}

/// Compiled validators, keyed by (schema, mode).
pub struct Validators {
    defs: BTreeMap<String, Value>,
    cache: Mutex<HashMap<(String, Mode), Arc<jsonschema::Validator>>>,
}

impl Validators {
    /// Validators for schemas that refer to no named type.
    pub fn empty() -> Validators {
        Validators::new(BTreeMap::new())
    }

    /// Validators for schemas whose `$ref`s point into `defs` (a plan's).
    pub fn new(defs: BTreeMap<String, Value>) -> Validators {
        Validators {
            defs,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The schema with the plan's definitions attached, as a model or a validator needs
    /// it; see [`Mode`].
    pub fn full_schema(&self, schema: &Value, mode: Mode) -> Value {
        crate::shown::full_schema(&self.defs, schema, mode)
    }

    /// The schema with only the definitions it reaches, for showing to a person (an
    /// answer's shape, not every type of the plan).
    pub fn shown_schema(&self, schema: &Value) -> Value {
        crate::shown::shown_schema(&self.defs, schema)
    }

    fn validator(
        &self,
        schema: &Value,
        mode: Mode,
    ) -> Result<Arc<jsonschema::Validator>, ValidationError> {
        let key = (schema.to_string(), mode);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache.get(&key) {
            return Ok(v.clone());
        }
        let mut full = self.full_schema(schema, mode);
        bound_integers(&mut full);
        let v =
            Arc::new(
                jsonschema::validator_for(&full).map_err(|e| ValidationError::Schema {
                    problem: e.to_string(),
                })?,
            );
        cache.insert(key, v.clone());
        Ok(v)
    }

    /// Removes from `value` the record fields `schema` does not declare
    /// ([`crate::declared`]): what a value read openly keeps once it is checked.
    pub fn keep_declared(&self, schema: &Value, value: &mut Value) {
        crate::declared::keep_declared(schema, &self.defs, value);
    }

    /// Checks a value; the error lists the first few problems with their paths.
    pub fn check(&self, schema: &Value, value: &Value, mode: Mode) -> Result<(), ValidationError> {
        // Every value a run takes in is checked here, whatever its type (`json` too): one
        // nested past the limit could not be read back from the store.
        if pipec_base::nesting::value_too_deep(value) {
            return Err(ValidationError::Mismatch {
                problems: vec![format!(
                    "the value nests more than {} levels of arrays and objects",
                    pipec_base::nesting::MAX_VALUE_NESTING
                )],
            });
        }
        let v = self.validator(schema, mode)?;
        let problems: Vec<String> = v
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
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ValidationError::Mismatch { problems })
        }
    }
}

/// Bounds every `integer` to the range of an `i64`.
fn bound_integers(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            let is_integer = match m.get("type") {
                Some(Value::String(t)) => t == "integer",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
                _ => false,
            };
            if is_integer {
                m.entry("minimum").or_insert(Value::from(i64::MIN));
                m.entry("maximum").or_insert(Value::from(i64::MAX));
            }
            for (_, v) in m.iter_mut() {
                bound_integers(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(bound_integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integers_beyond_64_bits_do_not_fit() {
        let plan_defs = Validators::empty();
        let int = json!({ "type": "integer" });
        let huge: Value = serde_json::from_str("100000000000000000000000").unwrap_or_default();
        assert!(huge.is_f64(), "the parser makes a float of it");
        assert!(plan_defs.check(&int, &huge, Mode::Open).is_err());
        assert!(plan_defs.check(&int, &json!(i64::MAX), Mode::Open).is_ok());
        assert!(plan_defs.check(&int, &json!(-5), Mode::Open).is_ok());
    }
}
