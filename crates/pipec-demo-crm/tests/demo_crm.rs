//! `pipec-demo-crm` end to end: the real binary over stdio and streamable HTTP, through
//! rmcp's client where a client's view matters and through raw JSON-RPC lines or HTTP
//! requests where the bytes on the wire do (faults).

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
    ReadResourceRequestParams, RequestMetaObject, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientCacheConfig, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_pipec-demo-crm");

/// Every variable the server reads, removed from the test's environment so that only
/// what a test sets applies.
const CRM_VARS: &[&str] = &[
    "CRM_EMAILS",
    "CRM_ACTIVITIES",
    "CRM_EXPIRE_EMAILS",
    "CRM_EXPIRE_FILE",
    "CRM_CALL_LOG",
    "CRM_FAULT_FILE",
    "CRM_TRANSPORT",
    "CRM_HTTP_PORT",
    "CRM_PORT_FILE",
    "CRM_HEADER_LOG",
    "CRM_BEARER_TOKEN",
];

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A folder for one test's files, removed on drop.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("pipec-demo-crm-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(name)).unwrap_or_default()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn command(args: &[&str], vars: &[(&str, &Path)], plain: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .kill_on_drop(true)
        .stderr(Stdio::inherit());
    for var in CRM_VARS {
        command.env_remove(var);
    }
    for (name, path) in vars {
        command.env(name, path);
    }
    for (name, value) in plain {
        command.env(name, value);
    }
    command
}

fn spawn_stdio(vars: &[(&str, &Path)], plain: &[(&str, &str)]) -> (Child, ChildStdin, ChildStdout) {
    let mut child = command(&[], vars, plain)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    (child, stdin, stdout)
}

/// A server listening on a free port, and the URL of its MCP endpoint.
struct HttpServer {
    child: Child,
    url: String,
}

async fn spawn_http(vars: &[(&str, &Path)], plain: &[(&str, &str)]) -> HttpServer {
    let mut child = command(&["--http", "127.0.0.1:0"], vars, plain)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    tokio::time::timeout(Duration::from_secs(20), reader.read_line(&mut line))
        .await
        .expect("the server says where it listens")
        .unwrap();
    let addr = line.trim().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "stdout said {line:?}");
    HttpServer {
        child,
        url: format!("http://{addr}/mcp"),
    }
}

type Client = RunningService<RoleClient, ClientConfig>;

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("demo-crm-test", "0"),
    )
}

async fn connect_stdio(stdout: ChildStdout, stdin: ChildStdin, modern: bool) -> Client {
    let lifecycle = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    let client = client_config()
        .serve_with_lifecycle((stdout, stdin), lifecycle)
        .await
        .unwrap();
    // A cached read would hide an expired link; these tests count every read.
    client
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    client
}

fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

async fn connect_http(url: &str, auth: Option<&str>, modern: bool) -> Client {
    install_tls_provider();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(token) = auth {
        config = config.auth_header(token.to_string());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let lifecycle = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    let client = client_config()
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap();
    client
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    client
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn get_deal(deal: &str) -> CallToolRequestParams {
    CallToolRequestParams::new("get_deal").with_arguments(args(json!({ "deal_id": deal })))
}

fn read(uri: &str) -> ReadResourceRequestParams {
    ReadResourceRequestParams::new(uri)
}

fn text_of(contents: &[ResourceContents]) -> String {
    match contents.first() {
        Some(ResourceContents::TextResourceContents { text, .. }) => text.clone(),
        other => panic!("no text contents: {other:?}"),
    }
}

async fn read_text(client: &Client, uri: &str) -> Result<String, ServiceError> {
    client
        .read_resource(read(uri))
        .await
        .map(|r| text_of(&r.contents))
}

/// The JSON-RPC error a failed request answered with.
fn mcp_error(result: Result<impl std::fmt::Debug, ServiceError>) -> rmcp::ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

const EMAILS_2025: &str = "mcp://crm/deals/D1/emails/2025-01-01/2025-12-31";

// ------------------------------------------------------------------ the interface

async fn check_tools_and_templates(client: &Client) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["get_deal", "arm_expiry", "get_deal_card"]);
    let annotations = tools[0].annotations.clone().unwrap();
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.idempotent_hint, Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));
    assert_eq!(tools[0].input_schema["required"], json!(["deal_id"]));
    assert_eq!(tools[1].input_schema["properties"]["count"]["default"], 1);
    let templates = client.list_all_resource_templates().await.unwrap();
    let listed: Vec<(&str, Option<&str>)> = templates
        .iter()
        .map(|t| (t.uri_template.as_str(), t.mime_type.as_deref()))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "mcp://crm/deals/{deal_id}/activity",
                Some("application/json")
            ),
            (
                "mcp://crm/deals/{deal_id}/emails/{start}/{end}",
                Some("application/json")
            ),
        ]
    );
}

