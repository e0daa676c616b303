//! MCP client costs over stdio: pipec's `mcp::Session` against the CRM server on the
//! official Python SDK (the same script the Python peer benchmark talks to) and against
//! `pipec-demo-crm`, measured the way the peer's section d measures its client, so the
//! two sides' figures can be put next to each other.
//!
//! For each server: session start (spawn and handshake) and close, over 10 sessions after
//! 2 warm-ups; then, on one session, `get_deal` ×200 and a one-day email read ×200 after
//! 10 warm-ups of each, the whole 5 MB email history ×10 (and its MB/s), and 10 reads of
//! an armed, expired link (each followed by an untimed read of the same link, which must
//! work again). Every row has the median and the nearest-rank p95, as the peer computes
//! them, and is printed as one JSON line.
//!
//! A round trip against the Python server is mostly that server's own work, which every
//! client pays alike. So the same three requests are also timed through a bare exchange
//! (the `floor_*` rows): one JSON line written to the server's stdin, one line read back
//! from its stdout, nothing parsed. What a client adds to a call is its round trip less
//! that floor.
//!
//! `cargo bench --bench mcp` runs both servers; `-- --server python|demo` one of them;
//! `-- --quick` repeats less; `-- --json FILE` also writes `{"meta", "results"}` (what
//! `bench/mcp_compare.sh` reads).
//!
//! Environment: `CRM_EMAILS` (default 5000, about 5 MB of history); `PEER_PYTHON` (the
//! Python with the MCP SDK; default `$PEER_VENV/bin/python`, `PEER_VENV` defaulting to
//! `~/.cache/pipec-peers-venv` as the peer harness has it); `PEER_DIR` (the peer harness,
//! default `../shared/peers` beside this checkout); `CRM_SERVER` (the server script,
//! default `$PEER_DIR/crm_server.py` when it exists, else `tests/interop/crm_server.py`).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pipec::mcp::{
    Body, Content, Elicitation, McpError, RequestOptions, ResourceContent, ServerConfig, Session,
    ToolResult, TransportConfig,
};
use serde_json::{Map, Value, json};

/// The deal the peer reads, and its one-day range (about 14 emails).
const DEAL_ID: &str = "D-1001";
const SMALL_RANGE: (&str, &str) = ("2025-03-01", "2025-03-01");

/// What the runtime gives a server it starts (`runtime/resources/servers.rs`), so the
/// client is measured as a pipeline would use it.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How many of each, as the peer's section d has them.
struct Counts {
    warmup: usize,
    sessions: usize,
    calls: usize,
    corpus: usize,
}

