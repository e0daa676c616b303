//! The nodes of an attempt that are not gates: pure nodes computed in place, and the
//! nodes that run as tasks through their kind's executor — bound, journaled (the first
//! try's `started` row joins the scheduler's next commit), started, and ended.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::nodes::ValueAt;
use super::units::{self, Items, Whose};
use super::{Attempt, each};
use crate::bind::{self, Entry, Params};
use crate::error::RuntimeError;
use crate::eval;
use crate::executor;
use crate::executor::tries::{self, Unit, UnitEnd};
use crate::hydrate;
use pipec_diagnostic as codes;
use pipec_plan::{Body, Node};
use pipec_store::{ItemRec, StoredError};

/// What a started node runs.
pub(super) enum Work {
    One(Box<Unit>),
    Items(Items),
}

/// A started task's result, as the scheduler sees it.
pub(super) struct TaskDone {
    idx: usize,
    end: UnitEnd,
    items: Option<u32>,
}

/// A node the scheduler computes in place: a `return` body that fetches no resource
/// (`ref<T>` parameters keep their references, so they count as pure).
pub(super) fn is_pure(node: &Node) -> bool {
    matches!(node.body, Body::Return { .. })
        && !node
            .params
            .iter()
            .any(|p| eval::is_resource(&p.source) && !p.keep_ref)
}

impl Attempt {
    /// A `return` node: computed here, its row joins the next commit. `false` when it
    /// must run as a task after all: a parameter holds a reference it declares the
    /// content type for, which is fetched (nothing was changed then).
    pub(super) fn run_pure(&mut self, i: usize) -> bool {
        let node = self.nodes.node(i).clone();
        let Body::Return { value } = &node.body else {
            return false;
        };
        // A replay from a later node: this one stays as the recorded thread has it.
        if let Some(recorded) = self.shared.replay.as_ref().filter(|r| r.keeps(&node.name)) {
            match recorded.value(&node.name) {
                Some(v) => {
                    self.nodes.mark_running(i);
                    self.nodes
                        .finish(i, v.into(), ValueAt::Row, Vec::new(), &mut self.buffer);
                }
                None => self.nodes.skip(i, &mut self.buffer),
            }
            return true;
        }
        let eval_one = |params: &Params| -> Result<Value, StoredError> {
            eval::returned(params, value).map_err(|e| {
                RuntimeError::new(e.rule(), format!("`return` of `{}`: {e}", node.name))
                    .stored(Some(&node.name))
            })
        };
        match bind::enter(&node, &self.scope()) {
            Entry::Skip => self.nodes.skip(i, &mut self.buffer),
            Entry::Fail(e) => self.nodes.fail(i, e, &mut self.buffer),
            Entry::Run(params) if hydrate::needed(&node, &params) => return false,
            Entry::Run(params) => match eval_one(&params) {
                Ok(v) => {
                    self.nodes.mark_running(i);
                    self.nodes
                        .finish(i, v.into(), ValueAt::Row, Vec::new(), &mut self.buffer);
                }
                Err(e) => self.nodes.fail(i, e, &mut self.buffer),
            },
            Entry::Each { name, base, items } => {
                let count = items.len() as u32;
                let mut all = Vec::new();
                for item in items {
                    match bind::item_params(&node, &self.scope(), &base, &name, item) {
                        Ok(params) if hydrate::needed(&node, &params) => return false,
                        Ok(params) => all.push(params),
                        Err(e) => {
                            self.nodes.fail(i, e, &mut self.buffer);
                            return true;
                        }
                    }
                }
                let mut out = Vec::new();
                for params in all {
                    match bind::when_holds(&node, &params) {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err(e) => {
                            self.nodes.fail(i, e, &mut self.buffer);
                            return true;
                        }
                    }
                    match eval_one(&params) {
                        Ok(v) => out.push(v),
                        Err(e) => {
                            self.nodes.fail(i, e, &mut self.buffer);
                            return true;
                        }
                    }
                }
                self.nodes.mark_running(i);
                // Computed whole, it has no item rows: the list is kept in its row.
                self.nodes.finish(
                    i,
                    Value::Array(out).into(),
                    ValueAt::RowOfItems(count),
                    Vec::new(),
                    &mut self.buffer,
                );
            }
        }
        true
    }

