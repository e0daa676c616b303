//! Evaluating the plan's expressions and sources over committed values. Pure: the same
//! committed inputs always give the same value, which is what lets chains of pure nodes
//! share one commit. Failures are typed ([`EvalError`]), so callers pick the code from
//! the kind of failure, never from its text.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Expr, Source, Step};

use crate::value::NodeValue;

/// Why a source or an expression has no value.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalError {
    /// `env("X")` without a default, and `X` is not set.
    MissingEnv { var: String },
    /// `secret("X")`, and `X` is not set.
    MissingSecret { var: String },
    /// `env("X")` whose text does not convert to the parameter's type.
    BadEnv { var: String, problem: String },
    /// A node the source reads has not finished (the scheduler only binds ready nodes).
    NotFinished { node: String },
    /// A resource or link binding, which hydration fetches.
    Resource,
    /// An expression over values that do not have the types the checker proved (an
    /// upstream value looser than its declaration).
    Expression { problem: String },
}

impl EvalError {
    /// The run-time code of this failure.
    pub fn rule(&self) -> &'static Rule {
        match self {
            EvalError::MissingEnv { .. }
            | EvalError::MissingSecret { .. }
            | EvalError::BadEnv { .. } => &codes::CONFIG_MISSING,
            EvalError::Resource => &codes::NOT_SUPPORTED,
            EvalError::NotFinished { .. } => &codes::INTERNAL_ERROR,
            EvalError::Expression { .. } => &codes::EVALUATION_FAILED,
        }
    }
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::MissingEnv { var } => {
                write!(f, "the environment variable `{var}` is not set")
            }
            EvalError::MissingSecret { var } => write!(f, "the secret `{var}` is not set"),
            EvalError::BadEnv { var, problem } => {
                write!(f, "the environment variable `{var}`: {problem}")
            }
            EvalError::NotFinished { node } => write!(f, "`{node}` has not finished"),
            EvalError::Resource => write!(
                f,
                "it reads an MCP resource where nothing fetches it (a part of a record, a list or a join); bind the resource to a parameter of its own"
            ),
            EvalError::Expression { problem } => f.write_str(problem),
        }
    }
}

fn expression(problem: impl Into<String>) -> EvalError {
    EvalError::Expression {
        problem: problem.into(),
    }
}

/// A source's value, or the fact that it has none (its node was skipped).
#[derive(Clone, Debug, PartialEq)]
pub enum Slot {
    Value(Value),
    Skipped,
}

impl Slot {
    pub fn value(&self) -> Option<&Value> {
        match self {
            Slot::Value(v) => Some(v),
            Slot::Skipped => None,
        }
    }
}

/// What sources can read: inputs, configuration, secrets, and finished nodes.
pub trait Env {
    fn input(&self, name: &str) -> Option<Value>;
    /// `None` when the node has not finished (callers only ask for finished nodes).
    fn node(&self, name: &str) -> Option<Slot>;
    fn env_var(&self, var: &str) -> Option<String>;
    fn secret(&self, var: &str) -> Option<String>;
    /// The resource links a finished node's tool calls returned, in call order.
    fn manifest(&self, _node: &str) -> Option<Vec<pipec_store::ResourceRef>> {
        None
    }
}

/// Follows a path into a value; a missing field or a null on the way gives null.
pub fn follow(mut v: Value, path: &[Step]) -> Value {
    for step in path {
        v = match step {
            Step::Field(f) => match v {
                Value::Object(mut m) => m.remove(f).unwrap_or(Value::Null),
                _ => Value::Null,
            },
            Step::Splat(f) => match v {
                Value::Array(items) => Value::Array(
                    items
                        .into_iter()
                        .map(|i| match i {
                            Value::Object(mut m) => m.remove(f).unwrap_or(Value::Null),
                            _ => Value::Null,
                        })
                        .collect(),
                ),
                Value::Null => Value::Null,
                _ => Value::Null,
            },
        };
    }
    v
}

/// Converts a configuration string to the parameter's JSON type (`int`, `bool`, ...).
pub fn config_value(raw: &str, schema: &Value) -> Result<Value, String> {
    let ty = schema.get("type").and_then(Value::as_str).or_else(|| {
        schema
            .get("anyOf")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
    });
    match ty {
        Some("integer") => raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("`{raw}` is not a whole number")),
        Some("number") => raw
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("`{raw}` is not a number")),
        Some("boolean") => match raw.trim() {
            "true" | "1" | "yes" => Ok(Value::Bool(true)),
            "false" | "0" | "no" => Ok(Value::Bool(false)),
            _ => Err(format!("`{raw}` is not true or false")),
        },
        _ => Ok(Value::String(raw.to_string())),
    }
}

