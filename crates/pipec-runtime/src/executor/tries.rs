//! Running one unit of work (a node, or one item of an `each` node) with its executor:
//! the node's `timeout` per try, `retries` with backoff (the next try and its deadline
//! are committed before waiting, so a crash does not reset them), and the journal rows
//! of journaled tries. Results go back to the scheduler, which commits them with
//! whatever they make ready: one commit per step of a chain.
//!
//! A try holds one of the run's permits (`--concurrency`) while it runs, and a
//! journaled try's `started` row is written only once it holds one: a `started` row
//! always means the call was about to be made, never that it was waiting its turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;

use super::{Executor, TryContext, TryError};
use crate::bind;
use crate::bind::Params;
use crate::context::AttemptContext;
use crate::error::RuntimeError;
use crate::hydrate::{self, Reader};
use crate::journal;
use crate::progress::Step;
use crate::replay::Replayed;
use crate::value::NodeValue;
use pipec_diagnostic as codes;
use pipec_plan::{Node, Plan};
use pipec_store::{
    CallKey, CallRec, CallState, Event, GateRec, NodeRec, NodeState, ResourceRef, StoredError,
    Write, ids,
};

/// One unit of work: a node, or one item of it.
pub(crate) struct Unit {
    pub node: Arc<Node>,
    pub executor: &'static dyn Executor,
    pub item: u32,
    /// The item index as `PIPEC_ITEM` shows it (none for plain nodes).
    pub is_item: bool,
    pub params: Params,
    pub generation: u32,
    /// Tries already used (from the node row), for the `retries` policy.
    pub tries: u32,
    /// The step of the next try (see `journal.rs`).
    pub step: u32,
    /// The idempotency key of the unit's call, the same for every try.
    pub idem_key: String,
    /// A call a person asked to retry, and the hash of its arguments: the retry must send
    /// the same ones (`R0404` otherwise).
    pub retry_of: Option<(CallKey, String)>,
    /// The node's row as the attempt last wrote it (plain nodes): retry rows are built
    /// from it, so they keep its crash count and start.
    pub row: Option<NodeRec>,
    /// The `started` row the scheduler already committed for the next try.
    pub started: Option<(CallKey, CallRec)>,
    /// The run permit the scheduler took for the first try.
    pub permit: Option<OwnedSemaphorePermit>,
    /// A retry's wait that a crash interrupted: the rest is waited out first.
    pub wait_until_ms: Option<u64>,
    /// Once its resources are fetched: the parameters as bound (with references), while
    /// `params` holds the fetched values.
    pub hydrated: Option<Params>,
    /// The journal rows of this unit's node, generation and item so far, by (step,
    /// call), kept current by the executor: a tool loop continues its conversation from
    /// them, in a retry as after a resume.
    pub calls: std::sync::Mutex<std::collections::BTreeMap<(u32, u32), CallRec>>,
}

/// What a unit ended with; the writes are committed by the caller. `row` is the node row
/// the unit wrote last (a retry's), for the scheduler's copy.
pub(crate) enum UnitEnd {
    /// (An `each` node's list is held as its items' text, [`NodeValue::List`].)
    Value {
        value: NodeValue,
        writes: Vec<Write>,
        row: Option<NodeRec>,
        /// The resource links its tool calls returned.
        manifest: Vec<ResourceRef>,
    },
    /// Its `when`, decided once the resources it reads were fetched, is false.
    Skipped {
        writes: Vec<Write>,
        row: Option<NodeRec>,
    },
    /// Calls wait at their approval gates (their rows are written).
    Waiting {
        gates: Vec<(String, GateRec)>,
        writes: Vec<Write>,
        row: Option<NodeRec>,
    },
    Failed {
        error: StoredError,
        writes: Vec<Write>,
        row: Option<NodeRec>,
    },
    /// Items of an `each` node failed (each one reported and recorded as it failed);
    /// `error` is the first one's, naming its item.
    ItemsFailed {
        error: StoredError,
        failed: u32,
        total: u32,
    },
    /// An effect whose outcome is unknown: the thread needs a person.
    Unknown {
        error: StoredError,
        writes: Vec<Write>,
        row: Option<NodeRec>,
    },
}

