//! The JSON Schemas a plan holds (its types, as `pipec-check` lowered them): what a
//! schema refers to among the plan's `$defs`.

use serde_json::Value;

/// Every `$defs` name a schema refers to, directly or through other definitions.
pub fn referenced_defs(
    schema: &Value,
    defs: &std::collections::BTreeMap<String, Value>,
    out: &mut std::collections::BTreeSet<String>,
) {
    match schema {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    if let Some(name) = v.as_str().and_then(|r| r.strip_prefix("#/$defs/"))
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
