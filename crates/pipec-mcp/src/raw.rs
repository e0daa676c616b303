//! Tool results, resource contents and tools in MCP's JSON: a `CallToolResult` an
//! embedder's replayer returns or a tape holds, read as a server's answer is
//! (`convert.rs`); and pipec's values written back in that form, for people to read
//! (`pipec mcp call`, `pipec mcp read`) and for tapes.

use pipec_base::base64;
use serde_json::{Map, Value, json};

use super::convert::{self, Unusable};
use super::{Body, Content, ResourceContent, ToolInfo, ToolResult};

impl ToolResult {
    /// Reads a `CallToolResult` in MCP's JSON form. A block that cannot be read is kept
    /// as `Content::Malformed`, so the rest of the result is not lost.
    pub fn from_json(v: &Value) -> Result<ToolResult, String> {
        convert::tool_result(v.clone()).map_err(|u| match u {
            Unusable::InputRequired => "it asks for input, which pipec does not answer".into(),
            Unusable::Protocol(m) => m,
        })
    }
}

impl ToolResult {
    /// The result as a `CallToolResult` (a block pipec could not read keeps its `type`
    /// and says what was wrong with it).
    pub fn to_json(&self) -> Value {
        let content: Vec<Value> = self
            .content
            .iter()
            .map(|block| match block {
                Content::Text(text) => json!({ "type": "text", "text": text }),
                Content::Media { kind, mime, data } => {
                    json!({ "type": kind, "mimeType": mime, "data": base64::encode(data) })
                }
                Content::Link(link) => {
                    let mut out = Map::new();
                    out.insert("type".into(), json!("resource_link"));
                    out.insert("uri".into(), json!(link.uri));
                    out.insert("name".into(), json!(link.name));
                    let optional = [
                        ("title", link.title.as_ref().map(|t| json!(t))),
                        ("description", link.description.as_ref().map(|d| json!(d))),
                        ("mimeType", link.mime.as_ref().map(|m| json!(m))),
                        ("size", link.size.map(|s| json!(s))),
                    ];
                    for (key, value) in optional {
                        if let Some(value) = value {
                            out.insert(key.into(), value);
                        }
                    }
                    Value::Object(out)
                }
                Content::Resource(resource) => {
                    json!({ "type": "resource", "resource": resource.to_json() })
                }
                Content::Malformed { kind, problem } => {
                    json!({ "type": kind, "unreadable": problem })
                }
            })
            .collect();
        let mut out = Map::new();
        out.insert("content".into(), Value::Array(content));
        if let Some(structured) = &self.structured {
            out.insert("structuredContent".into(), structured.clone());
        }
        if self.is_error {
            out.insert("isError".into(), json!(true));
        }
        Value::Object(out)
    }
}

impl ResourceContent {
    /// Reads a `TextResourceContents` or `BlobResourceContents` (a blob decoded).
    pub fn from_json(v: &Value) -> Result<ResourceContent, String> {
        match v {
            Value::Object(content) => convert::resource_content(content),
            _ => Err("a resource content is not a JSON object".into()),
        }
    }

    /// The content as MCP's `TextResourceContents` or `BlobResourceContents`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("uri".into(), json!(self.uri));
        if let Some(mime) = &self.mime {
            out.insert("mimeType".into(), json!(mime));
        }
        match &self.body {
            Body::Text(text) => out.insert("text".into(), json!(text)),
            Body::Blob(bytes) => out.insert("blob".into(), json!(base64::encode(bytes))),
        };
        Value::Object(out)
    }
}

impl ToolInfo {
    /// Reads one tool of a `tools/list` result.
    pub fn from_json(v: &Value) -> Result<ToolInfo, String> {
        match v {
            Value::Object(tool) => convert::tool_info("tool", 0, tool).map_err(|u| match u {
                Unusable::InputRequired => "a tool cannot ask for input".into(),
                Unusable::Protocol(m) => m,
            }),
            _ => Err("a tool is not a JSON object".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_result_reads_into_blocks_and_links() {
        let r = ToolResult::from_json(&json!({
            "content": [
                { "type": "text", "text": "{\"a\":1}" },
                { "type": "resource_link", "uri": "mcp://crm/deals/D1/activity", "name": "D1-activity", "mimeType": "application/json", "size": 12 },
                { "type": "resource", "resource": { "uri": "mcp://x/b", "blob": "aGVsbG8=" } },
                { "type": "resource_link", "name": "no uri" }
            ],
            "structuredContent": { "a": 1 }
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.content.len(), 4);
        assert_eq!(r.structured, Some(json!({ "a": 1 })));
        assert!(
            matches!(&r.content[1], Content::Link(l) if l.uri == "mcp://crm/deals/D1/activity" && l.size == Some(12))
        );
        assert!(
            matches!(&r.content[2], Content::Resource(c) if c.body == Body::Blob(b"hello".to_vec()))
        );
        assert!(matches!(&r.content[3], Content::Malformed { .. }));
        assert!(ToolResult::from_json(&json!("not an object")).is_err());
    }

    #[test]
    fn a_result_written_back_reads_the_same() {
        let sent = json!({
            "content": [
                { "type": "text", "text": "hi" },
                { "type": "image", "mimeType": "image/png", "data": "aGVsbG8=" },
                { "type": "resource_link", "uri": "mcp://x/a", "name": "a", "size": 3 },
                { "type": "resource", "resource": { "uri": "mcp://x/b", "mimeType": "text/plain", "text": "b" } }
            ],
            "structuredContent": { "a": 1 },
            "isError": true
        });
        let read = ToolResult::from_json(&sent).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read.to_json(), sent);
    }
}