impl Unit {
    /// Whether the unit fetches resources before its call, or decides its `when` then.
    pub(crate) fn fetches(&self) -> bool {
        self.hydrated.is_none()
            && (hydrate::needed(&self.node, &self.params) || bind::when_reads_resources(&self.node))
    }

    /// The `started` row of this unit's next try (journaled executors), written and
    /// committed before the call is made. Its arguments' hash covers the references the
    /// unit was bound with, not the fetched content.
    pub(crate) fn started_row(&self, attempt: u32, plan: &Plan) -> (CallKey, CallRec) {
        let key = journal::key(&self.node.name, self.generation, self.item, self.step);
        let params = self.hydrated.as_ref().unwrap_or(&self.params);
        let rec = CallRec {
            kind: self.executor.call_kind(),
            target: self.executor.target(&self.node),
            args_hash: journal::args_hash(&journal::redacted_params(&self.node, params)),
            args: None,
            idempotent: !self.executor.journaled(plan, &self.node),
            idem_key: self.idem_key.clone(),
            state: CallState::Started,
            result: None,
            error: None,
            attempt,
            started_ms: ids::now_ms(),
            finished_ms: 0,
            decision: None,
            watched_by: self.executor.watcher(),
            task: None,
        };
        (key, rec)
    }

    /// The writes that journal the next try before it runs: its `started` row and the
    /// `call_started` event. A retry of a call a person asked to retry must send the
    /// same arguments: otherwise it is not that call (`R0404`), and nothing is written.
    pub(crate) fn begin_try(
        &mut self,
        attempt: u32,
        plan: &Plan,
    ) -> Result<Vec<Write>, StoredError> {
        let (key, rec) = self.started_row(attempt, plan);
        if let Some((old_key, old_hash)) = &self.retry_of
            && *old_hash != rec.args_hash
        {
            return Err(RuntimeError::new(
                &codes::JOURNAL_DIVERGENCE,
                format!(
                    "the retry of {} would send different arguments ({} ≠ {old_hash}) than the call it retries",
                    old_key.display(),
                    rec.args_hash,
                )
            )
            .help("its inputs changed; check them with `pipec show --internal`, then run it from scratch with `--rerun-from`")
            .stored(Some(&self.node.name)));
        }
        let writes = vec![
            Write::Event(Event::CallStarted {
                node: self.node.name.clone(),
                call: key.display(),
                args_hash: rec.args_hash.clone(),
            }),
            Write::Call(key.clone(), rec.clone()),
        ];
        self.started = Some((key, rec));
        Ok(writes)
    }
}