async fn check_get_deal(client: &Client) {
    let result = client.call_tool(get_deal("D1")).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    let structured = result.structured_content.clone().unwrap();
    for field in [
        "deal_id",
        "name",
        "company",
        "stage",
        "amount",
        "currency",
        "owner",
        "close_date",
        "contacts",
    ] {
        assert!(
            structured.get(field).is_some(),
            "no {field} in {structured}"
        );
    }
    assert_eq!(structured["deal_id"], "D1");
    assert!(structured["amount"].is_u64());
    let text = result.content[0].as_text().unwrap().text.clone();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), structured);
    let links: Vec<_> = result
        .content
        .iter()
        .filter_map(|block| block.as_resource_link())
        .collect();
    assert_eq!(links.len(), 2);
    assert_eq!(links[0].uri, "mcp://crm/deals/D1/activity");
    assert_eq!(links[0].name, "D1-activity");
    assert_eq!(links[0].description.as_deref(), Some("activity-history"));
    assert_eq!(links[0].mime_type.as_deref(), Some("application/json"));
    assert_eq!(links[1].uri, EMAILS_2025);
    assert_eq!(links[1].description.as_deref(), Some("email-history"));
    assert_eq!(links[1].mime_type.as_deref(), Some("application/json"));
    // The size the link announces is exactly what reading it gives.
    let emails = read_text(client, &links[1].uri).await.unwrap();
    assert_eq!(links[1].size, Some(emails.len() as u64));
    // The same deal again gives the same deal: the data depends on the id alone.
    let again = client.call_tool(get_deal("D1")).await.unwrap();
    assert_eq!(again.structured_content, Some(structured));
}

