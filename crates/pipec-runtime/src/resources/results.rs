//! What a tool result means to a pipeline: the value of its declared type (from
//! `structuredContent`, else its one text block parsed as JSON, else its binary content
//! for `bytes`), what a model is shown of it, and the summary the journal keeps (a hash,
//! the size, the structured part, what other content it held, never large blobs).

use serde_json::{Value, json};

use crate::progress::human_bytes;
use crate::validate::{Mode, Validators};
use pipec_mcp::{Body, Content, ToolResult};
use pipec_plan::{Plan, Tool};

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

/// A block of a result that holds bytes: an image, an audio clip, or an embedded
/// resource sent as a blob.
pub(crate) struct Binary<'a> {
    /// `image`, `audio` or `resource`.
    pub block: &'a str,
    pub mime: Option<&'a str>,
    pub data: &'a [u8],
    /// An embedded resource's URI.
    pub uri: Option<&'a str>,
}

impl Binary<'_> {
    /// For messages: `an image (image/png, 1.2 KB)`.
    fn describe(&self) -> String {
        let what = match (self.block, self.uri) {
            ("image", _) => "an image".to_string(),
            ("audio", _) => "an audio clip".to_string(),
            (_, Some(uri)) => format!("the embedded resource {uri}"),
            (other, None) => format!("a {other} block"),
        };
        format!(
            "{what} ({}, {})",
            self.mime.unwrap_or("no MIME type"),
            human_bytes(self.data.len() as u64)
        )
    }
}

/// The binary blocks of a result, in order.
pub(crate) fn binaries(result: &ToolResult) -> Vec<Binary<'_>> {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Media { kind, mime, data } => Some(Binary {
                block: kind,
                mime: Some(mime),
                data,
                uri: None,
            }),
            Content::Resource(r) => match &r.body {
                Body::Blob(data) => Some(Binary {
                    block: "resource",
                    mime: r.mime.as_deref(),
                    data,
                    uri: Some(&r.uri),
                }),
                Body::Text(_) => None,
            },
            _ => None,
        })
        .collect()
}

/// What a declared type makes of a result's binary content.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TakesBytes {
    /// `bytes` (or `bytes?`): the one binary block.
    One,
    /// `bytes[]`: every binary block, in order.
    All,
    No,
}

/// Whether a tool's declared type takes binary content (`bytes`, `bytes?`, `bytes[]`).
pub(crate) fn takes_bytes(plan: &Plan, schema: &Value) -> TakesBytes {
    fn is_bytes(plan: &Plan, s: &Value) -> bool {
        let s = resolved(plan, s);
        s.get("contentEncoding").and_then(Value::as_str) == Some("base64")
            || s.get("anyOf")
                .and_then(Value::as_array)
                .is_some_and(|alts| alts.iter().any(|a| is_bytes(plan, a)))
    }
    let s = resolved(plan, schema);
    if is_bytes(plan, s) {
        return TakesBytes::One;
    }
    match items_of(plan, s) {
        Some(items) if is_bytes(plan, items) => TakesBytes::All,
        _ => TakesBytes::No,
    }
}