/// Runs a unit with its retries.
pub(crate) async fn run_unit(shared: Arc<AttemptContext>, mut unit: Unit) -> UnitEnd {
    let node = unit.node.clone();
    let executor = unit.executor;
    let journaled = executor.journaled(&shared.plan, &node);
    let mut writes: Vec<Write> = Vec::new();
    if let Some(recorded) = &shared.replay {
        // (The scheduler journals no try of a replay: nothing here is an effect.)
        // A replay calls nothing: the recorded result stands for the call.
        return match recorded.outcome(&node.name, unit.is_item.then_some(unit.item)) {
            Replayed::Value { value, manifest } => UnitEnd::Value {
                value: value.into(),
                writes,
                row: unit.row,
                manifest,
            },
            Replayed::Skipped => UnitEnd::Skipped {
                writes,
                row: unit.row,
            },
            Replayed::Failed(error) => UnitEnd::Failed {
                error,
                writes,
                row: unit.row,
            },
        };
    }
    if let Some(until) = unit.wait_until_ms.take() {
        let now = ids::now_ms();
        if until > now {
            tokio::time::sleep(Duration::from_millis(until - now)).await;
        }
    }
    loop {
        let permit = match unit.permit.take() {
            Some(p) => p,
            None => match shared.permits.clone().acquire_owned().await {
                Ok(p) => p,
                Err(_) => {
                    let error =
                        RuntimeError::new(&codes::INTERNAL_ERROR, "the run's permits closed")
                            .stored(Some(&node.name));
                    return UnitEnd::Failed {
                        error,
                        writes,
                        row: unit.row,
                    };
                }
            },
        };
        if let Some(p) = &shared.progress {
            p.step(Step::Started {
                node: &node.name,
                item: unit.is_item.then_some(unit.item),
            });
        }
        // Resources are fetched once the unit holds a permit (so reads too obey
        // `--concurrency`), before its call is journaled or made.
        if unit.fetches() {
            let mut params = unit.params.clone();
            let mut reader = Reader {
                shared: &shared,
                node: &node,
                generation: unit.generation,
                item: unit.item,
                step: unit.step,
                writes: &mut writes,
            };
            let fetched = async {
                if bind::when_reads_resources(&node) {
                    reader.hydrate(&mut params, Some(&node.when_reads)).await?;
                    let holds = bind::when_decides(&node, &params).map_err(TryError::Fatal)?;
                    if !holds {
                        return Ok(false);
                    }
                }
                reader.hydrate(&mut params, None).await?;
                Ok(true)
            }
            .await;
            match fetched {
                Ok(true) => {
                    unit.hydrated = Some(std::mem::replace(&mut unit.params, params));
                }
                Ok(false) => {
                    drop(permit);
                    return UnitEnd::Skipped {
                        writes,
                        row: unit.row,
                    };
                }
                Err(e) => {
                    drop(permit);
                    match failed_try(&shared, &mut unit, e, &mut writes).await {
                        Some(end) => return end,
                        None => continue,
                    }
                }
            }
        }
        // A journaled try the scheduler has not journaled yet (a retry, an item) is,
        // now that it holds a permit.
        if journaled && unit.started.is_none() {
            match unit.begin_try(shared.attempt_no, &shared.plan) {
                Ok(started) => {
                    if let Err(e) = shared.commit(started).await {
                        return UnitEnd::Failed {
                            error: e.stored(Some(&node.name)),
                            writes,
                            row: unit.row,
                        };
                    }
                }
                Err(error) => {
                    return UnitEnd::Unknown {
                        error,
                        writes,
                        row: unit.row,
                    };
                }
            }
        }
        let key = journal::key(&node.name, unit.generation, unit.item, unit.step);
        let started_row = unit.started.take().map(|(_, rec)| rec);
        let begun = Instant::now();
        let mut manifest = Vec::new();
        let cx = TryContext {
            shared: &shared,
            unit: &unit,
            idem_key: unit.idem_key.clone(),
            started: started_row.as_ref(),
            writes: &mut writes,
            manifest: &mut manifest,
        };
        let attempt = executor.run(cx);
        let result = match node.timeout_ms {
            Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), attempt).await {
                Ok(r) => r,
                Err(_) => {
                    let message = format!(
                        "`{}` ran longer than its timeout of {}",
                        node.name,
                        crate::progress::human(Duration::from_millis(ms))
                    );
                    if journaled {
                        Err(TryError::Unknown(message))
                    } else {
                        Err(TryError::Transient {
                            rule: executor.failure_rule(),
                            message,
                        })
                    }
                }
            },
            None => attempt.await,
        };
        drop(permit);
        if journaled && result.is_ok() && shared.kill_after.contains(&node.name) {
            // A test's fault: the effect ran, its result is not committed.
            pipec_process::kill_self();
        }
        // The end of the try, in the journal of the executors that keep one.
        let journal = |writes: &mut Vec<Write>, state, error| {
            if let Some(started) = &started_row {
                let mut row = journal::finished_row(started, state, error);
                // A task the call became stays with it, to be followed again.
                row.task = unit
                    .calls
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&(key.seq, key.call))
                    .and_then(|r| r.task.clone());
                writes.push(Write::Call(key.clone(), row));
            }
        };
        match result {
            Ok(value) => {
                if let Some(p) = &shared.progress {
                    p.step(Step::Finished {
                        node: &node.name,
                        item: unit.is_item.then_some(unit.item),
                        took: begun.elapsed(),
                    });
                }
                journal(&mut writes, CallState::Ok, None);
                return UnitEnd::Value {
                    value: value.into(),
                    writes,
                    row: unit.row,
                    manifest,
                };
            }
            Err(TryError::Waiting { gate, rec }) => {
                return UnitEnd::Waiting {
                    gates: vec![(gate, *rec)],
                    writes,
                    row: unit.row,
                };
            }
            Err(e) => {
                let (state, message) = match &e {
                    TryError::Waiting { .. } => (CallState::Ok, String::new()),
                    TryError::Unknown(m) => (CallState::Unknown, m.clone()),
                    TryError::Fatal(err) => (CallState::ToolError, err.message.clone()),
                    TryError::Transient { message, .. } => (CallState::ToolError, message.clone()),
                };
                journal(&mut writes, state, Some(message));
                if let Some(end) = failed_try(&shared, &mut unit, e, &mut writes).await {
                    return end;
                }
            }
        }
    }
}

