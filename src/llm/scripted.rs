//! A model that answers from a file of canned replies, picked by (node, item, turn) — not
//! by order, so a resumed thread gets the same reply for the same request.
//!
//! ```json
//! {
//!   "research": [{ "json": { "deal_id": "D1", "headline": "..." } }],
//!   "consume":  [{ "text": "not json" }, { "json": { "text": "Call brief" } }],
//!   "classify": { "items": { "0": [{ "json": "bug" }] }, "default": [{ "json": "question" }] },
//!   "agent":    [{ "tool_calls": [{ "name": "get_deal", "arguments": { "deal_id": "D1" } }] }, { "json": {} }]
//! }
//! ```
//! A list gives the replies of turns 0, 1, ... (a repair or an agent step is a turn); a
//! reply is `{"json": value}`, `{"text": "..."}`, or `{"tool_calls": [...]}`, or a plain
//! string (text). `{"template": value}` is `json` whose strings are rendered (Jinja) over
//! the node's inputs, so a canned reply can quote what the node was given:
//! `{"template": {"text": "{{ history.count }} emails"}}`. The arguments of scripted tool
//! calls are rendered the same way (`{"deal_id": "{{ deal_id }}"}`).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{Model, ModelError, ModelFuture, ModelReply, ModelRequest, ToolCall, Usage};

#[derive(Debug, Default)]
struct NodeReplies {
    default: Vec<Value>,
    items: BTreeMap<u32, Vec<Value>>,
}

#[derive(Debug)]
pub struct ScriptedModel {
    name: String,
    nodes: BTreeMap<String, NodeReplies>,
}

