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
    default: Vec<Reply>,
    items: BTreeMap<u32, Vec<Reply>>,
}

/// One canned reply, read and checked when the file is loaded.
#[derive(Debug)]
struct Reply {
    content: Content,
    tool_calls: Vec<CallSpec>,
}

#[derive(Debug)]
enum Content {
    Text(String),
    Json(Value),
    /// JSON whose strings are rendered over the node's inputs.
    Template(Value),
}

/// A tool call the reply asks for; its arguments are rendered like a template.
#[derive(Debug)]
struct CallSpec {
    id: Option<String>,
    name: String,
    arguments: Value,
}

/// The keys a reply object may have.
const REPLY_KEYS: &str = "`json`, `text`, `template` and `tool_calls`";

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
                    default: replies(&node, None, list)?,
                    items: BTreeMap::new(),
                },
                Value::Object(o) => {
                    let mut replies_of = NodeReplies::default();
                    for (key, value) in o {
                        match (key.as_str(), value) {
                            ("default", Value::Array(l)) => {
                                replies_of.default = replies(&node, None, l)?;
                            }
                            ("items", Value::Object(by_item)) => {
                                for (k, v) in by_item {
                                    let idx: u32 = k.parse().map_err(|_| {
                                        format!("`{node}`: item keys are numbers, not `{k}`")
                                    })?;
                                    let Value::Array(list) = v else {
                                        return Err(format!(
                                            "`{node}` item {k}: a list of replies"
                                        ));
                                    };
                                    replies_of
                                        .items
                                        .insert(idx, replies(&node, Some(idx), list)?);
                                }
                            }
                            ("default", _) => {
                                return Err(format!("`{node}`: `default` is a list of replies"));
                            }
                            ("items", _) => {
                                return Err(format!(
                                    "`{node}`: `items` is an object of item numbers, each a list of replies"
                                ));
                            }
                            (other, _) => {
                                return Err(format!(
                                    "`{node}`: unknown key `{other}`; a node's replies are a list, or `{{\"items\": {{\"0\": [...]}}, \"default\": [...]}}`"
                                ));
                            }
                        }
                    }
                    replies_of
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
        let content = match &reply.content {
            Content::Text(t) => t.clone(),
            Content::Json(j) => serde_json::to_string(j).unwrap_or_default(),
            Content::Template(t) => {
                let rendered = render(t, &req.inputs).map_err(|e| {
                    ModelError::Fatal(format!(
                        "the scripted model `{}`: the template reply for node `{}`, turn {}, does not render: {e}",
                        self.name, req.node, req.turn
                    ))
                })?;
                serde_json::to_string(&rendered).unwrap_or_default()
            }
        };
        let tool_calls = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let arguments = render(&c.arguments, &req.inputs).map_err(|e| {
                    ModelError::Fatal(format!(
                        "the scripted model `{}`: the arguments of tool call `{}` for node `{}`, turn {}, do not render: {e}",
                        self.name, c.name, req.node, req.turn
                    ))
                })?;
                Ok(ToolCall {
                    id: c
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call_{}_{i}", req.turn)),
                    name: c.name.clone(),
                    arguments,
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        let input: usize = req.messages.iter().map(|m| m.content.len()).sum();
        Ok(ModelReply {
            usage: Usage {
                input_tokens: (input / 4) as u64,
                output_tokens: (content.len() / 4) as u64,
                cached_input_tokens: 0,
            },
            content,
            tool_calls,
            model: format!("scripted:{}", self.name),
        })
    }
}

/// A node's (or one item's) list of replies, each checked.
fn replies(node: &str, item: Option<u32>, list: Vec<Value>) -> Result<Vec<Reply>, String> {
    list.into_iter()
        .enumerate()
        .map(|(turn, v)| {
            let at = match item {
                Some(i) => format!("`{node}` item {i}, turn {turn}"),
                None => format!("`{node}` turn {turn}"),
            };
            reply_of(v).map_err(|e| format!("{at}: {e}"))
        })
        .collect()
}

/// A reply: a string (text), an object of [`REPLY_KEYS`], or any other JSON value (its
/// JSON is the reply's text).
fn reply_of(v: Value) -> Result<Reply, String> {
    let Value::Object(o) = v else {
        return Ok(Reply {
            content: match v {
                Value::String(s) => Content::Text(s),
                other => Content::Json(other),
            },
            tool_calls: Vec::new(),
        });
    };
    let mut content = None;
    let mut tool_calls = Vec::new();
    for (key, value) in o {
        let this = match key.as_str() {
            "json" => Content::Json(value),
            "template" => Content::Template(value),
            "text" => match value {
                Value::String(s) => Content::Text(s),
                _ => return Err("`text` is a string; use `json` for a JSON value".into()),
            },
            "tool_calls" => {
                let Value::Array(calls) = value else {
                    return Err(
                        "`tool_calls` is a list of `{\"name\": ..., \"arguments\": {...}}`".into(),
                    );
                };
                tool_calls = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| call_of(c).map_err(|e| format!("tool call {i}: {e}")))
                    .collect::<Result<_, _>>()?;
                continue;
            }
            other => {
                let hint = match other {
                    "tool_call" | "calls" | "tools" => " (tool calls go in `tool_calls`)",
                    _ => "",
                };
                return Err(format!(
                    "unknown key `{other}`{hint}; a reply has {REPLY_KEYS}"
                ));
            }
        };
        if content.replace(this).is_some() {
            return Err("a reply has one of `json`, `text` and `template`".into());
        }
    }
    Ok(Reply {
        content: content.unwrap_or(Content::Text(String::new())),
        tool_calls,
    })
}

