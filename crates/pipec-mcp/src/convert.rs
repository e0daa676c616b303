//! From the JSON a server answered to pipec's values: tool listings, template listings,
//! tool results and resource contents. It reads the wire format (camelCase, as the MCP
//! schema names it) leniently where the schema is lenient and names what is wrong where
//! it is not; a tool result keeps its readable blocks when one is malformed.

use serde_json::{Map, Value};

use super::{
    Body, Content, Link, PromptInfo, ResourceContent, ResourceInfo, TaskSupport, TemplateInfo,
    ToolInfo, ToolResult,
};
use pipec_base::base64;

/// Why an answer could not be used.
#[derive(Debug, PartialEq)]
pub(super) enum Unusable {
    /// The server asked for input in the middle of the request (`input_required`).
    InputRequired,
    /// The answer does not have the shape its request calls for.
    Protocol(String),
}

type Converted<T> = Result<T, Unusable>;

/// One page of a listing: its items and the cursor of the next page.
pub(super) type Page<T> = Converted<(Vec<T>, Option<String>)>;

fn protocol<T>(message: impl Into<String>) -> Converted<T> {
    Err(Unusable::Protocol(message.into()))
}

/// The result as an object, after checking `resultType` (absent means complete).
fn complete(result: Value, what: &str) -> Converted<Map<String, Value>> {
    let Value::Object(result) = result else {
        return protocol(format!("the {what} result is not a JSON object"));
    };
    match result.get("resultType") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t == "complete" => {}
        Some(Value::String(t)) if t == "input_required" => return Err(Unusable::InputRequired),
        Some(other) => {
            return protocol(format!(
                "the {what} result has the result type {other}, which pipec does not follow"
            ));
        }
    }
    Ok(result)
}

fn text(object: &Map<String, Value>, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_string)
}

fn next_cursor(result: &Map<String, Value>) -> Converted<Option<String>> {
    match result.get("nextCursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => Ok(Some(c.clone())),
        Some(_) => protocol("`nextCursor` is not a string"),
    }
}

/// One page of a listing: the objects under `key`, each read by `item` (given its
/// index, and what one is called in messages), and the cursor of the next page.
fn page_of<T>(
    result: Value,
    method: &str,
    key: &str,
    what: &str,
    item: impl Fn(&str, usize, &Map<String, Value>) -> Converted<T>,
) -> Page<T> {
    let result = complete(result, method)?;
    let Some(Value::Array(items)) = result.get(key) else {
        return protocol(format!("the {method} result has no `{key}` list"));
    };
    let items = items
        .iter()
        .enumerate()
        .map(|(i, value)| match value {
            Value::Object(object) => item(what, i, object),
            _ => protocol(format!("{what} {i} of the listing is not an object")),
        })
        .collect::<Converted<Vec<_>>>()?;
    Ok((items, next_cursor(&result)?))
}

/// One page of `tools/list`: its tools and the cursor of the next page.
pub(super) fn tools_page(result: Value) -> Page<ToolInfo> {
    page_of(result, "tools/list", "tools", "tool", tool_info)
}

pub(super) fn tool_info(
    what: &str,
    index: usize,
    tool: &Map<String, Value>,
) -> Converted<ToolInfo> {
    let Some(name) = text(tool, "name") else {
        return protocol(format!("{what} {index} of the listing has no `name`"));
    };
    let annotations = tool.get("annotations").and_then(Value::as_object);
    let hint = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    Ok(ToolInfo {
        title: text(tool, "title").or_else(|| annotations.and_then(|a| text(a, "title"))),
        description: text(tool, "description"),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new())),
        output_schema: tool.get("outputSchema").filter(|s| !s.is_null()).cloned(),
        read_only: hint("readOnlyHint"),
        idempotent: hint("idempotentHint"),
        destructive: hint("destructiveHint"),
        open_world: hint("openWorldHint"),
        task_support: task_support(tool),
        name,
        raw: Value::Object(tool.clone()),
    })
}

/// `execution.taskSupport`; a value pipec does not know is taken as a server's wish
/// that pipec cannot meet, so as `required`.
fn task_support(tool: &Map<String, Value>) -> TaskSupport {
    let support = tool
        .get("execution")
        .and_then(|e| e.get("taskSupport"))
        .filter(|s| !s.is_null());
    match support.map(|s| s.as_str()) {
        None | Some(Some("forbidden")) => TaskSupport::Forbidden,
        Some(Some("optional")) => TaskSupport::Optional,
        Some(_) => TaskSupport::Required,
    }
}

