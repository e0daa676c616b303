//! The writes outside a commit: storing a plan, creating and claiming a thread (the
//! lease), and the two lease-free writes, answers and cancels (both compare-and-set).
//! Each runs as one transaction on the store thread.

use std::time::Duration;

use redb::ReadableTable;
use serde_json::Value;
use tokio::sync::oneshot;

use super::reads::{load_state, read_thread, resolve_id};
use super::store_thread::{Job, apply_writes, get_thread, put_thread};
use super::tables::*;
use super::{RedbStore, io};
use crate::envelope::{decode, encode};
use crate::ids;
use crate::lock;
use crate::*;

pub(super) fn put_plan<'a>(
    store: &'a RedbStore,
    hash: &str,
    plan_json: &str,
) -> StoreFuture<'a, ()> {
    let (hash, json) = (hash.to_string(), plan_json.to_string());
    Box::pin(async move {
        store.writable("put_plan")?;
        store
            .on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                {
                    let mut t = txn.open_table(PLANS).map_err(io)?;
                    if t.get(hash.as_str()).map_err(io)?.is_none() {
                        t.insert(hash.as_str(), pack_plan(&json).as_slice())
                            .map_err(io)?;
                    }
                }
                txn.commit().map_err(io)
            })
            .await
    })
}

pub(super) fn create_thread<'a>(
    store: &'a RedbStore,
    rec: ThreadRec,
    attempt: AttemptRec,
) -> StoreFuture<'a, (Lease, Vec<RecordedEvent>)> {
    let path = store.inner.path.clone();
    Box::pin(async move {
        store.writable("create_thread")?;
        let id = ids::decode(&rec.id)
            .ok_or_else(|| StoreError::Io(format!("`{}` is not a thread id", rec.id)))?;
        let lock = lock::try_lock(&path, &rec.id, Duration::from_millis(200))
            .map_err(io)?
            .ok_or_else(|| StoreError::Locked {
                thread: rec.id.clone(),
                holder: None,
            })?;
        let (thread, epoch, run_id, number) = (
            rec.id.clone(),
            rec.epoch,
            attempt.run_id.clone(),
            attempt.number,
        );
        let events = store
            .on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                if get_thread(&txn, id)?.is_some() {
                    return Err(StoreError::Io(format!("thread {} already exists", rec.id)));
                }
                let mut rec = rec;
                let events = apply_writes(
                    &txn,
                    id,
                    Some(&mut rec),
                    &[
                        Write::Attempt(attempt),
                        Write::Event(Event::ThreadCreated { attempt: number }),
                    ],
                )?;
                put_thread(&txn, id, None, &rec)?;
                txn.commit().map_err(io)?;
                Ok(events)
            })
            .await?;
        Ok((
            Lease {
                thread,
                epoch,
                run_id,
                attempt: number,
                _guard: LeaseGuard::File { _lock: lock },
            },
            events,
        ))
    })
}

/// Takes a thread's lease; with `answers`, answers its pending gates (as `by`) in the
/// same transaction, first.
pub(super) fn claim<'a>(
    store: &'a RedbStore,
    thread: &str,
    attempt: AttemptRec,
    answers: Vec<(String, Value)>,
    by: &str,
) -> StoreFuture<'a, Claimed> {
    let (thread, by) = (thread.to_string(), by.to_string());
    let path = store.inner.path.clone();
    Box::pin(async move {
        store.writable("claim")?;
        let p2 = path.clone();
        let t2 = thread.clone();
        let (id, rec) = store
            .read(move |txn| {
                let id = resolve_id(txn, &t2, &p2)?;
                Ok((id, read_thread(txn, id)?))
            })
            .await?;
        let name = ids::encode(id);
        let Some(rec) = rec else {
            return Err(StoreError::NotFound {
                thread,
                store: path.display().to_string(),
            });
        };
        let lock = lock::try_lock(&path, &name, Duration::from_millis(200)).map_err(io)?;
        let Some(lock) = lock else {
            return Err(StoreError::Locked {
                thread: name,
                holder: rec.holder.clone(),
            });
        };
        let run_id = attempt.run_id.clone();
        let (epoch, number, events) = store
            .on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                let Some(mut rec) = get_thread(&txn, id)? else {
                    return Err(StoreError::NotFound {
                        thread: ids::encode(id),
                        store: String::new(),
                    });
                };
                let old = rec.status;
                if matches!(old, Status::Completed | Status::Cancelled) {
                    return Err(StoreError::Ended {
                        thread: ids::encode(id),
                        status: old,
                    });
                }
                let mut writes = if answers.is_empty() {
                    Vec::new()
                } else {
                    answer_writes(&rec, &gates_of(&txn, id)?, &answers, &by, ids::now_ms())?
                };
                rec.epoch += 1;
                rec.attempts += 1;
                rec.status = Status::Running;
                rec.holder = Some(Holder {
                    run_id: attempt.run_id.clone(),
                    pid: attempt.pid,
                    host: attempt.host.clone(),
                    since_ms: attempt.started_ms,
                });
                let mut attempt = attempt;
                attempt.number = rec.attempts;
                let number = attempt.number;
                writes.extend([
                    Write::Attempt(attempt),
                    Write::Event(Event::AttemptStarted { attempt: number }),
                ]);
                let events = apply_writes(&txn, id, Some(&mut rec), &writes)?;
                put_thread(&txn, id, Some(old), &rec)?;
                let epoch = rec.epoch;
                txn.commit().map_err(io)?;
                Ok((epoch, number, events))
            })
            .await?;
        let state = store.read(move |txn| load_state(txn, id)).await?;
        Ok((
            Lease {
                thread: name,
                epoch,
                run_id,
                attempt: number,
                _guard: LeaseGuard::File { _lock: lock },
            },
            state,
            events,
        ))
    })
}

