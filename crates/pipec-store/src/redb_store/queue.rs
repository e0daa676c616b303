//! Workers on a redb store: queued threads, the runnable ones (read through the status
//! index, oldest first), and the wake file.
//!
//! Processes that share a store file share its locks folder, and the wake file in it
//! (`runs.redb.locks/queue.wake`) is rewritten by every write that gives workers
//! something to do: a thread queued, gates answered, a thread released. A waiting worker
//! looks at the file every 25 ms, which costs one small read; a worker whose holder died
//! without a word is found by the worker's poll.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redb::ReadTransaction;

use super::reads::read_thread;
use super::store_thread::{apply_writes, get_thread, put_thread};
use super::tables::*;
use super::{RedbStore, io};
use crate::envelope::decode;
use crate::ids;
use crate::lock;
use crate::queue::{CANDIDATE_STATUSES, why_runnable};
use crate::*;

/// How often a waiting worker looks at the wake file.
const WAKE_LOOK: Duration = Duration::from_millis(25);

fn wake_path(store: &Path) -> PathBuf {
    lock::locks_dir(store).join("queue.wake")
}

fn read_wake(store: &Path) -> Vec<u8> {
    std::fs::read(wake_path(store)).unwrap_or_default()
}

/// Tells waiting workers (of every process on this store) that there may be work.
pub(super) fn wake(store: &Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let _ = std::fs::create_dir_all(lock::locks_dir(store));
    let mark = format!(
        "{} {} {}",
        std::process::id(),
        ids::now_ms(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let _ = std::fs::write(wake_path(store), mark);
}

pub(super) fn submit<'a>(
    store: &'a RedbStore,
    rec: ThreadRec,
) -> StoreFuture<'a, Vec<RecordedEvent>> {
    let path = store.inner.path.clone();
    Box::pin(async move {
        store.writable("submit")?;
        let id = ids::decode(&rec.id)
            .ok_or_else(|| StoreError::Io(format!("`{}` is not a thread id", rec.id)))?;
        let events = store
            .on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                if get_thread(&txn, id)?.is_some() {
                    return Err(StoreError::Io(format!("thread {} already exists", rec.id)));
                }
                let mut rec = rec;
                rec.status = Status::Queued;
                rec.holder = None;
                rec.attempts = 0;
                let events = apply_writes(
                    &txn,
                    id,
                    Some(&mut rec),
                    &[Write::Event(Event::ThreadQueued {})],
                )?;
                put_thread(&txn, id, None, &rec)?;
                txn.commit().map_err(io)?;
                Ok(events)
            })
            .await?;
        wake(&path);
        Ok(events)
    })
}

/// The gates of a thread with the node rows of their nodes.
fn gates_of(
    txn: &ReadTransaction,
    id: u128,
) -> Result<Vec<(GateRec, Option<NodeRec>)>, StoreError> {
    let name = ids::encode(id);
    let gates = txn.open_table(GATES).map_err(io)?;
    let nodes = txn.open_table(NODES).map_err(io)?;
    let mut out = Vec::new();
    for e in gates
        .range((id, "")..(id.wrapping_add(1), ""))
        .map_err(io)?
    {
        let (k, v) = e.map_err(io)?;
        let gate = k.value().1.to_string();
        let g: GateRec = decode(v.value(), &|| format!("thread {name}, gate `{gate}`"))?;
        let node = match nodes.get((id, g.node.as_str())).map_err(io)? {
            Some(row) => Some(decode::<NodeRec>(row.value(), &|| {
                format!("thread {name}, node `{}`", g.node)
            })?),
            None => None,
        };
        out.push((g, node));
    }
    Ok(out)
}

pub(super) fn runnable<'a>(
    store: &'a RedbStore,
    query: RunnableQuery,
) -> StoreFuture<'a, Vec<RunnableThread>> {
    let path = store.inner.path.clone();
    // What the wake file says before the look: a wake during the look is news to the
    // next wait.
    *store
        .inner
        .wake_seen
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(read_wake(&path));
    Box::pin(store.read(move |txn| {
        let by = txn.open_table(BY_STATUS).map_err(io)?;
        let mut out = Vec::new();
        for status in CANDIDATE_STATUSES {
            let range = by
                .range((status.code(), 0u128)..=(status.code(), u128::MAX))
                .map_err(io)?;
            for e in range {
                if out.len() >= query.max() {
                    return Ok(out);
                }
                let (k, _) = e.map_err(io)?;
                let id = k.value().1;
                let Some(rec) = read_thread(txn, id)? else {
                    continue;
                };
                if !query.wants(&rec.id, &rec.pipeline) || lock::is_locked(&path, &rec.id) {
                    continue;
                }
                let gates = if status == Status::Paused {
                    gates_of(txn, id)?
                } else {
                    Vec::new()
                };
                let why = why_runnable(
                    &rec,
                    gates.iter().map(|(g, n)| (g, n.as_ref())),
                    query.now_ms,
                    false,
                );
                if let Some(why) = why {
                    out.push(RunnableThread {
                        id: rec.id,
                        pipeline: rec.pipeline,
                        why,
                    });
                }
            }
        }
        Ok(out)
    }))
}

pub(super) fn wait_for_work(store: &RedbStore, timeout: Duration) -> StoreFuture<'_, ()> {
    let path = store.inner.path.clone();
    Box::pin(async move {
        let seen = store
            .inner
            .wake_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_else(|| read_wake(&path));
        let until = Instant::now() + timeout;
        loop {
            let now = read_wake(&path);
            if now != seen {
                return Ok(());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            tokio::time::sleep(left.min(WAKE_LOOK)).await;
        }
    })
}
