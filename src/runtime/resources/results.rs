//! What a tool result means to a pipeline: the value of its declared type (from
//! `structuredContent`, else its one text block parsed as JSON), what a model is shown
//! of it, and the summary the journal keeps (a hash, the size, the structured part,
//! never large blobs).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::mcp::{Body, Content, ToolResult};
use crate::plan::Tool;
use crate::runtime::validate::{Mode, Validators};

/// The largest tool result accepted when the tool declares no `max_result_bytes`.
pub(crate) const DEFAULT_MAX_RESULT_BYTES: u64 = 1_000_000;

/// The journal keeps a result's structured part only up to this size.
const KEPT_STRUCTURED_BYTES: usize = 16 * 1024;

/// Why a result has no value of the tool's type.
#[derive(Debug, PartialEq)]
pub(crate) enum ResultError {
    /// `isError`: the tool ran and reports a failure (its text).
    Tool(String),
    /// It does not fit the declared type, or is not JSON.
    Unparsable(String),
}

/// The text of a result's text blocks, joined.
pub(crate) fn text_of(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of a tool result, of the tool's declared output type.
pub(crate) fn value_of(
    tool: &Tool,
    result: &ToolResult,
    validators: &Validators,
) -> Result<Value, ResultError> {
    if result.is_error {
        let text = text_of(result);
        return Err(ResultError::Tool(if text.is_empty() {
            "the tool reported an error and said nothing more".into()
        } else {
            text
        }));
    }
    let fits = |v: &Value| validators.check(&tool.output_schema, v, Mode::Open);
    let mut problems = Vec::new();
    if let Some(s) = &result.structured {
        match fits(s) {
            Ok(()) => return Ok(s.clone()),
            Err(e) => problems.push(format!("its structured content does not fit: {e}")),
        }
        // The Python SDK wraps a value that is not an object as `{"result": value}`.
        if let Some(inner) = s
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get("result"))
            && fits(inner).is_ok()
        {
            return Ok(inner.clone());
        }
    }
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    match texts.as_slice() {
        [] if result.structured.is_none() => {
            // A tool that answers with links alone, or nothing, for a type that takes null.
            if fits(&Value::Null).is_ok() {
                return Ok(Value::Null);
            }
            problems.push("it has no structured content and no text".into());
        }
        [] => {}
        [one] => match serde_json::from_str::<Value>(one) {
            Ok(v) => match fits(&v) {
                Ok(()) => return Ok(v),
                Err(e) => problems.push(format!("its text does not fit: {e}")),
            },
            Err(_) => {
                let text = Value::String(one.to_string());
                if fits(&text).is_ok() {
                    return Ok(text);
                }
                problems.push(format!(
                    "its text is not JSON: {}",
                    one.chars().take(200).collect::<String>()
                ));
            }
        },
        many => {
            let joined = Value::String(many.join("\n"));
            if fits(&joined).is_ok() {
                return Ok(joined);
            }
            problems.push(format!(
                "it has {} text blocks, and only a string takes several",
                many.len()
            ));
        }
    }
    Err(ResultError::Unparsable(problems.join("; ")))
}

/// What a model is shown of a result: the structured part (or the text), and the links
/// as `{uri, name, kind}`.
pub(crate) fn for_model(result: &ToolResult, links: &[Value]) -> String {
    let body = match &result.structured {
        Some(s) => serde_json::to_string(s).unwrap_or_default(),
        None => {
            let mut parts = Vec::new();
            for c in &result.content {
                match c {
                    Content::Text(t) => parts.push(t.clone()),
                    Content::Media { mime, data } => {
                        parts.push(format!("[{mime}, {} bytes of base64]", data.len()))
                    }
                    Content::Resource(r) => match &r.body {
                        Body::Text(t) => parts.push(t.clone()),
                        Body::Blob(b) => parts.push(format!("[{}: {} bytes]", r.uri, b.len())),
                    },
                    Content::Link(_) => {}
                    Content::Malformed { kind, problem } => parts.push(format!(
                        "[a {} block pipec could not read: {problem}]",
                        kind.as_deref().unwrap_or("content")
                    )),
                }
            }
            parts.join("\n")
        }
    };
    let mut out = if result.is_error {
        format!("The tool failed: {body}")
    } else {
        body
    };
    if !links.is_empty() {
        out.push_str("\nLinks: ");
        out.push_str(&serde_json::to_string(links).unwrap_or_default());
    }
    out
}

