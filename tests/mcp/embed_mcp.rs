//! The embedding API's MCP seams: a program supplies its own `Servers` (servers by name:
//! call a tool, read a URI, list tools), or keeps the plan's and replaces single
//! operations of a server — its reads with a fetcher, the replays that heal its dead links
//! with a replayer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pipec::mcp::{
    Body, Content, Link, McpError, RequestOptions, ResourceContent, ToolInfo, ToolResult,
};
use pipec::runtime::{Fetcher, Outcome, Replayer, Runner, ServerFuture, Servers};
use pipec::store::RedbStore;
use serde_json::{Map, Value, json};

const PIPELINE: &str = r#"
server docs {
  command = "a-server-that-does-not-exist"
}

type Doc {
  id: string
  words: int
}

link "doc": Doc = "mcp://docs/{id}/{version}"

/// Finds a document.
tool find(id: string) -> { id: string } from docs {
  read_only = true
  links = ["doc"]
}

input id: string

node search(id: string = input.id) -> { id: string } {
  call = find(id: id)
}

node count(found: { id: string } = search, doc: Doc = resource(ref: "doc", max_bytes: 1kb)) -> int {
  return = doc.words
}

node direct(id: string = input.id, doc: Doc = resource("mcp://docs/{id}/v9", max_bytes: 1kb)) -> int {
  return = doc.words
}

output words = count
output direct = direct
"#;

/// A server held by the program: `find` links version 1 of the document, whose first
/// read fails as a dead link would; every other read answers.
#[derive(Default)]
struct Held {
    calls: AtomicU32,
    reads: AtomicU32,
    v1_reads: AtomicU32,
}

fn link_result(uri: &str) -> ToolResult {
    ToolResult {
        structured: Some(json!({ "id": "A" })),
        content: vec![Content::Link(Link {
            uri: uri.into(),
            name: "doc".into(),
            title: None,
            description: None,
            mime: Some("application/json".into()),
            size: None,
        })],
        is_error: false,
    }
}

impl Servers for Held {
    fn call_tool<'a>(
        &'a self,
        _server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        _meta: Map<String, Value>,
        _options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult> {
        Box::pin(async move {
            assert_eq!(tool, "find");
            assert_eq!(arguments.get("id"), Some(&json!("A")));
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(link_result("mcp://docs/A/v1"))
        })
    }

    fn read<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        _options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>> {
        Box::pin(async move {
            self.reads.fetch_add(1, Ordering::SeqCst);
            if uri.ends_with("/v1") && self.v1_reads.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err(McpError::Server {
                    server: server.into(),
                    code: -32602,
                    message: format!("Unknown resource: {uri}"),
                    data: None,
                });
            }
            Ok(vec![ResourceContent {
                uri: uri.into(),
                mime: Some("application/json".into()),
                body: Body::Text(r#"{"id": "A", "words": 42}"#.into()),
            }])
        })
    }

    fn list_tools<'a>(&'a self, _server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>> {
        Box::pin(async move {
            Ok(vec![ToolInfo {
                name: "find".into(),
                title: None,
                description: None,
                input_schema: json!({ "type": "object", "properties": { "id": { "type": "string" } }, "required": ["id"] }),
                output_schema: None,
                read_only: Some(true),
                idempotent: Some(true),
                destructive: Some(false),
                ..ToolInfo::default()
            }])
        })
    }
}

fn store(tag: &str) -> RedbStore {
    let dir = std::env::temp_dir().join(format!("pipec-embed-mcp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    RedbStore::open(dir.join("runs.redb")).expect("store")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn a_program_supplies_its_servers_and_a_replayer_heals_their_dead_link() {
    let plan = pipec::compile_str("docs.pipe", PIPELINE).expect("compiles");
    let held = Arc::new(Held::default());
    let replays = Arc::new(AtomicU32::new(0));
    let counted = replays.clone();
    let replayer: Replayer = Arc::new(move |tool: String, args: Value| {
        let counted = counted.clone();
        Box::pin(async move {
            assert_eq!(tool, "find");
            assert_eq!(args, json!({ "id": "A" }), "the recorded arguments");
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(json!({
                "content": [{ "type": "resource_link", "uri": "mcp://docs/A/v1", "name": "doc" }],
                "structuredContent": { "id": "A" }
            }))
        })
    });
    let runner = Runner::new(plan, store("servers"))
        .servers(held.clone())
        .replayer("docs", replayer);
    let outcome = rt()
        .block_on(runner.start(json!({ "id": "A" })))
        .expect("runs");
    let Outcome::Completed { outputs, .. } = outcome else {
        panic!("not completed: {outcome:?}");
    };
    assert_eq!(outputs, json!({ "words": 42, "direct": 42 }));
    assert_eq!(held.calls.load(Ordering::SeqCst), 1, "the tool ran once");
    assert_eq!(
        replays.load(Ordering::SeqCst),
        1,
        "the heal went to the replayer, not to the server"
    );
    // v1 (dead), v1 again (healed), v9 (the direct binding).
    assert_eq!(held.reads.load(Ordering::SeqCst), 3);
}

#[test]
fn a_fetcher_reads_a_servers_resources_instead_of_the_server() {
    let plan = pipec::compile_str("docs.pipe", PIPELINE).expect("compiles");
    let held = Arc::new(Held::default());
    let fetched = Arc::new(AtomicU32::new(0));
    let counted = fetched.clone();
    let fetcher: Fetcher = Arc::new(move |uri: String| {
        let counted = counted.clone();
        Box::pin(async move {
            counted.fetch_add(1, Ordering::SeqCst);
            let words = if uri.ends_with("/v9") { 9 } else { 1 };
            Ok((
                format!(r#"{{"id": "A", "words": {words}}}"#).into_bytes(),
                Some("application/json".to_string()),
            ))
        })
    });
    let runner = Runner::new(plan, store("fetcher"))
        .servers(held.clone())
        .fetcher("docs", fetcher);
    let outcome = rt()
        .block_on(runner.start(json!({ "id": "A" })))
        .expect("runs");
    let Outcome::Completed { outputs, .. } = outcome else {
        panic!("not completed: {outcome:?}");
    };
    assert_eq!(outputs, json!({ "words": 1, "direct": 9 }));
    assert_eq!(fetched.load(Ordering::SeqCst), 2);
    assert_eq!(
        held.reads.load(Ordering::SeqCst),
        0,
        "the server read nothing"
    );
}