fn call_of(c: Value) -> Result<CallSpec, String> {
    let Value::Object(o) = c else {
        return Err("an object `{\"name\": ..., \"arguments\": {...}}`".into());
    };
    let mut call = CallSpec {
        id: None,
        name: String::new(),
        arguments: Value::Object(Default::default()),
    };
    for (key, value) in o {
        match (key.as_str(), value) {
            ("name", Value::String(n)) => call.name = n,
            ("id", Value::String(id)) => call.id = Some(id),
            ("arguments", a @ Value::Object(_)) => call.arguments = a,
            ("name" | "id", _) => return Err(format!("`{key}` is a string")),
            ("arguments", _) => return Err("`arguments` is an object".into()),
            (other, _) => {
                return Err(format!(
                    "unknown key `{other}`; a tool call has `name`, `arguments` and `id`"
                ));
            }
        }
    }
    if call.name.is_empty() {
        return Err("a tool call needs the `name` of a tool".into());
    }
    Ok(call)
}

/// A reply's strings rendered over the node's inputs; a string that is one expression
/// alone (`"{{ history.count }}"`) keeps the value's JSON type.
fn render(template: &Value, inputs: &Value) -> Result<Value, String> {
    Ok(match template {
        Value::String(s) => {
            // minijinja recurses once per level: a text nested past the limit is refused.
            if let Some(deep) = pipec_base::nesting::template_too_deep(s) {
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
            traceparent: None,
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
    fn a_reply_file_with_a_key_it_does_not_know_is_refused_where_it_is_wrong() {
        let cases = [
            (
                r#"{"agent": [{"tool_call": [{"name": "get_deal"}]}]}"#,
                "`agent` turn 0: unknown key `tool_call` (tool calls go in `tool_calls`); a reply has `json`, `text`, `template` and `tool_calls`",
            ),
            (
                r#"{"agent": [{"tool_calls": [{"name": "get_deal", "args": {}}]}]}"#,
                "`agent` turn 0: tool call 0: unknown key `args`; a tool call has `name`, `arguments` and `id`",
            ),
            (
                r#"{"agent": [{"tool_calls": [{"arguments": {}}]}]}"#,
                "`agent` turn 0: tool call 0: a tool call needs the `name` of a tool",
            ),
            (
                r#"{"classify": {"items": {"2": [{"json": 1, "text": "x"}]}}}"#,
                "`classify` item 2, turn 0: a reply has one of `json`, `text` and `template`",
            ),
            (
                r#"{"classify": {"item": {"0": ["a"]}}}"#,
                "`classify`: unknown key `item`",
            ),
            (
                r#"{"draft": ["ok", {"text": {"a": 1}}]}"#,
                "`draft` turn 1: `text` is a string; use `json` for a JSON value",
            ),
        ];
        for (text, says) in cases {
            match ScriptedModel::from_json("fast", text) {
                Ok(_) => panic!("{text} was taken"),
                Err(e) => assert!(e.starts_with(says), "{text}: {e}"),
            }
        }
    }

    #[test]
    fn the_example_reply_files_load() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/replies");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if let Err(e) = ScriptedModel::from_file("m", &path) {
                panic!("{e}");
            }
            n += 1;
        }
        assert!(n >= 2);
    }

    #[test]
    fn tool_calls_are_named_and_their_arguments_rendered() {
        let m = ScriptedModel::from_json(
            "fast",
            r#"{"agent": [{"text": "looking", "tool_calls": [{"name": "get_deal", "arguments": {"deal_id": "{{ deal.id }}"}}, {"id": "mine", "name": "read_emails"}]}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let reply = m
            .reply(&req("agent", 0, 0))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(reply.content, "looking");
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[0].id, "call_0_0");
        assert_eq!(reply.tool_calls[0].name, "get_deal");
        assert_eq!(
            reply.tool_calls[0].arguments,
            serde_json::json!({ "deal_id": "D7" })
        );
        assert_eq!(reply.tool_calls[1].id, "mine");
        assert_eq!(reply.tool_calls[1].arguments, serde_json::json!({}));
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