    /// Binds a node that runs as a task and writes its start rows (and, for a journaled
    /// node without `each`, its first try's `started` row). `None` when it was skipped or
    /// failed right away.
    pub(super) fn prepare_task(
        &mut self,
        i: usize,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Option<Work> {
        let node = Arc::new(self.nodes.node(i).clone());
        let Some(executor) = executor::for_node(&node) else {
            self.nodes.fail(
                i,
                RuntimeError::new(
                    &codes::INTERNAL_ERROR,
                    format!("`{}` has no executor", node.name),
                )
                .stored(Some(&node.name)),
                &mut self.buffer,
            );
            return None;
        };
        let entry = bind::enter(&node, &self.scope());
        let generation = self.nodes.generation(i);
        let whose = Whose {
            node: &node,
            executor,
            generation,
            thread: &self.shared.thread_id,
        };
        match entry {
            Entry::Skip => {
                self.nodes.skip(i, &mut self.buffer);
                None
            }
            Entry::Fail(e) => {
                self.nodes.fail(i, e, &mut self.buffer);
                None
            }
            Entry::Each { name, base, items } => {
                let items = Items::new(&whose, &self.state.calls, &self.scope(), name, base, items);
                self.nodes.start(i, Some(items.total()), &mut self.buffer);
                Some(Work::Items(items))
            }
            Entry::Run(params) => {
                let old = self.nodes.row(i).cloned();
                let mut unit =
                    units::unit(&whose, &self.state.calls, 0, false, params, old.as_ref());
                self.nodes.start(i, None, &mut self.buffer);
                unit.row = self.nodes.row(i).cloned();
                unit.permit = permit;
                // The first try is journaled here, in the scheduler's next commit, when it
                // can start at once; a try that first waits out a backoff is journaled by
                // `run_unit` once it holds its permit.
                let in_backoff = unit
                    .wait_until_ms
                    .is_some_and(|t| t > pipec_store::ids::now_ms());
                // A node that fetches resources first is journaled once they are
                // fetched, just before its call, by `run_unit`.
                // A replay makes no call, so it journals none.
                if executor.journaled(&self.shared.plan, &node)
                    && self.shared.replay.is_none()
                    && !in_backoff
                    && !unit.fetches()
                {
                    match unit.begin_try(self.shared.attempt_no, &self.shared.plan) {
                        Ok(writes) => {
                            if let Some((key, rec)) = &unit.started {
                                self.state.calls.insert(key.clone(), rec.clone());
                            }
                            self.buffer.extend(writes);
                        }
                        Err(error) => {
                            let call = unit.retry_of.as_ref().map(|(k, _)| k.display());
                            self.nodes.block(i, error, call, &mut self.buffer);
                            return None;
                        }
                    }
                }
                Some(Work::One(Box::new(unit)))
            }
        }
    }

    /// The future that runs a started node: its one unit, or its items. An `each`
    /// node's stored item rows move into it (nothing reads them here after; a resumed
    /// fan-out of thousands is not held twice).
    pub(super) fn task(
        &mut self,
        i: usize,
        work: Work,
    ) -> impl std::future::Future<Output = TaskDone> + Send + 'static {
        let shared = self.shared.clone();
        let node = Arc::new(self.nodes.node(i).clone());
        let generation = self.nodes.generation(i);
        let item_rows: BTreeMap<u32, ItemRec> = match &work {
            Work::One(_) => BTreeMap::new(),
            Work::Items(_) => {
                let keys: Vec<_> = self
                    .state
                    .items
                    .range(
                        (node.name.clone(), generation, 0)
                            ..=(node.name.clone(), generation, u32::MAX),
                    )
                    .map(|(k, _)| k.clone())
                    .collect();
                keys.into_iter()
                    .filter_map(|k| Some((k.2, self.state.items.remove(&k)?)))
                    .collect()
            }
        };
        async move {
            let (end, items) = match work {
                Work::Items(items) => {
                    let total = items.total();
                    (
                        each::run_each(shared, node, items, item_rows).await,
                        Some(total),
                    )
                }
                Work::One(unit) => (tries::run_unit(shared, *unit).await, None),
            };
            TaskDone { idx: i, end, items }
        }
    }

    /// A task ended: its writes join the next commit with its node's new state.
    pub(super) fn task_done(&mut self, td: TaskDone) {
        let i = td.idx;
        let at = match td.items {
            Some(n) => ValueAt::Items(n),
            None => ValueAt::Row,
        };
        match td.end {
            UnitEnd::Value {
                value,
                writes,
                row,
                manifest,
            } => {
                self.buffer.extend(writes);
                self.nodes.adopt(i, row);
                self.nodes.finish(i, value, at, manifest, &mut self.buffer);
            }
            UnitEnd::Skipped { writes, row } => {
                self.buffer.extend(writes);
                self.nodes.adopt(i, row);
                self.nodes.skip(i, &mut self.buffer);
            }
            UnitEnd::Waiting { gates, writes, row } => {
                self.buffer.extend(writes);
                self.nodes.adopt(i, row);
                for (name, rec) in gates {
                    self.state.gates.insert(name, rec);
                }
                self.nodes.wait_for_approval(i, &mut self.buffer);
            }
            UnitEnd::Failed { error, writes, row } => {
                self.buffer.extend(writes);
                self.nodes.adopt(i, row);
                self.nodes.fail(i, error, &mut self.buffer);
            }
            UnitEnd::ItemsFailed {
                error,
                failed,
                total,
            } => self
                .nodes
                .fail_items(i, error, failed, total, &mut self.buffer),
            UnitEnd::Unknown { error, writes, row } => {
                self.buffer.extend(writes);
                self.nodes.adopt(i, row);
                self.nodes.block(i, error, None, &mut self.buffer);
            }
        }
    }
}

/// Runs a future in place, turning a panic into an error as a spawned task's would be.
pub(super) struct CatchPanic<F>(pub(super) std::pin::Pin<Box<F>>);

impl<F: std::future::Future> std::future::Future for CatchPanic<F> {
    type Output = Result<F::Output, String>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                std::task::Poll::Ready(Err(format!("panicked: {message}")))
            }
        }
    }
}
