//! Host functions: Rust functions of the embedding program that `host = "name"` nodes
//! call, JSON in (the node's parameters) and JSON out. Their input and output types
//! (derived `JsonSchema`) are checked against every node that calls them when they are
//! registered, so a mismatch is an error before any run. Both sides' types are read with
//! `pipec-schema` (`fit`), as a tool's parameters are against its server's.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};

use pipec_plan::Plan;
use pipec_schema::fit;

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
    // The node's schema (into the plan's `$defs`) and the function's (into its own), in
    // words, when no value is of both.
    let plan_root = json!({ "$defs": plan.defs });
    let apart = |node_schema: &Value, function_schema: &Value, function_root: &Value| {
        let node_kinds = fit::kinds(&fit::sent_type(node_schema, &plan_root))?;
        let function_kinds = fit::kinds(&fit::sent_type(function_schema, function_root))?;
        (!fit::overlap(&node_kinds, &function_kinds)).then(|| {
            (
                fit::kind_names(&node_kinds),
                fit::kind_names(&function_kinds),
            )
        })
    };
    let in_props = props(input);
    for field in required(input) {
        let Some(param) = node.params.iter().find(|p| p.name == field) else {
            return Err(format!(
                "its input needs `{field}`, which the node has no parameter for"
            ));
        };
        if let Some(expected) = in_props.get(&field)
            && let Some((node_has, function_takes)) = apart(&param.schema, expected, input)
        {
            return Err(format!(
                "`{field}` is {node_has} in the node and {function_takes} in the function"
            ));
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
    if let Some((node_returns, function_returns)) = apart(&node.output, output, output) {
        return Err(format!(
            "the node returns {node_returns} and the function {function_returns}"
        ));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        let source = r#"
input word: string
input n: int

node tag(word: string = input.word, n: int = input.n) -> { tag: string } {
  host = "tag"
}

output tag = tag
"#;
        match pipec_check::compile_str("tag.pipe", source) {
            Ok(plan) => plan,
            Err(e) => panic!("{:?}", e.diagnostics),
        }
    }

    #[test]
    fn a_field_the_function_types_by_ref_is_held_to_the_node_parameter() {
        let plan = plan();
        let node = &plan.nodes[0];
        let output = json!({"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]});
        // As schemars writes a field of an enum type: a `$ref` into the root's `$defs`,
        // which the check did not follow before.
        let input = |n: Value| {
            json!({
                "type": "object",
                "properties": {"word": {"type": "string"}, "n": n},
                "required": ["word", "n"],
                "$defs": {"Label": {"type": "string", "enum": ["a", "b"]}, "Count": {"type": "integer"}},
            })
        };
        assert_eq!(
            check_host_types(
                node,
                &input(json!({"$ref": "#/$defs/Label"})),
                &output,
                &plan
            ),
            Err("`n` is integer in the node and string in the function".to_string())
        );
        assert_eq!(
            check_host_types(
                node,
                &input(json!({"$ref": "#/$defs/Count"})),
                &output,
                &plan
            ),
            Ok(())
        );
        assert_eq!(
            check_host_types(
                node,
                &input(json!({"type": ["number", "null"]})),
                &output,
                &plan
            ),
            Ok(())
        );
        let returns_list = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(
            check_host_types(
                node,
                &input(json!({"type": "integer"})),
                &returns_list,
                &plan
            ),
            Err("the node's output needs `tag`, which the function's output lacks".to_string())
        );
    }
}
