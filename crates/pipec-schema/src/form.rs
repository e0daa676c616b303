//! A value's schema as a form a person fills in: what MCP calls an elicitation's
//! `requestedSchema`, a flat object whose fields are text, numbers, yes/no, or one or
//! several of a set of strings. A gate's answer type becomes one when it can: a record of
//! such fields is the form itself; a single such value is a form of one field, named
//! after the gate, whose value is the answer. Anything else (nested records, lists of
//! records, bytes, `json`) is no form: a person answers it another way.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::refs::resolved;

/// A form, and how its filled-in content becomes the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    /// The `requestedSchema`: `{type: object, properties, required}`.
    pub schema: Map<String, Value>,
    /// The field that holds the whole answer, when the answer is not a record.
    pub wrapped: Option<String>,
}

impl Form {
    /// The form with `answer` (the gate's suggested answer, or part of it) as the
    /// fields' defaults, which a client shows filled in (MCP's SEP-1034): a record's
    /// values by field, a single value as its one field's.
    pub fn suggest(mut self, answer: &Value) -> Form {
        let Some(Value::Object(properties)) = self.schema.get_mut("properties") else {
            return self;
        };
        let defaults: Vec<(String, Value)> = match (&self.wrapped, answer) {
            (Some(field), value) => vec![(field.clone(), value.clone())],
            (None, Value::Object(fields)) => {
                fields.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            (None, _) => Vec::new(),
        };
        for (key, value) in defaults {
            if let Some(Value::Object(field)) = properties.get_mut(&key)
                && !value.is_null()
            {
                field.insert("default".into(), value);
            }
        }
        self
    }

    /// The answer a form's content gives: the content itself, or its one field.
    pub fn answer(&self, content: Value) -> Value {
        match (&self.wrapped, content) {
            (Some(field), Value::Object(mut fields)) => fields.remove(field).unwrap_or(Value::Null),
            (_, content) => content,
        }
    }
}

/// The form of a value of `schema` (whose `$defs` it carries, as a gate's does), or
/// `None` when no form can ask for it. `name` names the one field of a value that is not
/// a record.
pub fn form_of(schema: &Value, name: &str) -> Option<Form> {
    let defs: BTreeMap<String, Value> = schema
        .get("$defs")
        .and_then(Value::as_object)
        .map(|d| d.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let root = resolved(schema, &defs);
    if let Some(properties) = root.get("properties").and_then(Value::as_object) {
        let listed: Vec<&str> = root
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Map::new();
        let mut optional = Vec::new();
        for (key, field) in properties {
            let (field, may_lack) = field_of(field, &defs)?;
            if may_lack {
                optional.push(key.as_str());
            }
            fields.insert(key.clone(), field);
        }
        let required = listed
            .into_iter()
            .filter(|k| fields.contains_key(*k) && !optional.contains(k))
            .map(|k| Value::String(k.to_string()))
            .collect();
        return Some(Form {
            schema: object(fields, required),
            wrapped: None,
        });
    }
    let (field, optional) = field_of(root, &defs)?;
    let mut fields = Map::new();
    fields.insert(name.to_string(), field);
    let required = if optional {
        Vec::new()
    } else {
        vec![Value::String(name.to_string())]
    };
    Some(Form {
        schema: object(fields, required),
        wrapped: Some(name.to_string()),
    })
}

fn object(properties: Map<String, Value>, required: Vec<Value>) -> Map<String, Value> {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    schema
}

/// The bounds and words of a field a form keeps (MCP's forms take no others).
const KEPT: [&str; 7] = [
    "title",
    "description",
    "default",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
];

/// The formats of text a form knows.
const FORMATS: [&str; 4] = ["email", "uri", "date", "date-time"];

/// One field of a form, and whether it may be left out; `None` when a form cannot hold it.
fn field_of(schema: &Value, defs: &BTreeMap<String, Value>) -> Option<(Value, bool)> {
    let described = schema.get("description").cloned();
    let schema = resolved(schema, defs);
    // `T?`: `anyOf [T, null]`, or a type that lists null.
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        let inner: Vec<&Value> = any
            .iter()
            .filter(|s| s.get("type") != Some(&json!("null")))
            .collect();
        if inner.len() == 1 && any.len() == 2 {
            let (field, _) = field_of(inner[0], defs)?;
            return Some((with_description(field, described), true));
        }
        return None;
    }
    // A described reference: `allOf [T]` with the description beside it.
    if let Some([one]) = schema
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        let (field, optional) = field_of(one, defs)?;
        let described = schema.get("description").cloned().or(described);
        return Some((with_description(field, described), optional));
    }
    let (kind, optional) = match schema.get("type") {
        Some(Value::String(k)) => (k.as_str(), false),
        Some(Value::Array(kinds)) => {
            let named: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            match named.as_slice() {
                [k, "null"] | ["null", k] => (*k, true),
                _ => return None,
            }
        }
        _ => return None,
    };
    let mut field = Map::new();
    field.insert("type".into(), json!(kind));
    match kind {
        "string" if schema.get("contentEncoding").is_some() => return None,
        "string" => {
            if let Some(choices) = titled(schema) {
                field.insert("oneOf".into(), Value::Array(choices));
            } else if let Some(values) = schema.get("enum") {
                field.insert("enum".into(), values.clone());
            }
        }
        "integer" | "number" | "boolean" => {}
        "array" => {
            let items = resolved(schema.get("items")?, defs);
            if let Some(choices) = titled(items) {
                field.insert("items".into(), json!({ "anyOf": choices }));
            } else if let Some(values) = items.get("enum") {
                field.insert("items".into(), json!({ "type": "string", "enum": values }));
            } else {
                return None;
            }
            for k in ["minItems", "maxItems"] {
                if let Some(v) = schema.get(k) {
                    field.insert(k.into(), v.clone());
                }
            }
        }
        _ => return None,
    }
    for k in KEPT {
        if let Some(v) = schema.get(k) {
            field.insert(k.into(), v.clone());
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && kind == "string"
        && FORMATS.contains(&format)
    {
        field.insert("format".into(), json!(format));
    }
    Some((with_description(Value::Object(field), described), optional))
}

/// A set of strings with words for each (`oneOf` of `const`s): each choice's title is
/// its words, or the string itself.
fn titled(schema: &Value) -> Option<Vec<Value>> {
    let choices = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))?
        .as_array()?;
    choices
        .iter()
        .map(|c| {
            let value = c.get("const")?.as_str()?;
            let title = c
                .get("title")
                .or_else(|| c.get("description"))
                .and_then(Value::as_str)
                .unwrap_or(value);
            Some(json!({ "const": value, "title": title }))
        })
        .collect()
}

