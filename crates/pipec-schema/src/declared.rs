//! A value kept to what its type declares. Values a run reads from outside (a tool's
//! result, what an `exec` prints, what a host function returns) are read openly: a
//! record may come with fields its type does not have. No node can read those (the
//! checker types every path by the declared type), so they are dropped before the value
//! is stored or passed on: the store holds what the type says, and a server's extra
//! fields cost nothing. A `json` value, a map's values of type `json`, and anything the
//! schema does not describe as a record are kept whole.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::refs::DEFS;

/// How deep a schema is followed; a value's nesting is bounded below this before it is
/// read (`pipec_base::nesting`), so a deeper schema only means a recursive type.
const MAX_DEPTH: usize = 256;

/// Removes from `value` every record field `schema` (whose `$ref`s point into `defs`)
/// does not declare, at every depth.
pub fn keep_declared(schema: &Value, defs: &BTreeMap<String, Value>, value: &mut Value) {
    keep(schema, defs, value, 0);
}

fn keep(schema: &Value, defs: &BTreeMap<String, Value>, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH || value.is_null() {
        return;
    }
    let Some(s) = schema.as_object() else {
        return;
    };
    if let Some(target) = s.get("$ref").and_then(Value::as_str) {
        if let Some(def) = target.strip_prefix(DEFS).and_then(|name| defs.get(name)) {
            keep(def, defs, value, depth + 1);
        }
        return;
    }
    // `allOf` wraps a described reference; `anyOf` an optional value (`T` or null). A
    // value fits each branch that is not `null`, so each is followed; a union of several
    // records is not a pipec type.
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            let typed: Vec<&Value> = branches
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [one] = typed.as_slice() {
                keep(one, defs, value, depth + 1);
            }
        }
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = s.get("properties").and_then(Value::as_object) {
                fields.retain(|name, _| properties.contains_key(name));
                for (name, field) in fields.iter_mut() {
                    if let Some(p) = properties.get(name) {
                        keep(p, defs, field, depth + 1);
                    }
                }
            } else if let Some(values) = s.get("additionalProperties").filter(|v| v.is_object()) {
                for field in fields.values_mut() {
                    keep(values, defs, field, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.get("items") {
                for v in items.iter_mut() {
                    keep(item, defs, v, depth + 1);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{any, described, kind, list, map, nullable, record, reference};
    use serde_json::json;

    fn defs() -> BTreeMap<String, Value> {
        let deal = record(
            [
                ("deal_id", kind("string")),
                ("amount", kind("integer")),
                ("owner", reference("Person")),
                ("extra", any()),
            ],
            ["deal_id", "amount"],
        );
        let person = record([("name", kind("string"))], ["name"]);
        let tree = record(
            [
                ("label", kind("string")),
                ("children", list(reference("Tree"))),
            ],
            ["label"],
        );
        BTreeMap::from([
            ("Deal".to_string(), deal),
            ("Person".to_string(), person),
            ("Tree".to_string(), tree),
        ])
    }

    #[test]
    fn undeclared_fields_go_at_every_depth_and_json_stays_whole() {
        let schema = list(nullable(described(reference("Deal"), "a deal")));
        let mut value = json!([
            {
                "deal_id": "D1", "amount": 5, "company": "Acme", "stage": "won",
                "owner": { "name": "Ada", "email": "ada@example.com" },
                "extra": { "anything": [1, { "goes": true }] }
            },
            null,
            { "deal_id": "D2", "amount": 6 }
        ]);
        keep_declared(&schema, &defs(), &mut value);
        assert_eq!(
            value,
            json!([
                {
                    "deal_id": "D1", "amount": 5, "owner": { "name": "Ada" },
                    "extra": { "anything": [1, { "goes": true }] }
                },
                null,
                { "deal_id": "D2", "amount": 6 }
            ])
        );
    }

    #[test]
    fn maps_recursive_types_and_plain_values() {
        let mut value = json!({ "a": { "name": "x", "age": 3 }, "b": { "name": "y" } });
        keep_declared(&map(reference("Person")), &defs(), &mut value);
        assert_eq!(value, json!({ "a": { "name": "x" }, "b": { "name": "y" } }));

        let mut tree = json!({
            "label": "root", "id": 1,
            "children": [{ "label": "leaf", "id": 2, "children": [] }]
        });
        keep_declared(&reference("Tree"), &defs(), &mut tree);
        assert_eq!(
            tree,
            json!({ "label": "root", "children": [{ "label": "leaf", "children": [] }] })
        );

        // `json` and what is not a record are kept as they are.
        let mut anything = json!({ "whatever": 1 });
        keep_declared(&any(), &defs(), &mut anything);
        assert_eq!(anything, json!({ "whatever": 1 }));
        let mut text = json!("hello");
        keep_declared(&kind("string"), &defs(), &mut text);
        assert_eq!(text, json!("hello"));
    }

    #[test]
    fn a_deep_value_is_followed_no_further_than_the_bound() {
        // A recursive type and a value deeper than the bound: no stack overflow.
        let mut value = json!({ "label": "leaf", "children": [] });
        for _ in 0..400 {
            value = json!({ "label": "n", "x": 1, "children": [value] });
        }
        keep_declared(&reference("Tree"), &defs(), &mut value);
        assert!(value.get("x").is_none());
    }
}