impl ScriptedModel {
    pub fn from_file(name: &str, path: &Path) -> Result<ScriptedModel, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the replies of model `{name}` from {}: {e}",
                path.display()
            )
        })?;
        Self::from_json(name, &text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn from_json(name: &str, text: &str) -> Result<ScriptedModel, String> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("the replies file is not JSON: {e}"))?;
        let Value::Object(map) = v else {
            return Err("the replies file is an object of node names".into());
        };
        let mut nodes = BTreeMap::new();
        for (node, entry) in map {
            let replies = match entry {
                Value::Array(list) => NodeReplies {
                    default: list,
                    items: BTreeMap::new(),
                },
                Value::Object(mut o) => {
                    let default = match o.remove("default") {
                        Some(Value::Array(l)) => l,
                        _ => Vec::new(),
                    };
                    let mut items = BTreeMap::new();
                    if let Some(Value::Object(by_item)) = o.remove("items") {
                        for (k, v) in by_item {
                            let idx: u32 = k.parse().map_err(|_| {
                                format!("`{node}`: item keys are numbers, not `{k}`")
                            })?;
                            let Value::Array(list) = v else {
                                return Err(format!("`{node}` item {k}: a list of replies"));
                            };
                            items.insert(idx, list);
                        }
                    }
                    NodeReplies { default, items }
                }
                _ => {
                    return Err(format!(
                        "`{node}`: a list of replies, or {{\"items\": ..., \"default\": ...}}"
                    ));
                }
            };
            nodes.insert(node, replies);
        }
        Ok(ScriptedModel {
            name: name.to_string(),
            nodes,
        })
    }

    fn reply(&self, req: &ModelRequest) -> Result<ModelReply, ModelError> {
        let node = self.nodes.get(&req.node).ok_or_else(|| {
            ModelError::Fatal(format!(
                "the scripted model `{}` has no replies for node `{}`",
                self.name, req.node
            ))
        })?;
        let list = node.items.get(&req.item).unwrap_or(&node.default);
        let reply = list.get(req.turn as usize).ok_or_else(|| {
            ModelError::Fatal(format!(
                "the scripted model `{}` has no reply for node `{}`, item {}, turn {} (it has {})",
                self.name,
                req.node,
                req.item,
                req.turn,
                list.len()
            ))
        })?;
        let (content, tool_calls) = match reply {
            Value::String(s) => (s.clone(), Vec::new()),
            Value::Object(o) => {
                let content = if let Some(t) = o.get("template") {
                    let rendered = render(t, &req.inputs).map_err(|e| {
                        ModelError::Fatal(format!(
                            "the scripted model `{}`: the template reply for node `{}`, turn {}, does not render: {e}",
                            self.name, req.node, req.turn
                        ))
                    })?;
                    serde_json::to_string(&rendered).unwrap_or_default()
                } else if let Some(j) = o.get("json") {
                    serde_json::to_string(j).unwrap_or_default()
                } else {
                    o.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let calls = o
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|cs| {
                        cs.iter()
                            .enumerate()
                            .map(|(i, c)| ToolCall {
                                id: c.get("id").and_then(Value::as_str).map_or_else(
                                    || format!("call_{}_{i}", req.turn),
                                    str::to_string,
                                ),
                                name: c
                                    .get("name")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                                    .to_string(),
                                arguments: c
                                    .get("arguments")
                                    .map(|a| render(a, &req.inputs).unwrap_or_else(|_| a.clone()))
                                    .unwrap_or(Value::Object(Default::default())),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                (content, calls)
            }
            other => (serde_json::to_string(other).unwrap_or_default(), Vec::new()),
        };
        let input: usize = req.messages.iter().map(|m| m.content.len()).sum();
        Ok(ModelReply {
            usage: Usage {
                input_tokens: (input / 4) as u64,
                output_tokens: (content.len() / 4) as u64,
            },
            content,
            tool_calls,
            model: format!("scripted:{}", self.name),
        })
    }
}

/// A reply's strings rendered over the node's inputs; a string that is one expression
/// alone (`"{{ history.count }}"`) keeps the value's JSON type.
fn render(template: &Value, inputs: &Value) -> Result<Value, String> {
    Ok(match template {
        Value::String(s) => {
            // minijinja recurses once per level: a text nested past the limit is refused.
            if let Some(deep) = crate::nesting::template_too_deep(s) {
                return Err(deep.what);
            }
            let env = minijinja::Environment::new();
            let trimmed = s.trim();
            if let Some(expr) = trimmed
                .strip_prefix("{{")
                .and_then(|r| r.strip_suffix("}}"))
                .filter(|e| !e.contains("{{") && !e.contains("}}"))
            {
                let e = env
                    .compile_expression(expr.trim())
                    .map_err(|e| e.to_string())?;
                let v = e
                    .eval(minijinja::value::Serde(inputs))
                    .map_err(|e| e.to_string())?;
                serde_json::to_value(&v).map_err(|e| e.to_string())?
            } else {
                Value::String(
                    env.render_str(s, minijinja::value::Serde(inputs))
                        .map_err(|e| e.to_string())?,
                )
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| render(i, inputs))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| Ok((k.clone(), render(v, inputs)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

impl Model for ScriptedModel {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async move { self.reply(request) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(node: &str, item: u32, turn: u32) -> ModelRequest {
        ModelRequest {
            node: node.into(),
            item,
            turn,
            messages: vec![],
            schema: None,
            schema_name: "x".into(),
            tools: vec![],
            temperature: None,
            max_tokens: None,
            inputs: serde_json::json!({ "deal": { "id": "D7", "emails": [1, 2, 3] } }),
        }
    }

    #[test]
    fn replies_are_picked_by_node_item_and_turn() {
        let m = ScriptedModel::from_json("fast", r#"{"a": [{"json": {"x": 1}}, "second"], "b": {"items": {"1": [{"text": "one"}]}, "default": ["d"]}}"#).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            m.reply(&req("a", 0, 0)).map(|r| r.content),
            Ok("{\"x\":1}".into())
        );
        assert_eq!(
            m.reply(&req("a", 5, 1)).map(|r| r.content),
            Ok("second".into())
        );
        assert_eq!(
            m.reply(&req("b", 1, 0)).map(|r| r.content),
            Ok("one".into())
        );
        assert_eq!(m.reply(&req("b", 0, 0)).map(|r| r.content), Ok("d".into()));
        assert!(m.reply(&req("a", 0, 2)).is_err());
        assert!(m.reply(&req("zzz", 0, 0)).is_err());
    }

    #[test]
    fn a_template_reply_quotes_the_nodes_inputs() {
        let m = ScriptedModel::from_json(
            "fast",
            r#"{"brief": [{"template": {"text": "Deal {{ deal.id }}: {{ deal.emails | length }} emails", "count": "{{ deal.emails | length }}"}}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let reply = m.reply(&req("brief", 0, 0)).map(|r| r.content);
        let v: Value = serde_json::from_str(&reply.unwrap_or_default()).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!({ "text": "Deal D7: 3 emails", "count": 3 })
        );
    }
}