/// Evaluates a source. Resources are not handled here (they are fetched by hydration).
pub fn source(env: &dyn Env, src: &Source, schema: &Value) -> Result<Slot, EvalError> {
    Ok(match src {
        Source::Input { input, path } => {
            Slot::Value(follow(env.input(input).unwrap_or(Value::Null), path))
        }
        Source::Node { node, path } => match env.node(node) {
            Some(Slot::Value(v)) => Slot::Value(follow(v, path)),
            Some(Slot::Skipped) => Slot::Skipped,
            None => return Err(EvalError::NotFinished { node: node.clone() }),
        },
        Source::Join { sides } => {
            for side in sides {
                if let Slot::Value(v) = source(env, side, schema)?
                    && !v.is_null()
                {
                    return Ok(Slot::Value(v));
                }
            }
            // Every side skipped or null: skipped only if all were skipped.
            let all_skipped = sides
                .iter()
                .all(|s| matches!(source(env, s, schema), Ok(Slot::Skipped)));
            if all_skipped {
                Slot::Skipped
            } else {
                Slot::Value(Value::Null)
            }
        }
        Source::Const { value } => Slot::Value(value.clone()),
        Source::Record { fields } => {
            let mut m = Map::new();
            for (k, s) in fields {
                let field_schema = schema
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .cloned()
                    .unwrap_or(Value::Null);
                match source(env, s, &field_schema)? {
                    Slot::Value(v) => {
                        m.insert(k.clone(), v);
                    }
                    Slot::Skipped => {
                        m.insert(k.clone(), Value::Null);
                    }
                }
            }
            Slot::Value(Value::Object(m))
        }
        Source::List { items } => {
            let mut out = Vec::new();
            for s in items {
                match source(env, s, &Value::Null)? {
                    Slot::Value(v) => out.push(v),
                    Slot::Skipped => out.push(Value::Null),
                }
            }
            Slot::Value(Value::Array(out))
        }
        Source::Env { var, default } => {
            match env.env_var(var).or_else(|| default.clone()) {
                Some(raw) => Slot::Value(config_value(&raw, schema).map_err(|problem| {
                    EvalError::BadEnv {
                        var: var.clone(),
                        problem,
                    }
                })?),
                None => return Err(EvalError::MissingEnv { var: var.clone() }),
            }
        }
        Source::Secret { var } => match env.secret(var) {
            Some(v) => Slot::Value(Value::String(v)),
            None => return Err(EvalError::MissingSecret { var: var.clone() }),
        },
        Source::Each { list, .. } => source(env, list, &Value::Null)?,
        Source::Resource { .. } | Source::Link { .. } => return Err(EvalError::Resource),
    })
}

/// Whether a source is read by hydration (an MCP resource or a resource link), not by
/// [`source`].
pub fn is_resource(src: &Source) -> bool {
    match src {
        Source::Resource { .. } | Source::Link { .. } => true,
        Source::Each { list, .. } => is_resource(list),
        _ => false,
    }
}

/// Evaluates a body expression over the node's (hydrated) parameters.
/// The value of a `return` body. It may nest no deeper than a value a run takes in: the
/// records and lists a body builds around its parameters could otherwise, node after
/// node, make a value the store cannot read back.
pub fn returned(params: &BTreeMap<String, Value>, e: &Expr) -> Result<Value, EvalError> {
    let v = expr(params, e)?;
    if pipec_base::nesting::value_too_deep(&v) {
        return Err(EvalError::Expression {
            problem: format!(
                "the value nests more than {} levels of arrays and objects",
                pipec_base::nesting::MAX_VALUE_NESTING
            ),
        });
    }
    Ok(v)
}

