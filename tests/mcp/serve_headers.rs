//! A served pipeline's inputs mirrored into HTTP headers (the `tool` entry's `headers`,
//! MCP's `x-mcp-header`, SEP-2243): the tool listing annotates them, a 2026-07-28 call
//! over HTTP must carry `Mcp-Param-{Header}` equal to the argument (as is, or
//! `=?base64?...?=`), and one whose header is missing, malformed or different is refused
//! with -32020 and HTTP 400 before a run starts. pipec's own client, calling the tool
//! from a pipeline, sends the header itself.

use crate::common;

use common::serve_http::{call_2026, serve_http};
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

/// One 2026-07-28 request with the test's token and no capabilities.
fn call(
    url: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    call_2026(url, TOKEN, method, name, params, json!({}), extra)
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
    let out = p.run_env(
        &["run", "caller.pipe", "--input", "tenant=acme"],
        &[("ECHO_URL", &url), ("ECHO_AUTH", &auth)],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        common::json(&stdout(&out))["answer"],
        json!({ "echoed": { "tenant": "acme", "verbose": true } })
    );
}