/// The value of a tool result, of the tool's declared output type.
pub(crate) fn value_of(
    plan: &Plan,
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
    // A record of a block's parts (`data: bytes`, `mime: string`, ...) takes the
    // binary blocks and embedded resources with their MIME types and URIs.
    // A list of such records with no block to take is read from the text (a JSON list
    // of `{text, uri}` hits is such a list too), else empty.
    let mut no_parts = false;
    if let Some(shape) = media_shape(plan, &tool.output_schema) {
        let parts = parts(result, &shape.fields);
        let v = match (shape.many, parts.as_slice()) {
            (_, []) => {
                no_parts = shape.many;
                None
            }
            (true, _) => Some(Value::Array(parts.clone())),
            (false, [one]) => Some(one.clone()),
            (false, several) => {
                problems.push(format!(
                    "it holds {} binary blocks or embedded resources, and only a list of records takes several",
                    several.len()
                ));
                None
            }
        };
        if let Some(v) = v {
            match fits(&v) {
                Ok(()) => return Ok(v),
                Err(e) => problems.push(format!("its blocks as records do not fit: {e}")),
            }
        }
    }
    let binaries = binaries(result);
    let encoded = |b: &Binary<'_>| Value::String(pipec_base::base64::encode(b.data));
    let takes = takes_bytes(plan, &tool.output_schema);
    match (takes, binaries.as_slice()) {
        (TakesBytes::No, _) | (_, []) => {}
        (TakesBytes::One, [one]) => {
            let v = encoded(one);
            match fits(&v) {
                Ok(()) => return Ok(v),
                Err(e) => problems.push(format!("{} does not fit: {e}", one.describe())),
            }
        }
        (TakesBytes::One, several) => problems.push(format!(
            "it holds {} binary blocks ({}), and only `bytes[]` takes several",
            several.len(),
            several
                .iter()
                .map(Binary::describe)
                .collect::<Vec<_>>()
                .join(", ")
        )),
        (TakesBytes::All, all) => {
            let v = Value::Array(all.iter().map(encoded).collect());
            match fits(&v) {
                Ok(()) => return Ok(v),
                Err(e) => problems.push(format!("its binary blocks do not fit: {e}")),
            }
        }
    }
    // A `bytes` value is the binary content when there is some: a caption beside it is
    // not the picture.
    if takes != TakesBytes::No && !binaries.is_empty() {
        return Err(ResultError::Unparsable(problems.join("; ")));
    }
    let mut texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    // A tool that answers with a document alone (one embedded text resource) answers
    // with its text.
    let embedded_texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Resource(r) => match &r.body {
                Body::Text(t) => Some(t.as_str()),
                Body::Blob(_) => None,
            },
            _ => None,
        })
        .collect();
    if texts.is_empty() && result.structured.is_none() && embedded_texts.len() == 1 {
        texts = embedded_texts;
    }
    let held = || {
        format!(
            "it holds {}, which only `bytes` takes",
            binaries
                .iter()
                .map(Binary::describe)
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    match texts.as_slice() {
        [] if result.structured.is_none() && !binaries.is_empty() => problems.push(format!(
            "it has no structured content and no text; {}",
            held()
        )),
        [] if result.structured.is_none() => {
            // A tool that answers with links alone, or nothing, for a type that takes null
            // (or a list of parts, then none).
            if fits(&Value::Null).is_ok() {
                return Ok(Value::Null);
            }
            if no_parts && fits(&json!([])).is_ok() {
                return Ok(json!([]));
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
    if !texts.is_empty() && !binaries.is_empty() {
        problems.push(held());
    }
    Err(ResultError::Unparsable(problems.join("; ")))
}

/// A declared record that takes a result's blocks one by one: its fields among
/// `data` (bytes), `mime`, `uri` and `text` (strings), with `data`, or with `text` and
/// `uri` or `mime` (a record of `text` alone is an ordinary one).
pub struct MediaShape {
    /// The record's fields of those four.
    pub fields: Vec<&'static str>,
    /// A list of such records (every block), else one.
    pub many: bool,
}

/// Whether the declared type is such a record, or a list of them.
pub fn media_shape(plan: &Plan, schema: &Value) -> Option<MediaShape> {
    fn fields(plan: &Plan, s: &Value) -> Option<Vec<&'static str>> {
        let s = resolved(plan, s);
        let props = s.get("properties")?.as_object()?;
        let is_bytes = |v: &Value| {
            let v = resolved(plan, v);
            v.get("contentEncoding").and_then(Value::as_str) == Some("base64")
                || v.get("anyOf")
                    .and_then(Value::as_array)
                    .is_some_and(|alts| {
                        alts.iter().any(|a| {
                            resolved(plan, a)
                                .get("contentEncoding")
                                .and_then(Value::as_str)
                                == Some("base64")
                        })
                    })
        };
        let known = ["data", "mime", "uri", "text"];
        if props.keys().any(|k| !known.contains(&k.as_str())) {
            return None;
        }
        let data = props.get("data").is_some_and(is_bytes);
        // `text` alone is any record's field; with `uri` or `mime` it is a document's.
        let document =
            props.contains_key("text") && (props.contains_key("uri") || props.contains_key("mime"));
        if !data && !document {
            return None;
        }
        if props.contains_key("data") && !data {
            return None;
        }
        Some(
            known
                .into_iter()
                .filter(|k| props.contains_key(*k))
                .collect(),
        )
    }
    if let Some(found) = fields(plan, schema) {
        return Some(MediaShape {
            fields: found,
            many: false,
        });
    }
    let items = items_of(plan, schema)?;
    fields(plan, items).map(|found| MediaShape {
        fields: found,
        many: true,
    })
}

/// A result's images, audio and embedded resources as records of `fields`, in order (an
/// embedded text resource only when the record takes `text`).
fn parts(result: &ToolResult, fields: &[&str]) -> Vec<Value> {
    let takes = |f: &str| fields.contains(&f);
    result
        .content
        .iter()
        .filter_map(|c| {
            let (mime, uri, data, text) = match c {
                Content::Media { mime, data, .. } => (Some(mime.as_str()), None, Some(data), None),
                Content::Resource(r) => match &r.body {
                    Body::Blob(data) => (r.mime.as_deref(), Some(r.uri.as_str()), Some(data), None),
                    Body::Text(t) if takes("text") => (
                        r.mime.as_deref(),
                        Some(r.uri.as_str()),
                        None,
                        Some(t.as_str()),
                    ),
                    Body::Text(_) => return None,
                },
                _ => return None,
            };
            let mut out = serde_json::Map::new();
            if let (true, Some(data)) = (takes("data"), data) {
                out.insert("data".into(), json!(pipec_base::base64::encode(data)));
            }
            if let (true, Some(text)) = (takes("text"), text) {
                out.insert("text".into(), json!(text));
            }
            if let (true, Some(mime)) = (takes("mime"), mime) {
                out.insert("mime".into(), json!(mime));
            }
            if let (true, Some(uri)) = (takes("uri"), uri) {
                out.insert("uri".into(), json!(uri));
            }
            Some(Value::Object(out))
        })
        .collect()
}

/// A binary block as a model is shown it: what it is, never its bytes.
fn placeholder(b: &Binary<'_>) -> String {
    format!("[{}: not shown]", b.describe())
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
                    Content::Media { kind, mime, data } => parts.push(placeholder(&Binary {
                        block: kind,
                        mime: Some(mime),
                        data,
                        uri: None,
                    })),
                    Content::Resource(r) => match &r.body {
                        Body::Text(t) => parts.push(t.clone()),
                        Body::Blob(b) => parts.push(placeholder(&Binary {
                            block: "resource",
                            mime: r.mime.as_deref(),
                            data: b,
                            uri: Some(&r.uri),
                        })),
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
/// small, the links, and what else it held (images, audio, embedded resources: their
/// type, URI, MIME type and size, never their bytes).
pub(crate) fn summary(result: &ToolResult, links: &[Value]) -> Value {
    let held = held(result);
    let mut whole = json!({
        "structured": result.structured,
        "text": text_of(result),
    });
    if !held.is_empty() {
        // Results that differ only in an image hash apart.
        let digests: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Media { data, .. } => Some(hex16(data)),
                Content::Resource(r) => Some(match &r.body {
                    Body::Text(t) => hex16(t.as_bytes()),
                    Body::Blob(b) => hex16(b),
                }),
                _ => None,
            })
            .collect();
        whole["held"] = json!(digests);
    }
    let whole = serde_json::to_vec(&whole).unwrap_or_default();
    let mut out =
        json!({ "sha256": hex16(&whole), "bytes": whole.len(), "is_error": result.is_error });
    if let Some(s) = &result.structured
        && serde_json::to_vec(s).map_or(0, |b| b.len()) <= KEPT_STRUCTURED_BYTES
    {
        out["structured"] = s.clone();
    }
    if !links.is_empty() {
        out["links"] = Value::Array(links.to_vec());
    }
    if !held.is_empty() {
        out["content"] = Value::Array(held);
    }
    out
}

/// The first 16 bytes of a SHA-256, in hex.
fn hex16(data: &[u8]) -> String {
    pipec_base::digest::sha256_hex(data, 16)
}

/// The blocks of a result that are neither text nor links, as the journal describes them.
fn held(result: &ToolResult) -> Vec<Value> {
    result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Media { kind, mime, data } => {
                Some(json!({ "type": kind, "mime": mime, "bytes": data.len() }))
            }
            Content::Resource(r) => {
                let mut v = json!({ "type": "resource", "uri": r.uri, "bytes": r.len() });
                if let Some(m) = &r.mime {
                    v["mime"] = json!(m);
                }
                Some(v)
            }
            _ => None,
        })
        .collect()
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
            Content::Media { data, .. } => data.len(),
            Content::Resource(r) => r.len(),
            Content::Link(l) => l.uri.len() + l.name.len(),
            Content::Malformed { problem, .. } => problem.len(),
        };
    }
    n as u64
}