pub fn expr(params: &BTreeMap<String, Value>, e: &Expr) -> Result<Value, EvalError> {
    Ok(match e {
        Expr::Param { name } => params.get(name).cloned().unwrap_or(Value::Null),
        Expr::Field { of, name } => match expr(params, of)? {
            Value::Object(mut m) => m.remove(name).unwrap_or(Value::Null),
            _ => Value::Null,
        },
        Expr::Splat { of, name } => follow(expr(params, of)?, &[Step::Splat(name.clone())]),
        Expr::Const { value } => value.clone(),
        Expr::Duration { ms } => Value::from(*ms),
        Expr::Record { fields } => {
            let mut m = Map::new();
            for (k, v) in fields {
                m.insert(k.clone(), expr(params, v)?);
            }
            Value::Object(m)
        }
        Expr::List { items } => Value::Array(
            items
                .iter()
                .map(|i| expr(params, i))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Not { of } => Value::Bool(!truthy(&expr(params, of)?)?),
        Expr::Len { of } => match expr(params, of)? {
            Value::Array(a) => Value::from(a.len()),
            Value::String(s) => Value::from(s.chars().count()),
            Value::Object(m) => Value::from(m.len()),
            Value::Null => return Err(expression("`len` of a missing value")),
            other => return Err(expression(format!("`len` of {other}"))),
        },
        Expr::Binary {
            operator,
            left,
            right,
        } => {
            let l = expr(params, left)?;
            match operator.as_str() {
                "??" => {
                    if l.is_null() {
                        expr(params, right)?
                    } else {
                        l
                    }
                }
                "&&" => {
                    if !truthy(&l)? {
                        Value::Bool(false)
                    } else {
                        Value::Bool(truthy(&expr(params, right)?)?)
                    }
                }
                "||" => {
                    if truthy(&l)? {
                        Value::Bool(true)
                    } else {
                        Value::Bool(truthy(&expr(params, right)?)?)
                    }
                }
                "==" => Value::Bool(json_eq(&l, &expr(params, right)?)),
                "!=" => Value::Bool(!json_eq(&l, &expr(params, right)?)),
                op => {
                    let r = expr(params, right)?;
                    let (Some(a), Some(b)) = (l.as_f64(), r.as_f64()) else {
                        return Err(expression(format!(
                            "`{op}` compares numbers, not {l} and {r}"
                        )));
                    };
                    Value::Bool(match op {
                        "<" => a < b,
                        "<=" => a <= b,
                        ">" => a > b,
                        ">=" => a >= b,
                        _ => return Err(expression(format!("unknown operator `{op}`"))),
                    })
                }
            }
        }
    })
}

fn truthy(v: &Value) -> Result<bool, EvalError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Null => Ok(false),
        other => Err(expression(format!("expected true or false, found {other}"))),
    }
}

/// Deep equality where `1` equals `1.0`.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Sources read from a stored thread: its inputs, its recorded configuration, and its
/// finished nodes' values. Secrets are never stored, so none can be read.
struct Stored<'a> {
    state: &'a pipec_store::ThreadState,
}

impl Env for Stored<'_> {
    fn input(&self, name: &str) -> Option<Value> {
        self.state.thread.as_ref()?.inputs.get(name).cloned()
    }
    fn node(&self, name: &str) -> Option<Slot> {
        match self.state.nodes.get(name)?.state {
            pipec_store::NodeState::Done => self.state.value_of(name).map(Slot::Value),
            pipec_store::NodeState::Skipped => Some(Slot::Skipped),
            _ => None,
        }
    }
    fn env_var(&self, var: &str) -> Option<String> {
        self.state.thread.as_ref()?.config.get(var).cloned()
    }
    fn secret(&self, _var: &str) -> Option<String> {
        None
    }
}

/// A pipeline's outputs over whatever `env` reads; a skipped output is `null`. The
/// error names the output.
pub fn outputs(env: &dyn Env, plan: &pipec_plan::Plan) -> Result<Value, (String, EvalError)> {
    outputs_taking(env, plan, &mut |_| None).map(crate::Outputs::into_value)
}

/// The outputs, as [`outputs`], where an output that is a whole node's value takes it
/// from `take` when `take` has it (a finished attempt's own copy, for the nodes of
/// [`whole_node_outputs`] of the plan's outputs) rather than copying it: a list of 20,000 items is not held
/// twice to be handed over.
pub(crate) fn outputs_taking(
    env: &dyn Env,
    plan: &pipec_plan::Plan,
    take: &mut dyn FnMut(&str) -> Option<NodeValue>,
) -> Result<crate::Outputs, (String, EvalError)> {
    let mut out = crate::Outputs::default();
    for o in &plan.outputs {
        let taken = match &o.source {
            Source::Node { node, path } if path.is_empty() => take(node),
            _ => None,
        };
        let v = match taken {
            Some(v) => v,
            None => match source(env, &o.source, &o.schema).map_err(|e| (o.name.clone(), e))? {
                Slot::Value(v) => v.into(),
                Slot::Skipped => Value::Null.into(),
            },
        };
        out.insert(o.name.clone(), v);
    }
    Ok(out)
}

