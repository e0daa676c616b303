//! The MCP client the official conformance suite drives (`scripts/conformance client`):
//! pipec's own session (`pipec_mcp::Session`, what a run uses), pointed at the URL the
//! suite appends to the command, doing what the scenario named in
//! `MCP_CONFORMANCE_SCENARIO` asks of a client. `MCP_CONFORMANCE_CONTEXT` may give the
//! tool calls to make, and a client registered beforehand. In the authorization scenarios
//! the session authorizes as a run does (`pipec_mcp::Authorization`), with consent that
//! follows the suite's authorization server's redirect in place of a person. Exits 0 when the session did its part, 1 with pipec's error
//! otherwise; the suite judges what went over the wire.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use pipec_mcp::{
    Authorization, Elicitation, Identity, McpError, MemoryTokens, RequestOptions, ServerConfig,
    Session, ToolInfo, TransportConfig, Unattended,
};
use serde_json::{Map, Value};

fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) else {
        eprintln!(
            "usage: pipec-conformance-client URL (MCP_CONFORMANCE_SCENARIO names the scenario)"
        );
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("pipec-conformance-client: no async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&scenario, &url, &context)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pipec-conformance-client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How the session for `scenario` answers the server's questions.
fn elicitation(scenario: &str) -> Elicitation {
    if scenario.starts_with("elicitation") {
        Elicitation::Defaults
    } else {
        Elicitation::Decline
    }
}

/// The client ID metadata document the suite's authorization server expects a client to
/// name (it never fetches it).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Where the suite's authorization server redirects after its (automatic) approval.
const REDIRECT_URI: &str = "http://localhost:3000/callback";

/// How the session authorizes in the authorization scenarios: as the client the context
/// registered beforehand, with the client-credentials grant where the scenario is about
/// it, else as a public client with a metadata document (or dynamic registration).
fn authorization(scenario: &str, context: &Value) -> Option<Authorization> {
    if !scenario.starts_with("auth/") {
        return None;
    }
    let given = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_string);
    let identity = match (given("client_id"), given("client_secret")) {
        (Some(id), Some(secret)) if scenario.contains("client-credentials") => {
            Identity::Machine { id, secret }
        }
        (Some(id), secret) => Identity::Registered { id, secret },
        _ => Identity::Public {
            name: "pipec-conformance-client".to_string(),
            metadata_url: Some(CLIENT_METADATA_URL.to_string()),
        },
    };
    Some(Authorization {
        identity,
        consent: Some(Arc::new(Unattended {
            redirect_uri: REDIRECT_URI.to_string(),
        })),
        tokens: Arc::new(MemoryTokens::default()),
        scopes: Vec::new(),
    })
}

fn config(scenario: &str, url: &str, context: &Value) -> ServerConfig {
    ServerConfig {
        name: "conformance".to_string(),
        transport: TransportConfig::Http {
            url: url.to_string(),
            headers: Vec::new(),
        },
        startup_timeout: Duration::from_secs(20),
        request_timeout: Duration::from_secs(20),
        max_message_bytes: 16 << 20,
        redact: Arc::new(|text: &str| text.to_string()),
        elicitation: elicitation(scenario),
        sampler: None,
        authorization: authorization(scenario, context),
    }
}

async fn run(scenario: &str, url: &str, context: &Value) -> Result<(), McpError> {
    let session = Session::connect(config(scenario, url, context)).await?;
    let done = exercise(&session, scenario, context).await;
    session.close().await;
    done
}

/// What a client does in every scenario but the handshake alone: list the tools, then
/// call the ones the context names (else each listed tool, with example arguments). A
/// call the server answers with a JSON-RPC error is the server's answer, not the client
/// failing: it is reported and the next call made.
async fn exercise(session: &Session, scenario: &str, context: &Value) -> Result<(), McpError> {
    if scenario == "initialize" {
        return Ok(());
    }
    let tools = session.list_tools().await?;
    for (name, arguments) in calls(&tools, context) {
        match session
            .call_tool(&name, arguments, Map::new(), RequestOptions::default())
            .await
        {
            Ok(_) => {}
            Err(e @ McpError::Server { .. }) => eprintln!("{name}: {e}"),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// In `json-schema-2020-12-preservation`, the tool whose input schema is sent back, and the
/// tool that echoes it: the suite compares what arrives with what it listed.
const SCHEMA_SHOWN: &str = "json_schema_2020_12_tool";
const SCHEMA_ECHO: &str = "json_schema_echo";

/// The calls to make: the context's `toolCalls` when it has them; in the schema
/// preservation scenario, the one input schema sent back as pipec holds it; else one call
/// of each tool with an example of its input schema.
fn calls(tools: &[ToolInfo], context: &Value) -> Vec<(String, Map<String, Value>)> {
    let shown = tools.iter().find(|t| t.name == SCHEMA_SHOWN);
    if let Some(shown) = shown
        && tools.iter().any(|t| t.name == SCHEMA_ECHO)
    {
        let mut arguments = Map::new();
        arguments.insert("schema".to_string(), shown.input_schema.clone());
        return vec![(SCHEMA_ECHO.to_string(), arguments)];
    }
    let given = context
        .get("toolCalls")
        .or_else(|| context.get("tool_calls"))
        .and_then(Value::as_array);
    if let Some(given) = given {
        return given
            .iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?.to_string();
                let arguments = call
                    .get("arguments")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                Some((name, arguments))
            })
            .collect();
    }
    tools
        .iter()
        .map(|tool| {
            let defs = tool
                .input_schema
                .get("$defs")
                .cloned()
                .unwrap_or(Value::Null);
            let arguments = match pipec_schema::example(&tool.input_schema, &defs) {
                Value::Object(arguments) => arguments,
                _ => Map::new(),
            };
            (tool.name.clone(), arguments)
        })
        .collect()
}
