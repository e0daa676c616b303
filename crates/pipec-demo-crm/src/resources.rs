//! The CRM's resources: the two templates it lists, and reading a deal's activity or a
//! date range of its emails (where an armed expiry makes the read fail as a link that is
//! gone would).

use rmcp::ErrorData;
use rmcp::model::{ReadResourceResult, ResourceContents, ResourceTemplate};
use serde_json::json;

use super::crm::Crm;
use super::data::{self, Corpus};
use super::dates::Date;
use super::uris::{self, Named};

const JSON: &str = "application/json";

pub(crate) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(uris::ACTIVITY_TEMPLATE, "activity")
            .with_title("Activity history of a deal")
            .with_description(
                "Calls, meetings, notes and stage changes of a deal over 2025: \
                 {\"deal_id\", \"activity\": [{at, kind, by, summary}]}",
            )
            .with_mime_type(JSON),
        ResourceTemplate::new(uris::EMAILS_TEMPLATE, "emails")
            .with_title("Emails of a deal in a date range")
            .with_description(
                "The deal's emails dated from start to end (YYYY-MM-DD, both included): \
                 {deal_id, start, end, count, emails: [{id, date, from, to, subject, body}]}",
            )
            .with_mime_type(JSON),
    ]
}

fn activity_text(deal_id: &str, corpus: Corpus) -> String {
    serde_json::to_string(&data::activity_log(deal_id, corpus)).unwrap_or_default()
}

/// How a read of something that is not there fails: JSON-RPC -32602 with the URI in
/// `data`, as MCP servers report an unknown resource. An expired link says the same.
fn not_found(message: String, uri: &str) -> ErrorData {
    ErrorData::invalid_params(message, Some(json!({ "uri": uri })))
}

pub(crate) fn read(crm: &Crm, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let text = match uris::recognise(uri) {
        Some(Named::Activity { deal_id }) => activity_text(&deal_id, crm.corpus),
        Some(Named::Emails {
            deal_id,
            start,
            end,
        }) => {
            // Expiry comes first: a dead link fails whatever it names.
            if crm.expiry.take() {
                return Err(not_found(format!("resource link expired: {uri}"), uri));
            }
            if Date::parse(&start).is_none() || Date::parse(&end).is_none() {
                return Err(not_found(
                    format!(
                        "bad date range `{start}/{end}` in {uri}: dates are YYYY-MM-DD, such as 2025-01-01"
                    ),
                    uri,
                ));
            }
            crm.mailboxes.of(&deal_id).page_text(&start, &end)
        }
        None => {
            return Err(not_found(
                format!(
                    "unknown resource: {uri}; this server reads {} and {}",
                    uris::ACTIVITY_TEMPLATE,
                    uris::EMAILS_TEMPLATE
                ),
                uri,
            ));
        }
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(JSON),
    ]))
}