/// The nodes an output reads whole and no other output reads at all; none when an
/// output's source is anything but an input, a constant or a node (a join or a record
/// may read a node more than once).
pub fn whole_node_outputs(outputs: &[pipec_plan::Output]) -> Vec<&str> {
    let mut reads: BTreeMap<&str, (u32, bool)> = BTreeMap::new();
    for o in outputs {
        match &o.source {
            Source::Node { node, path } => {
                let e = reads.entry(node.as_str()).or_default();
                e.0 += 1;
                e.1 = path.is_empty();
            }
            Source::Input { .. } | Source::Const { .. } => {}
            _ => return Vec::new(),
        }
    }
    reads
        .into_iter()
        .filter(|(_, (n, whole))| *n == 1 && *whole)
        .map(|(node, _)| node)
        .collect()
}

/// A completed thread's outputs, computed from its stored rows (they are not stored a
/// second time; stores written before that hold them on the thread record).
pub fn outputs_of(
    plan: &pipec_plan::Plan,
    state: &pipec_store::ThreadState,
) -> Result<Value, (String, EvalError)> {
    if let Some(o) = state.thread.as_ref().and_then(|t| t.outputs.clone()) {
        return Ok(o);
    }
    outputs(&Stored { state }, plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: Value) -> BTreeMap<String, Value> {
        v.as_object()
            .map(|m| m.clone().into_iter().collect())
            .unwrap_or_default()
    }

    fn outputs_of(list: Value) -> Vec<pipec_plan::Output> {
        serde_json::from_value(list).unwrap_or_default()
    }

    #[test]
    fn an_output_takes_a_node_only_when_no_other_output_reads_it() {
        let o = |name: &str, source: Value| json!({ "name": name, "schema": {}, "type": "json", "optional": false, "source": source });
        let node = |n: &str| json!({ "kind": "node", "node": n });
        let field = |n: &str| json!({ "kind": "node", "node": n, "path": [{ "field": "v" }] });
        let outputs = outputs_of(json!([
            o("a", node("once")),
            o("b", node("twice")),
            o("c", node("twice")),
            o("d", node("part")),
            o("e", field("part")),
            o("f", field("field_only")),
            o("g", json!({ "kind": "input", "input": "x" })),
        ]));
        assert_eq!(outputs.len(), 7, "the outputs parse");
        assert_eq!(whole_node_outputs(&outputs), vec!["once"]);
        // A join may read its sides twice: nothing is taken then.
        let outputs = outputs_of(json!([
            o("a", node("once")),
            o(
                "b",
                json!({ "kind": "join", "sides": [node("x"), node("y")] })
            ),
        ]));
        assert_eq!(outputs.len(), 2, "the outputs parse");
        assert!(whole_node_outputs(&outputs).is_empty());
    }

    #[test]
    fn expressions() {
        let params =
            p(json!({ "ack": { "approved": true }, "items": [{ "t": 1 }, { "t": 2 }], "n": null }));
        let e: Expr = serde_json::from_value(
            json!({ "op": "field", "of": { "op": "param", "name": "ack" }, "name": "approved" }),
        )
        .unwrap_or(Expr::Const { value: Value::Null });
        assert_eq!(expr(&params, &e), Ok(json!(true)));
        let splat: Expr = serde_json::from_value(
            json!({ "op": "splat", "of": { "op": "param", "name": "items" }, "name": "t" }),
        )
        .unwrap_or(Expr::Const { value: Value::Null });
        assert_eq!(expr(&params, &splat), Ok(json!([1, 2])));
        let coalesce: Expr = serde_json::from_value(json!({ "op": "binary", "operator": "??", "left": { "op": "param", "name": "n" }, "right": { "op": "const", "value": 5 } })).unwrap_or(Expr::Const { value: Value::Null });
        assert_eq!(expr(&params, &coalesce), Ok(json!(5)));
        let cmp: Expr = serde_json::from_value(json!({ "op": "binary", "operator": "==", "left": { "op": "const", "value": 1 }, "right": { "op": "const", "value": 1.0 } })).unwrap_or(Expr::Const { value: Value::Null });
        assert_eq!(expr(&params, &cmp), Ok(json!(true)));
    }

    #[test]
    fn config_values_take_the_parameter_type() {
        assert_eq!(
            config_value("42", &json!({ "type": "integer" })),
            Ok(json!(42))
        );
        assert!(config_value("x", &json!({ "type": "integer" })).is_err());
        assert_eq!(
            config_value("true", &json!({ "type": "boolean" })),
            Ok(json!(true))
        );
        assert_eq!(
            config_value("ops", &json!({ "type": "string" })),
            Ok(json!("ops"))
        );
    }
}
