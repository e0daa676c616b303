//! Lifting `resource_link`s out of a tool result into the producing node's manifest: each
//! link becomes a [`ResourceRef`] with its kind (the one among the tool's link kinds whose
//! template matches the URI, with the variables it captured; failing that, the kind the
//! link's name or description names), the server it came from, and the call that produced
//! it, so a dead link can be re-derived. Embedded resources are lifted the same way
//! (their kind by template), with their content, so that reading one makes no round
//! trip; images and audio are lifted with their bytes and MIME type unless the value
//! took them (`-> bytes`), so nothing a result held in place is dropped. A `call` node's
//! manifest keeps, of plain links, only those of the kinds some node reads of it
//! (`Plan::links_read`): no node can read the others, and the server still has what they
//! point to. The manifest lives with the node's row and is never printed as output.

use std::collections::BTreeMap;

use serde_json::Value;

use pipec_mcp::{Body, Content, ToolResult};
use pipec_plan::{Plan, Tool};
use pipec_store::{Embedded, ProducingCall, RefOrigin, ResourceRef, ids};

/// A link whose URI is not a URI, or a `resource_link` block that does not parse (its
/// `uri` is then empty).
#[derive(Debug, PartialEq)]
pub(crate) struct MalformedLink {
    pub uri: String,
    pub why: String,
}

impl std::fmt::Display for MalformedLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.uri.is_empty() {
            write!(f, "a `resource_link` that pipec cannot read: {}", self.why)
        } else {
            write!(
                f,
                "a `resource_link` whose uri `{}` is not a URI: {}",
                self.uri, self.why
            )
        }
    }
}

/// The kind and captures of a URI among the tool's link kinds: the kind whose template
/// matches it, else the kind one of `names` (a link's name, description, title) names.
pub(crate) fn kind_of(
    plan: &Plan,
    tool: &Tool,
    uri: &str,
    names: &[&String],
) -> (Option<String>, BTreeMap<String, String>) {
    for kind in &tool.links {
        let Some(k) = plan.link_kinds.iter().find(|k| &k.kind == kind) else {
            continue;
        };
        if let Ok(t) = pipec_base::uri::parse(&k.template)
            && let Some(captures) = t.match_uri(uri)
        {
            return (Some(kind.clone()), captures.into_iter().collect());
        }
    }
    for n in names {
        if tool.links.iter().any(|k| k == *n) {
            return (Some((*n).clone()), BTreeMap::new());
        }
    }
    (None, BTreeMap::new())
}

/// Whether a string is a URI pipec can read: a scheme, then anything but whitespace.
fn check_uri(uri: &str) -> Result<(), String> {
    if uri.is_empty() {
        return Err("it is empty".into());
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains whitespace or control characters".into());
    }
    let Some((scheme, _)) = uri.split_once(':') else {
        return Err("it has no scheme (`mcp:`, `https:`, `file:` ...)".into());
    };
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) {
        return Err(format!("`{scheme}` is not a URI scheme"));
    }
    Ok(())
}

/// The links of a result as references, and what it carried in place (embedded
/// resources, images, audio), in the order the result lists them. `call` is the journal
/// key of the call; `args` its arguments as stored (secrets as placeholders).
pub(crate) fn lift(
    plan: &Plan,
    tool: &Tool,
    result: &ToolResult,
    args: &Value,
    call: &str,
) -> Result<Vec<ResourceRef>, MalformedLink> {
    let took_bytes =
        super::results::takes_bytes(plan, &tool.output_schema) != super::results::TakesBytes::No;
    let mut out = Vec::new();
    for c in &result.content {
        if let Content::Malformed {
            kind: Some(kind),
            problem,
        } = c
            && kind == "resource_link"
        {
            return Err(MalformedLink {
                uri: String::new(),
                why: problem.clone(),
            });
        }
        let producing_call = || {
            Some(ProducingCall {
                tool: tool.name.clone(),
                args: args.clone(),
                read_only: tool.read_only,
                idempotent: tool.idempotent || tool.read_only,
                call: call.to_string(),
            })
        };
        match c {
            Content::Link(link) => {
                check_uri(&link.uri).map_err(|why| MalformedLink {
                    uri: link.uri.clone(),
                    why,
                })?;
                let names = [
                    Some(&link.name),
                    link.description.as_ref(),
                    link.title.as_ref(),
                ];
                let names: Vec<&String> = names.into_iter().flatten().collect();
                let (kind, captures) = kind_of(plan, tool, &link.uri, &names);
                out.push(ResourceRef {
                    uri: link.uri.clone(),
                    server: tool.server.clone(),
                    kind,
                    captures,
                    name: link.name.clone(),
                    mime: link.mime.clone(),
                    size: link.size,
                    producing_call: producing_call(),
                    origin: None,
                    produced_ms: ids::now_ms(),
                    max_bytes: None,
                    embedded: None,
                });
            }
            Content::Resource(r) => {
                check_uri(&r.uri).map_err(|why| MalformedLink {
                    uri: r.uri.clone(),
                    why: format!("(an embedded resource) {why}"),
                })?;
                let (kind, captures) = kind_of(plan, tool, &r.uri, &[]);
                let (text, blob) = match &r.body {
                    Body::Text(t) => (Some(t.clone()), None),
                    Body::Blob(b) => (None, Some(pipec_base::base64::encode(b))),
                };
                // The value took a blob (`-> bytes`): the reference stays, its bytes are
                // not stored twice, and a read of it goes to the server.
                let embedded = (!(took_bytes && blob.is_some())).then(|| Embedded {
                    block: "resource".into(),
                    text,
                    blob,
                });
                out.push(ResourceRef {
                    uri: r.uri.clone(),
                    server: tool.server.clone(),
                    kind,
                    captures,
                    name: String::new(),
                    mime: r.mime.clone(),
                    size: Some(r.len() as u64),
                    producing_call: producing_call(),
                    origin: None,
                    produced_ms: ids::now_ms(),
                    max_bytes: None,
                    embedded,
                });
            }
            Content::Media { kind, mime, data } if !took_bytes => out.push(ResourceRef {
                uri: String::new(),
                server: tool.server.clone(),
                kind: None,
                captures: BTreeMap::new(),
                name: String::new(),
                mime: Some(mime.clone()),
                size: Some(data.len() as u64),
                producing_call: producing_call(),
                origin: None,
                produced_ms: ids::now_ms(),
                max_bytes: None,
                embedded: Some(Embedded {
                    block: kind.clone(),
                    text: None,
                    blob: Some(pipec_base::base64::encode(data)),
                }),
            }),
            _ => {}
        }
    }
    Ok(out)
}

/// Appends references to a manifest, giving each its place.
pub(crate) fn append(
    manifest: &mut Vec<ResourceRef>,
    refs: Vec<ResourceRef>,
    node: &str,
    generation: u32,
    item: u32,
) {
    for mut r in refs {
        r.origin = Some(RefOrigin {
            node: node.to_string(),
            generation,
            item,
            index: manifest.len() as u32,
        });
        manifest.push(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_need_a_scheme_and_no_whitespace() {
        assert!(check_uri("mcp://crm/deals/D1/activity").is_ok());
        assert!(check_uri("file:///a/b").is_ok());
        assert!(check_uri("not a uri").is_err());
        assert!(check_uri("").is_err());
        assert!(check_uri("/just/a/path").is_err());
        assert!(check_uri("1abc:x").is_err());
    }
}
