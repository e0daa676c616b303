//! The MCP client (`pipec::mcp::Session`) against real servers: the CRM fixture on the
//! official Python SDK over stdio and over streamable HTTP, a misbehaving stdio server
//! (`tests/interop/fault_server.py`), a lax one (`tests/interop/lax_server.py`), and tiny
//! HTTP servers inside the test.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::python::{crm_server, fault_server, lax_server, on_path, python, python_with_mcp};
use pipec::mcp::{
    Body, Content, Elicitation, McpError, Offers, RequestOptions, ServerConfig, Session,
    TaskSupport, ToolResult, TransportConfig,
};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A secret the tests plant in servers' output: it must come back redacted.
const SECRET: &str = "hunter2-s3cr3t";

fn redact(text: &str) -> String {
    text.replace(SECRET, "[redacted]")
}

fn config(name: &str, transport: TransportConfig) -> ServerConfig {
    ServerConfig {
        name: name.to_string(),
        transport,
        startup_timeout: Duration::from_secs(30),
        request_timeout: Duration::from_secs(30),
        max_message_bytes: 64 << 20,
        redact: Arc::new(redact),
        elicitation: Elicitation::Decline,
        sampler: None,
        authorization: None,
    }
}

/// A scratch folder for one test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipec-mcp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