/// One page of `resources/list`.
pub(super) fn resources_page(result: Value) -> Page<ResourceInfo> {
    page_of(
        result,
        "resources/list",
        "resources",
        "resource",
        |what, i, resource| {
            let Some(uri) = text(resource, "uri") else {
                return protocol(format!("{what} {i} of the listing has no `uri`"));
            };
            Ok(ResourceInfo {
                name: text(resource, "name").unwrap_or_else(|| uri.clone()),
                title: text(resource, "title"),
                description: text(resource, "description"),
                mime: text(resource, "mimeType"),
                uri,
                raw: Value::Object(resource.clone()),
            })
        },
    )
}

/// One page of `resources/templates/list`.
pub(super) fn templates_page(result: Value) -> Page<TemplateInfo> {
    let method = "resources/templates/list";
    page_of(
        result,
        method,
        "resourceTemplates",
        "template",
        |what, i, template| {
            let Some(uri_template) = text(template, "uriTemplate") else {
                return protocol(format!("{what} {i} of the listing has no `uriTemplate`"));
            };
            Ok(TemplateInfo {
                name: text(template, "name").unwrap_or_else(|| uri_template.clone()),
                title: text(template, "title"),
                description: text(template, "description"),
                mime: text(template, "mimeType"),
                uri_template,
                raw: Value::Object(template.clone()),
            })
        },
    )
}

pub(super) fn prompts_page(result: Value) -> Page<PromptInfo> {
    page_of(
        result,
        "prompts/list",
        "prompts",
        "prompt",
        |what, i, prompt| {
            let Some(name) = text(prompt, "name") else {
                return protocol(format!("{what} {i} of the listing has no `name`"));
            };
            let arguments = prompt
                .get("arguments")
                .and_then(Value::as_array)
                .map(|arguments| {
                    arguments
                        .iter()
                        .filter_map(Value::as_object)
                        .filter_map(|a| {
                            let required = a.get("required").and_then(Value::as_bool);
                            Some((text(a, "name")?, required.unwrap_or(false)))
                        })
                        .collect()
                })
                .unwrap_or_default();
            Ok(PromptInfo {
                name,
                title: text(prompt, "title"),
                description: text(prompt, "description"),
                arguments,
                raw: Value::Object(prompt.clone()),
            })
        },
    )
}

/// A `prompts/get` result: its messages, as sent.
pub(super) fn prompt_result(result: Value) -> Converted<Value> {
    let result = complete(result, "prompts/get")?;
    match result.get("messages") {
        Some(Value::Array(_)) => Ok(Value::Object(result)),
        _ => protocol("the prompts/get result has no `messages` list"),
    }
}

/// A `tools/call` result.
pub(super) fn tool_result(result: Value) -> Converted<ToolResult> {
    let mut result = complete(result, "tools/call")?;
    let content = match result.remove("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(blocks)) => blocks.into_iter().map(content_block).collect(),
        Some(_) => return protocol("the `content` of the tool result is not a list"),
    };
    let is_error = match result.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return protocol("`isError` of the tool result is not a boolean"),
    };
    Ok(ToolResult {
        structured: result.remove("structuredContent"),
        content,
        is_error,
    })
}

/// One content block; one that cannot be read is kept as [`Content::Malformed`].
fn content_block(block: Value) -> Content {
    let Value::Object(block) = block else {
        return Content::Malformed {
            kind: None,
            problem: "the block is not an object".into(),
        };
    };
    let kind = text(&block, "type");
    let read = match kind.as_deref() {
        Some("text") => match text(&block, "text") {
            Some(t) => Ok(Content::Text(t)),
            None => Err("a text block without `text`".to_string()),
        },
        Some(media @ ("image" | "audio")) => match (text(&block, "mimeType"), text(&block, "data"))
        {
            (Some(mime), Some(data)) => base64::decode(&data)
                .map(|data| Content::Media {
                    kind: media.to_string(),
                    mime,
                    data,
                })
                .map_err(|e| format!("the data of an {media} block is not base64: {e}")),
            _ => Err(format!("an {media} block needs `mimeType` and `data`")),
        },
        Some("resource_link") => link(&block).map(Content::Link),
        Some("resource") => match block.get("resource") {
            Some(Value::Object(resource)) => resource_content(resource).map(Content::Resource),
            _ => Err("an embedded resource without its `resource`".to_string()),
        },
        Some(other) => Err(format!(
            "a block of the type `{other}`, which pipec does not know"
        )),
        None => Err("a block without a `type`".to_string()),
    };
    read.unwrap_or_else(|problem| Content::Malformed { kind, problem })
}