async fn check_reads(client: &Client, emails: usize, activities: usize) {
    let activity: Value = serde_json::from_str(
        &read_text(client, "mcp://crm/deals/D1/activity")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(activity["deal_id"], "D1");
    let entries = activity["activity"].as_array().unwrap();
    assert_eq!(entries.len(), activities);
    for field in ["at", "kind", "by", "summary"] {
        assert!(
            entries[0].get(field).is_some(),
            "no {field} in {}",
            entries[0]
        );
    }
    let all: Value = serde_json::from_str(&read_text(client, EMAILS_2025).await.unwrap()).unwrap();
    assert_eq!(all["count"], emails);
    assert_eq!(all["emails"].as_array().unwrap().len(), emails);
    for field in ["id", "date", "from", "to", "subject", "body"] {
        assert!(all["emails"][0].get(field).is_some(), "no {field}");
    }
    let march: Value = serde_json::from_str(
        &read_text(client, "mcp://crm/deals/D1/emails/2025-03-01/2025-03-31")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(march["start"], "2025-03-01");
    assert_eq!(march["end"], "2025-03-31");
    let dates: Vec<&str> = march["emails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["date"].as_str().unwrap())
        .collect();
    assert!(!dates.is_empty() && dates.iter().all(|d| d.starts_with("2025-03")));
    assert_eq!(march["count"], dates.len());
}

async fn check_not_found(client: &Client) {
    for uri in [
        "mcp://crm/deals/D1/emails/2025-02-30/2025-12-31",
        "mcp://crm/deals/D1/emails/yesterday/today",
        "mcp://crm/deals/D1/nothing",
    ] {
        let error = mcp_error(client.read_resource(read(uri)).await);
        assert_eq!(error.code.0, -32602, "{uri}: {error:?}");
        assert_eq!(error.data, Some(json!({ "uri": uri })));
    }
}

#[tokio::test]
async fn over_stdio_the_tools_links_and_reads_are_as_documented() {
    let (_child, stdin, stdout) =
        spawn_stdio(&[], &[("CRM_EMAILS", "12"), ("CRM_ACTIVITIES", "7")]);
    let client = connect_stdio(stdout, stdin, false).await;
    check_tools_and_templates(&client).await;
    check_get_deal(&client).await;
    check_reads(&client, 12, 7).await;
    check_not_found(&client).await;
}

#[tokio::test]
async fn over_stdio_with_the_2026_lifecycle_too() {
    let (_child, stdin, stdout) = spawn_stdio(&[], &[("CRM_EMAILS", "5")]);
    let client = connect_stdio(stdout, stdin, true).await;
    check_tools_and_templates(&client).await;
    check_get_deal(&client).await;
    check_reads(&client, 5, 50).await;
    check_not_found(&client).await;
}

#[tokio::test]
async fn over_http_the_tools_links_and_reads_are_as_documented() {
    let server = spawn_http(&[], &[("CRM_EMAILS", "12"), ("CRM_ACTIVITIES", "7")]).await;
    let client = connect_http(&server.url, None, false).await;
    check_tools_and_templates(&client).await;
    check_get_deal(&client).await;
    check_reads(&client, 12, 7).await;
    check_not_found(&client).await;
    let modern = connect_http(&server.url, None, true).await;
    check_get_deal(&modern).await;
    check_not_found(&modern).await;
}

#[tokio::test]
async fn the_default_email_history_fits_the_demo_cap() {
    let (_child, stdin, stdout) = spawn_stdio(&[], &[]);
    let client = connect_stdio(stdout, stdin, false).await;
    let result = client.call_tool(get_deal("D1")).await.unwrap();
    let size = result.content[2].as_resource_link().unwrap().size.unwrap();
    // deal_research.pipe reads the whole history with `max_bytes: 200kb`, and its
    // `read_emails` reader is capped at 100kb: the whole year fits both.
    assert!((80_000..100_000).contains(&size), "{size} bytes");
    let emails: Value =
        serde_json::from_str(&read_text(&client, EMAILS_2025).await.unwrap()).unwrap();
    assert_eq!(emails["count"], 100);
}

#[tokio::test]
async fn deal_ids_with_spaces_are_encoded_in_links_and_decoded_in_reads() {
    let (_child, stdin, stdout) = spawn_stdio(&[], &[("CRM_EMAILS", "3")]);
    let client = connect_stdio(stdout, stdin, false).await;
    let result = client.call_tool(get_deal("D 7")).await.unwrap();
    let link = result.content[1].as_resource_link().unwrap();
    assert_eq!(link.uri, "mcp://crm/deals/D%207/activity");
    let activity: Value =
        serde_json::from_str(&read_text(&client, &link.uri).await.unwrap()).unwrap();
    assert_eq!(activity["deal_id"], "D 7");
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_refused_with_what_to_type() {
    let (_child, stdin, stdout) = spawn_stdio(&[], &[]);
    let client = connect_stdio(stdout, stdin, false).await;
    let missing = mcp_error(
        client
            .call_tool(CallToolRequestParams::new("get_deal"))
            .await,
    );
    assert_eq!(missing.code.0, -32602);
    assert!(missing.message.contains("deal_id"), "{missing:?}");
    let unknown = mcp_error(
        client
            .call_tool(CallToolRequestParams::new("get_deals"))
            .await,
    );
    assert!(
        unknown.message.contains("did you mean `get_deal`?"),
        "{unknown:?}"
    );
}

// ------------------------------------------------------------------ expiring links

#[tokio::test]
async fn crm_expire_emails_fails_the_first_email_reads_of_each_process() {
    for _process in 0..2 {
        let (_child, stdin, stdout) =
            spawn_stdio(&[], &[("CRM_EXPIRE_EMAILS", "2"), ("CRM_EMAILS", "3")]);
        let client = connect_stdio(stdout, stdin, false).await;
        // Activity reads are not email reads: they take nothing from the count.
        assert!(
            read_text(&client, "mcp://crm/deals/D1/activity")
                .await
                .is_ok()
        );
        for _ in 0..2 {
            let error = mcp_error(client.read_resource(read(EMAILS_2025)).await);
            assert_eq!(error.code.0, -32602);
            assert!(error.message.contains("expired"), "{error:?}");
            assert_eq!(error.data, Some(json!({ "uri": EMAILS_2025 })));
        }
        assert!(read_text(&client, EMAILS_2025).await.is_ok());
    }
}

#[tokio::test]
async fn crm_expire_file_arms_reads_across_processes() {
    let scratch = Scratch::new("expire-file");
    let file = scratch.write("expire", "2\n");
    let vars = [("CRM_EXPIRE_FILE", file.as_path())];
    let (_a, stdin_a, stdout_a) = spawn_stdio(&vars, &[("CRM_EMAILS", "3")]);
    let (_b, stdin_b, stdout_b) = spawn_stdio(&vars, &[("CRM_EMAILS", "3")]);
    let a = connect_stdio(stdout_a, stdin_a, false).await;
    let b = connect_stdio(stdout_b, stdin_b, false).await;
    assert!(
        mcp_error(a.read_resource(read(EMAILS_2025)).await)
            .message
            .contains("expired")
    );
    assert_eq!(scratch.read("expire"), "1\n");
    assert!(
        mcp_error(b.read_resource(read(EMAILS_2025)).await)
            .message
            .contains("expired")
    );
    assert_eq!(scratch.read("expire"), "0\n");
    assert!(read_text(&a, EMAILS_2025).await.is_ok());
    assert!(read_text(&b, EMAILS_2025).await.is_ok());
    // Arming again, while both run, reaches whichever reads next.
    scratch.write("expire", "1\n");
    assert!(read_text(&b, EMAILS_2025).await.is_err());
    assert!(read_text(&a, EMAILS_2025).await.is_ok());
    // A file that is gone arms nothing.
    std::fs::remove_file(&file).unwrap();
    assert!(read_text(&a, EMAILS_2025).await.is_ok());
}

#[tokio::test]
async fn crm_expire_file_is_shared_by_a_stdio_and_an_http_process() {
    let scratch = Scratch::new("expire-file-http");
    let file = scratch.write("expire", "1\n");
    let vars = [("CRM_EXPIRE_FILE", file.as_path())];
    let server = spawn_http(&vars, &[("CRM_EMAILS", "3")]).await;
    let (_child, stdin, stdout) = spawn_stdio(&vars, &[("CRM_EMAILS", "3")]);
    let over_http = connect_http(&server.url, None, false).await;
    let over_stdio = connect_stdio(stdout, stdin, false).await;
    let expired = mcp_error(over_http.read_resource(read(EMAILS_2025)).await);
    assert_eq!(expired.code.0, -32602);
    assert_eq!(expired.data, Some(json!({ "uri": EMAILS_2025 })));
    assert!(
        read_text(&over_stdio, EMAILS_2025).await.is_ok(),
        "the count is used up"
    );
    scratch.write("expire", "1\n");
    assert!(read_text(&over_stdio, EMAILS_2025).await.is_err());
    assert!(read_text(&over_http, EMAILS_2025).await.is_ok());
    assert_eq!(scratch.read("expire"), "0\n");
}

#[tokio::test]
async fn arm_expiry_arms_the_next_email_reads_of_its_process() {
    let (_child, stdin, stdout) = spawn_stdio(&[], &[("CRM_EMAILS", "3")]);
    let client = connect_stdio(stdout, stdin, false).await;
    assert!(read_text(&client, EMAILS_2025).await.is_ok());
    let armed = client
        .call_tool(
            CallToolRequestParams::new("arm_expiry").with_arguments(args(json!({"count": 2}))),
        )
        .await
        .unwrap();
    assert_eq!(armed.structured_content, Some(json!({ "armed": 2 })));
    assert!(read_text(&client, EMAILS_2025).await.is_err());
    assert!(
        read_text(&client, "mcp://crm/deals/D2/emails/2025-05-01/2025-05-31")
            .await
            .is_err()
    );
    assert!(read_text(&client, EMAILS_2025).await.is_ok());
    let default = client
        .call_tool(CallToolRequestParams::new("arm_expiry"))
        .await
        .unwrap();
    assert_eq!(default.structured_content, Some(json!({ "armed": 1 })));
}

// ------------------------------------------------------------------ logs

#[tokio::test]
async fn the_call_log_has_a_line_per_call_with_the_idempotency_key() {
    let scratch = Scratch::new("call-log");
    let log = scratch.path("calls.log");
    let faults = scratch.write("faults", "error -32000 tool get_deal 1\n");
    let vars = [
        ("CRM_CALL_LOG", log.as_path()),
        ("CRM_FAULT_FILE", faults.as_path()),
    ];
    let (_child, stdin, stdout) = spawn_stdio(&vars, &[("CRM_EMAILS", "3")]);
    let client = connect_stdio(stdout, stdin, false).await;
    assert!(client.call_tool(get_deal("D1")).await.is_err());
    let mut keyed = get_deal("D2");
    keyed.meta = Some(RequestMetaObject::from(args(
        json!({ "pipec/idempotencyKey": "0123abcd" }),
    )));
    client.call_tool(keyed).await.unwrap();
    read_text(&client, "mcp://crm/deals/D2/activity")
        .await
        .unwrap();
    client.list_all_tools().await.unwrap();
    client
        .call_tool(
            CallToolRequestParams::new("arm_expiry").with_arguments(args(json!({"count": 0}))),
        )
        .await
        .unwrap();
    assert_eq!(
        scratch.read("calls.log"),
        "tool get_deal D1 fault=error\n\
         tool get_deal D2 key=0123abcd\n\
         read mcp://crm/deals/D2/activity\n\
         tool arm_expiry 0\n"
    );
}

#[tokio::test]
async fn over_http_the_call_log_and_the_header_log_see_every_request() {
    let scratch = Scratch::new("header-log");
    let calls = scratch.path("calls.log");
    let headers = scratch.path("headers.log");
    let vars = [
        ("CRM_CALL_LOG", calls.as_path()),
        ("CRM_HEADER_LOG", headers.as_path()),
    ];
    let server = spawn_http(&vars, &[("CRM_EMAILS", "3")]).await;
    let client = connect_http(&server.url, Some("secret-token"), false).await;
    client.call_tool(get_deal("D1")).await.unwrap();
    client.cancel().await.unwrap();
    assert_eq!(scratch.read("calls.log"), "tool get_deal D1\n");
    let log = scratch.read("headers.log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(
        lines[0],
        "HTTP POST /mcp authorization='Bearer secret-token' mcp-protocol-version=None mcp-session-id=None",
        "the initialize request: {log}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("HTTP POST /mcp authorization='Bearer secret-token' mcp-protocol-version='2025-11-25' mcp-session-id=set")),
        "{log}"
    );
    assert!(lines.iter().all(|l| l.starts_with("HTTP ")), "{log}");
}

#[tokio::test]
async fn crm_bearer_token_refuses_requests_without_it_as_an_oauth_resource_server_does() {
    let server = spawn_http(&[], &[("CRM_BEARER_TOKEN", "right-token")]).await;
    for (authorization, error) in [
        (None, "invalid_request"),
        (Some("Bearer wrong-token"), "invalid_token"),
    ] {
        let mut request = post(&server.url, call(1, "D1"));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        let refused = request.send().await.unwrap();
        assert_eq!(refused.status().as_u16(), 401);
        assert_eq!(
            refused.headers()["www-authenticate"],
            format!("Bearer realm=\"pipec-demo-crm\", error=\"{error}\"").as_str()
        );
        let body: Value = serde_json::from_str(&refused.text().await.unwrap()).unwrap();
        assert_eq!(body["error"], error);
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "{body}"
        );
    }
    let client = connect_http(&server.url, Some("right-token"), false).await;
    check_get_deal(&client).await;
}

#[tokio::test]
async fn crm_transport_and_port_file_serve_http_on_a_free_port() {
    let scratch = Scratch::new("port-file");
    let port_file = scratch.path("port");
    let mut child = command(
        &[],
        &[("CRM_PORT_FILE", port_file.as_path())],
        &[("CRM_TRANSPORT", "streamable-http"), ("CRM_HTTP_PORT", "0")],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .await
        .unwrap();
    let written = scratch.read("port");
    assert_eq!(written, line, "the file and stdout say the same");
    let addr = written.trim();
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    let client = connect_http(&format!("http://{addr}/mcp"), None, false).await;
    check_get_deal(&client).await;
}

// ------------------------------------------------------------------ the command line

#[tokio::test]
async fn help_documents_the_interface() {
    let output = command(&["--help"], &[], &[]).output().await.unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for needle in CRM_VARS.iter().copied().chain([
        "--http",
        "get_deal",
        "get_deal_card",
        "arm_expiry",
        "mcp://crm/deals/{deal_id}/activity",
        "mcp://crm/deals/{deal_id}/emails/{start}/{end}",
        "-32602",
        "FAULT ON [TIMES]",
        "exit ",
        "hang ",
        "garbage ",
        "huge BYTES",
        "bad-link",
        "error CODE",
        "empty ",
        "status CODE",
        "close ",
        "key=KEY",
        "mcp-session-id=set",
    ]) {
        assert!(help.contains(needle), "--help does not mention {needle}");
    }
}

#[tokio::test]
async fn a_misspelt_flag_or_transport_is_refused_with_a_suggestion() {
    let flag = command(&["--htp", "127.0.0.1:0"], &[], &[])
        .output()
        .await
        .unwrap();
    assert_eq!(flag.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&flag.stderr).contains("--http"));
    let transport = command(&[], &[], &[("CRM_TRANSPORT", "streamable_http")])
        .output()
        .await
        .unwrap();
    assert_eq!(transport.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&transport.stderr);
    assert!(
        stderr.contains("did you mean `streamable-http`?"),
        "{stderr}"
    );
    let emails = command(&[], &[], &[("CRM_EMAILS", "-1")])
        .output()
        .await
        .unwrap();
    assert_eq!(emails.status.code(), Some(2));
}

#[tokio::test]
async fn closing_stdin_ends_the_server() {
    let (mut child, stdin, _stdout) = spawn_stdio(&[], &[]);
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the server exits when stdin closes")
        .unwrap();
    assert!(status.success());
}

// ------------------------------------------------------------------ faults over stdio

/// A server spoken to in raw JSON-RPC lines, to see exactly what it writes.
struct RawStdio {
    child: Child,
    stdin: ChildStdin,
    lines: BufReader<ChildStdout>,
}

impl RawStdio {
    async fn start(scratch: &Scratch, faults: &str) -> RawStdio {
        let fault_file = scratch.write("faults", faults);
        let log = scratch.path("calls.log");
        let (child, stdin, stdout) = spawn_stdio(
            &[
                ("CRM_FAULT_FILE", fault_file.as_path()),
                ("CRM_CALL_LOG", log.as_path()),
            ],
            &[("CRM_EMAILS", "3"), ("CRM_ACTIVITIES", "2")],
        );
        let mut raw = RawStdio {
            child,
            stdin,
            lines: BufReader::new(stdout),
        };
        raw.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        let answer = raw.line().await.unwrap();
        assert!(answer.contains("\"id\":0"), "{answer}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next line the server writes, or `None` if it writes none within a while (or
    /// closed stdout).
    async fn line_within(&mut self, wait: Duration) -> Option<String> {
        let mut line = String::new();
        match tokio::time::timeout(wait, self.lines.read_line(&mut line)).await {
            Ok(Ok(0)) | Err(_) => None,
            Ok(Ok(_)) => Some(line),
            Ok(Err(e)) => panic!("{e}"),
        }
    }

    async fn line(&mut self) -> Option<String> {
        self.line_within(Duration::from_secs(10)).await
    }

    async fn json(&mut self) -> Value {
        let line = self.line().await.expect("an answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }
}

fn call(id: u64, deal: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "get_deal", "arguments": {"deal_id": deal}}})
}

fn read_request(id: u64, uri: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": uri}})
}

#[tokio::test]
async fn stdio_exit_ends_the_process_without_an_answer() {
    let scratch = Scratch::new("exit");
    let mut raw = RawStdio::start(&scratch, "exit tool get_deal\n").await;
    raw.send(call(1, "D1")).await;
    assert_eq!(raw.line().await, None, "no answer, stdout closed");
    let status = tokio::time::timeout(Duration::from_secs(10), raw.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    assert_eq!(scratch.read("calls.log"), "tool get_deal D1 fault=exit\n");
}

#[tokio::test]
async fn stdio_hang_leaves_one_request_unanswered_and_answers_the_rest() {
    let scratch = Scratch::new("hang");
    let mut raw = RawStdio::start(&scratch, "hang tool get_deal 1\n").await;
    raw.send(call(1, "D1")).await;
    raw.send(call(2, "D1")).await;
    raw.send(read_request(3, "mcp://crm/deals/D1/activity"))
        .await;
    let mut ids = vec![
        raw.json().await["id"].clone(),
        raw.json().await["id"].clone(),
    ];
    ids.sort_by_key(|id| id.as_u64());
    assert_eq!(ids, [json!(2), json!(3)]);
    assert_eq!(raw.line_within(Duration::from_millis(300)).await, None);
    assert_eq!(
        scratch.read("faults"),
        "hang tool get_deal 0\n",
        "counted down"
    );
}

#[tokio::test]
async fn stdio_garbage_writes_a_line_that_is_not_json_in_place_of_the_answer() {
    let scratch = Scratch::new("garbage");
    let mut raw = RawStdio::start(&scratch, "garbage read 1\n").await;
    raw.send(read_request(1, "mcp://crm/deals/D1/activity"))
        .await;
    let line = raw.line().await.unwrap();
    assert!(serde_json::from_str::<Value>(&line).is_err(), "{line}");
    assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
    raw.send(read_request(2, "mcp://crm/deals/D1/activity"))
        .await;
    assert_eq!(raw.json().await["id"], 2, "the session goes on");
}

#[tokio::test]
async fn stdio_huge_answers_with_one_valid_line_of_at_least_the_size() {
    let scratch = Scratch::new("huge");
    let mut raw = RawStdio::start(&scratch, "huge 3000000 tool get_deal 1\n").await;
    // A second request in flight with the huge one: its answer is a line of its own.
    raw.send(call(1, "D1")).await;
    raw.send(read_request(2, "mcp://crm/deals/D1/activity"))
        .await;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let line = raw.line().await.unwrap();
        let value: Value = serde_json::from_str(&line).unwrap();
        seen.push((value["id"].as_u64().unwrap(), line.len()));
    }
    seen.sort();
    assert_eq!(seen[0].0, 1);
    assert!(seen[0].1 >= 3_000_000, "{} bytes", seen[0].1);
    assert_eq!(seen[1].0, 2);
    assert!(seen[1].1 < 10_000);
}

#[tokio::test]
async fn stdio_bad_link_adds_a_malformed_link_after_the_good_blocks() {
    let scratch = Scratch::new("bad-link");
    let mut raw = RawStdio::start(
        &scratch,
        "bad-link tool get_deal 1\nbad-link no-uri tool get_deal 1\n",
    )
    .await;
    raw.send(call(1, "D1")).await;
    let first = raw.json().await;
    let content = first["result"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 4);
    assert_eq!(content[1]["uri"], "mcp://crm/deals/D1/activity");
    assert_eq!(content[2]["uri"], EMAILS_2025);
    assert_eq!(content[3]["type"], "resource_link");
    assert_eq!(content[3]["uri"], "not a uri");
    assert_eq!(first["result"]["structuredContent"]["deal_id"], "D1");
    raw.send(call(2, "D1")).await;
    let second = raw.json().await;
    let broken = &second["result"]["content"][3];
    assert_eq!(broken["type"], "resource_link");
    assert!(broken.get("uri").is_none(), "{broken}");
    raw.send(call(3, "D1")).await;
    assert_eq!(
        raw.json().await["result"]["content"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[tokio::test]
async fn stdio_error_and_empty_answer_as_the_file_says_then_stop() {
    let scratch = Scratch::new("error-empty");
    let mut raw = RawStdio::start(
        &scratch,
        "# counted faults\nerror -32099 read mcp://crm/deals/D1/ 1\nempty read 1\n",
    )
    .await;
    raw.send(read_request(1, EMAILS_2025)).await;
    let error = raw.json().await;
    assert_eq!(error["error"]["code"], -32099);
    assert_eq!(error["error"]["message"], "injected error");
    assert_eq!(error["error"]["data"]["uri"], EMAILS_2025);
    raw.send(read_request(2, EMAILS_2025)).await;
    assert_eq!(raw.json().await["result"]["contents"], json!([]));
    raw.send(read_request(3, EMAILS_2025)).await;
    let normal = raw.json().await;
    assert_eq!(normal["result"]["contents"][0]["uri"], EMAILS_2025);
    assert_eq!(
        scratch.read("faults"),
        "# counted faults\nerror -32099 read mcp://crm/deals/D1/ 0\nempty read 0\n"
    );
    assert_eq!(
        scratch.read("calls.log"),
        format!(
            "read {EMAILS_2025} fault=error\nread {EMAILS_2025} fault=empty\nread {EMAILS_2025}\n"
        )
    );
}

#[tokio::test]
async fn stdio_ignores_the_faults_of_http_and_of_other_requests() {
    let scratch = Scratch::new("stdio-ignores");
    let faults = "status 500 tool get_deal 1\nclose tool get_deal 1\nexit tool arm_expiry\nhang read mcp://crm/deals/D9/\n";
    let mut raw = RawStdio::start(&scratch, faults).await;
    raw.send(call(1, "D1")).await;
    assert!(raw.json().await["result"]["structuredContent"].is_object());
    raw.send(read_request(2, "mcp://crm/deals/D1/activity"))
        .await;
    assert_eq!(raw.json().await["id"], 2);
    assert_eq!(
        scratch.read("faults"),
        faults,
        "nothing applied, nothing counted"
    );
}

#[tokio::test]
async fn faults_seen_through_rmcp_s_client() {
    // What pipec's client will see: an injected error as a JSON-RPC error, an empty read
    // as an empty result, a bad link as a fourth block whose URI is not one.
    let scratch = Scratch::new("client-faults");
    let faults = scratch.write(
        "faults",
        "error -32603 tool get_deal 1\nempty read 1\nbad-link tool get_deal 1\nhuge 100000 read 1\n",
    );
    let (_child, stdin, stdout) = spawn_stdio(&[("CRM_FAULT_FILE", faults.as_path())], &[]);
    let client = connect_stdio(stdout, stdin, true).await;
    let error = mcp_error(client.call_tool(get_deal("D1")).await);
    assert_eq!(
        (error.code.0, error.message.as_ref()),
        (-32603, "injected error")
    );
    let empty = client.read_resource(read(EMAILS_2025)).await.unwrap();
    assert!(empty.contents.is_empty());
    let bad = client.call_tool(get_deal("D1")).await.unwrap();
    assert_eq!(bad.content.len(), 4);
    assert_eq!(bad.content[3].as_resource_link().unwrap().uri, "not a uri");
    let huge = read_text(&client, EMAILS_2025).await.unwrap();
    assert!(huge.len() >= 100_000);
    assert!(
        read_text(&client, EMAILS_2025)
            .await
            .unwrap()
            .starts_with('{')
    );
}

// ------------------------------------------------------------------ faults over HTTP

fn post(url: &str, body: Value) -> reqwest::RequestBuilder {
    install_tls_provider();
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
}

async fn http_with_faults(scratch: &Scratch, faults: &str) -> HttpServer {
    let fault_file = scratch.write("faults", faults);
    let log = scratch.path("calls.log");
    spawn_http(
        &[
            ("CRM_FAULT_FILE", fault_file.as_path()),
            ("CRM_CALL_LOG", log.as_path()),
        ],
        &[("CRM_EMAILS", "3")],
    )
    .await
}

#[tokio::test]
async fn http_status_answers_that_status_and_the_next_call_works() {
    let scratch = Scratch::new("http-status");
    let server = http_with_faults(
        &scratch,
        "status 401 tool get_deal 1\nstatus 500 tool get_deal 1\n",
    )
    .await;
    let unauthorised = post(&server.url, call(1, "D1")).send().await.unwrap();
    assert_eq!(unauthorised.status().as_u16(), 401);
    let client = connect_http(&server.url, None, false).await;
    assert!(
        client.call_tool(get_deal("D1")).await.is_err(),
        "500 fails the call"
    );
    check_get_deal(&client).await;
}

#[tokio::test]
async fn http_close_drops_the_connection_halfway_through_the_answer() {
    let scratch = Scratch::new("http-close");
    let server = http_with_faults(&scratch, "close tool get_deal 1\nclose read 1\n").await;
    let response = post(&server.url, call(1, "D1")).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "the headers arrive");
    let length = response.content_length().unwrap();
    assert!(length > 100);
    assert!(response.bytes().await.is_err(), "the body does not");
    let client = connect_http(&server.url, None, false).await;
    assert!(client.read_resource(read(EMAILS_2025)).await.is_err());
    assert!(read_text(&client, EMAILS_2025).await.is_ok());
}

#[tokio::test]
async fn http_hang_never_answers_that_request_but_answers_others() {
    let scratch = Scratch::new("http-hang");
    let server = http_with_faults(&scratch, "hang tool get_deal 1\n").await;
    let hung = post(&server.url, call(1, "D1"))
        .timeout(Duration::from_millis(400))
        .send()
        .await;
    assert!(hung.is_err_and(|e| e.is_timeout()));
    let client = connect_http(&server.url, None, false).await;
    check_get_deal(&client).await;
}

#[tokio::test]
async fn http_garbage_huge_error_empty_and_bad_link_answer_in_place_of_the_handler() {
    let scratch = Scratch::new("http-answers");
    let server = http_with_faults(
        &scratch,
        "garbage tool get_deal 1\nhuge 2000000 tool get_deal 1\nerror -32042 tool get_deal 1\nempty read 1\nbad-link tool get_deal 1\n",
    )
    .await;
    let garbage = post(&server.url, call(1, "D1")).send().await.unwrap();
    assert_eq!(garbage.status().as_u16(), 200);
    let body = garbage.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");
    let huge = post(&server.url, call(2, "D1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(huge.len() >= 2_000_000 && serde_json::from_str::<Value>(&huge).unwrap()["id"] == 2);
    let client = connect_http(&server.url, None, false).await;
    let error = mcp_error(client.call_tool(get_deal("D1")).await);
    assert_eq!(
        (error.code.0, error.message.as_ref()),
        (-32042, "injected error")
    );
    assert!(
        client
            .read_resource(read(EMAILS_2025))
            .await
            .unwrap()
            .contents
            .is_empty()
    );
    let bad = client.call_tool(get_deal("D1")).await.unwrap();
    assert_eq!(bad.content[3].as_resource_link().unwrap().uri, "not a uri");
    check_get_deal(&client).await;
    let log = scratch.read("calls.log");
    for fault in ["garbage", "huge", "error", "empty", "bad-link"] {
        assert!(log.contains(&format!(" fault={fault}\n")), "{log}");
    }
}

#[tokio::test]
async fn http_exit_ends_the_process() {
    let scratch = Scratch::new("http-exit");
    let mut server = http_with_faults(&scratch, "exit read\n").await;
    let answer = post(&server.url, read_request(1, EMAILS_2025)).send().await;
    assert!(answer.is_err(), "no answer: {answer:?}");
    let status = tokio::time::timeout(Duration::from_secs(10), server.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(1));
}
