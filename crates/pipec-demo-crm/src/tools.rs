//! The CRM's tools: `get_deal` (a deal, with links to its activity and email history),
//! `get_deal_card` (content carried in place: a line of text, the deal as an embedded
//! resource and its owner's picture as an image) and `arm_expiry` (the next email reads
//! fail as expired links).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, Resource, ResourceContents, Tool, ToolAnnotations,
};
use serde_json::{Map, Value, json};

use super::crm::Crm;
use super::data::{self, HISTORY_END, HISTORY_START};
use super::uris;

const TOOL_NAMES: &[&str] = &["get_deal", "arm_expiry", "get_deal_card"];

/// The owner's picture on a deal card: a 1×1 PNG, the same for every deal.
pub(crate) const OWNER_PICTURE_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

pub(crate) fn list() -> Vec<Tool> {
    let deal_schema = json!({
        "type": "object",
        "properties": {
            "deal_id": {"type": "string"},
            "name": {"type": "string"},
            "company": {"type": "string"},
            "stage": {"type": "string"},
            "amount": {"type": "integer"},
            "currency": {"type": "string"},
            "owner": {"type": "string"},
            "close_date": {"type": "string"},
            "contacts": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["deal_id", "name", "company", "stage", "amount", "currency", "owner",
                     "close_date", "contacts"]
    });
    vec![
        Tool::new(
            "get_deal",
            "Look a deal up. The result links the deal's activity history and its whole \
             email history (resource_link blocks of kinds activity-history and email-history).",
            object(json!({
                "type": "object",
                "properties": {
                    "deal_id": {"type": "string", "description": "The deal's id, such as D1"}
                },
                "required": ["deal_id"]
            })),
        )
        .with_title("Get a deal")
        .with_raw_output_schema(object(deal_schema))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .idempotent(true)
                .destructive(false)
                .open_world(false),
        ),
        Tool::new(
            "arm_expiry",
            "Make the next `count` email-history reads of this server fail as expired links.",
            object(json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0, "default": 1,
                              "description": "How many reads fail"}
                }
            })),
        )
        .with_title("Arm link expiry")
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"armed": {"type": "integer"}},
            "required": ["armed"]
        })))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .idempotent(true)
                .destructive(false)
                .open_world(false),
        ),
        Tool::new(
            "get_deal_card",
            "A deal's card, all of it in the result: a line of text, the deal as an embedded \
             JSON resource (mcp://crm/deals/{deal_id}/card, which resources/read does not \
             serve) and its owner's picture as a PNG image.",
            object(json!({
                "type": "object",
                "properties": {
                    "deal_id": {"type": "string", "description": "The deal's id, such as D1"}
                },
                "required": ["deal_id"]
            })),
        )
        .with_title("Get a deal's card")
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .idempotent(true)
                .destructive(false)
                .open_world(false),
        ),
    ]
}

fn bad_arguments(tool: &str, message: String) -> ErrorData {
    ErrorData::invalid_params(message, Some(json!({ "tool": tool })))
}

pub(crate) fn call(
    crm: &Crm,
    name: &str,
    arguments: &Map<String, Value>,
) -> Result<CallToolResult, ErrorData> {
    match name {
        "get_deal" => match arguments.get("deal_id") {
            Some(Value::String(deal_id)) => Ok(get_deal(crm, deal_id)),
            Some(other) => Err(bad_arguments(
                name,
                format!("`deal_id` is a string, not {other}"),
            )),
            None => Err(bad_arguments(
                name,
                "get_deal needs `deal_id`, such as {\"deal_id\": \"D1\"}".into(),
            )),
        },
        "get_deal_card" => match arguments.get("deal_id") {
            Some(Value::String(deal_id)) => Ok(get_deal_card(deal_id)),
            _ => Err(bad_arguments(
                name,
                "get_deal_card needs `deal_id` as a string, such as {\"deal_id\": \"D1\"}".into(),
            )),
        },
        "arm_expiry" => {
            let count = match arguments.get("count") {
                None => 1,
                Some(value) => value.as_u64().ok_or_else(|| {
                    bad_arguments(
                        name,
                        format!("`count` is a whole number of reads, not {value}"),
                    )
                })?,
            };
            crm.expiry.arm(count);
            Ok(json_result(json!({ "armed": count })))
        }
        other => {
            let hint = pipec_base::names::did_you_mean(other, TOOL_NAMES.iter().copied())
                .map(|h| format!("; {h}"))
                .unwrap_or_else(|| format!("; the tools are {}", TOOL_NAMES.join(", ")));
            Err(ErrorData::invalid_params(
                format!("unknown tool `{other}`{hint}"),
                Some(json!({ "tool": other })),
            ))
        }
    }
}

/// A result whose structured content is `value`, with the same JSON as its text.
fn json_result(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

fn get_deal(crm: &Crm, deal_id: &str) -> CallToolResult {
    let deal = serde_json::to_value(data::deal(deal_id)).unwrap_or(Value::Null);
    let mut result = json_result(deal);
    let activity = Resource::new(uris::activity_uri(deal_id), format!("{deal_id}-activity"))
        .with_description("activity-history")
        .with_mime_type("application/json");
    let size = crm.mailboxes.of(deal_id).whole_history_bytes();
    let emails = Resource::new(
        uris::emails_uri(deal_id, HISTORY_START, HISTORY_END),
        format!("{deal_id}-emails-{HISTORY_START}-{HISTORY_END}"),
    )
    .with_description("email-history")
    .with_mime_type("application/json")
    .with_size(size as u64);
    result.content.push(ContentBlock::resource_link(activity));
    result.content.push(ContentBlock::resource_link(emails));
    result
}

fn get_deal_card(deal_id: &str) -> CallToolResult {
    let deal = data::deal(deal_id);
    let line = format!("{} ({}), owned by {}", deal.name, deal.stage, deal.owner);
    let json = serde_json::to_string(&deal).unwrap_or_default();
    CallToolResult::success(vec![
        ContentBlock::text(line),
        ContentBlock::resource(
            ResourceContents::text(json, uris::card_uri(deal_id))
                .with_mime_type("application/json"),
        ),
        ContentBlock::image(OWNER_PICTURE_PNG, "image/png"),
    ])
}
