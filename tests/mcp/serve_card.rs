//! The server card of `pipec serve --http` (MCP's Server Card extension, SEP-2127): read
//! before connecting, at the endpoint's `/server-card` and at
//! `/.well-known/mcp/server-card.json`, without the token, from an allowed host only; it
//! says what the handshake says and names the token as a secret header without giving it.

use crate::common;

use common::Project;
use common::serve_http::{call_2026, header, request_at, serve_http};
use serde_json::Value;

const TOKEN: &str = "card-t0ken-secret";

const SERVED: &str = r#"//! Greets.

input who: string

node greet(w: string = input.who) -> { who: string } {
  return = { who: w }
}

output greeting = greet

serve {
  resource "note://readme" {
    name = "readme"
    text = "hello"
  }
}
"#;

fn body(answer: &str) -> Value {
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[test]
fn the_card_says_what_the_handshake_says_and_keeps_the_token_secret() {
    let p = Project::new("serve-card");
    p.write("greet.pipe", SERVED);
    let (_server, url) = serve_http(&p.dir, &["greet.pipe"], TOKEN);
    let (_, discovered) = call_2026(
        &url,
        TOKEN,
        "server/discover",
        None,
        serde_json::json!({}),
        serde_json::json!({}),
        &[],
    );
    let info = &discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"];
    let versions = &discovered["result"]["supportedVersions"];
    assert!(info["name"].is_string(), "{discovered}");

    let accept = [("accept", "application/mcp-server-card+json")];
    let mut cards = Vec::new();
    for path in ["/mcp/server-card", "/.well-known/mcp/server-card.json"] {
        let (status, answer) = request_at(&url, path, "GET", &accept, "");
        assert_eq!(status, 200, "{path}: {answer}");
        assert_eq!(
            header(&answer, "content-type"),
            Some("application/mcp-server-card+json"),
            "{answer}"
        );
        assert_eq!(header(&answer, "access-control-allow-origin"), Some("*"));
        assert!(
            !answer.contains(TOKEN),
            "the token is never in a card: {answer}"
        );
        cards.push(body(&answer));
    }
    assert_eq!(cards[0], cards[1]);
    let card = &cards[0];
    assert_eq!(
        card["$schema"],
        "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json"
    );
    // `namespace/name`, the namespace from the host reached, the name the handshake's.
    let name = card["name"].as_str().expect("a name");
    let (namespace, server) = name.split_once('/').expect("one slash");
    assert_eq!(namespace, "127.0.0.1", "{card}");
    assert_eq!(
        server,
        info["name"].as_str().expect("a server name"),
        "{card}"
    );
    assert!(
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || "./_-".contains(c)),
        "{name}"
    );
    assert_eq!(card["version"], info["version"], "{card}");
    assert_eq!(card["title"], info["title"], "{card}");
    // The description counts what the listings hold (the pipeline and `resume_run`).
    let (_, tools) = call_2026(
        &url,
        TOKEN,
        "tools/list",
        None,
        serde_json::json!({}),
        serde_json::json!({}),
        &[],
    );
    let tools = tools["result"]["tools"].as_array().map_or(0, Vec::len);
    assert_eq!(tools, 2);
    assert_eq!(
        card["description"],
        format!("1 resource and {tools} tools over MCP"),
        "{card}"
    );
    let remote = &card["remotes"][0];
    assert_eq!(remote["type"], "streamable-http");
    assert_eq!(remote["url"], url.as_str());
    assert_eq!(&remote["supportedProtocolVersions"], versions, "{card}");
    assert_eq!(remote["headers"][0]["name"], "Authorization", "{card}");
    assert_eq!(remote["headers"][0]["isSecret"], true, "{card}");

    // Asked as plain JSON, it answers as JSON.
    let (_, plain) = request_at(&url, "/mcp/server-card", "GET", &[], "");
    assert_eq!(header(&plain, "content-type"), Some("application/json"));
    // Read-only; a preflight is answered.
    let (status, answer) = request_at(&url, "/mcp/server-card", "POST", &[], "{}");
    assert_eq!(status, 405, "{answer}");
    assert_eq!(header(&answer, "allow"), Some("GET, HEAD, OPTIONS"));
    let (status, _) = request_at(&url, "/mcp/server-card", "OPTIONS", &[], "");
    assert_eq!(status, 204);
    // A host the server does not answer for (DNS rebinding) gets nothing.
    let (status, answer) = request_at(
        &url,
        "/.well-known/mcp/server-card.json",
        "GET",
        &[("host", "evil.example")],
        "",
    );
    assert_eq!(status, 403, "{answer}");
    assert!(!answer.contains("remotes"), "{answer}");
    // Other paths stay closed.
    let (status, _) = request_at(&url, "/.well-known/mcp/other.json", "GET", &[], "");
    assert_eq!(status, 404);
}
