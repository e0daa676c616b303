//! `each` nodes that run as tasks: items run concurrently within the node's
//! `concurrency`, each bound when it starts ([`super::units`]) and committed as it finishes (the done items of work that runs again
//! for free with the attempt's next commit, [`crate::deferred`]); items already stored
//! are not run again.
//! Items are started one at a time as room frees up, so once an item fails the node
//! (or its outcome is unknown), no further item starts: those running finish and are
//! recorded, nothing queued behind them is paid for. With `drop_failed_items`, a failed
//! item is recorded as dropped, with its reason, and the others go on.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinSet;

use super::units::Items;
use crate::bind;
use crate::context::AttemptContext;
use crate::error::RuntimeError;
use crate::executor::tries::{self, Unit, UnitEnd};
use crate::value::{NodeValue, text_of};
use pipec_diagnostic as codes;
use pipec_plan::Node;
use pipec_store::{Event, ItemRec, ItemState, ResourceRef, StoredError, Write};

/// How an item ended.
enum ItemEnd {
    /// Done (or skipped by its `when`): its value's JSON text, and its manifest.
    Done(Option<Box<str>>, Vec<ResourceRef>),
    /// Its error, and whether its outcome is unknown.
    Failed(StoredError, bool),
    /// It never started: the node failed while it waited for a permit.
    NotStarted,
    /// Its calls wait at their approval gates.
    Waiting(Vec<(String, pipec_store::GateRec)>),
}