fn link(block: &Map<String, Value>) -> Result<Link, String> {
    let Some(uri) = text(block, "uri") else {
        return Err("a resource_link without a `uri`".into());
    };
    let Some(name) = text(block, "name") else {
        return Err(format!("the resource_link {uri} has no `name`"));
    };
    let size = match block.get("size") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(size) => Some(size),
            None => {
                return Err(format!(
                    "the size {v} of the resource_link {uri} is not a byte count"
                ));
            }
        },
    };
    Ok(Link {
        title: text(block, "title"),
        description: text(block, "description"),
        mime: text(block, "mimeType"),
        uri,
        name,
        size,
    })
}

pub(super) fn resource_content(resource: &Map<String, Value>) -> Result<ResourceContent, String> {
    let Some(uri) = text(resource, "uri") else {
        return Err("a resource content without a `uri`".into());
    };
    let body = match (resource.get("text"), resource.get("blob")) {
        (Some(Value::String(t)), _) => Body::Text(t.clone()),
        (_, Some(Value::String(b))) => Body::Blob(
            base64::decode(b).map_err(|e| format!("the blob of {uri} is not base64: {e}"))?,
        ),
        _ => {
            return Err(format!(
                "the content of {uri} has neither `text` nor `blob`"
            ));
        }
    };
    Ok(ResourceContent {
        mime: text(resource, "mimeType"),
        uri,
        body,
    })
}