/// The peer's median: the mean of the two middle values of an even count.
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The peer's p95: nearest rank.
fn p95(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((0.95 * v.len() as f64).ceil() as usize).max(1);
    v.get(rank - 1).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

struct Results {
    rows: Vec<Value>,
}

impl Results {
    /// One row, printed at once as a JSON line (as the peer prints its own).
    fn emit(&mut self, id: &str, unit: &str, samples: &[f64], desc: &str, extra: Value) {
        let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut row = json!({
            "id": id,
            "unit": unit,
            "n": samples.len(),
            "median": round4(median(samples)),
            "p95": round4(p95(samples)),
            "min": round4(min),
            "max": round4(max),
            "desc": desc,
        });
        if let (Value::Object(row), Value::Object(extra)) = (&mut row, extra) {
            row.extend(extra);
        }
        println!("{row}");
        self.rows.push(row);
    }
}

/// One server to measure against.
struct Target {
    /// The prefix of its rows: `d` for the Python server (the peer's own ids), `demo`
    /// for `pipec-demo-crm`.
    prefix: &'static str,
    name: &'static str,
    transport: TransportConfig,
}

impl Target {
    fn config(&self) -> ServerConfig {
        ServerConfig {
            name: self.name.to_string(),
            transport: self.transport.clone(),
            startup_timeout: STARTUP_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            max_message_bytes: MAX_MESSAGE_BYTES,
            redact: Arc::new(|text: &str| text.to_string()),
            elicitation: Elicitation::Decline,
            sampler: None,
            authorization: None,
        }
    }

    fn id(&self, what: &str) -> String {
        format!("{}.{what}", self.prefix)
    }
}

fn arguments(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

async fn get_deal(session: &Session) -> ToolResult {
    session
        .call_tool(
            "get_deal",
            arguments(json!({ "deal_id": DEAL_ID })),
            Map::new(),
            RequestOptions::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("get_deal: {e}"))
}

async fn read(session: &Session, uri: &str) -> Result<Vec<ResourceContent>, McpError> {
    session.read_resource(uri, RequestOptions::default()).await
}

/// The bytes of a read's first content, which must be text.
fn text_len(contents: &[ResourceContent]) -> usize {
    match contents.first().map(|c| &c.body) {
        Some(Body::Text(text)) => text.len(),
        other => panic!("the read gave no text: {other:?}"),
    }
}

/// The email-history link of a `get_deal` result, and its announced size.
fn email_link(result: &ToolResult) -> (String, Option<u64>) {
    result
        .content
        .iter()
        .find_map(|block| match block {
            Content::Link(link) if link.description.as_deref() == Some("email-history") => {
                Some((link.uri.clone(), link.size))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("get_deal returned no email-history link: {result:?}"))
}

/// The server's own cost of each request, with no client to speak of: the handshake of
/// 2025-11-25 written by hand, then each request written as one line and its answer read
/// as one line, unparsed (only checked to be a result). The same counts as the client's.
fn measure_floor(target: &Target, counts: &Counts, out: &mut Results) {
    let TransportConfig::Stdio {
        program,
        args,
        cwd,
        env,
    } = &target.transport
    else {
        return;
    };
    let mut child = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", target.name));
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped stdout"));
    let mut line = Vec::new();
    // A notification (`answered` false) is written and nothing is read back.
    let mut exchange = |request: &Value, answered: bool| -> Duration {
        let mut bytes = request.to_string().into_bytes();
        bytes.push(b'\n');
        line.clear();
        let t0 = Instant::now();
        stdin.write_all(&bytes).expect("writing to the server");
        stdin.flush().expect("flushing to the server");
        if !answered {
            return t0.elapsed();
        }
        stdout
            .read_until(b'\n', &mut line)
            .expect("reading the server");
        let took = t0.elapsed();
        // Both servers put `result` among the first keys of the answer.
        let head = String::from_utf8_lossy(&line[..line.len().min(200)]);
        assert!(head.contains("\"result\""), "not a result: {head}");
        took
    };
    exchange(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "pipec-bench-floor", "version": "0"}}}),
        true,
    );
    exchange(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    );
    let small = format!(
        "mcp://crm/deals/{DEAL_ID}/emails/{}/{}",
        SMALL_RANGE.0, SMALL_RANGE.1
    );
    let corpus = format!("mcp://crm/deals/{DEAL_ID}/emails/2025-01-01/2025-12-31");
    let tool = json!({"name": "get_deal", "arguments": {"deal_id": DEAL_ID}});
    let rows = [
        (
            "floor_call_tool_get_deal_ms",
            "tools/call",
            tool,
            counts.calls,
        ),
        (
            "floor_read_resource_small_ms",
            "resources/read",
            json!({"uri": small}),
            counts.calls,
        ),
        (
            "floor_read_resource_corpus_ms",
            "resources/read",
            json!({"uri": corpus}),
            counts.corpus,
        ),
    ];
    let mut id = 1;
    for (name, method, params, n) in rows {
        let mut times = Vec::with_capacity(n);
        for i in 0..10 + n {
            id += 1;
            let took = exchange(
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                true,
            );
            if i >= 10 {
                times.push(ms(took));
            }
        }
        out.emit(
            &target.id(name),
            "ms",
            &times,
            &format!(
                "{method} as one line written and one read back, unparsed (the server's floor)"
            ),
            json!({}),
        );
    }
    drop(stdin);
    let _ = child.wait();
}

