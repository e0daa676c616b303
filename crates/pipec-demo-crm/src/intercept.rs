//! What happens to a request before the MCP handler sees it, the same on both
//! transports: a tool call or read writes its call-log line, and a fault of
//! `CRM_FAULT_FILE` that applies to it replaces the handler's answer with the verdict
//! here. The transport carries the verdict out (it alone can exit, hang or cut).

use rmcp::model::{
    CallToolResult, ContentBlock, ReadResourceResult, ResourceContents, ServerResult,
};
use serde_json::{Value, json};

use super::calls::Call;
use super::crm::Crm;
use super::faults::{self, BadLink, Fault, Transport};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Hand the request to the MCP handler.
    Forward,
    /// Send this line (a JSON-RPC message, or garbage) as the answer.
    Answer(String),
    /// Never answer.
    Hang,
    /// Exit the process at once.
    Exit,
    /// Over HTTP: answer with this status.
    Status(u16),
    /// Over HTTP: send the first half of this answer, then drop the connection.
    Cut(String),
}

/// The verdict on one message a client sent.
pub(crate) fn intercept(crm: &Crm, message: &[u8], transport: Transport) -> Verdict {
    let Ok(message) = serde_json::from_slice::<Value>(message) else {
        return Verdict::Forward;
    };
    let Some(call) = Call::from_message(&message) else {
        return Verdict::Forward;
    };
    let fault = crm
        .fault_file
        .as_deref()
        .and_then(|path| faults::take(path, call.request(), transport));
    crm.log_call(&call, fault);
    let Some(fault) = fault else {
        return Verdict::Forward;
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let modern = speaks_2026(&message);
    match fault {
        Fault::Exit => Verdict::Exit,
        Fault::Hang => Verdict::Hang,
        Fault::Status(code) => Verdict::Status(code),
        Fault::Garbage => Verdict::Answer(format!(
            "this is not JSON-RPC: garbage injected instead of the answer to {}",
            call.log_line(None)
        )),
        Fault::Error(code) => {
            let mut error = json!({ "code": code, "message": "injected error" });
            if let Call::Read { uri } = &call {
                error["data"] = json!({ "uri": uri });
            }
            Verdict::Answer(json!({ "jsonrpc": "2.0", "id": id, "error": error }).to_string())
        }
        Fault::Huge(bytes) => {
            let padding = "x".repeat(usize::try_from(bytes).unwrap_or(usize::MAX));
            let result = match &call {
                Call::Tool { .. } => {
                    ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(
                        padding,
                    )]))
                }
                Call::Read { uri } => {
                    ServerResult::ReadResourceResult(ReadResourceResult::new(vec![
                        ResourceContents::text(padding, uri.as_str()).with_mime_type("text/plain"),
                    ]))
                }
            };
            Verdict::Answer(response(&id, result, modern))
        }
        Fault::Empty => {
            let result = match &call {
                Call::Tool { .. } => ServerResult::CallToolResult(CallToolResult::success(vec![])),
                Call::Read { .. } => {
                    ServerResult::ReadResourceResult(ReadResourceResult::new(vec![]))
                }
            };
            Verdict::Answer(response(&id, result, modern))
        }
        Fault::BadLink(shape) => Verdict::Answer(match crm.answer(&call) {
            Ok(result) => {
                let mut result = shape_result(result, modern);
                if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
                    content.push(bad_link(&call, shape));
                }
                json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string()
            }
            Err(error) => error_response(&id, error),
        }),
        Fault::Close => Verdict::Cut(match crm.answer(&call) {
            Ok(result) => response(&id, result, modern),
            Err(error) => error_response(&id, error),
        }),
    }
}

/// Whether the request declares protocol 2026-07-28 or later in its `_meta` (the
/// per-request lifecycle), whose results carry `resultType` and cache hints.
fn speaks_2026(message: &Value) -> bool {
    message
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        .is_some_and(|version| version >= "2026-07-28")
}

/// A result in the shape the request's protocol version gives it, as rmcp's handler would.
fn shape_result(mut result: ServerResult, modern: bool) -> Value {
    if modern {
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
    serde_json::to_value(result).unwrap_or(Value::Null)
}

fn response(id: &Value, result: ServerResult, modern: bool) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "result": shape_result(result, modern) }).to_string()
}

fn error_response(id: &Value, error: rmcp::ErrorData) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": error }).to_string()
}