/// A `resources/read` result: every content, blobs decoded.
pub(super) fn read_result(result: Value) -> Converted<Vec<ResourceContent>> {
    let result = complete(result, "resources/read")?;
    let Some(Value::Array(contents)) = result.get("contents") else {
        return protocol("the resources/read result has no `contents` list");
    };
    contents
        .iter()
        .enumerate()
        .map(|(i, content)| match content {
            Value::Object(content) => resource_content(content)
                .or_else(|problem| protocol(format!("content {i} of the read: {problem}"))),
            _ => protocol(format!("content {i} of the read is not an object")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_listing_with_annotations() {
        let (tools, next) = tools_page(json!({
            "tools": [{
                "name": "get_deal",
                "description": "A deal.",
                "inputSchema": {"type": "object"},
                "annotations": {"title": "Get a deal", "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
            }, {"name": "bare"}],
            "nextCursor": "p2"
        }))
        .expect("listing");
        assert_eq!(next.as_deref(), Some("p2"));
        assert_eq!(tools[0].title.as_deref(), Some("Get a deal"));
        assert_eq!(tools[0].read_only, Some(true));
        assert_eq!(tools[0].idempotent, Some(true));
        assert_eq!(tools[0].destructive, None);
        assert_eq!(tools[0].open_world, Some(false));
        assert_eq!(tools[1].input_schema, json!({}));
        assert!(
            matches!(tools_page(json!({"tools": [{"title": "x"}]})), Err(Unusable::Protocol(m)) if m.contains("no `name`"))
        );
    }

    #[test]
    fn task_support_is_read_and_an_unknown_value_is_taken_as_required() {
        let support = |execution: Value| {
            let (tools, _) = tools_page(json!({"tools": [{"name": "t", "execution": execution}]}))
                .expect("listing");
            tools[0].task_support
        };
        assert_eq!(support(Value::Null), TaskSupport::Forbidden);
        assert_eq!(support(json!({})), TaskSupport::Forbidden);
        assert_eq!(
            support(json!({"taskSupport": "forbidden"})),
            TaskSupport::Forbidden
        );
        assert_eq!(
            support(json!({"taskSupport": "optional"})),
            TaskSupport::Optional
        );
        assert_eq!(
            support(json!({"taskSupport": "required"})),
            TaskSupport::Required
        );
        assert_eq!(
            support(json!({"taskSupport": "always"})),
            TaskSupport::Required
        );
    }

    #[test]
    fn a_resource_listing() {
        let (resources, next) = resources_page(json!({
            "resources": [{"uri": "mcp://r/q1", "name": "q1", "mimeType": "application/json"}, {"uri": "mcp://r/q2"}]
        }))
        .expect("listing");
        assert_eq!(next, None);
        assert_eq!(resources[0].mime.as_deref(), Some("application/json"));
        assert_eq!(resources[1].name, "mcp://r/q2");
        assert!(
            matches!(resources_page(json!({})), Err(Unusable::Protocol(m)) if m.contains("no `resources` list"))
        );
    }

    #[test]
    fn a_malformed_block_keeps_the_rest_of_the_result() {
        let result = tool_result(json!({
            "content": [
                {"type": "text", "text": "{}"},
                {"type": "resource_link", "name": "no-uri"},
                {"type": "resource_link", "uri": "mcp://x/1", "name": "one", "size": 12, "mimeType": "application/json"},
                {"type": "resource_link", "uri": "mcp://x/2", "name": "two", "size": 1.5},
                {"type": "image", "mimeType": "image/png", "data": "iVBORw=="},
                {"type": "resource", "resource": {"uri": "mcp://x/3", "blob": "aGk="}},
                {"type": "hologram"}
            ],
            "structuredContent": {"a": 1},
            "isError": false
        }))
        .expect("result");
        assert_eq!(result.structured, Some(json!({"a": 1})));
        assert_eq!(result.content.len(), 7);
        assert!(
            matches!(&result.content[1], Content::Malformed { kind: Some(k), problem } if k == "resource_link" && problem.contains("`uri`"))
        );
        assert_eq!(
            result.content[2],
            Content::Link(Link {
                uri: "mcp://x/1".into(),
                name: "one".into(),
                title: None,
                description: None,
                mime: Some("application/json".into()),
                size: Some(12)
            })
        );
        assert!(
            matches!(&result.content[3], Content::Malformed { problem, .. } if problem.contains("1.5"))
        );
        assert!(
            matches!(&result.content[4], Content::Media { kind, mime, data } if kind == "image" && mime == "image/png" && data == b"\x89PNG")
        );
        let bad = tool_result(
            json!({"content": [{"type": "audio", "mimeType": "audio/wav", "data": "not base64!"}]}),
        )
        .expect("result");
        assert!(
            matches!(&bad.content[0], Content::Malformed { kind: Some(k), problem } if k == "audio" && problem.contains("not base64"))
        );
        assert!(
            matches!(&result.content[5], Content::Resource(r) if r.body == Body::Blob(b"hi".to_vec()))
        );
        assert!(
            matches!(&result.content[6], Content::Malformed { kind: Some(k), .. } if k == "hologram")
        );
    }

    #[test]
    fn result_types_other_than_complete() {
        assert_eq!(
            tool_result(json!({"resultType": "input_required", "inputRequests": {}})),
            Err(Unusable::InputRequired)
        );
        assert_eq!(
            read_result(json!({"resultType": "input_required"})),
            Err(Unusable::InputRequired)
        );
        assert!(tool_result(json!({"resultType": "task"})).is_err());
        assert_eq!(
            tool_result(json!({"resultType": "complete", "isError": true})),
            Ok(ToolResult {
                structured: None,
                content: vec![],
                is_error: true
            })
        );
    }

    #[test]
    fn read_contents_text_and_blob() {
        let contents = read_result(json!({"contents": [
            {"uri": "mcp://a", "mimeType": "application/json", "text": "{}"},
            {"uri": "mcp://b", "blob": "AAEC"}
        ]}))
        .expect("read");
        assert_eq!(contents[0].body, Body::Text("{}".into()));
        assert_eq!(contents[0].mime.as_deref(), Some("application/json"));
        assert_eq!(contents[1].body, Body::Blob(vec![0, 1, 2]));
        assert!(read_result(json!({"contents": [{"uri": "mcp://c"}]})).is_err());
        assert_eq!(read_result(json!({"contents": []})), Ok(vec![]));
    }

    #[test]
    fn a_template_listing() {
        let (templates, next) = templates_page(json!({"resourceTemplates": [
            {"uriTemplate": "mcp://crm/deals/{deal_id}/activity", "name": "activity", "mimeType": "application/json"}
        ]}))
        .expect("listing");
        assert_eq!(next, None);
        assert_eq!(
            templates[0].uri_template,
            "mcp://crm/deals/{deal_id}/activity"
        );
        assert_eq!(templates[0].mime.as_deref(), Some("application/json"));
    }
}