fn measure(rt: &tokio::runtime::Runtime, target: &Target, counts: &Counts, out: &mut Results) {
    let (mut starts, mut closes) = (Vec::new(), Vec::new());
    for i in 0..counts.warmup + counts.sessions {
        let (start, close) = rt.block_on(async {
            let t0 = Instant::now();
            let session = Session::connect(target.config())
                .await
                .unwrap_or_else(|e| panic!("connecting to {}: {e}", target.name));
            let t1 = Instant::now();
            session.close().await;
            (t1 - t0, t1.elapsed())
        });
        if i >= counts.warmup {
            starts.push(ms(start));
            closes.push(ms(close));
        }
    }
    out.emit(
        &target.id("session_start_ms"),
        "ms",
        &starts,
        &format!("spawn of {} + handshake (Session::connect)", target.name),
        json!({}),
    );
    out.emit(
        &target.id("session_close_ms"),
        "ms",
        &closes,
        "Session::close: stdin closed, the server's exit awaited (its group then killed)",
        json!({}),
    );

    rt.block_on(async {
        let session = Session::connect(target.config())
            .await
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", target.name));
        let t0 = Instant::now();
        let first = get_deal(&session).await;
        let first_ms = ms(t0.elapsed());
        assert_eq!(first.content.len(), 3, "get_deal gives 3 blocks: {first:?}");
        let (link, announced) = email_link(&first);
        let small = format!(
            "mcp://crm/deals/{DEAL_ID}/emails/{}/{}",
            SMALL_RANGE.0, SMALL_RANGE.1
        );
        for _ in 0..10 {
            get_deal(&session).await;
            read(&session, &small)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut tool = Vec::with_capacity(counts.calls);
        for _ in 0..counts.calls {
            let t0 = Instant::now();
            let result = get_deal(&session).await;
            tool.push(ms(t0.elapsed()));
            assert_eq!(result.content.len(), 3);
        }
        let (mut small_reads, mut small_bytes) = (Vec::with_capacity(counts.calls), 0);
        for _ in 0..counts.calls {
            let t0 = Instant::now();
            let contents = read(&session, &small)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            small_reads.push(ms(t0.elapsed()));
            small_bytes = text_len(&contents);
        }
        out.emit(
            &target.id("call_tool_get_deal_ms"),
            "ms",
            &tool,
            "call_tool(get_deal) round trip, 3 content blocks",
            json!({ "first_call_ms": round4(first_ms) }),
        );
        out.emit(
            &target.id("read_resource_small_ms"),
            "ms",
            &small_reads,
            &format!("read_resource of a one-day email range ({small_bytes} bytes)"),
            json!({ "bytes": small_bytes }),
        );

        let (mut big, mut big_bytes) = (Vec::with_capacity(counts.corpus), 0);
        for _ in 0..counts.corpus {
            let t0 = Instant::now();
            let contents = read(&session, &link)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            big.push(ms(t0.elapsed()));
            big_bytes = text_len(&contents);
        }
        if let Some(announced) = announced {
            assert_eq!(big_bytes as u64, announced, "the link's size is the read's");
        }
        out.emit(
            &target.id("read_resource_corpus_ms"),
            "ms",
            &big,
            &format!("read_resource of the whole email range ({big_bytes} bytes)"),
            json!({ "bytes": big_bytes, "largest_read_buffer": session.largest_read_buffer() }),
        );
        let mb = big_bytes as f64 / 1e6;
        let rates: Vec<f64> = big.iter().map(|t| mb / (t / 1000.0)).collect();
        out.emit(
            &target.id("read_resource_corpus_MBps"),
            "MB/s",
            &rates,
            "throughput of that read",
            json!({}),
        );

        let (mut dead, mut code) = (Vec::with_capacity(counts.corpus), None);
        for _ in 0..counts.corpus {
            session
                .call_tool(
                    "arm_expiry",
                    arguments(json!({ "count": 1 })),
                    Map::new(),
                    RequestOptions::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("arm_expiry: {e}"));
            let t0 = Instant::now();
            let failed = read(&session, &link).await;
            dead.push(ms(t0.elapsed()));
            match failed {
                Err(error @ McpError::Server { .. }) => code = error.code(),
                other => panic!("an armed expiry did not fail the read: {other:?}"),
            }
            let again = read(&session, &link)
                .await
                .unwrap_or_else(|e| panic!("the link read again: {e}"));
            assert_eq!(text_len(&again), big_bytes);
        }
        out.emit(
            &target.id("dead_link_error_ms"),
            "ms",
            &dead,
            "armed email read failing with a JSON-RPC error",
            json!({ "error_code": code }),
        );
        session.close().await;
    });
}

fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json_out = flag_value(&args, "--json").map(PathBuf::from);
    let which = flag_value(&args, "--server").unwrap_or("both");
    if !["both", "python", "demo"].contains(&which) {
        eprintln!("error: --server takes python, demo or both, not `{which}`");
        std::process::exit(2);
    }
    let counts = if quick {
        Counts {
            warmup: 1,
            sessions: 3,
            calls: 20,
            corpus: 3,
        }
    } else {
        Counts {
            warmup: 2,
            sessions: 10,
            calls: 200,
            corpus: 10,
        }
    };
    let emails = std::env::var("CRM_EMAILS").unwrap_or_else(|_| "5000".to_string());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let peer_dir = std::env::var_os("PEER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/peers"));
    let server_script = std::env::var_os("CRM_SERVER")
        .map(PathBuf::from)
        .or_else(|| Some(peer_dir.join("crm_server.py")).filter(|p| p.exists()))
        .unwrap_or_else(|| root.join("tests/interop/crm_server.py"));
    let python = std::env::var_os("PEER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let venv = std::env::var_os("PEER_VENV")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    let home = std::env::var_os("HOME").map_or_else(|| ".".into(), PathBuf::from);
                    home.join(".cache/pipec-peers-venv")
                });
            venv.join("bin/python")
        });
    let env = vec![("CRM_EMAILS".to_string(), emails.clone())];
    let mut targets = Vec::new();
    if which != "demo" {
        let cwd = server_script
            .parent()
            .map_or_else(|| root.clone(), Path::to_path_buf);
        targets.push(Target {
            prefix: "d",
            name: "crm (Python SDK)",
            transport: TransportConfig::Stdio {
                program: python.clone(),
                args: vec![server_script.display().to_string()],
                cwd,
                env: env.clone(),
            },
        });
    }
    if which != "python" {
        targets.push(Target {
            prefix: "demo",
            name: "pipec-demo-crm",
            transport: TransportConfig::Stdio {
                program: demo_crm(),
                args: Vec::new(),
                cwd: root.clone(),
                env,
            },
        });
    }
    // The runtime pipec's command line runs on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let started = std::time::SystemTime::now();
    let mut results = Results { rows: Vec::new() };
    for target in &targets {
        measure(&rt, target, &counts, &mut results);
        measure_floor(target, &counts, &mut results);
    }
    if let Some(path) = json_out {
        let meta = json!({
            "started_unix_s": started.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            "emails": emails,
            "python": python.display().to_string(),
            "server_script": server_script.display().to_string(),
            "quick": quick,
            "pipec": env!("CARGO_PKG_VERSION"),
        });
        let doc = json!({ "meta": meta, "results": results.rows });
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&doc).unwrap_or_default(),
        )
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// The demo CRM server, beside pipec's executable: a crate of its own, built here with the
/// cargo running the benchmark when it is not there yet.
fn demo_crm() -> PathBuf {
    let pipec = std::path::Path::new(env!("CARGO_BIN_EXE_pipec"));
    let bin = pipec.with_file_name("pipec-demo-crm");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "--quiet", "--release", "-p", "pipec-demo-crm"])
            .status()
            .expect("cargo starts to build pipec-demo-crm");
        assert!(status.success(), "cargo build -p pipec-demo-crm failed");
    }
    bin
}