/// What the journal keeps of a result: its hash and size, the structured part when it is
/// small, and the links.
pub(crate) fn summary(result: &ToolResult, links: &[Value]) -> Value {
    let whole = serde_json::to_vec(&json!({
        "structured": result.structured,
        "text": text_of(result),
    }))
    .unwrap_or_default();
    let digest = Sha256::digest(&whole);
    let hash: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let mut out = json!({ "sha256": hash, "bytes": whole.len(), "is_error": result.is_error });
    if let Some(s) = &result.structured
        && serde_json::to_vec(s).map_or(0, |b| b.len()) <= KEPT_STRUCTURED_BYTES
    {
        out["structured"] = s.clone();
    }
    if !links.is_empty() {
        out["links"] = Value::Array(links.to_vec());
    }
    out
}

/// The size of a result as it counts against `max_result_bytes`: its text and
/// structured part, and the decoded size of media and embedded resources.
pub(crate) fn size_of(result: &ToolResult) -> u64 {
    let mut n = result
        .structured
        .as_ref()
        .map_or(0, |s| serde_json::to_vec(s).map_or(0, |b| b.len()));
    for c in &result.content {
        n += match c {
            Content::Text(t) => t.len(),
            Content::Media { data, .. } => data.len() * 3 / 4,
            Content::Resource(r) => r.len(),
            Content::Link(l) => l.uri.len() + l.name.len(),
            Content::Malformed { problem, .. } => problem.len(),
        };
    }
    n as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ToolKind;

    fn tool(output: Value) -> Tool {
        Tool {
            name: "t".into(),
            kind: ToolKind::Tool,
            wire_name: "t".into(),
            server: "s".into(),
            description: None,
            params: Vec::new(),
            input_schema: json!({ "type": "object" }),
            output_schema: output,
            read_only: true,
            idempotent: true,
            destructive: false,
            links: Vec::new(),
            timeout_ms: None,
            max_result_bytes: None,
            uri: None,
            max_bytes: None,
            mime: None,
        }
    }

    fn validators() -> Validators {
        Validators::empty()
    }

    fn result(structured: Option<Value>, texts: &[&str]) -> ToolResult {
        ToolResult {
            structured,
            content: texts.iter().map(|t| Content::Text(t.to_string())).collect(),
            is_error: false,
        }
    }

    #[test]
    fn structured_content_wins_and_the_result_wrapper_is_taken_off() {
        let v = validators();
        let obj = tool(json!({ "type": "object", "required": ["a"] }));
        assert_eq!(
            value_of(&obj, &result(Some(json!({ "a": 1 })), &["ignored"]), &v),
            Ok(json!({ "a": 1 }))
        );
        let int = tool(json!({ "type": "integer" }));
        assert_eq!(
            value_of(&int, &result(Some(json!({ "result": 7 })), &[]), &v),
            Ok(json!(7))
        );
    }

    #[test]
    fn one_text_block_is_parsed_as_json_and_plain_text_fits_a_string() {
        let v = validators();
        let obj = tool(json!({ "type": "object", "required": ["a"] }));
        assert_eq!(
            value_of(&obj, &result(None, &["{\"a\": 2}"]), &v),
            Ok(json!({ "a": 2 }))
        );
        let s = tool(json!({ "type": "string" }));
        assert_eq!(
            value_of(&s, &result(None, &["hello"]), &v),
            Ok(json!("hello"))
        );
        assert!(matches!(
            value_of(&obj, &result(None, &["hello"]), &v),
            Err(ResultError::Unparsable(_))
        ));
    }

    #[test]
    fn an_error_result_is_the_tools_failure_with_its_text() {
        let mut r = result(None, &["no such deal"]);
        r.is_error = true;
        assert_eq!(
            value_of(&tool(json!({})), &r, &validators()),
            Err(ResultError::Tool("no such deal".into()))
        );
    }
}
