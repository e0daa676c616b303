//! References between schemas: a plan's types refer to its `$defs` by `#/$defs/Name`;
//! what a schema refers to, directly or through other definitions.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Where a reference to a definition of the root points, before the definition's name.
pub const DEFS: &str = "#/$defs/";

/// The name of the definition a `$ref` points to (`#/$defs/Name`), if it points to one.
pub fn def_name(reference: &str) -> Option<&str> {
    reference.strip_prefix(DEFS)
}

/// The name of the definition a schema is a `$ref` to, if it is one.
pub fn reference_of(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(def_name)
}

/// The schema with its `$ref`s to definitions followed (a few deep: an alias of an
/// alias), or itself when it is no reference to a definition `defs` holds.
pub fn resolved<'a>(schema: &'a Value, defs: &'a BTreeMap<String, Value>) -> &'a Value {
    let mut s = schema;
    for _ in 0..8 {
        match reference_of(s).and_then(|name| defs.get(name)) {
            Some(next) => s = next,
            None => break,
        }
    }
    s
}

/// Every `$defs` name a schema refers to, directly or through other definitions.
pub fn referenced_defs(schema: &Value, defs: &BTreeMap<String, Value>, out: &mut BTreeSet<String>) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(def_name)
                        && out.insert(name.to_string())
                        && let Some(def) = defs.get(name)
                    {
                        referenced_defs(def, defs, out);
                    }
                } else {
                    referenced_defs(v, defs, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| referenced_defs(i, defs, out)),
        _ => {}
    }
}
