//! Content on spans, for a sink that asks for it: a model turn's messages and a tool
//! call's arguments and result, in the shapes OpenTelemetry's GenAI conventions give
//! them (messages as `{role, parts}`, system prompts apart, tool calls and their
//! responses as parts), as JSON text. Every value is scrubbed of secrets after it is
//! written out, so a secret is a placeholder whatever field it hid in; and each is cut at
//! [`MAX_CONTENT`] bytes, so one huge prompt cannot make a span a backend refuses.

use serde_json::{Value, json};

use super::Attr;
use crate::llm::{Message, ModelReply, Role};

/// The most of one content attribute a span keeps, in bytes; the rest is cut off and
/// the cut says how much it left out.
pub(crate) const MAX_CONTENT: usize = 64 * 1024;

/// The content attributes of a model turn: what it was sent and what it answered.
pub(crate) fn turn(
    messages: &[Message],
    reply: &ModelReply,
    scrub: &dyn Fn(&str) -> String,
) -> Vec<(&'static str, Attr)> {
    let system: Vec<Value> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| json!({ "type": "text", "content": m.content }))
        .collect();
    let input: Vec<Value> = messages
        .iter()
        .filter(|m| m.role != Role::System)
        .map(message)
        .collect();
    let output = json!([{
        "role": "assistant",
        "parts": parts(&reply.content, &reply.tool_calls),
        "finish_reason": if reply.tool_calls.is_empty() { "stop" } else { "tool_call" },
    }]);
    let mut attrs = Vec::with_capacity(3);
    if !system.is_empty() {
        attrs.push((
            "gen_ai.system_instructions",
            text(&Value::Array(system), scrub),
        ));
    }
    attrs.push(("gen_ai.input.messages", text(&Value::Array(input), scrub)));
    attrs.push(("gen_ai.output.messages", text(&output, scrub)));
    attrs
}

/// The content attributes of a tool call: its arguments, and its result when it
/// answered with one.
pub(crate) fn tool(
    arguments: &Value,
    result: Option<&pipec_mcp::ToolResult>,
    scrub: &dyn Fn(&str) -> String,
) -> Vec<(&'static str, Attr)> {
    let mut attrs = vec![("gen_ai.tool.call.arguments", text(arguments, scrub))];
    if let Some(r) = result {
        attrs.push(("gen_ai.tool.call.result", text(&tool_result(r), scrub)));
    }
    attrs
}

fn message(m: &Message) -> Value {
    match m.role {
        Role::Tool => json!({
            "role": "tool",
            "parts": [{
                "type": "tool_call_response",
                "id": m.tool_call_id,
                "response": m.content,
            }],
        }),
        Role::User => json!({ "role": "user", "parts": parts(&m.content, &[]) }),
        Role::Assistant | Role::System => json!({
            "role": "assistant",
            "parts": parts(&m.content, &m.tool_calls),
        }),
    }
}