/// Runs the items of an `each` node; `done` holds the item rows already stored.
pub(super) async fn run_each(
    shared: Arc<AttemptContext>,
    node: Arc<Node>,
    mut items: Items,
    done: BTreeMap<u32, ItemRec>,
) -> UnitEnd {
    // Items in flight: the node's `concurrency`, and never more than the run may run at
    // once, so no item waits for a permit with its `started` row written.
    let limit = node
        .concurrency
        .map_or(usize::MAX, |c| c.max(1) as usize)
        .min(shared.concurrency.max(1));
    let total = items.total();
    let generation = items.generation();
    // Items an earlier attempt stored stay as they are, unless they failed.
    let kept: BTreeSet<u32> = done
        .iter()
        .filter(|(_, r)| r.state != ItemState::Failed)
        .map(|(k, _)| *k)
        .collect();
    // The values (and manifests) of the done items, stored before or now: all the node
    // keeps of its items while they run. A value is kept as its JSON text, and becomes
    // the node's list as that (see `crate::value`).
    let mut results = Results::new(total);
    for (item, r) in done {
        if r.state == ItemState::Done {
            results.put(item, r.value.as_ref().map(text_of), r.manifest);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut set: JoinSet<(u32, ItemEnd)> = JoinSet::new();
    let mut failure: Option<(StoredError, bool)> = None;
    // The item whose failure fails the node, and how many failed: each was reported
    // as it failed, so the node's own report only counts them.
    let mut first_failed_item: Option<u32> = None;
    let mut failed_items = 0u32;
    let mut waiting = Vec::new();
    loop {
        // Start items while there is room and nothing failed the node.
        while failure.is_none() && set.len() < limit {
            let Some((item, value)) = items.next_item() else {
                break;
            };
            if kept.contains(&item) {
                continue;
            }
            let unit = match items.unit(item, value) {
                Ok(unit) => unit,
                Err(e) => {
                    failure = Some((e, false));
                    break;
                }
            };
            match bind::when_holds(&node, &unit.params) {
                Ok(true) => {
                    set.spawn(run_item(shared.clone(), node.clone(), unit, stop.clone()));
                }
                Ok(false) => {
                    let rec = ItemRec {
                        state: ItemState::Skipped,
                        value: None,
                        error: None,
                        manifest: Vec::new(),
                    };
                    let write = Write::Item(node.name.clone(), generation, unit.item, rec);
                    if let Err(e) = shared.commit(vec![write]).await {
                        failure = Some((e.stored(Some(&node.name)), false));
                        break;
                    }
                }
                Err(e) => failure = Some((e, false)),
            }
        }
        if failure.is_some() {
            stop.store(true, Ordering::SeqCst);
        }
        let Some(joined) = set.join_next().await else {
            break;
        };
        match joined {
            Ok((item, ItemEnd::Done(value, manifest))) => results.put(item, value, manifest),
            Ok((_, ItemEnd::NotStarted)) => {}
            Ok((_, ItemEnd::Waiting(gates))) => waiting.extend(gates),
            Ok((item, ItemEnd::Failed(error, unknown))) => {
                if node.drop_failed_items && !unknown {
                    let rec = ItemRec {
                        state: ItemState::Dropped,
                        value: None,
                        error: Some(error.clone()),
                        manifest: Vec::new(),
                    };
                    let writes = vec![
                        Write::Item(node.name.clone(), generation, item, rec),
                        Write::Event(Event::ItemDropped {
                            node: node.name.clone(),
                            item,
                            code: error.code.clone(),
                            message: error.message.clone(),
                        }),
                    ];
                    if let Err(e) = shared.commit(writes).await {
                        failure.get_or_insert((e.stored(Some(&node.name)), false));
                    }
                } else {
                    // The first failure stands; later ones are recorded in their rows.
                    failed_items += 1;
                    if failure.is_none() {
                        first_failed_item = Some(item);
                    }
                    failure.get_or_insert((error, unknown));
                }
            }
            Err(e) => {
                failure.get_or_insert((
                    RuntimeError::new(
                        &codes::INTERNAL_ERROR,
                        format!("an item of `{}` stopped unexpectedly: {e}", node.name),
                    )
                    .stored(Some(&node.name)),
                    false,
                ));
            }
        }
        if failure.is_some() {
            stop.store(true, Ordering::SeqCst);
        }
    }
    if let Some((mut error, unknown)) = failure {
        if let Some(item) = first_failed_item {
            error.message = items_failed_message(item, failed_items, &error.message);
            if !unknown {
                return UnitEnd::ItemsFailed {
                    error,
                    failed: failed_items,
                    total,
                };
            }
        }
        return if unknown {
            UnitEnd::Unknown {
                error,
                writes: Vec::new(),
                row: None,
            }
        } else {
            UnitEnd::Failed {
                error,
                writes: Vec::new(),
                row: None,
            }
        };
    }
    if !waiting.is_empty() {
        // The items that finished are in their rows; the node goes on from them once
        // the gates are answered.
        return UnitEnd::Waiting {
            gates: waiting,
            writes: Vec::new(),
            row: None,
        };
    }
    // The node's value is its done items' values in item order (moved, not copied).
    let (value, manifest) = results.into_list();
    UnitEnd::Value {
        value,
        writes: Vec::new(),
        row: None,
        manifest,
    }
}

/// The done items' values, as JSON text, by item, and their manifests.
struct Results {
    values: Vec<Option<Box<str>>>,
    /// Only the items whose calls returned links.
    manifests: BTreeMap<u32, Vec<ResourceRef>>,
}

impl Results {
    fn new(total: u32) -> Results {
        Results {
            values: vec![None; total as usize],
            manifests: BTreeMap::new(),
        }
    }

    /// An item past the node's count (a stored row no run of this list wrote) is not
    /// one of its items and is left out.
    fn put(&mut self, item: u32, value: Option<Box<str>>, manifest: Vec<ResourceRef>) {
        let Some(slot) = self.values.get_mut(item as usize) else {
            return;
        };
        *slot = value;
        if manifest.is_empty() {
            self.manifests.remove(&item);
        } else {
            self.manifests.insert(item, manifest);
        }
    }

    /// The node's list, in item order, and its manifest (its items', in item order).
    fn into_list(self) -> (NodeValue, Vec<ResourceRef>) {
        let values = self.values.into_iter().flatten().collect();
        let manifest = self.manifests.into_values().flatten().collect();
        (NodeValue::List(values), manifest)
    }
}

/// The node's error when items failed: the first failure's message, naming its item
/// and how many others failed with it (their errors are in their rows).
fn items_failed_message(item: u32, failed: u32, message: &str) -> String {
    match failed {
        0 | 1 => format!("item {item}: {message}"),
        2 => format!("item {item} (1 other item failed too): {message}"),
        n => format!("item {item} ({} other items failed too): {message}", n - 1),
    }
}

/// One item: once it holds a permit (and the node has not failed meanwhile), its tries,
/// then its row, committed.
async fn run_item(
    shared: Arc<AttemptContext>,
    node: Arc<Node>,
    mut unit: Unit,
    stop: Arc<AtomicBool>,
) -> (u32, ItemEnd) {
    let item = unit.item;
    let generation = unit.generation;
    let Ok(permit) = shared.permits.clone().acquire_owned().await else {
        return (item, ItemEnd::NotStarted);
    };
    if stop.load(Ordering::SeqCst) {
        return (item, ItemEnd::NotStarted);
    }
    unit.permit = Some(permit);
    let redoable = unit.executor.free_to_redo(&shared.plan, &node);
    let end = tries::run_unit(shared.clone(), unit).await;
    let (rec, mut writes, outcome) = match end {
        UnitEnd::Value {
            value,
            writes,
            manifest,
            ..
        } => (
            ItemRec {
                state: ItemState::Done,
                value: Some(value.into_value()),
                error: None,
                manifest,
            },
            writes,
            None,
        ),
        UnitEnd::Waiting { gates, writes, .. } => {
            if let Err(e) = shared.commit(writes).await {
                return (item, ItemEnd::Failed(e.stored(Some(&node.name)), false));
            }
            return (item, ItemEnd::Waiting(gates));
        }
        UnitEnd::Skipped { writes, .. } => (
            ItemRec {
                state: ItemState::Skipped,
                value: None,
                error: None,
                manifest: Vec::new(),
            },
            writes,
            None,
        ),
        UnitEnd::Failed { error, writes, .. } => (
            ItemRec {
                state: ItemState::Failed,
                value: None,
                error: Some(error.clone()),
                manifest: Vec::new(),
            },
            writes,
            Some((error, false)),
        ),
        // An item is one unit, never an `each` of its own; were it one, it failed.
        UnitEnd::ItemsFailed { error, .. } => (
            ItemRec {
                state: ItemState::Failed,
                value: None,
                error: Some(error.clone()),
                manifest: Vec::new(),
            },
            Vec::new(),
            Some((error, false)),
        ),
        UnitEnd::Unknown { error, writes, .. } => (
            ItemRec {
                state: ItemState::Failed,
                value: None,
                error: Some(error.clone()),
                manifest: Vec::new(),
            },
            writes,
            Some((error, true)),
        ),
    };
    // What the node keeps of a done item: its value's text, and its links.
    let done = match &outcome {
        None => (rec.value.as_ref().map(text_of), rec.manifest.clone()),
        Some(_) => (None, Vec::new()),
    };
    writes.push(Write::Item(node.name.clone(), generation, item, rec));
    // A done item of work that runs again for free waits for the next commit (group
    // commit); a failure is committed at once, as it decides the node.
    let committed = if redoable && outcome.is_none() {
        shared.commit_deferred(writes).await
    } else {
        shared.commit(writes).await
    };
    if let Err(e) = committed {
        return (item, ItemEnd::Failed(e.stored(Some(&node.name)), false));
    }
    match outcome {
        None => (item, ItemEnd::Done(done.0, done.1)),
        Some((error, unknown)) => (item, ItemEnd::Failed(error, unknown)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a panic is the assertion")]
mod tests {
    use super::*;
    use crate::value::NodeValue;
    use serde_json::json;

    fn link(uri: &str) -> ResourceRef {
        serde_json::from_value(json!({"uri": uri, "server": "crm"})).unwrap()
    }

    #[test]
    fn items_that_finish_out_of_order_make_the_list_in_item_order_kept_as_text() {
        let mut results = Results::new(4);
        // Item 3 finishes first, item 1 was skipped (no value), item 0 was stored by
        // an earlier attempt; a row past the count (a store no run of this list
        // wrote) is no item of it, however far past.
        results.put(3, Some(text_of(&json!({"id": 3}))), vec![link("crm://3")]);
        results.put(1, None, Vec::new());
        results.put(
            0,
            Some(text_of(&json!({"id": 0}))),
            vec![link("crm://0a"), link("crm://0b")],
        );
        results.put(4, Some(text_of(&json!("four"))), vec![link("crm://4")]);
        results.put(u32::MAX, Some(text_of(&json!("far"))), Vec::new());
        results.put(2, Some(text_of(&json!([2, 2.5, null]))), Vec::new());
        let (value, manifest) = results.into_list();
        let NodeValue::List(texts) = &value else {
            panic!("the list became a tree: {value:?}");
        };
        assert_eq!(texts.len(), 3);
        assert_eq!(
            value.to_value(),
            json!([{"id": 0}, [2, 2.5, null], {"id": 3}])
        );
        let uris: Vec<&str> = manifest.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["crm://0a", "crm://0b", "crm://3"]);
    }

    #[test]
    fn an_item_stored_again_replaces_its_value_and_links() {
        let mut results = Results::new(2);
        results.put(0, Some(text_of(&json!(1))), vec![link("crm://old")]);
        results.put(0, Some(text_of(&json!(2))), Vec::new());
        let (value, manifest) = results.into_list();
        assert_eq!(value.to_value(), json!([2]));
        assert!(manifest.is_empty());
    }
}
