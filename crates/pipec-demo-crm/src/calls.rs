//! The requests the CRM logs and faults apply to (tool calls and resource reads), read
//! from their JSON-RPC message before the MCP handler sees them, and the line each one
//! writes to `CRM_CALL_LOG`.

use serde_json::{Map, Value};

use super::faults::{Fault, Request};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Call {
    Tool {
        name: String,
        arguments: Map<String, Value>,
        /// The idempotency key the caller put in `_meta`, if any.
        key: Option<String>,
    },
    Read {
        uri: String,
    },
}

impl Call {
    /// The call a JSON-RPC message makes: a `tools/call` or `resources/read` request with
    /// an id and the name or URI it needs. Anything else is the MCP handler's alone.
    pub(crate) fn from_message(message: &Value) -> Option<Call> {
        message.get("id")?;
        let params = message.get("params");
        match message.get("method")?.as_str()? {
            "tools/call" => {
                let params = params?;
                let name = params.get("name")?.as_str()?.to_string();
                let arguments = match params.get("arguments") {
                    Some(Value::Object(arguments)) => arguments.clone(),
                    _ => Map::new(),
                };
                let key = params
                    .get("_meta")
                    .and_then(Value::as_object)
                    .and_then(idempotency_key);
                Some(Call::Tool {
                    name,
                    arguments,
                    key,
                })
            }
            "resources/read" => Some(Call::Read {
                uri: params?.get("uri")?.as_str()?.to_string(),
            }),
            _ => None,
        }
    }

    pub(crate) fn request(&self) -> Request<'_> {
        match self {
            Call::Tool { name, .. } => Request::Tool(name),
            Call::Read { uri } => Request::Read(uri),
        }
    }

    /// Its line in the call log:
    ///
    /// - `tool NAME ARG[ key=KEY][ fault=FAULT]`, where ARG is `deal_id` for `get_deal`,
    ///   `count` for `arm_expiry` (`1` when absent), and for any other call (or one
    ///   without that argument) the arguments as compact JSON;
    /// - `read URI[ fault=FAULT]`.
    ///
    /// A value with spaces or control characters in it is written as a JSON string, so
    /// a line stays one line and its words stay words.
    pub(crate) fn log_line(&self, fault: Option<Fault>) -> String {
        let mut line = match self {
            Call::Tool {
                name,
                arguments,
                key,
            } => {
                let argument = match (
                    name.as_str(),
                    arguments.get("deal_id"),
                    arguments.get("count"),
                ) {
                    ("get_deal", Some(Value::String(deal)), _) => word(deal),
                    ("arm_expiry", _, Some(Value::Number(count))) => count.to_string(),
                    ("arm_expiry", _, None) => "1".to_string(),
                    _ => Value::Object(arguments.clone()).to_string(),
                };
                let mut line = format!("tool {} {argument}", word(name));
                if let Some(key) = key {
                    line.push_str(&format!(" key={}", word(key)));
                }
                line
            }
            Call::Read { uri } => format!("read {}", word(uri)),
        };
        if let Some(fault) = fault {
            line.push_str(&format!(" fault={}", fault.name()));
        }
        line
    }
}

/// The value of the first `_meta` entry whose name contains `idempotency` (any case:
/// `idempotencyKey`, `pipec/idempotency-key`, ...); a value that is not a string is
/// written as JSON.
fn idempotency_key(meta: &Map<String, Value>) -> Option<String> {
    meta.iter()
        .find(|(name, _)| name.to_ascii_lowercase().contains("idempotency"))
        .map(|(_, value)| match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
}

fn word(text: &str) -> String {
    if text.is_empty() || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Value::String(text.to_string()).to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(message: Value) -> Call {
        match Call::from_message(&message) {
            Some(call) => call,
            None => panic!("no call in {message}"),
        }
    }

    #[test]
    fn tool_calls_log_their_argument_and_key() {
        let get = call(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_deal", "arguments": {"deal_id": "D1"}}}));
        assert_eq!(get.log_line(None), "tool get_deal D1");
        let keyed = call(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "get_deal", "arguments": {"deal_id": "D1"},
                "_meta": {"progressToken": 3, "pipec/idempotencyKey": "k-123"}}}));
        assert_eq!(keyed.log_line(None), "tool get_deal D1 key=k-123");
        assert_eq!(
            keyed.log_line(Some(Fault::Hang)),
            "tool get_deal D1 key=k-123 fault=hang"
        );
        let arm = call(json!({"id": "a", "method": "tools/call",
            "params": {"name": "arm_expiry", "arguments": {"count": 2}}}));
        assert_eq!(arm.log_line(None), "tool arm_expiry 2");
        let arm_default =
            call(json!({"id": 4, "method": "tools/call", "params": {"name": "arm_expiry"}}));
        assert_eq!(arm_default.log_line(None), "tool arm_expiry 1");
        let other = call(json!({"id": 5, "method": "tools/call",
            "params": {"name": "get_deals", "arguments": {"x": 1}}}));
        assert_eq!(other.log_line(None), r#"tool get_deals {"x":1}"#);
        let spaced = call(json!({"id": 6, "method": "tools/call",
            "params": {"name": "get_deal", "arguments": {"deal_id": "D 1\n"}}}));
        assert_eq!(spaced.log_line(None), r#"tool get_deal "D 1\n""#);
    }

    #[test]
    fn reads_log_their_uri() {
        let read = call(
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": "mcp://crm/deals/D1/activity"}}),
        );
        assert_eq!(read.log_line(None), "read mcp://crm/deals/D1/activity");
        assert_eq!(
            read.log_line(Some(Fault::Huge(10))),
            "read mcp://crm/deals/D1/activity fault=huge"
        );
    }

    #[test]
    fn other_messages_are_no_calls() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "get_deal"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!([1, 2]),
        ] {
            assert_eq!(Call::from_message(&message), None, "{message}");
        }
    }
}
