//! The journal of calls: the key of each try, the idempotency key handed to the callee,
//! the `started` row written before a non-idempotent call and the row that ends it.
//!
//! A call is identified by (thread, node, generation, item, call); its tries are the
//! *steps* of that (node, generation, item): one counter, never reused within a
//! generation, so no two tries share a journal row. The idempotency key
//! (`PIPEC_CALL_KEY` for `exec`, `_meta` for MCP tools) is the same for every try of a
//! call: a command can tell a retry from a new call. It changes with the thread, the
//! node's name, its generation (`--rerun-from` computes the node again, as a new call)
//! and the item. Executors whose steps are distinct calls (an agent's model turns) key
//! by step as well.

use std::collections::BTreeMap;

use serde_json::Value;

use super::secrets::placeholder;
use pipec_plan::{Node, Source};
use pipec_store::{CallKey, CallRec, CallState, ids};

/// The journal rows of one node's item in one generation, in key order: a range of the
/// map (its keys sort by node, generation, item, step, call).
pub(crate) fn item_calls<'a>(
    calls: &'a BTreeMap<CallKey, CallRec>,
    node: &str,
    generation: u32,
    item: u32,
) -> impl DoubleEndedIterator<Item = (&'a CallKey, &'a CallRec)> + 'a {
    let from = CallKey {
        node: node.to_string(),
        generation,
        item,
        seq: 0,
        call: 0,
    };
    let to = CallKey {
        seq: u32::MAX,
        call: u32::MAX,
        ..from.clone()
    };
    calls.range(from..=to)
}

/// The journal rows of one node in one generation (all its items), in key order.
pub(crate) fn node_calls<'a>(
    calls: &'a BTreeMap<CallKey, CallRec>,
    node: &str,
    generation: u32,
) -> impl Iterator<Item = (&'a CallKey, &'a CallRec)> + 'a {
    let from = key(node, generation, 0, 0);
    let to = CallKey {
        item: u32::MAX,
        seq: u32::MAX,
        call: u32::MAX,
        ..from.clone()
    };
    calls.range(from..=to)
}

/// The next unused step of a node's item in its generation.
pub(crate) fn next_step(
    calls: &BTreeMap<CallKey, CallRec>,
    node: &str,
    generation: u32,
    item: u32,
) -> u32 {
    item_calls(calls, node, generation, item)
        .next_back()
        .map_or(0, |(k, _)| k.seq + 1)
}

/// The journal key of one try.
pub(crate) fn key(node: &str, generation: u32, item: u32, step: u32) -> CallKey {
    CallKey {
        node: node.to_string(),
        generation,
        item,
        seq: step,
        call: 0,
    }
}

/// A hash of a call's arguments (secrets as placeholders), to notice a retry that would
/// send something else than the call it retries.
pub(crate) fn args_hash(args: &Value) -> String {
    pipec_base::digest::sha256_hex(serde_json::to_vec(args).unwrap_or_default(), 16)
}

/// The idempotency key of a call: 26 hex digits of a SHA-256 over its identity. A key
/// already recorded for the same call (an earlier try) wins, so a retry carries the key
/// its first try carried.
pub(crate) fn idempotency_key(
    calls: &BTreeMap<CallKey, CallRec>,
    thread: &str,
    key: &CallKey,
    per_step: bool,
) -> String {
    let recorded = item_calls(calls, &key.node, key.generation, key.item)
        .find(|(k, _)| k.call == key.call && (!per_step || k.seq == key.seq));
    if let Some((_, rec)) = recorded {
        return rec.idem_key.clone();
    }
    let identity = if per_step {
        format!(
            "{thread}/{}/{}/{}/{}/{}",
            key.node, key.generation, key.item, key.seq, key.call
        )
    } else {
        format!(
            "{thread}/{}/{}/{}/{}",
            key.node, key.generation, key.item, key.call
        )
    };
    pipec_base::digest::sha256_hex(identity, 13)
}

/// The parameters as stored: secrets replaced by placeholders.
pub(crate) fn redacted_params(node: &Node, params: &BTreeMap<String, Value>) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in params {
        let secret = node
            .params
            .iter()
            .find(|p| &p.name == k)
            .and_then(|p| secret_name(&p.source));
        out.insert(
            k.clone(),
            match secret {
                Some(name) => placeholder(&name),
                None => v.clone(),
            },
        );
    }
    Value::Object(out)
}

fn secret_name(src: &Source) -> Option<String> {
    match src {
        Source::Secret { var } => Some(var.clone()),
        Source::Join { sides } => sides.iter().find_map(secret_name),
        _ => None,
    }
}

/// The row that ends a try: its state and error. The result is the node's (or item's)
/// value, stored in that row only.
pub(crate) fn finished_row(started: &CallRec, state: CallState, error: Option<String>) -> CallRec {
    CallRec {
        state,
        error,
        finished_ms: ids::now_ms(),
        ..started.clone()
    }
}