fn parts(content: &str, calls: &[crate::llm::ToolCall]) -> Vec<Value> {
    let mut parts = Vec::with_capacity(1 + calls.len());
    if !content.is_empty() {
        parts.push(json!({ "type": "text", "content": content }));
    }
    parts.extend(calls.iter().map(
        |c| json!({ "type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments }),
    ));
    parts
}

/// A tool result as a span shows it: its structured content, else its blocks (media
/// by type and size, never their bytes).
fn tool_result(r: &pipec_mcp::ToolResult) -> Value {
    use pipec_mcp::{Body, Content};
    if let Some(s) = &r.structured {
        return s.clone();
    }
    let blocks: Vec<Value> = r
        .content
        .iter()
        .map(|c| match c {
            Content::Text(t) => json!({ "type": "text", "text": t }),
            Content::Media { kind, mime, data } => {
                json!({ "type": kind, "mimeType": mime, "bytes": data.len() })
            }
            Content::Link(l) => json!({ "type": "resource_link", "uri": l.uri, "name": l.name }),
            Content::Resource(res) => match &res.body {
                Body::Text(t) => json!({ "type": "resource", "uri": res.uri, "text": t }),
                Body::Blob(b) => json!({ "type": "resource", "uri": res.uri, "bytes": b.len() }),
            },
            Content::Malformed { kind, problem } => {
                json!({ "type": kind, "malformed": problem })
            }
        })
        .collect();
    json!({ "content": blocks, "isError": r.is_error })
}

/// `value` as JSON text, scrubbed, and cut at [`MAX_CONTENT`] bytes.
fn text(value: &Value, scrub: &dyn Fn(&str) -> String) -> Attr {
    let mut s = scrub(&value.to_string());
    if s.len() > MAX_CONTENT {
        let total = s.len();
        let mut end = MAX_CONTENT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(&format!("…[{} more bytes]", total - end));
    }
    Attr::Str(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;

    fn attr(attrs: &[(&'static str, Attr)], key: &str) -> Value {
        match attrs.iter().find(|(k, _)| *k == key) {
            Some((_, Attr::Str(s))) => serde_json::from_str(s).expect("JSON"),
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn a_turn_is_told_as_messages_with_parts_and_the_system_prompt_apart() {
        let mut asked = Message::text(Role::Assistant, "");
        asked.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "get_deal".into(),
            arguments: json!({ "deal_id": "D1" }),
        }];
        let mut answered = Message::text(Role::Tool, "{\"stage\":\"won\"}");
        answered.tool_call_id = Some("c1".into());
        let messages = vec![
            Message::text(Role::System, "You are careful."),
            Message::text(Role::User, "Summarize D1"),
            asked,
            answered,
        ];
        let reply = ModelReply {
            content: "D1 is won.".into(),
            tool_calls: Vec::new(),
            usage: Default::default(),
            model: String::new(),
        };
        let attrs = turn(&messages, &reply, &|s| s.to_string());
        assert_eq!(
            attr(&attrs, "gen_ai.system_instructions"),
            json!([{ "type": "text", "content": "You are careful." }])
        );
        assert_eq!(
            attr(&attrs, "gen_ai.input.messages"),
            json!([
                { "role": "user", "parts": [{ "type": "text", "content": "Summarize D1" }] },
                { "role": "assistant", "parts": [{ "type": "tool_call", "id": "c1", "name": "get_deal", "arguments": { "deal_id": "D1" } }] },
                { "role": "tool", "parts": [{ "type": "tool_call_response", "id": "c1", "response": "{\"stage\":\"won\"}" }] },
            ])
        );
        assert_eq!(
            attr(&attrs, "gen_ai.output.messages"),
            json!([{ "role": "assistant", "parts": [{ "type": "text", "content": "D1 is won." }], "finish_reason": "stop" }])
        );
    }

    #[test]
    fn content_is_scrubbed_after_it_is_written_and_cut_when_huge() {
        let reply = ModelReply {
            content: "the key is sk-123".into(),
            tool_calls: Vec::new(),
            usage: Default::default(),
            model: String::new(),
        };
        let scrub = |s: &str| s.replace("sk-123", "secret(KEY)");
        let attrs = turn(&[Message::text(Role::User, "sk-123?")], &reply, &scrub);
        for (_, v) in &attrs {
            let Attr::Str(s) = v else { panic!() };
            assert!(!s.contains("sk-123") && s.contains("secret(KEY)"), "{s}");
        }
        let huge = json!({ "text": "é".repeat(MAX_CONTENT) });
        let attrs = tool(&huge, None, &|s| s.to_string());
        let Attr::Str(s) = &attrs[0].1 else { panic!() };
        assert!(s.len() < MAX_CONTENT + 64, "{}", s.len());
        assert!(s.ends_with("more bytes]"), "{}", &s[s.len() - 40..]);
    }

    #[test]
    fn a_tool_result_shows_structured_content_or_its_blocks_without_bytes() {
        let r = pipec_mcp::ToolResult {
            structured: None,
            content: vec![
                pipec_mcp::Content::Text("hi".into()),
                pipec_mcp::Content::Media {
                    kind: "image".into(),
                    mime: "image/png".into(),
                    data: vec![0; 10],
                },
            ],
            is_error: false,
        };
        let attrs = tool(&json!({ "a": 1 }), Some(&r), &|s| s.to_string());
        assert_eq!(
            attr(&attrs, "gen_ai.tool.call.arguments"),
            json!({ "a": 1 })
        );
        assert_eq!(
            attr(&attrs, "gen_ai.tool.call.result"),
            json!({ "content": [{ "type": "text", "text": "hi" }, { "type": "image", "mimeType": "image/png", "bytes": 10 }], "isError": false })
        );
    }
}