/// The malformed block `bad-link` adds after the good ones: it claims the kind
/// `activity-history`, so a client that trusts it would read garbage.
fn bad_link(call: &Call, shape: BadLink) -> Value {
    let deal = match call {
        Call::Tool { arguments, .. } => arguments
            .get("deal_id")
            .and_then(Value::as_str)
            .unwrap_or("deal")
            .to_string(),
        Call::Read { .. } => "deal".to_string(),
    };
    let mut link = json!({
        "type": "resource_link",
        "name": format!("{deal}-broken"),
        "description": "activity-history",
        "mimeType": "application/json",
    });
    if shape == BadLink::NotAUri {
        link["uri"] = json!("not a uri");
    }
    link
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Corpus;
    use crate::expiry::Expiry;

    fn crm(fault_file: Option<std::path::PathBuf>) -> Crm {
        let corpus = Corpus {
            emails: 3,
            activities: 2,
        };
        Crm {
            corpus,
            mailboxes: crate::mailboxes::Mailboxes::new(corpus),
            expiry: Expiry::new(0, None),
            fault_file,
            call_log: None,
        }
    }

    fn with_faults(tag: &str, text: &str) -> (Crm, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("pipec-intercept-{tag}-{}", std::process::id()));
        std::fs::write(&path, text).ok();
        (crm(Some(path.clone())), path)
    }

    const GET_DEAL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_deal","arguments":{"deal_id":"D1"}}}"#;
    const READ: &str = r#"{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"mcp://crm/deals/D1/activity"}}"#;

    fn answer(verdict: Verdict) -> Value {
        match verdict {
            Verdict::Answer(line) => serde_json::from_str(&line).unwrap_or(Value::Null),
            other => panic!("no answer: {other:?}"),
        }
    }

    #[test]
    fn without_a_fault_file_everything_goes_to_the_handler() {
        let crm = crm(None);
        assert_eq!(
            intercept(&crm, GET_DEAL.as_bytes(), Transport::Stdio),
            Verdict::Forward
        );
        assert_eq!(
            intercept(&crm, b"not json", Transport::Stdio),
            Verdict::Forward
        );
    }

    #[test]
    fn error_and_empty_answer_in_place_of_the_handler() {
        let (crm, path) = with_faults("error", "error -32000 tool get_deal 1\nempty read 1\n");
        let error = answer(intercept(&crm, GET_DEAL.as_bytes(), Transport::Stdio));
        assert_eq!(error["id"], 7);
        assert_eq!(error["error"]["code"], -32000);
        assert_eq!(error["error"]["message"], "injected error");
        let empty = answer(intercept(&crm, READ.as_bytes(), Transport::Stdio));
        assert_eq!(empty["id"], "r");
        assert_eq!(empty["result"]["contents"], json!([]));
        assert!(
            empty["result"].get("resultType").is_none(),
            "legacy shape: {empty}"
        );
        assert_eq!(
            intercept(&crm, GET_DEAL.as_bytes(), Transport::Stdio),
            Verdict::Forward
        );
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_bad_link_comes_after_the_good_blocks() {
        let (crm, path) = with_faults("bad-link", "bad-link tool get_deal\n");
        let result = answer(intercept(&crm, GET_DEAL.as_bytes(), Transport::Stdio));
        let content = result["result"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(content.len(), 4, "{result}");
        assert_eq!(content[1]["uri"], "mcp://crm/deals/D1/activity");
        assert_eq!(content[3]["uri"], "not a uri");
        assert_eq!(result["result"]["structuredContent"]["deal_id"], "D1");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn huge_answers_are_valid_json_rpc_of_at_least_the_size() {
        let (crm, path) = with_faults("huge", "huge 5000 read\n");
        let Verdict::Answer(line) = intercept(&crm, READ.as_bytes(), Transport::Stdio) else {
            panic!("no answer");
        };
        assert!(line.len() >= 5000 && !line.contains('\n'));
        let value: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        assert_eq!(
            value["result"]["contents"][0]["uri"],
            "mcp://crm/deals/D1/activity"
        );
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn modern_requests_get_modern_results() {
        let (crm, path) = with_faults("modern", "empty tool get_deal\n");
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_deal","arguments":{"deal_id":"D1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let result = answer(intercept(&crm, request.as_bytes(), Transport::Stdio));
        assert_eq!(result["result"]["resultType"], "complete");
        let _ = std::fs::remove_file(path);
    }
}
