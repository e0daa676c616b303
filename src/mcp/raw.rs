//! A tool result given as MCP's JSON (a `CallToolResult`), as an embedder's replayer
//! returns it: read into the same values a session gives, without rmcp.

use serde_json::Value;

use super::{Body, Content, Link, ResourceContent, ToolResult};

impl ToolResult {
    /// Reads a `CallToolResult` in MCP's JSON form. Blocks of a type pipec does not know
    /// are left out; a block of a known type without its required fields is an error.
    pub fn from_json(v: &Value) -> Result<ToolResult, String> {
        let o = v
            .as_object()
            .ok_or("a tool result is a JSON object with `content`")?;
        let mut content = Vec::new();
        if let Some(blocks) = o.get("content") {
            let blocks = blocks.as_array().ok_or("`content` is a list of blocks")?;
            for (i, b) in blocks.iter().enumerate() {
                if let Some(c) = block(b).map_err(|e| format!("content block {i}: {e}"))? {
                    content.push(c);
                }
            }
        }
        Ok(ToolResult {
            structured: o.get("structuredContent").cloned(),
            content,
            is_error: o.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

fn text_field<'a>(b: &'a Value, name: &str) -> Result<&'a str, String> {
    b.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("no `{name}` string"))
}

fn opt_string(b: &Value, name: &str) -> Option<String> {
    b.get(name).and_then(Value::as_str).map(str::to_string)
}

fn block(b: &Value) -> Result<Option<Content>, String> {
    let kind = text_field(b, "type")?;
    Ok(Some(match kind {
        "text" => Content::Text(text_field(b, "text")?.to_string()),
        "image" | "audio" => Content::Media {
            mime: text_field(b, "mimeType")?.to_string(),
            data: text_field(b, "data")?.to_string(),
        },
        "resource_link" => Content::Link(Link {
            uri: text_field(b, "uri")?.to_string(),
            name: opt_string(b, "name").unwrap_or_default(),
            title: opt_string(b, "title"),
            description: opt_string(b, "description"),
            mime: opt_string(b, "mimeType"),
            size: b.get("size").and_then(Value::as_u64),
        }),
        "resource" => {
            let r = b.get("resource").ok_or("no `resource`")?;
            let uri = text_field(r, "uri")?.to_string();
            let mime = opt_string(r, "mimeType");
            let body = if let Some(t) = r.get("text").and_then(Value::as_str) {
                Body::Text(t.to_string())
            } else {
                let blob = text_field(r, "blob")?;
                Body::Blob(decode_base64(blob).ok_or("`blob` is not base64")?)
            };
            Content::Resource(ResourceContent { uri, mime, body })
        }
        _ => return Ok(None),
    }))
}

/// Standard base64 (padding optional, whitespace ignored).
pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            b' ' | b'\n' | b'\r' | b'\t' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_raw_result_reads_into_blocks_and_links() {
        let r = ToolResult::from_json(&json!({
            "content": [
                { "type": "text", "text": "{\"a\":1}" },
                { "type": "resource_link", "uri": "mcp://crm/deals/D1/activity", "name": "D1-activity", "mimeType": "application/json", "size": 12 },
                { "type": "resource", "resource": { "uri": "mcp://x/b", "blob": "aGVsbG8=" } },
                { "type": "something-new", "x": 1 }
            ],
            "structuredContent": { "a": 1 }
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.content.len(), 3);
        assert_eq!(r.structured, Some(json!({ "a": 1 })));
        assert!(
            matches!(&r.content[1], Content::Link(l) if l.uri == "mcp://crm/deals/D1/activity" && l.size == Some(12))
        );
        assert!(
            matches!(&r.content[2], Content::Resource(c) if c.body == Body::Blob(b"hello".to_vec()))
        );
        assert!(
            ToolResult::from_json(
                &json!({ "content": [{ "type": "resource_link", "name": "x" }] })
            )
            .is_err()
        );
    }
}