pub(super) fn commit<'a>(
    store: &'a RedbStore,
    lease: &'a Lease,
    writes: Vec<Write>,
) -> StoreFuture<'a, Vec<RecordedEvent>> {
    Box::pin(async move {
        store.writable("commit")?;
        let Some(thread) = ids::decode(&lease.thread) else {
            return Err(StoreError::Io(format!(
                "`{}` is not a thread id",
                lease.thread
            )));
        };
        // A thread given back to the queue is news to waiting workers.
        let releases = writes
            .iter()
            .any(|w| matches!(w, Write::Thread(t) if t.status == Status::Queued));
        let (reply, rx) = oneshot::channel();
        store.send(Job::Commit {
            thread,
            epoch: lease.epoch,
            writes,
            reply,
        })?;
        let events = rx
            .await
            .map_err(|_| StoreError::Io("the store thread stopped".into()))??;
        if releases {
            super::queue::wake(&store.inner.path);
        }
        Ok(events)
    })
}

pub(super) fn answer<'a>(
    store: &'a RedbStore,
    thread: &str,
    answers: Vec<(String, Value)>,
    by: &str,
) -> StoreFuture<'a, Vec<RecordedEvent>> {
    let (thread, by) = (thread.to_string(), by.to_string());
    let path = store.inner.path.clone();
    Box::pin(async move {
        store.writable("answer")?;
        let p2 = path.clone();
        let p3 = path.clone();
        let id = store.read(move |txn| resolve_id(txn, &thread, &p2)).await?;
        let events = store
            .on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                let Some(mut rec) = get_thread(&txn, id)? else {
                    return Err(StoreError::NotFound {
                        thread: ids::encode(id),
                        store: path.display().to_string(),
                    });
                };
                let writes =
                    answer_writes(&rec, &gates_of(&txn, id)?, &answers, &by, ids::now_ms())?;
                let old = rec.status;
                let events = apply_writes(&txn, id, Some(&mut rec), &writes)?;
                put_thread(&txn, id, Some(old), &rec)?;
                txn.commit().map_err(io)?;
                Ok(events)
            })
            .await?;
        if !events.is_empty() {
            super::queue::wake(&p3);
        }
        Ok(events)
    })
}

/// A thread's gate rows, by name.
fn gates_of(
    txn: &redb::WriteTransaction,
    id: u128,
) -> Result<std::collections::BTreeMap<String, GateRec>, StoreError> {
    let mut gates = std::collections::BTreeMap::new();
    let table = txn.open_table(GATES).map_err(io)?;
    for e in table
        .range((id, "")..(id.wrapping_add(1), ""))
        .map_err(io)?
    {
        let (k, v) = e.map_err(io)?;
        let name = k.value().1.to_string();
        let g: GateRec = decode(v.value(), &|| format!("gate `{name}`"))?;
        gates.insert(name, g);
    }
    Ok(gates)
}

