//! The floor of a fan-out: N `get_deal` calls to `pipec-demo-crm` over stdio, at most 8
//! at a time on one session, made by pipec's MCP client alone — no plan, no runtime, no
//! store. `bench/fanout_compare.sh` puts `pipec run` of the same calls (an `each` node)
//! beside it, and beside LangGraph's; what the run costs above this is what its
//! durability and its scheduling cost.
//!
//! `cargo bench --bench fanout -- N [N...]` prints one JSON line per N:
//! `{"n", "wall_ms"}`, from the server's spawn to the last answer, as `pipec run`'s
//! whole process is timed (its own start is the rest).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pipec::mcp::{Elicitation, RequestOptions, ServerConfig, Session, TransportConfig};
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// As many calls at once as the compared runs make (`concurrency = 8`).
const CONCURRENCY: usize = 8;

fn demo_crm() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let release = root.join("target/release/pipec-demo-crm");
    if release.exists() {
        return release;
    }
    root.join("target/debug/pipec-demo-crm")
}

fn config() -> ServerConfig {
    ServerConfig {
        name: "crm".into(),
        transport: TransportConfig::Stdio {
            program: demo_crm(),
            args: Vec::new(),
            cwd: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            env: Vec::new(),
        },
        startup_timeout: Duration::from_secs(30),
        request_timeout: Duration::from_secs(60),
        max_message_bytes: 64 * 1024 * 1024,
        redact: Arc::new(|text: &str| text.to_string()),
        elicitation: Elicitation::Decline,
        sampler: None,
        authorization: None,
    }
}

async fn fan_out(n: usize) -> Duration {
    let started = Instant::now();
    let session = Arc::new(
        Session::connect(config())
            .await
            .expect("the demo CRM starts"),
    );
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let mut calls = JoinSet::new();
    for i in 0..n {
        let (session, permits) = (session.clone(), permits.clone());
        calls.spawn(async move {
            let _permit = permits.acquire_owned().await.expect("permits");
            let mut arguments = Map::new();
            arguments.insert("deal_id".into(), json!(format!("D{i}")));
            let result = session
                .call_tool("get_deal", arguments, Map::new(), RequestOptions::default())
                .await
                .expect("get_deal answers");
            let deal: &Value = result.structured.as_ref().expect("a deal");
            assert_eq!(deal["deal_id"], format!("D{i}"));
        });
    }
    while let Some(done) = calls.join_next().await {
        done.expect("a call");
    }
    let wall = started.elapsed();
    if let Ok(session) = Arc::try_unwrap(session) {
        session.close().await;
    }
    wall
}

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![1000]
    } else {
        counts
    };
    // The runtime pipec's command line runs on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for n in counts {
        let wall = rt.block_on(fan_out(n));
        println!(
            "{}",
            json!({ "n": n, "wall_ms": (wall.as_secs_f64() * 1e4).round() / 10.0 })
        );
    }
}
