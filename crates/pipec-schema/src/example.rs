//! An example value of a schema, to show a person what an answer looks like (the
//! `--answer` of a paused thread's resume command).

use serde_json::{Map, Value};

/// An example value of a schema whose `$ref`s point into `defs`: its `const`, the first
/// of an `enum`, `oneOf` or `anyOf`, an object with its required properties, a placeholder of
/// each type; `null` past a few levels.
pub fn example(schema: &Value, defs: &Value) -> Value {
    example_at(schema, defs, 0)
}

fn example_at(schema: &Value, defs: &Value, depth: usize) -> Value {
    if depth > 6 {
        return Value::Null;
    }
    if let Some(r) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        return example_at(defs.get(r).unwrap_or(&Value::Null), defs, depth + 1);
    }
    if let Some(one) = schema.get("const") {
        return one.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return first.clone();
    }
    if let Some(first) = schema
        .get("oneOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|o| o.get("const"))
    {
        return first.clone();
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        return any
            .first()
            .map_or(Value::Null, |s| example_at(s, defs, depth + 1));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut m = Map::new();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, s) in props {
                    if required.contains(&k.as_str()) {
                        m.insert(k.clone(), example_at(s, defs, depth + 1));
                    }
                }
            }
            Value::Object(m)
        }
        Some("array") => Value::Array(Vec::new()),
        Some("string") => Value::String("...".into()),
        Some("integer") => Value::from(0),
        Some("number") => Value::from(0.0),
        Some("boolean") => Value::Bool(true),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_example_has_the_required_fields_and_the_first_choice() {
        let defs = json!({"Level": {"type": "string", "enum": ["low", "high"]}});
        let schema = json!({
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "level": {"$ref": "#/$defs/Level"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}
            },
            "required": ["approved", "level"]
        });
        assert_eq!(
            example(&schema, &defs),
            json!({"approved": true, "level": "low"})
        );
    }

    #[test]
    fn a_constant_is_its_own_example() {
        let schema = json!({
            "type": "object",
            "properties": {
                "content": {"type": "object", "properties": {"type": {"const": "text"}, "text": {"type": "string"}}, "required": ["type", "text"]}
            },
            "required": ["content"]
        });
        assert_eq!(
            example(&schema, &json!({})),
            json!({"content": {"type": "text", "text": "..."}})
        );
    }
}
