//! Host functions: Rust functions of the embedding program that `host = "name"` nodes
//! call, JSON in (the node's parameters) and JSON out. Their input and output types
//! (derived `JsonSchema`) are checked against every node that calls them when they are
//! registered, so a mismatch is an error before any run.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use pipec_plan::Plan;

/// A host function: JSON in (the node's parameters), JSON out.
pub type HostFn =
    Arc<dyn Fn(Value) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send>> + Send + Sync>;

/// The host function's input must provide the node's required parameters, with fitting
/// JSON types, and its output must have every field the node's output requires.
pub(crate) fn check_host_types(
    node: &pipec_plan::Node,
    input: &Value,
    output: &Value,
    plan: &Plan,
) -> Result<(), String> {
    let props = |s: &Value| -> BTreeMap<String, Value> {
        s.get("properties")
            .and_then(Value::as_object)
            .map(|m| m.clone().into_iter().collect())
            .unwrap_or_default()
    };
    let required = |s: &Value| -> Vec<String> {
        s.get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let in_props = props(input);
    for field in required(input) {
        let Some(param) = node.params.iter().find(|p| p.name == field) else {
            return Err(format!(
                "its input needs `{field}`, which the node has no parameter for"
            ));
        };
        if let Some(expected) = in_props.get(&field).and_then(|s| s.get("type")) {
            let declared = resolve_type(&param.schema, plan);
            if let Some(declared) = declared.get("type")
                && !types_overlap(declared, expected)
            {
                return Err(format!(
                    "`{field}` is {declared} in the node and {expected} in the function"
                ));
            }
        }
    }
    let node_out = resolve_type(&node.output, plan);
    let fn_props = props(output);
    for field in required(&node_out) {
        if !fn_props.contains_key(&field) {
            return Err(format!(
                "the node's output needs `{field}`, which the function's output lacks"
            ));
        }
    }
    if let (Some(a), Some(b)) = (node_out.get("type"), output.get("type"))
        && !types_overlap(a, b)
    {
        return Err(format!("the node returns {a} and the function {b}"));
    }
    Ok(())
}

fn resolve_type(schema: &Value, plan: &Plan) -> Value {
    match schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        Some(name) => plan.defs.get(name).cloned().unwrap_or(Value::Null),
        None => schema.clone(),
    }
}

fn types_overlap(a: &Value, b: &Value) -> bool {
    let set = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(a) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            _ => vec![],
        }
    };
    let (a, b) = (set(a), set(b));
    a.iter().any(|x| {
        b.contains(x)
            || (x == "number" && b.iter().any(|y| y == "integer"))
            || (x == "integer" && b.iter().any(|y| y == "number"))
    })
}
