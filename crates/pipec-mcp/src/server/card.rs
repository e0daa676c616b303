//! The server card: what an HTTP server is and where to connect to it, read before
//! connecting (MCP's Server Card extension, SEP-2127, schema `v2`). It is built on each
//! request from what the server says in its handshake, so the two never disagree: the
//! `serverInfo` name and version, the title, the revisions `server/discover` lists, the
//! endpoint the request reached, and whether a bearer token is needed. Its description
//! counts what is served. It holds no secret: the token is named as a required secret
//! header, never given.

use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

use super::provider::Provider;

/// The schema every card names.
pub(super) const SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json";

/// The media type of a card.
pub(super) const MEDIA_TYPE: &str = "application/mcp-server-card+json";

/// Where a card is served: the location the extension reserves (the endpoint's URL and
/// `/server-card`) and the well-known one discovery tools look at.
pub(super) const PATHS: [&str; 2] = ["/mcp/server-card", "/.well-known/mcp/server-card.json"];

/// The card of `provider` reached at `authority` (the request's `Host`) over `scheme`;
/// `token` says whether calls need `Authorization: Bearer`.
pub(super) fn card(provider: &dyn Provider, scheme: &str, authority: &str, token: bool) -> Value {
    let id = provider.identity();
    let versions: Vec<&str> = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(ProtocolVersion::as_str)
        .collect();
    let mut remote = json!({
        "type": "streamable-http",
        "url": format!("{scheme}://{authority}/mcp"),
        "supportedProtocolVersions": versions,
    });
    if token {
        remote["headers"] = json!([{
            "name": "Authorization",
            "description": "`Bearer TOKEN`, the token pipec serve printed when it started (or PIPEC_SERVE_TOKEN)",
            "isRequired": true,
            "isSecret": true,
        }]);
    }
    let mut card = json!({
        "$schema": SCHEMA,
        "name": format!("{}/{}", namespace(authority), label(&id.name)),
        "version": clip(&id.version, 255),
        "description": description(provider),
        "remotes": [remote],
    });
    if let Some(title) = id.title.filter(|t| !t.trim().is_empty()) {
        card["title"] = json!(clip(&title, 100));
    }
    card
}

/// What is served, counted: "3 resources, 1 resource template, 2 tools and 1 prompt
/// over MCP".
fn description(provider: &dyn Provider) -> String {
    let counted = [
        (provider.resources().len(), "resource", "resources"),
        (
            provider.templates().len(),
            "resource template",
            "resource templates",
        ),
        (provider.tools().len(), "tool", "tools"),
        (provider.prompts().len(), "prompt", "prompts"),
    ];
    let parts: Vec<String> = counted
        .iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| format!("{n} {}", if *n == 1 { one } else { many }))
        .collect();
    let listed = match parts.as_slice() {
        [] => return "An MCP server made with pipec, serving nothing yet".into(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    clip(&format!("{listed} over MCP"), 100)
}

/// The card name's namespace from the host a client reached: a DNS name reversed
/// (`mcp.example.com` is `com.example.mcp`), an address as it is (an IPv6 address with
/// `-` for `:`), in the characters a name may hold.
fn namespace(authority: &str) -> String {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6).replace(':', "-"),
        None => authority.split(':').next().unwrap_or(authority).to_string(),
    };
    let is_address = host.parse::<std::net::Ipv4Addr>().is_ok() || authority.starts_with('[');
    let host = if is_address {
        host
    } else {
        host.split('.').rev().collect::<Vec<_>>().join(".")
    };
    only(&host, ".-", "local")
}

/// A server name in the characters a card's name may hold after its `/`.
fn label(name: &str) -> String {
    only(&clip(name, 100), "._-", "pipec")
}

/// `text` with each character other than ASCII letters, digits and `also` as `-`;
/// `fallback` when it is empty.
fn only(text: &str, also: &str, fallback: &str) -> String {
    if text.is_empty() {
        return fallback.into();
    }
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || also.contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// At most `max` characters of `text`.
fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_the_host_reversed_or_the_address() {
        assert_eq!(namespace("mcp.example.com:8080"), "com.example.mcp");
        assert_eq!(namespace("localhost"), "localhost");
        assert_eq!(namespace("127.0.0.1:4000"), "127.0.0.1");
        assert_eq!(namespace("[::1]:4000"), "--1");
        assert_eq!(namespace("bad_host"), "bad-host");
        assert_eq!(label("pipec serve"), "pipec-serve");
        assert_eq!(label(""), "pipec");
    }
}