pub(super) fn request_cancel<'a>(
    store: &'a RedbStore,
    thread: &str,
) -> StoreFuture<'a, (CancelOutcome, Vec<RecordedEvent>)> {
    let thread = thread.to_string();
    let path = store.inner.path.clone();
    Box::pin(async move {
        store.writable("request_cancel")?;
        let p2 = path.clone();
        let id = store.read(move |txn| resolve_id(txn, &thread, &p2)).await?;
        let name = ids::encode(id);
        // If no process holds it, hold it ourselves while cancelling.
        let lock = lock::try_lock(&path, &name, Duration::from_millis(0)).map_err(io)?;
        let held_by_other = lock.is_none();
        let outcome = store
            .on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                let Some(mut rec) = get_thread(&txn, id)? else {
                    return Err(StoreError::NotFound {
                        thread: ids::encode(id),
                        store: String::new(),
                    });
                };
                if rec.status.is_terminal() {
                    return Ok((CancelOutcome::AlreadyEnded(rec.status), Vec::new()));
                }
                let old = rec.status;
                let (outcome, event) = if held_by_other {
                    rec.cancel_requested = true;
                    (CancelOutcome::Requested, Event::CancelRequested {})
                } else {
                    rec.status = Status::Cancelled;
                    rec.holder = None;
                    (CancelOutcome::Cancelled, Event::ThreadCancelled {})
                };
                let events = apply_writes(&txn, id, Some(&mut rec), &[Write::Event(event)])?;
                put_thread(&txn, id, Some(old), &rec)?;
                txn.commit().map_err(io)?;
                Ok((outcome, events))
            })
            .await;
        drop(lock);
        outcome
    })
}

/// Writes a whole thread exported from another store, in one transaction: every row as
/// it was, the record with its own `updated_ms` (not the time of the copy), its fence
/// and its place in the status index.
pub(super) fn import<'a>(
    store: &'a RedbStore,
    state: ThreadState,
    events: Vec<RecordedEvent>,
) -> StoreFuture<'a, ()> {
    let path = store.inner.path.clone();
    Box::pin(async move {
        store.writable("import")?;
        let checked = crate::import::check(&state, &events)?;
        let shown = path.display().to_string();
        store
            .on_store_thread(move |db| {
                let id = checked.id;
                let rec = &checked.rec;
                let txn = db.begin_write().map_err(io)?;
                if get_thread(&txn, id)?.is_some() {
                    return Err(crate::import::exists(&rec.id, shown));
                }
                {
                    let mut t = txn.open_table(NODES).map_err(io)?;
                    for (name, n) in &state.nodes {
                        t.insert((id, name.as_str()), encode(n)?.as_slice())
                            .map_err(io)?;
                    }
                }
                {
                    let mut t = txn.open_table(ITEMS).map_err(io)?;
                    for ((name, generation, item), r) in &state.items {
                        t.insert(
                            (id, name.as_str(), *generation, *item),
                            encode(r)?.as_slice(),
                        )
                        .map_err(io)?;
                    }
                }
                {
                    let mut t = txn.open_table(CALLS).map_err(io)?;
                    for (k, r) in &state.calls {
                        t.insert(
                            (id, k.node.as_str(), k.generation, k.item, k.seq, k.call),
                            encode(r)?.as_slice(),
                        )
                        .map_err(io)?;
                    }
                }
                {
                    let mut t = txn.open_table(GATES).map_err(io)?;
                    for (name, g) in &state.gates {
                        t.insert((id, name.as_str()), encode(g)?.as_slice())
                            .map_err(io)?;
                    }
                }
                {
                    let mut t = txn.open_table(ATTEMPTS).map_err(io)?;
                    for a in &state.attempts {
                        t.insert((id, a.number), encode(a)?.as_slice())
                            .map_err(io)?;
                    }
                }
                {
                    let mut t = txn.open_table(HEALS).map_err(io)?;
                    for (k, h) in &state.heals {
                        t.insert(
                            (id, k.node.as_str(), k.generation, k.item, k.index),
                            encode(h)?.as_slice(),
                        )
                        .map_err(io)?;
                    }
                }
                {
                    let mut t = txn.open_table(EVENTS).map_err(io)?;
                    for (seq, row) in &checked.events {
                        t.insert((id, *seq), encode(row)?.as_slice()).map_err(io)?;
                    }
                }
                txn.open_table(THREADS)
                    .map_err(io)?
                    .insert(id, encode(rec)?.as_slice())
                    .map_err(io)?;
                txn.open_table(FENCES)
                    .map_err(io)?
                    .insert(id, (rec.epoch, rec.cancel_requested))
                    .map_err(io)?;
                txn.open_table(BY_STATUS)
                    .map_err(io)?
                    .insert((rec.status.code(), id), ())
                    .map_err(io)?;
                txn.commit().map_err(io)
            })
            .await?;
        // A queued, answered or due thread is news to the workers waiting on this file.
        super::queue::wake(&path);
        Ok(())
    })
}
