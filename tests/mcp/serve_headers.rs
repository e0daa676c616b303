//! A served pipeline's inputs mirrored into HTTP headers (the `tool` entry's `headers`,
//! MCP's `x-mcp-header`, SEP-2243): the tool listing annotates them, a 2026-07-28 call
//! over HTTP must carry `Mcp-Param-{Header}` equal to the argument (as is, or
//! `=?base64?...?=`), and one whose header is missing, malformed or different is refused
//! with -32020 and HTTP 400 before a run starts. pipec's own client, calling the tool
//! from a pipeline, sends the header itself.

use crate::common;

use common::serve_http::{request, serve_http};
use common::{Project, code, stderr, stdout};
use serde_json::{Value, json};

const TOKEN: &str = "headers-t0ken";

const ECHO: &str = r#"//! Echoes a tenant.

input tenant_id: string
input verbose: bool = false

node echo(t: string = input.tenant_id, v: bool = input.verbose) -> { tenant: string, verbose: bool } {
  return = { tenant: t, verbose: v }
}

output echoed = echo

serve {
  tool {
    title = "Echo a tenant"
    headers = { tenant_id: "Tenant-Id", verbose: "Verbose" }
  }
}
"#;

/// One 2026-07-28 request, its status and JSON-RPC answer.
fn call(
    url: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params }).to_string();
    let auth = format!("Bearer {TOKEN}");
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers.extend_from_slice(extra);
    let (status, text) = request(url, "POST", &headers, &body);
    let json_part = text
        .lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .find(|l| l.starts_with('{') && l.contains("\"id\":7"))
        .unwrap_or_else(|| panic!("no answer: {text}"));
    (status, serde_json::from_str(json_part).expect("JSON"))
}

#[test]
fn a_call_carries_the_inputs_headers_or_is_refused_before_it_runs() {
    let p = Project::new("serve-headers");
    p.write("echo.pipe", ECHO);
    let (_server, url) = serve_http(&p.dir, &["echo.pipe"], TOKEN);

    let (_, listed) = call(&url, "tools/list", None, json!({}), &[]);
    let tool = &listed["result"]["tools"][0];
    assert_eq!(tool["title"], "Echo a tenant", "{tool}");
    let properties = &tool["inputSchema"]["properties"];
    assert_eq!(
        properties["tenant_id"]["x-mcp-header"], "Tenant-Id",
        "{tool}"
    );
    assert_eq!(properties["verbose"]["x-mcp-header"], "Verbose", "{tool}");

    let args = json!({ "name": "echo", "arguments": { "tenant_id": "acme", "verbose": true } });
    let (status, ok) = call(
        &url,
        "tools/call",
        Some("echo"),
        args.clone(),
        &[
            ("mcp-param-tenant-id", "acme"),
            ("mcp-param-verbose", "true"),
        ],
    );
    assert_eq!(status, 200, "{ok}");
    assert_eq!(
        ok["result"]["structuredContent"],
        json!({ "echoed": { "tenant": "acme", "verbose": true } }),
        "{ok}"
    );
    // Base64 (`=?base64?YWNtZQ==?=` is `acme`) is decoded before it is compared.
    let (status, ok) = call(
        &url,
        "tools/call",
        Some("echo"),
        args.clone(),
        &[
            ("mcp-param-tenant-id", "=?base64?YWNtZQ==?="),
            ("mcp-param-verbose", "true"),
        ],
    );
    assert_eq!(status, 200, "{ok}");

    let refused = [
        vec![("mcp-param-verbose", "true")],
        vec![
            ("mcp-param-tenant-id", "globex"),
            ("mcp-param-verbose", "true"),
        ],
        vec![
            ("mcp-param-tenant-id", "=?base64?YWNtZQ?="),
            ("mcp-param-verbose", "true"),
        ],
    ];
    for headers in &refused {
        let (status, answer) = call(&url, "tools/call", Some("echo"), args.clone(), headers);
        assert_eq!(status, 400, "{headers:?}: {answer}");
        assert_eq!(answer["error"]["code"], -32020, "{headers:?}: {answer}");
    }
    // Two calls ran; the refused ones started nothing.
    let out = p.run(&["runs", "--json", "--pipeline", "echo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let runs = common::json(&stdout(&out));
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{runs}");
}

/// A pipeline that calls the served `echo` over HTTP with pipec's own MCP client.
const CALLER: &str = r#"//! Asks the echo server for a tenant.

server echoes {
  url = env("ECHO_URL")
  headers = { Authorization: secret("ECHO_AUTH") }
}

tool echo(tenant_id: string, verbose: bool) -> { echoed: { tenant: string, verbose: bool } } from echoes {
  read_only = true
}

input tenant: string

node ask(t: string = input.tenant) -> { echoed: { tenant: string, verbose: bool } } {
  call = echo(tenant_id: t, verbose: true)
}

output answer = ask
"#;

#[test]
fn pipecs_own_client_sends_the_headers_a_served_tool_asks_for() {
    let p = Project::new("serve-headers-client");
    p.write("echo.pipe", ECHO);
    p.write("caller.pipe", CALLER);
    let (_server, url) = serve_http(&p.dir, &["echo.pipe"], TOKEN);
    let auth = format!("Bearer {TOKEN}");
    let mut cmd = p.cmd(&["run", "caller.pipe", "--input", "tenant=acme"]);
    cmd.env("ECHO_URL", &url).env("ECHO_AUTH", &auth);
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        common::json(&stdout(&out))["answer"],
        json!({ "echoed": { "tenant": "acme", "verbose": true } })
    );
}
