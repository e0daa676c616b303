//! The schemas pipec writes: the constructors the lowering of types (`pipec-check`) and
//! the runtime's own answers (an agent's approval) build with, so every schema of a plan
//! has one spelling. Records are open (extra fields are allowed when reading);
//! [`crate::validate`] closes them where a value must be exact.

use serde_json::{Map, Value, json};

use crate::refs::DEFS;

/// A value of one JSON type: `string`, `integer`, `number`, `boolean`, `null`.
pub fn kind(name: &str) -> Value {
    json!({ "type": name })
}

/// A value of one JSON type, or `null` (`"type": [name, "null"]`).
pub fn kind_or_null(name: &str) -> Value {
    json!({ "type": [name, "null"] })
}

/// Bytes, as base64 text.
pub fn bytes() -> Value {
    json!({ "type": "string", "contentEncoding": "base64" })
}

/// Any value.
pub fn any() -> Value {
    json!({})
}

/// The definition `name` of the root's `$defs`.
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("{DEFS}{name}") })
}

/// A list of `items`.
pub fn list(items: Value) -> Value {
    json!({ "type": "array", "items": items })
}

/// `inner`, or `null`.
pub fn nullable(inner: Value) -> Value {
    json!({ "anyOf": [inner, { "type": "null" }] })
}

/// One of the strings `values`.
pub fn literals(values: &[String]) -> Value {
    json!({ "type": "string", "enum": values })
}

/// One of the strings `values`, each with its description when it has one.
pub fn described_literals(values: &[String], docs: &[Option<String>]) -> Value {
    let one_of: Vec<Value> = values
        .iter()
        .zip(docs)
        .map(|(v, d)| match d {
            Some(d) => json!({ "const": v, "description": d }),
            None => json!({ "const": v }),
        })
        .collect();
    json!({ "type": "string", "oneOf": one_of })
}

/// An object whose values are all `values`.
pub fn map(values: Value) -> Value {
    json!({ "type": "object", "additionalProperties": values })
}

/// An object with `properties`, the `required` ones among them.
pub fn record<K: Into<String>, R: Into<String>>(
    properties: impl IntoIterator<Item = (K, Value)>,
    required: impl IntoIterator<Item = R>,
) -> Value {
    let properties: Map<String, Value> =
        properties.into_iter().map(|(k, v)| (k.into(), v)).collect();
    let required: Vec<Value> = required
        .into_iter()
        .map(|r| Value::String(r.into()))
        .collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

/// The schema with a `description`; a `$ref`, whose siblings older readers ignore
/// (2020-12 allows them), is wrapped in an `allOf` to carry it.
pub fn described(mut schema: Value, doc: &str) -> Value {
    let Some(obj) = schema.as_object_mut() else {
        return schema;
    };
    if obj.contains_key("$ref") {
        return json!({ "allOf": [schema], "description": doc });
    }
    obj.insert("description".into(), Value::String(doc.to_string()));
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_reference_is_wrapped() {
        assert_eq!(
            described(reference("Deal"), "the deal"),
            json!({ "allOf": [{ "$ref": "#/$defs/Deal" }], "description": "the deal" })
        );
        assert_eq!(
            described(kind("string"), "a name"),
            json!({ "type": "string", "description": "a name" })
        );
        assert_eq!(
            record(
                [("a", kind("integer")), ("b", nullable(kind("string")))],
                ["a"]
            ),
            json!({
                "type": "object",
                "properties": { "a": { "type": "integer" }, "b": { "anyOf": [{ "type": "string" }, { "type": "null" }] } },
                "required": ["a"]
            })
        );
    }
}