fn with_description(mut field: Value, described: Option<Value>) -> Value {
    if let (Some(d), Some(obj)) = (described, field.as_object_mut()) {
        obj.entry("description").or_insert(d);
    }
    field
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_simple_fields_is_the_form_itself() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "Who you are" },
                "age": { "type": "integer" },
                "nick": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
                "level": { "$ref": "#/$defs/Level" },
                "tags": { "type": "array", "items": { "type": "string", "enum": ["a", "b"] } }
            },
            "required": ["name", "age", "nick", "level", "tags"],
            "$defs": {
                "Level": { "type": "string", "oneOf": [
                    { "const": "low", "description": "Not urgent" },
                    { "const": "high" }
                ] }
            }
        });
        let form = form_of(&schema, "ask").expect("a form");
        assert_eq!(form.wrapped, None);
        assert_eq!(
            Value::Object(form.schema),
            json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "Who you are" },
                    "age": { "type": "integer" },
                    "nick": { "type": "string" },
                    "level": { "type": "string", "oneOf": [
                        { "const": "low", "title": "Not urgent" },
                        { "const": "high", "title": "high" }
                    ] },
                    "tags": { "type": "array", "items": { "type": "string", "enum": ["a", "b"] } }
                },
                "required": ["name", "age", "level", "tags"]
            })
        );
    }

    #[test]
    fn a_single_value_is_a_form_of_one_field_and_its_answer_is_that_field() {
        let form = form_of(&json!({ "type": "boolean" }), "approve").expect("a form");
        assert_eq!(
            form.schema.get("properties"),
            Some(&json!({ "approve": { "type": "boolean" } }))
        );
        assert_eq!(form.answer(json!({ "approve": true })), json!(true));
        assert_eq!(form.answer(json!({})), Value::Null);
    }

    #[test]
    fn a_suggested_answer_fills_in_the_fields_defaults() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "age": { "type": "integer" },
                "note": { "anyOf": [{ "type": "string" }, { "type": "null" }] }
            },
            "required": ["name", "age", "note"]
        });
        let form = form_of(&schema, "ask")
            .expect("a form")
            .suggest(&json!({ "name": "John Doe", "note": null, "other": 1 }));
        assert_eq!(
            form.schema.get("properties"),
            Some(&json!({
                "name": { "type": "string", "default": "John Doe" },
                "age": { "type": "integer" },
                "note": { "type": "string" }
            }))
        );
        let one = form_of(&json!({ "type": "boolean" }), "approve")
            .expect("a form")
            .suggest(&json!(true));
        assert_eq!(
            one.schema.get("properties"),
            Some(&json!({ "approve": { "type": "boolean", "default": true } }))
        );
    }

    #[test]
    fn what_a_form_cannot_hold_is_no_form() {
        for schema in [
            json!({}),
            json!({ "type": "string", "contentEncoding": "base64" }),
            json!({ "type": "object", "properties": { "inner": { "type": "object", "properties": {} } } }),
            json!({ "type": "array", "items": { "type": "object" } }),
            json!({ "type": "object", "additionalProperties": { "type": "string" } }),
        ] {
            assert_eq!(form_of(&schema, "x"), None, "{schema}");
        }
    }
}