/// A schema with its `$ref` to a named type followed.
pub(crate) fn resolved<'a>(plan: &'a Plan, schema: &'a Value) -> &'a Value {
    pipec_schema::refs::resolved(schema, &plan.defs)
}

/// The schema of the items of a list schema (following `T?`), or `None` for a
/// schema that is not a list.
pub(crate) fn items_of<'a>(plan: &'a Plan, schema: &'a Value) -> Option<&'a Value> {
    let s = resolved(plan, schema);
    if s.get("type").and_then(Value::as_str) == Some("array") {
        return s.get("items");
    }
    s.get("anyOf")
        .and_then(Value::as_array)?
        .iter()
        .find_map(|alt| items_of(plan, alt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_plan::ToolKind;

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
            task: Default::default(),
            uri: None,
            max_bytes: None,
            mime: None,
        }
    }

    fn plan() -> Plan {
        match pipec_check::compile_str("t.pipe", "type Picture = bytes\n") {
            Ok(plan) => plan,
            Err(e) => panic!("{:?}", e.diagnostics),
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
            value_of(
                &plan(),
                &obj,
                &result(Some(json!({ "a": 1 })), &["ignored"]),
                &v
            ),
            Ok(json!({ "a": 1 }))
        );
        let int = tool(json!({ "type": "integer" }));
        assert_eq!(
            value_of(
                &plan(),
                &int,
                &result(Some(json!({ "result": 7 })), &[]),
                &v
            ),
            Ok(json!(7))
        );
    }

    #[test]
    fn one_text_block_is_parsed_as_json_and_plain_text_fits_a_string() {
        let v = validators();
        let obj = tool(json!({ "type": "object", "required": ["a"] }));
        assert_eq!(
            value_of(&plan(), &obj, &result(None, &["{\"a\": 2}"]), &v),
            Ok(json!({ "a": 2 }))
        );
        let s = tool(json!({ "type": "string" }));
        assert_eq!(
            value_of(&plan(), &s, &result(None, &["hello"]), &v),
            Ok(json!("hello"))
        );
        assert!(matches!(
            value_of(&plan(), &obj, &result(None, &["hello"]), &v),
            Err(ResultError::Unparsable(_))
        ));
    }

    #[test]
    fn an_error_result_is_the_tools_failure_with_its_text() {
        let mut r = result(None, &["no such deal"]);
        r.is_error = true;
        assert_eq!(
            value_of(&plan(), &tool(json!({})), &r, &validators()),
            Err(ResultError::Tool("no such deal".into()))
        );
    }

    fn media(kind: &str, data: &[u8]) -> Content {
        Content::Media {
            kind: kind.into(),
            mime: format!("{kind}/x"),
            data: data.to_vec(),
        }
    }

    #[test]
    fn records_of_parts_take_images_audio_and_embedded_resources_with_their_types() {
        let plan = match pipec_check::compile_str(
            "t.pipe",
            "type Shot {\n  data: bytes\n  mime: string\n}\n\ntype Part {\n  data: bytes?\n  text: string?\n  mime: string?\n  uri: string?\n}\n",
        ) {
            Ok(plan) => plan,
            Err(e) => panic!("{:?}", e.diagnostics),
        };
        let v = Validators::new(plan.defs.clone());
        let shot = tool(json!({ "$ref": "#/$defs/Shot" }));
        let parts = tool(json!({ "type": "array", "items": { "$ref": "#/$defs/Part" } }));
        let mut r = result(None, &["a caption"]);
        r.content.push(media("image", b"hi"));
        assert_eq!(
            value_of(&plan, &shot, &r, &v),
            Ok(json!({ "data": "aGk=", "mime": "image/x" }))
        );
        r.content.push(media("audio", b"hello"));
        r.content
            .push(Content::Resource(pipec_mcp::ResourceContent {
                uri: "mcp://docs/readme".into(),
                mime: Some("text/markdown".into()),
                body: Body::Text("# Read me".into()),
            }));
        assert_eq!(
            value_of(&plan, &parts, &r, &v),
            Ok(json!([
                { "data": "aGk=", "mime": "image/x" },
                { "data": "aGVsbG8=", "mime": "audio/x" },
                { "text": "# Read me", "mime": "text/markdown", "uri": "mcp://docs/readme" }
            ]))
        );
        // One record does not take several blocks, and says so.
        assert!(matches!(
            value_of(&plan, &shot, &r, &v),
            Err(ResultError::Unparsable(m)) if m.contains("only a list of records takes several")
        ));
        // A record with fields of its own is no record of parts, nor one of `text` alone.
        assert!(
            media_shape(
                &plan,
                &json!({"type": "object", "properties": {"text": {"type": "string"}}})
            )
            .is_none()
        );
        assert!(media_shape(&plan, &json!({"type": "object", "properties": {"data": {"type": "string", "contentEncoding": "base64"}, "name": {"type": "string"}}})).is_none());
    }

    #[test]
    fn a_list_of_text_and_uri_records_is_read_from_the_text_when_no_block_is_a_part() {
        let plan = match pipec_check::compile_str(
            "t.pipe",
            "type Hit {\n  text: string\n  uri: string\n}\n",
        ) {
            Ok(plan) => plan,
            Err(e) => panic!("{:?}", e.diagnostics),
        };
        let v = Validators::new(plan.defs.clone());
        let hits = tool(json!({ "type": "array", "items": { "$ref": "#/$defs/Hit" } }));
        let r = result(None, &[r#"[{"text": "Ada", "uri": "mcp://crm/1"}]"#]);
        assert_eq!(
            value_of(&plan, &hits, &r, &v),
            Ok(json!([{ "text": "Ada", "uri": "mcp://crm/1" }]))
        );
        // Nothing at all is no parts.
        assert_eq!(
            value_of(&plan, &hits, &result(None, &[]), &v),
            Ok(json!([]))
        );
    }

    #[test]
    fn binary_content_is_the_value_of_bytes_and_named_where_a_type_cannot_hold_it() {
        let v = validators();
        let bytes = tool(json!({ "type": "string", "contentEncoding": "base64" }));
        let alias = tool(json!({ "$ref": "#/$defs/Picture" }));
        let list = tool(
            json!({ "type": "array", "items": { "type": "string", "contentEncoding": "base64" } }),
        );
        let mut r = result(None, &["a caption"]);
        r.content.push(media("image", b"hi"));
        assert_eq!(value_of(&plan(), &bytes, &r, &v), Ok(json!("aGk=")));
        assert_eq!(takes_bytes(&plan(), &alias.output_schema), TakesBytes::One);
        // The text is the value of a string; the image is not dropped, it is lifted.
        let s = tool(json!({ "type": "string" }));
        assert_eq!(value_of(&plan(), &s, &r, &v), Ok(json!("a caption")));
        r.content.push(media("audio", b"hello"));
        assert_eq!(
            value_of(&plan(), &list, &r, &v),
            Ok(json!(["aGk=", "aGVsbG8="]))
        );
        assert!(matches!(
            value_of(&plan(), &bytes, &r, &v),
            Err(ResultError::Unparsable(m)) if m.contains("only `bytes[]` takes several")
        ));
        let only_image = ToolResult {
            structured: None,
            content: vec![media("image", b"hi")],
            is_error: false,
        };
        let obj = tool(json!({ "type": "object" }));
        assert!(matches!(
            value_of(&plan(), &obj, &only_image, &v),
            Err(ResultError::Unparsable(m)) if m.contains("an image (image/x, 2 B)") && m.contains("only `bytes`")
        ));
        assert!(
            for_model(&only_image, &[]).contains("[an image (image/x, 2 B): not shown]"),
            "{}",
            for_model(&only_image, &[])
        );
        let summary = summary(&only_image, &[]);
        assert_eq!(
            summary["content"],
            json!([{ "type": "image", "mime": "image/x", "bytes": 2 }])
        );
    }

    #[test]
    fn an_embedded_text_resource_alone_is_the_results_text() {
        let r = ToolResult {
            structured: None,
            content: vec![Content::Resource(pipec_mcp::ResourceContent {
                uri: "mcp://crm/deals/D1/card".into(),
                mime: Some("application/json".into()),
                body: Body::Text("{\"a\": 3}".into()),
            })],
            is_error: false,
        };
        let obj = tool(json!({ "type": "object", "required": ["a"] }));
        assert_eq!(
            value_of(&plan(), &obj, &r, &validators()),
            Ok(json!({ "a": 3 }))
        );
    }
}
