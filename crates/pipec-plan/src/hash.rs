//! Content hashes: of the whole plan, and of each node's closure.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Body, Plan, Source};
use pipec_base::digest::sha256_tagged;
use pipec_schema::refs::referenced_defs;

/// The hash of a plan's content: everything but `hash` and `compiler`. serde_json
/// writes struct fields in declaration order and object keys sorted, so the bytes
/// depend only on the content.
pub fn hash_plan(plan: &Plan) -> String {
    let mut copy = plan.clone();
    copy.hash = String::new();
    copy.compiler = String::new();
    sha256_tagged(serde_json::to_vec(&copy).unwrap_or_default())
}

/// A node's fingerprint: the node itself (without its fingerprint) and everything in the
/// plan that can change what it computes: its model, tools and their servers, link kinds,
/// and every type definition any of them touches.
pub fn node_fingerprint(plan: &Plan, index: usize) -> String {
    let Some(node) = plan.nodes.get(index) else {
        return String::new();
    };
    let mut node = node.clone();
    node.fingerprint = String::new();
    let mut tools: BTreeSet<&str> = BTreeSet::new();
    let mut kinds: BTreeSet<&str> = BTreeSet::new();
    let mut model = None;
    match &node.body {
        Body::Call { tool, .. } => {
            tools.insert(tool);
        }
        Body::Model {
            model: m,
            tools: ts,
            ..
        } => {
            model = plan.models.iter().find(|x| &x.name == m);
            tools.extend(ts.iter().map(String::as_str));
        }
        _ => {}
    }
    for p in &node.params {
        source_kinds(&p.source, &mut kinds);
    }
    let tool_defs: Vec<&super::Tool> = plan
        .tools
        .iter()
        .filter(|t| tools.contains(t.name.as_str()))
        .collect();
    for t in &tool_defs {
        kinds.extend(t.links.iter().map(String::as_str));
    }
    let servers: Vec<&super::Server> = plan
        .servers
        .iter()
        .filter(|s| tool_defs.iter().any(|t| t.server == s.name))
        .collect();
    let link_defs: Vec<&super::LinkKind> = plan
        .link_kinds
        .iter()
        .filter(|k| kinds.contains(k.kind.as_str()))
        .collect();
    let closure = json!({
        "node": node,
        "model": model,
        "tools": tool_defs,
        "servers": servers,
        "link_kinds": link_defs,
    });
    let mut names = BTreeSet::new();
    referenced_defs(&closure, &plan.defs, &mut names);
    let defs: Vec<(&String, &Value)> = plan
        .defs
        .iter()
        .filter(|(k, _)| names.contains(*k))
        .collect();
    let full = json!({ "closure": closure, "defs": defs });
    sha256_tagged(serde_json::to_vec(&full).unwrap_or_default())
}

fn source_kinds<'a>(src: &'a Source, out: &mut BTreeSet<&'a str>) {
    match src {
        Source::Link { link_kind, .. } => {
            out.insert(link_kind);
        }
        Source::Join { sides } | Source::List { items: sides } => {
            sides.iter().for_each(|s| source_kinds(s, out))
        }
        Source::Record { fields } => fields.values().for_each(|s| source_kinds(s, out)),
        Source::Each { list, .. } => source_kinds(list, out),
        _ => {}
    }
}