fn stdio(script: &Path, args: &[&str], env: &[(&str, &str)], python: String) -> TransportConfig {
    let mut argv = vec![script.display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    TransportConfig::Stdio {
        program: on_path(&python),
        args: argv,
        cwd: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn fault(args: &[&str], env: &[(&str, &str)]) -> ServerConfig {
    config("faulty", stdio(&fault_server(), args, env, python()))
}

async fn connect(config: ServerConfig) -> Session {
    let name = config.name.clone();
    Session::connect(config)
        .await
        .unwrap_or_else(|e| panic!("connecting to {name}: {e}"))
}

async fn call(session: &Session, tool: &str, args: Value) -> Result<ToolResult, McpError> {
    let args = match args {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    session
        .call_tool(tool, args, Map::new(), RequestOptions::default())
        .await
}

fn options(limit: Option<usize>, timeout: Option<Duration>) -> RequestOptions {
    RequestOptions {
        timeout,
        limit,
        task: false,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Whether a process with this id is alive (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        })
        .unwrap_or(false)
}

fn wait_gone(pid: u32, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

fn read_pid(path: &Path) -> u32 {
    common::wait_for(path, Duration::from_secs(10));
    let start = Instant::now();
    loop {
        if let Ok(pid) = std::fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .parse()
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no pid in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------
// The CRM fixture (official Python SDK), over stdio and over streamable HTTP.
// ---------------------------------------------------------------------------------------

/// Whether the CRM is this repository's fixture, whose extras (titles and annotations,
/// the `_meta` log, the expiry file, port 0) are checked too. Another implementation
/// (`PIPEC_CRM_SERVER`, such as the peers' benchmark server) is held to the interface
/// both share.
fn fixture_extras() -> bool {
    let other = std::env::var_os("PIPEC_CRM_SERVER").is_some();
    if other {
        eprintln!("PIPEC_CRM_SERVER is set: the fixture's extras are not checked");
    }
    !other
}

/// A CRM server over HTTP, started for one test and killed when it ends.
struct HttpCrm {
    child: std::process::Child,
    url: String,
    header_log: PathBuf,
}

impl HttpCrm {
    fn start(dir: &Path, env: &[(&str, &str)]) -> HttpCrm {
        let port_file = dir.join("port");
        let header_log = dir.join("headers.log");
        // The fixture picks a free port and says which; another server is given one.
        let port = if fixture_extras() {
            0
        } else {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let port = probe.local_addr().expect("addr").port();
            std::fs::write(&port_file, port.to_string()).expect("port file");
            port
        };
        let mut command = std::process::Command::new(python_with_mcp());
        command
            .arg(crm_server())
            .env("CRM_TRANSPORT", "streamable-http")
            .env("CRM_HTTP_PORT", port.to_string())
            .env("CRM_PORT_FILE", &port_file)
            .env("CRM_HEADER_LOG", &header_log)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for (k, v) in env {
            command.env(k, v);
        }
        let child = command.spawn().expect("the HTTP CRM server starts");
        // Made before waiting, so that a server that never says its port is killed.
        let mut crm = HttpCrm {
            child,
            url: String::new(),
            header_log,
        };
        common::wait_for(&port_file, Duration::from_secs(30));
        let port = std::fs::read_to_string(&port_file).expect("port");
        let address = format!("127.0.0.1:{}", port.trim());
        let start = Instant::now();
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "nothing listens on {address}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        crm.url = format!("http://{address}/mcp");
        crm
    }

    fn headers(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.header_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for HttpCrm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Everything a pipeline asks of the CRM, on one session; timings go to stderr
/// (`--nocapture`).
async fn exercise_crm(session: &Session, dir: &Path, transport: &str) {
    assert_eq!(
        session.protocol_version().as_deref(),
        Some("2026-07-28"),
        "the SDK speaks the newest protocol"
    );

    let tools = session.list_tools().await.expect("tools/list");
    let get_deal = tools
        .iter()
        .find(|t| t.name == "get_deal")
        .expect("get_deal is listed");
    assert_eq!(get_deal.input_schema["required"], json!(["deal_id"]));
    assert!(tools.iter().any(|t| t.name == "arm_expiry"), "{tools:?}");
    if fixture_extras() {
        assert_eq!(get_deal.title.as_deref(), Some("Get a deal"));
        assert_eq!(get_deal.read_only, Some(true));
        assert_eq!(get_deal.idempotent, Some(true));
        assert_eq!(get_deal.open_world, Some(false));
        assert_eq!(get_deal.destructive, None);
        let arm = tools
            .iter()
            .find(|t| t.name == "arm_expiry")
            .expect("arm_expiry");
        assert_eq!(arm.destructive, Some(false));
        assert_eq!(arm.read_only, Some(false));
    }

    let templates = session
        .list_resource_templates()
        .await
        .expect("templates/list");
    let mut uris: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    uris.sort();
    assert_eq!(
        uris,
        vec![
            "mcp://crm/deals/{deal_id}/activity",
            "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
        ]
    );
    assert!(
        templates
            .iter()
            .all(|t| t.mime.as_deref() == Some("application/json"))
    );

    let mut meta = Map::new();
    meta.insert("pipec/idempotency-key".into(), json!("k-123"));
    let mut args = Map::new();
    args.insert("deal_id".into(), json!("D1"));
    let t = Instant::now();
    let deal = session
        .call_tool("get_deal", args.clone(), meta, RequestOptions::default())
        .await
        .expect("get_deal");
    let first_call = t.elapsed();
    assert!(!deal.is_error);
    let structured = deal.structured.clone().expect("structured content");
    assert_eq!(structured["deal_id"], "D1");
    assert_eq!(structured["currency"], "EUR");
    let Content::Text(text) = &deal.content[0] else {
        panic!("the first block is the deal as text: {:?}", deal.content[0]);
    };
    assert_eq!(
        &serde_json::from_str::<Value>(text).expect("JSON text"),
        &structured
    );
    let links: Vec<_> = deal
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Link(l) => Some(l),
            _ => None,
        })
        .collect();
    assert_eq!(links.len(), 2, "{:?}", deal.content);
    assert_eq!(links[0].uri, "mcp://crm/deals/D1/activity");
    assert_eq!(links[0].name, "D1-activity");
    assert_eq!(links[0].mime.as_deref(), Some("application/json"));
    assert_eq!(links[0].size, None);
    assert_eq!(
        links[1].uri,
        "mcp://crm/deals/D1/emails/2025-01-01/2025-12-31"
    );
    assert_eq!(links[1].name, "D1-emails-2025-01-01-2025-12-31");
    let emails_size = links[1].size.expect("the email link has a size");
    assert!(emails_size > 5_000_000, "{emails_size}");

    // The `_meta` reached the tool.
    if fixture_extras() {
        let meta_log = std::fs::read_to_string(dir.join("meta.log")).expect("meta log");
        let logged: Value =
            serde_json::from_str(meta_log.lines().last().expect("a line")).expect("JSON");
        assert_eq!(
            logged["meta"]["pipec/idempotency-key"], "k-123",
            "{meta_log}"
        );
    }

    let t = Instant::now();
    let small_calls = 20;
    for _ in 0..small_calls {
        call(session, "get_deal", json!({"deal_id": "D1"}))
            .await
            .expect("get_deal");
    }
    let per_call = t.elapsed() / small_calls;

    let activity = session
        .read_resource(&links[0].uri, RequestOptions::default())
        .await
        .expect("activity");
    assert_eq!(activity.len(), 1);
    assert_eq!(activity[0].uri, links[0].uri);
    let Body::Text(activity_text) = &activity[0].body else {
        panic!("activity is text");
    };
    let activity_json: Value = serde_json::from_str(activity_text).expect("JSON");
    assert_eq!(activity_json["activity"].as_array().map(Vec::len), Some(50));

    let t = Instant::now();
    let emails = session
        .read_resource(&links[1].uri, RequestOptions::default())
        .await
        .expect("the whole year of emails");
    let big_read = t.elapsed();
    assert_eq!(emails.len(), 1);
    assert_eq!(
        emails[0].len() as u64,
        emails_size,
        "the link's size is the body's"
    );
    let Body::Text(emails_text) = &emails[0].body else {
        panic!("emails are text");
    };
    let emails_json: Value = serde_json::from_str(emails_text).expect("JSON");
    assert_eq!(emails_json["count"], 5000);

    let missing = session
        .read_resource("mcp://crm/deals/D1/nothing-here", RequestOptions::default())
        .await
        .expect_err("no such resource");
    match &missing {
        McpError::Server {
            code,
            message,
            data,
            ..
        } => {
            assert_eq!(*code, -32602);
            assert!(
                message.contains("mcp://crm/deals/D1/nothing-here"),
                "{message}"
            );
            assert_eq!(
                data.as_ref().and_then(|d| d.get("uri")),
                Some(&json!("mcp://crm/deals/D1/nothing-here"))
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(missing.answered_by_server());

    // A limit below the answer's size: refused with the size, and the session goes on.
    let over = session
        .read_resource(&links[1].uri, options(Some(200_000), None))
        .await
        .expect_err("over the limit");
    match over {
        McpError::TooLarge { limit, size, .. } => {
            assert_eq!(limit, 200_000);
            if let Some(size) = size {
                assert!(size > emails_size, "{size} counts the whole message");
            }
        }
        other => panic!("{other:?}"),
    }
    let after = session
        .read_resource(&links[0].uri, options(Some(200_000), None))
        .await
        .expect("the session still answers");
    assert_eq!(after[0].uri, links[0].uri);

    eprintln!(
        "timings ({transport}, debug build): first get_deal {:.1} ms, get_deal {:.2} ms per call, 5 MB read {:.0} ms",
        ms(first_call),
        ms(per_call),
        ms(big_read)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crm_over_stdio() {
    let dir = scratch("crm-stdio");
    let meta_log = dir.join("meta.log");
    let call_log = dir.join("calls.log");
    let transport = stdio(
        &crm_server(),
        &[],
        &[
            ("CRM_META_LOG", meta_log.to_str().expect("utf-8")),
            ("CRM_CALL_LOG", call_log.to_str().expect("utf-8")),
        ],
        python_with_mcp(),
    );
    let t = Instant::now();
    let session = connect(config("crm", transport)).await;
    let started = t.elapsed();
    exercise_crm(&session, &dir, "stdio").await;
    let calls = std::fs::read_to_string(&call_log).expect("call log");
    assert!(calls.lines().any(|l| l == "tool get_deal D1"), "{calls}");
    assert!(
        calls
            .lines()
            .any(|l| l == "read mcp://crm/deals/D1/activity"),
        "{calls}"
    );
    assert!(
        session.largest_read_buffer() > 5_000_000,
        "the 5 MB answer was read whole"
    );
    let t = Instant::now();
    session.close().await;
    eprintln!(
        "timings (stdio, debug build): session start {:.0} ms, close {:.0} ms",
        ms(started),
        ms(t.elapsed())
    );
    let closed = call(&session, "get_deal", json!({"deal_id": "D1"})).await;
    assert!(matches!(closed, Err(McpError::Closed { .. })), "{closed:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crm_over_streamable_http_with_headers() {
    let dir = scratch("crm-http");
    let meta_log = dir.join("meta.log");
    let crm = HttpCrm::start(&dir, &[("CRM_META_LOG", meta_log.to_str().expect("utf-8"))]);
    let transport = TransportConfig::Http {
        url: crm.url.clone(),
        headers: vec![
            ("Authorization".into(), format!("Bearer {SECRET}")),
            ("X-Tenant".into(), "acme".into()),
        ],
    };
    let t = Instant::now();
    let session = connect(config("crm-http", transport)).await;
    let started = t.elapsed();
    exercise_crm(&session, &dir, "http").await;
    let t = Instant::now();
    session.close().await;
    eprintln!(
        "timings (http, debug build): session start {:.0} ms, close {:.0} ms",
        ms(started),
        ms(t.elapsed())
    );
    if fixture_extras() {
        let requests = crm.headers();
        assert!(requests.len() > 5, "{requests:?}");
        for request in &requests {
            assert_eq!(request["headers"]["x-tenant"], "acme", "{request}");
            assert_eq!(
                request["headers"]["authorization"],
                format!("Bearer {SECRET}"),
                "{request}"
            );
        }
    } else {
        // The peers' server logs the authorization header only, in a line of its own.
        let log = std::fs::read_to_string(&crm.header_log).unwrap_or_default();
        assert!(log.lines().count() > 5, "{log}");
        assert!(
            log.lines()
                .all(|l| l.contains(&format!("authorization='Bearer {SECRET}'"))),
            "{log}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_armed_in_a_file_is_seen_by_the_next_process() {
    let dir = scratch("crm-expiry");
    let expire = dir.join("expire");
    std::fs::write(&expire, "1").expect("arm");
    let env = [("CRM_EXPIRE_FILE", expire.to_str().expect("utf-8"))];
    let uri = "mcp://crm/deals/D7/emails/2025-03-01/2025-03-02";
    let first = connect(config(
        "crm",
        stdio(&crm_server(), &[], &env, python_with_mcp()),
    ))
    .await;
    let Err(expired) = first.read_resource(uri, RequestOptions::default()).await else {
        panic!("the read did not expire: does the server implement CRM_EXPIRE_FILE?");
    };
    assert!(
        matches!(&expired, McpError::Server { code: -32602, message, .. } if message.contains("expired")),
        "{expired:?}"
    );
    first.close().await;
    let second = connect(config(
        "crm",
        stdio(&crm_server(), &[], &env, python_with_mcp()),
    ))
    .await;
    let read = second
        .read_resource(uri, RequestOptions::default())
        .await
        .expect("the expiry was used up by the first process");
    assert_eq!(read[0].uri, uri);
    assert_eq!(std::fs::read_to_string(&expire).expect("count").trim(), "0");
    second.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// A misbehaving stdio server.
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn a_legacy_server_is_reached_by_the_initialize_handshake() {
    let session = connect(fault(&[], &[])).await;
    assert_eq!(session.protocol_version().as_deref(), Some("2025-11-25"));
    let tools = session.list_tools().await.expect("tools/list");
    assert_eq!(tools[0].name, "echo");
    session.close().await;
}

/// Lax servers answer a method they do not know with `{}`, `server/discover` among
/// them; the official SDKs take that for a server of the `initialize` era, and so does
/// pipec (it used to fail the start with rmcp's debug form of the answer).
#[tokio::test]
async fn an_empty_answer_to_server_discover_falls_back_to_initialize() {
    let session = connect(config("lax", stdio(&lax_server(), &[], &[], python()))).await;
    assert_eq!(session.protocol_version().as_deref(), Some("2025-11-25"));
    assert_eq!(
        session.offers(),
        Offers {
            tools: true,
            resources: false,
            prompts: false,
        }
    );
    let tools = session.list_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["lookup", "long_report"]);
    // The listing is read as sent: rmcp's types would drop `execution`.
    assert_eq!(tools[1].task_support, TaskSupport::Required);
    assert_eq!(tools[1].raw["execution"]["taskSupport"], "required");
    let found = call(&session, "lookup", json!({"key": "k1"}))
        .await
        .expect("a call");
    assert_eq!(found.structured, Some(json!({"found": "k1"})));
    session.close().await;

    // The same over streamable HTTP.
    let (url, log) = tiny_server_with(Probe::Empty, OnCall::BigJson(10)).await;
    let session = connect(http_config(url)).await;
    assert_eq!(session.protocol_version().as_deref(), Some("2025-11-25"));
    let asked = asked(&log);
    assert!(
        asked.starts_with(&[
            "POST server/discover".to_string(),
            "POST initialize".to_string()
        ]),
        "{asked:?}"
    );
    session.close().await;
}

#[tokio::test]
async fn listings_follow_every_page_and_stop_at_a_repeated_cursor() {
    let session = connect(fault(&[], &[("FAULT_PAGES", "3")])).await;
    let names: Vec<String> = session
        .list_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["echo", "tool2", "tool3"]);
    session.close().await;

    let session = connect(fault(&[], &[("FAULT_CURSOR_LOOP", "1")])).await;
    let t = Instant::now();
    let err = session.list_tools().await.expect_err("a loop");
    assert!(
        matches!(&err, McpError::Protocol { message, .. } if message.contains("`2` a second time")),
        "{err:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    session.close().await;
}

#[tokio::test]
async fn a_server_that_exits_mid_call_is_closed_with_its_stderr_tail() {
    let session = connect(fault(&[], &[])).await;
    let err = call(
        &session,
        "exit",
        json!({"stderr": format!("fatal: the database is on fire (token {SECRET})\n")}),
    )
    .await
    .expect_err("the server exited");
    match &err {
        McpError::Closed { server, stderr } => {
            assert_eq!(server, "faulty");
            assert!(stderr.contains("the database is on fire"), "{stderr:?}");
            assert!(
                !stderr.contains(SECRET),
                "the secret is redacted: {stderr:?}"
            );
            assert!(stderr.contains("[redacted]"), "{stderr:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("the database is on fire"));
    assert!(session.stderr_tail().contains("[redacted]"));
    let later = call(&session, "echo", json!({})).await;
    assert!(matches!(later, Err(McpError::Closed { .. })), "{later:?}");
}

#[tokio::test]
async fn a_request_that_is_never_answered_times_out_and_is_cancelled_at_the_server() {
    let dir = scratch("hang");
    let log = dir.join("methods.log");
    let session = connect(fault(&[], &[("FAULT_LOG", log.to_str().expect("utf-8"))])).await;
    let t = Instant::now();
    let err = session
        .call_tool(
            "hang",
            Map::new(),
            Map::new(),
            options(None, Some(Duration::from_millis(300))),
        )
        .await
        .expect_err("no answer");
    assert!(t.elapsed() < Duration::from_secs(5));
    match err {
        McpError::Timeout { request, after, .. } => {
            assert_eq!(request, "tools/call hang");
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("{other:?}"),
    }
    // The session still answers, and the server was told the request is abandoned.
    call(&session, "echo", json!({})).await.expect("echo");
    let start = Instant::now();
    loop {
        let methods = std::fs::read_to_string(&log).unwrap_or_default();
        if methods.lines().any(|m| m == "notifications/cancelled") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no cancellation: {methods}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    session.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn dropping_a_request_cancels_it_at_the_server() {
    let dir = scratch("drop-request");
    let log = dir.join("methods.log");
    let session = connect(fault(&[], &[("FAULT_LOG", log.to_str().expect("utf-8"))])).await;
    let pending = call(&session, "hang", json!({}));
    let raced = tokio::time::timeout(Duration::from_millis(200), pending).await;
    assert!(raced.is_err(), "the request was still waiting");
    let start = Instant::now();
    loop {
        let methods = std::fs::read_to_string(&log).unwrap_or_default();
        if methods.lines().any(|m| m == "notifications/cancelled") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no cancellation: {methods}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    session.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_handshake_that_never_finishes_is_a_start_timeout_with_stderr() {
    let mut config = fault(&["no-handshake"], &[("FAULT_STDERR", "booting, slowly\n")]);
    config.startup_timeout = Duration::from_millis(800);
    let t = Instant::now();
    let err = Session::connect(config).await.expect_err("no handshake");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    match err {
        McpError::StartTimeout { after, stderr, .. } => {
            assert_eq!(after, Duration::from_millis(800));
            assert!(stderr.contains("booting, slowly"), "{stderr:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn garbage_instead_of_an_answer_fails_the_request_at_once_and_every_later_one() {
    let session = connect(fault(&[], &[])).await;
    let t = Instant::now();
    let err = call(&session, "garbage", json!({"lines": 3}))
        .await
        .expect_err("garbage");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "within the 30 s timeout, not at it: {:?}",
        t.elapsed()
    );
    match &err {
        McpError::Garbage { lines, sample, .. } => {
            assert!(*lines >= 1);
            assert_eq!(sample, "not a message, line 0");
        }
        other => panic!("{other:?}"),
    }
    let later = call(&session, "echo", json!({})).await;
    assert!(matches!(later, Err(McpError::Garbage { .. })), "{later:?}");
    session.close().await;
}

#[tokio::test]
async fn garbage_during_the_handshake_fails_the_start() {
    let err = Session::connect(fault(&["garbage-first"], &[]))
        .await
        .expect_err("garbage");
    assert!(
        matches!(&err, McpError::Garbage { sample, .. } if sample.contains("Server starting")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_line_over_the_session_limit_is_too_large_and_the_session_goes_on() {
    let mut config = fault(&[], &[]);
    config.max_message_bytes = 1 << 20;
    let session = connect(config).await;
    let err = call(&session, "big", json!({"bytes": 3 << 20}))
        .await
        .expect_err("over the session's limit");
    match err {
        McpError::TooLarge { limit, size, .. } => {
            assert_eq!(limit, 1 << 20);
            assert!(size.is_some_and(|s| s > 3 << 20), "{size:?}");
        }
        other => panic!("{other:?}"),
    }
    let fits = call(&session, "big", json!({"bytes": 1000}))
        .await
        .expect("fits");
    assert!(matches!(&fits.content[0], Content::Text(t) if t.len() == 1000));
    session.close().await;
}

#[tokio::test]
async fn a_listing_over_the_session_limit_is_too_large_not_an_error_of_the_server() {
    let mut config = fault(&[], &[("FAULT_LONG_LIST", "300000")]);
    config.max_message_bytes = 100_000;
    let session = connect(config).await;
    let err = session.list_tools().await.expect_err("over the limit");
    assert!(
        matches!(err, McpError::TooLarge { limit: 100_000, size: Some(s), .. } if s > 300_000),
        "{err:?}"
    );
    session.close().await;
}

#[tokio::test]
async fn a_20_mb_answer_under_a_200_kb_limit_is_never_held_whole() {
    let session = connect(fault(&[], &[])).await;
    let t = Instant::now();
    let err = session
        .call_tool(
            "big",
            json!({"bytes": 20_000_000})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            Map::new(),
            options(Some(200_000), None),
        )
        .await
        .expect_err("over its limit");
    let read_past = t.elapsed();
    match err {
        McpError::TooLarge { limit, size, .. } => {
            assert_eq!(limit, 200_000);
            assert!(size.is_some_and(|s| s > 20_000_000), "{size:?}");
        }
        other => panic!("{other:?}"),
    }
    let held = session.largest_read_buffer();
    assert!(
        held < 1_000_000,
        "the transport held {held} bytes of a 20 MB answer"
    );
    let next = call(&session, "echo", json!({"n": 1})).await.expect("echo");
    assert_eq!(next.structured.expect("structured")["arguments"]["n"], 1);
    eprintln!(
        "timings (stdio, debug build): 20 MB answer read past in {:.0} ms",
        ms(read_past)
    );
    session.close().await;
}

#[tokio::test]
async fn an_id_after_the_answer_is_checked_against_its_limit_at_the_end() {
    let session = connect(fault(&[], &[])).await;
    let args = json!({"bytes": 300_000, "id_last": true});
    let err = session
        .call_tool(
            "big",
            args.as_object().cloned().unwrap_or_default(),
            Map::new(),
            options(Some(100_000), None),
        )
        .await
        .expect_err("over its limit");
    assert!(
        matches!(err, McpError::TooLarge { limit: 100_000, size: Some(s), .. } if s > 300_000),
        "{err:?}"
    );
    let fits = session
        .call_tool(
            "big",
            json!({"bytes": 1000, "id_last": true})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            Map::new(),
            options(Some(100_000), None),
        )
        .await
        .expect("fits");
    assert!(matches!(&fits.content[0], Content::Text(t) if t.len() == 1000));
    session.close().await;
}

#[tokio::test]
async fn a_program_that_does_not_exist_or_cannot_run_is_a_start_error_naming_it() {
    let missing = ServerConfig {
        transport: TransportConfig::Stdio {
            program: PathBuf::from("/nonexistent/mcp-server"),
            args: vec![],
            cwd: PathBuf::from("/"),
            env: vec![],
        },
        ..fault(&[], &[])
    };
    let err = Session::connect(missing).await.expect_err("no program");
    assert!(
        matches!(&err, McpError::Start { message, .. } if message.contains("/nonexistent/mcp-server")),
        "{err:?}"
    );
    let not_executable = ServerConfig {
        transport: TransportConfig::Stdio {
            program: fault_server(),
            args: vec![],
            cwd: PathBuf::from("/"),
            env: vec![],
        },
        ..fault(&[], &[])
    };
    let err = Session::connect(not_executable)
        .await
        .expect_err("not executable");
    assert!(
        matches!(&err, McpError::Start { message, .. } if message.contains("fault_server.py")),
        "{err:?}"
    );
}

#[tokio::test]
async fn the_server_sees_its_declared_environment_and_nothing_else_of_pipecs() {
    // A variable of the test process that is not on the allowlist (cargo sets several).
    let (canary, value) = std::env::vars()
        .find(|(name, _)| name.starts_with("CARGO_"))
        .expect("cargo sets CARGO_* variables for tests");
    assert!(!value.is_empty() || !canary.is_empty());
    let session = connect(fault(&[], &[("DECLARED", "yes")])).await;
    let seen = call(
        &session,
        "env",
        json!({"names": [canary, "DECLARED", "PATH"]}),
    )
    .await
    .expect("env");
    let values = seen.structured.expect("structured");
    assert_eq!(values[&canary], Value::Null, "{canary} leaked: {values}");
    assert_eq!(values["DECLARED"], "yes");
    assert!(values["PATH"].is_string(), "PATH is on the allowlist");
    session.close().await;
}

#[tokio::test]
async fn a_malformed_link_keeps_the_rest_of_the_result() {
    let session = connect(fault(&[], &[])).await;
    let result = call(&session, "malformed", json!({}))
        .await
        .expect("a result");
    assert_eq!(result.structured, Some(json!({"ok": true})));
    assert_eq!(result.content.len(), 3);
    assert_eq!(result.content[0], Content::Text("before".into()));
    assert!(
        matches!(&result.content[1], Content::Malformed { kind: Some(k), problem } if k == "resource_link" && problem.contains("uri")),
        "{:?}",
        result.content[1]
    );
    assert!(
        matches!(&result.content[2], Content::Link(l) if l.uri == "fault://text" && l.size == Some(4))
    );
    session.close().await;
}

#[tokio::test]
async fn blobs_are_decoded_and_error_codes_kept_whatever_they_are() {
    let session = connect(fault(&[], &[])).await;
    let blob = session
        .read_resource("fault://blob", RequestOptions::default())
        .await
        .expect("blob");
    assert_eq!(blob[0].body, Body::Blob((0..=255).collect()));
    assert_eq!(blob[0].mime.as_deref(), Some("application/octet-stream"));
    for code in [0, -32002, -32602, -32603] {
        let uri = format!("fault://error/{code}");
        let err = session
            .read_resource(&uri, RequestOptions::default())
            .await
            .expect_err("an error");
        assert!(
            matches!(&err, McpError::Server { code: c, message, .. } if *c == code && message.contains(&uri)),
            "{err:?}"
        );
        assert_eq!(err.code(), Some(code));
    }
    // A request the session's policy does not answer (sampling) fails the call.
    let asked = call(&session, "ask", json!({})).await;
    assert!(
        matches!(asked, Err(McpError::InputRequired { .. })),
        "{asked:?}"
    );
    // Asking for nothing is not a question.
    let empty = call(&session, "ask", json!({"kind": "empty"})).await;
    assert!(
        matches!(&empty, Err(McpError::Protocol { message, .. }) if message.contains("neither input requests nor a requestState")),
        "{empty:?}"
    );
    // Declining (the default policy) is an answer: the call goes again with it and the
    // server's requestState, unchanged.
    let declined = call(&session, "ask", json!({"kind": "elicit"}))
        .await
        .expect("answered");
    assert_eq!(
        declined.content,
        vec![Content::Text(
            r#"{"responses": {"who": {"action": "decline"}}, "state": "opaque-1"}"#.into()
        )]
    );
    session.close().await;
}

/// A server that asks for input mid-call (2026-07-28's `input_required`) gets the answer
/// the session's policy gives, with its `requestState` as sent: with `Defaults`, a form
/// is accepted with the defaults its schema declares.
#[tokio::test]
async fn an_input_required_call_is_answered_by_the_policy_and_sent_again_with_its_state() {
    let session = connect(ServerConfig {
        elicitation: Elicitation::Defaults,
        sampler: None,
        authorization: None,
        ..fault(&[], &[])
    })
    .await;
    let answered = call(&session, "ask", json!({"kind": "elicit"}))
        .await
        .expect("answered");
    assert_eq!(
        answered.content,
        vec![Content::Text(
            r#"{"responses": {"who": {"action": "accept", "content": {"name": "Ada"}}}, "state": "opaque-1"}"#
                .into()
        )]
    );
    session.close().await;
}

#[tokio::test]
async fn a_secret_the_server_writes_to_stderr_comes_back_redacted() {
    let secret_line = format!("config: api_key={SECRET}\n");
    let mut config = fault(&["no-handshake"], &[("FAULT_STDERR", &secret_line)]);
    config.startup_timeout = Duration::from_millis(500);
    let err = Session::connect(config).await.expect_err("no handshake");
    let McpError::StartTimeout { stderr, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(stderr.contains("api_key=[redacted]"), "{stderr:?}");
    assert!(!err.to_string().contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_share_one_session() {
    let session = Arc::new(connect(fault(&[], &[])).await);
    let mut tasks = Vec::new();
    for i in 0..24 {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let tool = if i % 3 == 0 { "slow" } else { "echo" };
            call(&session, tool, json!({"n": i, "seconds": 0.2})).await
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        let result = task.await.expect("task").expect("answer");
        if i % 3 != 0 {
            assert_eq!(result.structured.expect("structured")["arguments"]["n"], i);
        }
    }
    session.close().await;
}

#[test]
fn a_session_can_be_shared_across_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Session>();
}

#[tokio::test]
async fn closing_ends_the_server_and_a_dropped_session_does_not_leave_it_running() {
    let dir = scratch("lifetime");
    let closed_pid = dir.join("closed.pid");
    let session = connect(fault(
        &[],
        &[("FAULT_PID_FILE", closed_pid.to_str().expect("utf-8"))],
    ))
    .await;
    let pid = read_pid(&closed_pid);
    assert!(alive(pid));
    let t = Instant::now();
    session.close().await;
    assert!(!alive(pid), "closed, the server is gone");
    eprintln!(
        "timings (stdio fault server): close {:.0} ms",
        ms(t.elapsed())
    );
    session.close().await;

    let dropped_pid = dir.join("dropped.pid");
    let session = connect(fault(
        &[],
        &[("FAULT_PID_FILE", dropped_pid.to_str().expect("utf-8"))],
    ))
    .await;
    let pid = read_pid(&dropped_pid);
    call(&session, "echo", json!({})).await.expect("echo");
    drop(session);
    assert!(
        wait_gone(pid, Duration::from_secs(5)),
        "dropped, the server is gone"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// Tiny HTTP servers inside the test.
// ---------------------------------------------------------------------------------------

/// What the tiny server does with a `tools/call`.
#[derive(Clone, Copy)]
enum OnCall {
    /// HTTP 500 with a body that names a secret.
    Status500,
    /// HTTP 403 (no challenge) with a body that names a secret.
    Status403,
    /// An SSE answer cut off in the middle, then the connection closed.
    CutOff,
    /// A JSON answer of about this many bytes.
    BigJson(usize),
    /// An SSE answer of about this many bytes.
    BigSse(usize),
    /// An answer with a `resource_link` that has no `uri`, as JSON or as an SSE event.
    Malformed { sse: bool },
}

/// What the tiny server answers to the handshake.
#[derive(Clone, Copy)]
enum Probe {
    /// `server/discover` is "method not found"; `initialize` is answered.
    Refused,
    /// `server/discover` is answered with `{}`, as lax servers answer what they do not
    /// know; `initialize` is answered.
    Empty,
    /// `{}` to both.
    EmptyToBoth,
    /// 401 to both, with a `WWW-Authenticate` challenge and a JSON body that explains
    /// (and names the secret).
    Unauthorized,
}

/// What the tiny server was asked: `POST initialize`, `DELETE`, ...
type Asked = Arc<std::sync::Mutex<Vec<String>>>;

/// An MCP server over HTTP that speaks just enough: it refuses `server/discover`, so the
/// client falls back to `initialize`, which it answers with a session id, accepts
/// notifications, refuses the GET stream, and does `on_call` with a `tools/call`. One
/// request per connection.
async fn tiny_server(on_call: OnCall) -> (String, Asked) {
    tiny_server_with(Probe::Refused, on_call).await
}

/// The tiny server, answering the handshake as `probe` says.
async fn tiny_server_with(probe: Probe, on_call: OnCall) -> (String, Asked) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let asked = Asked::default();
    let log = asked.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer_one(stream, probe, on_call, log.clone()));
        }
    });
    (url, asked)
}

fn asked(log: &Asked) -> Vec<String> {
    log.lock().map(|l| l.clone()).unwrap_or_default()
}

async fn answer_one(mut stream: tokio::net::TcpStream, probe: Probe, on_call: OnCall, log: Asked) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    let (head_end, length) = loop {
        let Ok(n) = stream.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        request.extend_from_slice(&buf[..n]);
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..at]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (at + 4, length);
        }
    };
    while request.len() < head_end + length {
        let Ok(n) = stream.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&request[..head_end]).to_string();
    let verb = head.split_whitespace().next().unwrap_or("").to_string();
    if verb != "POST" {
        if let Ok(mut log) = log.lock() {
            log.push(verb);
        }
        let _ = stream
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return;
    }
    let body: Value = serde_json::from_slice(&request[head_end..]).unwrap_or(Value::Null);
    let id = body.get("id").cloned().unwrap_or(Value::Null);
    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
    if let Ok(mut log) = log.lock() {
        log.push(format!("POST {method}"));
    }
    let json_reply = |message: Value| {
        let text = message.to_string();
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )
    };
    let unauthorized = || {
        let text = json!({
            "error": "invalid_token",
            "error_description": format!("the token expired yesterday (key {SECRET})"),
        })
        .to_string();
        format!(
            "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm=\"tiny\", error=\"invalid_token\"\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )
    };
    let empty = json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
    let reply = match (method, probe) {
        ("server/discover" | "initialize", Probe::Unauthorized) => unauthorized(),
        ("server/discover", Probe::Empty) | (_, Probe::EmptyToBoth) => empty,
        ("server/discover", _) => json_reply(json!({
            "jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found"}
        })),
        ("initialize", _) => json_reply(json!({
            "jsonrpc": "2.0", "id": id,
            "result": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "tiny", "version": "1"}
            }
        }))
        .replacen("\r\n", "\r\nmcp-session-id: tiny-session-1\r\n", 1),
        ("tools/call", _) => match on_call {
            OnCall::Status500 => {
                let text = format!("database exploded (key {SECRET})");
                format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                )
            }
            OnCall::Status403 => {
                let text = format!("tenant not allowed (key {SECRET})");
                format!(
                    "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                    text.len()
                )
            }
            OnCall::CutOff => {
                let start = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: message\r\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"abc"
                );
                let _ = stream.write_all(start.as_bytes()).await;
                let _ = stream.flush().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                return;
            }
            OnCall::Malformed { sse } => {
                let message = json!({
                    "jsonrpc": "2.0", "id": id,
                    "result": {
                        "content": [
                            {"type": "text", "text": "kept"},
                            {"type": "resource_link", "name": "no-uri"}
                        ],
                        "structuredContent": {"kept": true}
                    }
                });
                if sse {
                    let event = format!("event: message\r\ndata: {message}\r\n\r\n");
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{event}",
                        event.len()
                    )
                } else {
                    json_reply(message)
                }
            }
            OnCall::BigSse(bytes) => {
                let message = json!({
                    "jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "s".repeat(bytes)}]}
                });
                let event = format!("event: message\r\ndata: {message}\r\n\r\n");
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{event}",
                    event.len()
                )
            }
            OnCall::BigJson(bytes) => json_reply(json!({
                "jsonrpc": "2.0", "id": id,
                "result": {"content": [{"type": "text", "text": "y".repeat(bytes)}]}
            })),
        },
        _ => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
    };
    let _ = stream.write_all(reply.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn http_config(url: String) -> ServerConfig {
    config(
        "tiny",
        TransportConfig::Http {
            url,
            headers: vec![],
        },
    )
}

#[tokio::test]
async fn an_http_500_is_an_http_error_with_its_status() {
    let (url, _) = tiny_server(OnCall::Status500).await;
    let session = connect(http_config(url)).await;
    assert_eq!(session.protocol_version().as_deref(), Some("2025-11-25"));
    let err = call(&session, "anything", json!({}))
        .await
        .expect_err("500");
    match &err {
        // rmcp does not read the body of a 5xx that is not a JSON-RPC error.
        McpError::Http { status, body, .. } => {
            assert_eq!(*status, 500);
            assert!(!body.contains(SECRET), "{body}");
        }
        other => panic!("{other:?}"),
    }
    session.close().await;
}

#[tokio::test]
async fn an_http_403_is_an_http_error_with_its_body_redacted() {
    let (url, _) = tiny_server(OnCall::Status403).await;
    let session = connect(http_config(url)).await;
    let err = call(&session, "anything", json!({}))
        .await
        .expect_err("403");
    match &err {
        McpError::Http { status, body, .. } => {
            assert_eq!(*status, 403);
            assert_eq!(body, "tenant not allowed (key [redacted])");
        }
        other => panic!("{other:?}"),
    }
    session.close().await;
}

#[tokio::test]
async fn closing_an_http_session_deletes_it() {
    let (url, log) = tiny_server(OnCall::BigJson(10)).await;
    let session = connect(http_config(url)).await;
    call(&session, "anything", json!({})).await.expect("a call");
    assert!(!asked(&log).contains(&"DELETE".to_string()));
    session.close().await;
    let asked = asked(&log);
    assert!(asked.contains(&"DELETE".to_string()), "{asked:?}");
    assert!(asked.contains(&"POST initialize".to_string()), "{asked:?}");
}

#[tokio::test]
async fn an_http_answer_cut_off_mid_stream_fails_without_hanging() {
    let (url, _) = tiny_server(OnCall::CutOff).await;
    let session = connect(http_config(url)).await;
    let t = Instant::now();
    let err = call(&session, "anything", json!({}))
        .await
        .expect_err("cut off");
    assert!(
        matches!(err, McpError::Closed { .. } | McpError::Protocol { .. }),
        "{err:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    session.close().await;
}

#[tokio::test]
async fn an_http_json_answer_over_its_request_limit_is_too_large_and_the_next_one_works() {
    let (url, _) = tiny_server(OnCall::BigJson(2 << 20)).await;
    let session = connect(http_config(url)).await;
    let err = session
        .call_tool(
            "anything",
            Map::new(),
            Map::new(),
            options(Some(100_000), None),
        )
        .await
        .expect_err("over its limit");
    assert!(
        matches!(err, McpError::TooLarge { limit: 100_000, .. }),
        "{err:?}"
    );
    let fits = call(&session, "anything", json!({}))
        .await
        .expect("no limit");
    assert!(matches!(&fits.content[0], Content::Text(t) if t.len() == 2 << 20));
    session.close().await;
}

#[tokio::test]
async fn http_answers_over_the_session_limit_or_the_request_limit_are_too_large() {
    for on_call in [OnCall::BigJson(2 << 20), OnCall::BigSse(2 << 20)] {
        let (url, _) = tiny_server(on_call).await;
        let mut config = http_config(url);
        config.max_message_bytes = 1 << 20;
        let session = connect(config).await;
        let err = call(&session, "anything", json!({}))
            .await
            .expect_err("over the session's limit");
        assert!(
            matches!(err, McpError::TooLarge { limit, .. } if limit == 1 << 20),
            "{err:?}"
        );
        let err = session
            .call_tool(
                "anything",
                Map::new(),
                Map::new(),
                options(Some(50_000), None),
            )
            .await
            .expect_err("over its own limit");
        assert!(
            matches!(err, McpError::TooLarge { limit: 50_000, .. }),
            "{err:?}"
        );
        session.close().await;
    }
}

#[tokio::test]
async fn a_malformed_link_over_http_keeps_the_rest_of_the_result() {
    for sse in [false, true] {
        let (url, _) = tiny_server(OnCall::Malformed { sse }).await;
        let session = connect(http_config(url)).await;
        let result = call(&session, "anything", json!({}))
            .await
            .expect("a result");
        assert_eq!(result.structured, Some(json!({"kept": true})), "sse: {sse}");
        assert_eq!(
            result.content[0],
            Content::Text("kept".into()),
            "sse: {sse}"
        );
        assert!(
            matches!(&result.content[1], Content::Malformed { problem, .. } if problem.contains("uri")),
            "sse: {sse}: {:?}",
            result.content
        );
        session.close().await;
    }
}

#[tokio::test]
async fn an_http_server_that_is_not_there_is_a_start_error_naming_its_url_and_the_cause() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    drop(listener);
    let err = Session::connect(http_config(format!("{url}?key={SECRET}")))
        .await
        .expect_err("nothing listens");
    assert!(
        matches!(&err, McpError::Start { server, url: Some(shown), .. } if server == "tiny" && *shown == url),
        "{err:?}"
    );
    let text = err.to_string();
    assert_eq!(
        text,
        format!(
            "the server `tiny` could not be reached at {url}: nothing listens there (connection refused)"
        )
    );
    assert!(err.help().is_some_and(|h| h.contains("`url`")), "{err:?}");
}

/// A 401 with a challenge: rmcp drops its body, where the server says why; pipec asks
/// again for it, and shows it (redacted) with the challenge and what to check.
#[tokio::test]
async fn a_refused_handshake_shows_the_servers_explanation_and_challenge() {
    let (url, log) = tiny_server_with(Probe::Unauthorized, OnCall::BigJson(10)).await;
    let err = Session::connect(http_config(url.clone()))
        .await
        .expect_err("401");
    match &err {
        McpError::Http {
            status,
            body,
            challenge,
            url: shown,
            ..
        } => {
            assert_eq!(*status, 401);
            assert_eq!(shown, &url);
            assert!(body.contains("the token expired yesterday"), "{body}");
            assert!(
                body.contains("[redacted]") && !body.contains(SECRET),
                "{body}"
            );
            assert_eq!(
                challenge.as_deref(),
                Some(r#"Bearer realm="tiny", error="invalid_token""#)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(err.refused_credentials());
    assert!(
        err.help()
            .is_some_and(|h| h.contains("`headers` of the server `tiny`")),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "the server `tiny` answered HTTP 401 Unauthorized at {url}: "
        )),
        "{text}"
    );
    // The handshake's request was sent twice (the second time for the body), and
    // nothing else.
    let asked = asked(&log);
    assert_eq!(
        asked,
        ["POST server/discover", "POST server/discover"],
        "{asked:?}"
    );
}

/// No error shows a debug form of rmcp's types, whatever the handshake got.
#[tokio::test]
async fn a_handshake_answered_with_nonsense_is_a_start_error_in_words() {
    let (url, _) = tiny_server_with(Probe::EmptyToBoth, OnCall::BigJson(10)).await;
    let err = Session::connect(http_config(url))
        .await
        .expect_err("no initialize result");
    let text = err.to_string();
    assert_eq!(
        text,
        "the server `tiny` could not be started: the server answered the handshake with something that is not an answer to `initialize`"
    );
}
