//! Replaying a recorded thread ([`Runner::replaying`](crate::Runner::replaying)): every
//! node that calls something (a model, a tool, a command, a host function, a resource
//! read) takes the result the recorded thread holds for it, item by item, instead of
//! running; the nodes the scheduler computes (`return` bodies, `when`, routing, gate
//! answers given again) are computed under the plan being replayed. What differs from
//! the recorded thread is then the pipeline's own doing. Nothing is called.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::error::RuntimeError;
use pipec_diagnostic as codes;
use pipec_plan::Plan;
use pipec_store::{ItemRec, ItemState, NodeState, ResourceRef, StoredError, ThreadState};

/// What a recorded thread holds for the nodes it ran.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    nodes: BTreeMap<String, RecordedNode>,
    /// Nodes that take their recorded value though the scheduler could compute them
    /// (those a `--from` node does not reach).
    kept: BTreeSet<String>,
}

#[derive(Clone, Debug)]
enum RecordedNode {
    Done {
        value: Value,
        manifest: Vec<ResourceRef>,
    },
    Skipped,
    Failed(StoredError),
    /// An `each` node: its items, by index.
    Items(BTreeMap<u32, ItemRec>),
}

/// What a replayed node or item does.
pub(crate) enum Replayed {
    Value {
        value: Value,
        manifest: Vec<ResourceRef>,
    },
    Skipped,
    Failed(StoredError),
}

impl Recorded {
    /// What `state` recorded, to replay under `plan`; with `from`, the nodes it does not
    /// reach take their recorded values even when they could be computed again.
    pub fn of(state: &ThreadState, plan: &Plan, from: Option<&str>) -> Recorded {
        let kept = match from {
            Some(from) => {
                let reached = crate::plan_change::dependents(plan, &[from.to_string()]);
                plan.nodes
                    .iter()
                    .filter(|n| !reached.contains(&n.name))
                    .map(|n| n.name.clone())
                    .collect()
            }
            None => BTreeSet::new(),
        };
        let mut nodes = BTreeMap::new();
        for (name, rec) in &state.nodes {
            let node = match (rec.state, rec.items) {
                (NodeState::Done, Some(_)) | (NodeState::Failed, Some(_)) => RecordedNode::Items(
                    state
                        .items
                        .iter()
                        .filter(|((n, g, _), _)| n == name && *g == rec.generation)
                        .map(|((_, _, i), r)| (*i, r.clone()))
                        .collect(),
                ),
                (NodeState::Done, None) => match state.value_of(name) {
                    Some(value) => RecordedNode::Done {
                        value,
                        manifest: rec.manifest.clone(),
                    },
                    None => continue,
                },
                (NodeState::Skipped, _) => RecordedNode::Skipped,
                (NodeState::Failed, None) => match &rec.error {
                    Some(e) => RecordedNode::Failed(e.clone()),
                    None => continue,
                },
                (NodeState::Running, _) => continue,
            };
            nodes.insert(name.clone(), node);
        }
        Recorded { nodes, kept }
    }

    /// Whether `node` takes its recorded value though it could be computed.
    pub(crate) fn keeps(&self, node: &str) -> bool {
        self.kept.contains(node)
    }

    /// The recorded outcome of `node` (of its item `item`, for an `each` node's unit).
    pub(crate) fn outcome(&self, node: &str, item: Option<u32>) -> Replayed {
        let missing = |what: String| {
            Replayed::Failed(
                RuntimeError::new(
                    &codes::NOTHING_RECORDED,
                    format!(
                        "the replayed thread holds no result for {what}, and a replay calls nothing"
                    ),
                )
                .stored(Some(node)),
            )
        };
        match (self.nodes.get(node), item) {
            (None, _) => missing(format!("`{node}`")),
            (Some(RecordedNode::Done { value, manifest }), None) => Replayed::Value {
                value: value.clone(),
                manifest: manifest.clone(),
            },
            (Some(RecordedNode::Skipped), _) => Replayed::Skipped,
            (Some(RecordedNode::Failed(e)), _) => Replayed::Failed(e.clone()),
            (Some(RecordedNode::Items(items)), Some(i)) => match items.get(&i) {
                Some(ItemRec {
                    state: ItemState::Done,
                    value: Some(value),
                    manifest,
                    ..
                }) => Replayed::Value {
                    value: value.clone(),
                    manifest: manifest.clone(),
                },
                Some(ItemRec {
                    state: ItemState::Skipped,
                    ..
                }) => Replayed::Skipped,
                Some(ItemRec { error: Some(e), .. }) => Replayed::Failed(e.clone()),
                _ => missing(format!("item {i} of `{node}`")),
            },
            (Some(RecordedNode::Items(_)), None) => missing(format!("`{node}` as one value")),
            (Some(RecordedNode::Done { .. }), Some(i)) => {
                missing(format!("item {i} of `{node}`, which ran as one value"))
            }
        }
    }

    /// The recorded value of a node the scheduler would compute (`kept`).
    pub(crate) fn value(&self, node: &str) -> Option<Value> {
        match self.nodes.get(node)? {
            RecordedNode::Done { value, .. } => Some(value.clone()),
            RecordedNode::Items(items) => Some(Value::Array(
                items
                    .values()
                    .filter(|r| r.state == ItemState::Done)
                    .filter_map(|r| r.value.clone())
                    .collect(),
            )),
            _ => None,
        }
    }
}