/// What a failed try leads to: the unit's end, or (`None`) another try, once its wait
/// is stored and over.
async fn failed_try(
    shared: &Arc<AttemptContext>,
    unit: &mut Unit,
    failure: TryError,
    writes: &mut Vec<Write>,
) -> Option<UnitEnd> {
    let node = unit.node.clone();
    let retries = node.retries.unwrap_or(0) as u32;
    match failure {
        TryError::Waiting { gate, rec } => Some(UnitEnd::Waiting {
            gates: vec![(gate, *rec)],
            writes: std::mem::take(writes),
            row: unit.row.take(),
        }),
        TryError::Unknown(message) => {
            let error = RuntimeError::new(
                &codes::UNFINISHED_EFFECT,
                format!("{message}; whether it took effect is unknown"),
            )
            .stored(Some(&node.name));
            Some(UnitEnd::Unknown {
                error,
                writes: std::mem::take(writes),
                row: unit.row.take(),
            })
        }
        TryError::Fatal(error) => {
            report_item_failure(shared, unit, &error);
            Some(UnitEnd::Failed {
                error,
                writes: std::mem::take(writes),
                row: unit.row.take(),
            })
        }
        TryError::Transient { rule, message } => {
            if unit.tries >= retries {
                let message = if retries > 0 {
                    format!("{message} (after {} tries)", unit.tries + 1)
                } else {
                    message
                };
                let error = RuntimeError::new(rule, message).stored(Some(&node.name));
                report_item_failure(shared, unit, &error);
                return Some(UnitEnd::Failed {
                    error,
                    writes: std::mem::take(writes),
                    row: unit.row.take(),
                });
            }
            // The next try and its wait are stored before waiting; its `started` row
            // is written when it holds a permit again.
            unit.tries += 1;
            unit.step += 1;
            let backoff = Duration::from_millis(
                node.backoff_ms
                    .unwrap_or(500)
                    .saturating_mul(1u64 << (unit.tries - 1).min(6)),
            );
            let due = ids::now_ms() + backoff.as_millis() as u64;
            let error = RuntimeError::new(rule, message.clone()).stored(Some(&node.name));
            let mut batch = std::mem::take(writes);
            if let Some(row) = &mut unit.row {
                row.state = NodeState::Running;
                row.tries = unit.tries;
                row.next_retry_ms = Some(due);
                row.error = Some(error);
                row.finished_ms = 0;
                batch.push(Write::Node(node.name.clone(), row.clone()));
            }
            batch.push(Write::Event(Event::RetryScheduled {
                node: node.name.clone(),
                item: unit.item,
                try_number: unit.tries,
                at_ms: due,
                code: Some(rule.code.into()),
                error: message,
            }));
            if let Err(e) = shared.commit(batch).await {
                return Some(UnitEnd::Failed {
                    error: e.stored(Some(&node.name)),
                    writes: Vec::new(),
                    row: unit.row.take(),
                });
            }
            if let Some(p) = &shared.progress {
                p.step(Step::Retrying {
                    node: &node.name,
                    item: unit.is_item.then_some(unit.item),
                    try_number: unit.tries + 1,
                    after: backoff,
                });
            }
            tokio::time::sleep(backoff).await;
            None
        }
    }
}

/// An item's failure is shown as it happens; a node's, by the scheduler as it fails the
/// node.
fn report_item_failure(shared: &AttemptContext, unit: &Unit, error: &StoredError) {
    if unit.is_item
        && let Some(p) = &shared.progress
    {
        p.step(Step::Failed {
            node: &unit.node.name,
            item: Some(unit.item),
            message: &error.message,
        });
    }
}
