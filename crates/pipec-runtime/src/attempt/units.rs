//! The units a started node runs: its one unit, or its items, each built only when it
//! starts. An `each` over 20,000 items holds their list and the journal rows of the
//! node, not 20,000 prepared units with their parameters: what an item needs (its
//! parameters, its step, its idempotency key, its journal rows) is made from them as a
//! permit frees up.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::bind::{self, Params};
use crate::eval::{Env, Slot};
use crate::executor::Executor;
use crate::executor::tries::Unit;
use crate::journal;
use pipec_plan::{Node, Source};
use pipec_store::{CallDecision, CallKey, CallRec, NodeRec, ResourceRef, StoredError};

/// Who a unit is: its node, the node's executor and generation, and the thread.
pub(super) struct Whose<'a> {
    pub node: &'a Arc<Node>,
    pub executor: &'static dyn Executor,
    pub generation: u32,
    pub thread: &'a str,
}

/// One unit of `whose`, item `item` (`is_item` for an item of an `each`), with `params`
/// bound; `calls` holds at least the journal rows of that item (more is fine), `old` the
/// node's row when a plain node runs again (its tries and a retry's wait carry over).
pub(super) fn unit(
    whose: &Whose<'_>,
    calls: &BTreeMap<CallKey, CallRec>,
    item: u32,
    is_item: bool,
    params: Params,
    old: Option<&NodeRec>,
) -> Unit {
    let node = whose.node;
    let generation = whose.generation;
    let step = journal::next_step(calls, &node.name, generation, item);
    let key = journal::key(&node.name, generation, item, step);
    let mine = || journal::item_calls(calls, &node.name, generation, item);
    let old = old.filter(|_| !is_item);
    Unit {
        node: node.clone(),
        executor: whose.executor,
        item,
        is_item,
        params,
        generation,
        tries: old.map_or(0, |o| o.tries),
        step,
        idem_key: journal::idempotency_key(
            calls,
            whose.thread,
            &key,
            whose.executor.key_per_step(),
        ),
        // The call a person asked to retry, the last one of this item.
        retry_of: mine()
            .rfind(|(_, c)| c.decision == Some(CallDecision::RetryRequested))
            .map(|(k, c)| (k.clone(), c.args_hash.clone())),
        row: None,
        started: None,
        permit: None,
        wait_until_ms: old.and_then(|o| o.next_retry_ms),
        hydrated: None,
        calls: std::sync::Mutex::new(mine().map(|(k, r)| ((k.seq, k.call), r.clone())).collect()),
    }
}

/// The items of a started `each` node, made into units one at a time.
pub(crate) struct Items {
    node: Arc<Node>,
    executor: &'static dyn Executor,
    generation: u32,
    thread: String,
    /// The parameter the items bind, and the node's other parameters.
    name: String,
    base: Params,
    values: std::iter::Enumerate<std::vec::IntoIter<Value>>,
    total: u32,
    /// The journal rows of the node in this generation.
    calls: BTreeMap<CallKey, CallRec>,
    /// The manifests of the producers the node's link parameters read.
    links: Links,
}

impl Items {
    /// The items of `node`; `calls` are the thread's journal rows (those of the node in
    /// `generation` are kept) and `env` the scope the node was bound in (the manifests
    /// its link parameters read are kept).
    pub(super) fn new(
        whose: &Whose<'_>,
        calls: &BTreeMap<CallKey, CallRec>,
        env: &dyn Env,
        name: String,
        base: Params,
        values: Vec<Value>,
    ) -> Items {
        let node = whose.node;
        let links = Links(
            node.params
                .iter()
                .filter_map(|p| match &p.source {
                    Source::Link { producer, .. } => Some(producer.clone()),
                    _ => None,
                })
                .filter_map(|producer| {
                    let manifest = env.manifest(&producer)?;
                    Some((producer, manifest))
                })
                .collect(),
        );
        Items {
            node: node.clone(),
            executor: whose.executor,
            generation: whose.generation,
            thread: whose.thread.to_string(),
            name,
            base,
            total: values.len() as u32,
            values: values.into_iter().enumerate(),
            calls: journal::node_calls(calls, &node.name, whose.generation)
                .map(|(k, r)| (k.clone(), r.clone()))
                .collect(),
            links,
        }
    }

    pub(crate) fn total(&self) -> u32 {
        self.total
    }

    pub(crate) fn generation(&self) -> u32 {
        self.generation
    }

    /// The next item's index and value, not yet bound.
    pub(crate) fn next_item(&mut self) -> Option<(u32, Value)> {
        self.values.next().map(|(k, v)| (k as u32, v))
    }

    /// The unit of item `item` of value `value`: its parameters bound (its resource and
    /// link parameters resolved), its journal rows and keys.
    pub(crate) fn unit(&self, item: u32, value: Value) -> Result<Unit, StoredError> {
        let params = bind::item_params(&self.node, &self.links, &self.base, &self.name, value)?;
        let whose = Whose {
            node: &self.node,
            executor: self.executor,
            generation: self.generation,
            thread: &self.thread,
        };
        Ok(unit(&whose, &self.calls, item, true, params, None))
    }
}

/// The manifests an item's link parameters read, kept from the scope the node started
/// in (they cannot change: their producers are done).
struct Links(BTreeMap<String, Vec<ResourceRef>>);

impl Env for Links {
    fn input(&self, _: &str) -> Option<Value> {
        None
    }
    fn node(&self, _: &str) -> Option<Slot> {
        None
    }
    fn env_var(&self, _: &str) -> Option<String> {
        None
    }
    fn secret(&self, _: &str) -> Option<String> {
        None
    }
    fn manifest(&self, node: &str) -> Option<Vec<ResourceRef>> {
        self.0.get(node).cloned()
    }
}
