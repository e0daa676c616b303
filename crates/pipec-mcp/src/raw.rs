//! A tool result given as MCP's JSON (a `CallToolResult`), as an embedder's replayer
//! returns it: read as a server's answer is (`convert.rs`).

use serde_json::Value;

use super::ToolResult;
use super::convert::{self, Unusable};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Body, Content};
    use serde_json::json;

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
}
