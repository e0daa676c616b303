//! The values a template sees: a node's parameters, with the optional record fields a
//! value leaves out present as none. Which fields are optional is read from the
//! parameters' types (their JSON Schemas in the plan), never guessed from the values, so
//! `{% if ack.note %}` over `note: string?` tests the field instead of failing on an
//! undefined value, and a field the type does not declare stays undefined.

use std::collections::BTreeMap;

use serde_json::Value;

use pipec_plan::Node;

/// How deep into a value (and through how many `$ref`s at one level) the completion goes;
/// deeper values are left as they are rather than risk the stack.
const MAX_DEPTH: u32 = 64;

/// The node's parameter values as its templates see them: every record field its type
/// declares optional and the value leaves out is present as `null` (none).
pub fn template_context(
    node: &Node,
    params: &BTreeMap<String, Value>,
    defs: &BTreeMap<String, Value>,
) -> BTreeMap<String, Value> {
    let mut context = params.clone();
    for p in &node.params {
        if let Some(value) = context.get_mut(&p.name) {
            complete(value, &p.schema, defs, 0);
        }
    }
    context
}

/// Adds the optional fields `value` leaves out, as `null`, wherever `schema` declares a
/// record, through lists, maps, optionals and named types.
fn complete(value: &mut Value, schema: &Value, defs: &BTreeMap<String, Value>, depth: u32) {
    if depth > MAX_DEPTH || value.is_null() {
        return;
    }
    let Some(schema) = schema.as_object() else {
        return;
    };
    // A reference is not its content: its fields are the reference's own.
    if schema.contains_key("x-pipec-ref") {
        return;
    }
    if let Some(target) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(pipec_schema::refs::def_name)
        .and_then(|name| defs.get(name))
    {
        complete(value, target, defs, depth + 1);
    }
    // `T?` is `anyOf: [T, null]`; a documented named type is `allOf: [T]`.
    for key in ["anyOf", "allOf"] {
        if let Some(alternatives) = schema.get(key).and_then(Value::as_array) {
            for alternative in alternatives {
                complete(value, alternative, defs, depth + 1);
            }
        }
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                let required = |name: &str| {
                    schema
                        .get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(name)))
                };
                for (name, field_schema) in properties {
                    match fields.get_mut(name) {
                        Some(field) => complete(field, field_schema, defs, depth + 1),
                        None if !required(name) => {
                            fields.insert(name.clone(), Value::Null);
                        }
                        None => {}
                    }
                }
            }
            if let Some(entry) = schema.get("additionalProperties")
                && entry.is_object()
            {
                for field in fields.values_mut() {
                    complete(field, entry, defs, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for x in items {
                    complete(x, item, defs, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defs() -> BTreeMap<String, Value> {
        [(
            "Ack".to_string(),
            json!({
                "type": "object",
                "properties": {
                    "ok": { "type": "boolean" },
                    "note": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
                    "by": { "anyOf": [{ "$ref": "#/$defs/Who" }, { "type": "null" }] }
                },
                "required": ["ok"]
            }),
        ), (
            "Who".to_string(),
            json!({
                "type": "object",
                "properties": { "name": { "type": "string" }, "team": { "anyOf": [{ "type": "string" }, { "type": "null" }] } },
                "required": ["name"]
            }),
        )]
        .into_iter()
        .collect()
    }

    fn completed(value: Value, schema: Value) -> Value {
        let mut v = value;
        complete(&mut v, &schema, &defs(), 0);
        v
    }

    #[test]
    fn optional_fields_left_out_are_none_and_required_ones_stay_missing() {
        let ack = json!({ "$ref": "#/$defs/Ack" });
        assert_eq!(
            completed(json!({ "ok": true }), ack.clone()),
            json!({ "ok": true, "note": null, "by": null })
        );
        // A present optional record is completed in turn; a missing required field is
        // not invented, and an undeclared field is kept as it is.
        assert_eq!(
            completed(json!({ "by": { "name": "ann" }, "extra": 1 }), ack),
            json!({ "by": { "name": "ann", "team": null }, "note": null, "extra": 1 })
        );
    }

    #[test]
    fn lists_maps_and_optionals_are_walked() {
        let list = json!({ "type": "array", "items": { "$ref": "#/$defs/Who" } });
        assert_eq!(
            completed(json!([{ "name": "a" }, { "name": "b", "team": "x" }]), list),
            json!([{ "name": "a", "team": null }, { "name": "b", "team": "x" }])
        );
        let map = json!({ "anyOf": [{ "type": "object", "additionalProperties": { "$ref": "#/$defs/Who" } }, { "type": "null" }] });
        assert_eq!(
            completed(json!({ "k": { "name": "a" } }), map.clone()),
            json!({ "k": { "name": "a", "team": null } })
        );
        assert_eq!(completed(Value::Null, map), Value::Null);
    }

    #[test]
    fn references_and_untyped_values_are_left_alone() {
        let reference = json!({
            "type": "object",
            "properties": { "uri": { "type": "string" } },
            "required": ["uri"],
            "x-pipec-ref": { "$ref": "#/$defs/Who" }
        });
        let r = json!({ "uri": "mcp://x/1", "pipec_ref": 1 });
        assert_eq!(completed(r.clone(), reference), r);
        assert_eq!(completed(json!({ "a": 1 }), json!({})), json!({ "a": 1 }));
    }

    #[test]
    fn a_type_that_refers_to_itself_ends() {
        let mut defs = BTreeMap::new();
        defs.insert("Loop".to_string(), json!({ "$ref": "#/$defs/Loop" }));
        let mut v = json!({ "a": 1 });
        complete(&mut v, &json!({ "$ref": "#/$defs/Loop" }), &defs, 0);
        assert_eq!(v, json!({ "a": 1 }));
    }
}
