//! Maintenance: `prune` (whole terminal threads, in short transactions), the integrity
//! check and the per-table statistics of `pipec store check|stats`.

use std::path::Path;

use redb::{Builder, ConcurrencyMode, Database, ReadableDatabase, ReadableTableMetadata};

use super::open::db_error;
use super::store_thread::get_thread;
use super::tables::*;
use super::{RedbStore, io};
use crate::store::envelope::decode;
use crate::store::ids;
use crate::store::lock;
use crate::store::*;

impl RedbStore {
    /// The store's integrity check (`pipec store check`); needs exclusive access.
    pub fn check_integrity(path: &Path) -> Result<bool, StoreError> {
        let mut builder = Builder::new();
        builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
        let mut db = builder.open(path).map_err(|e| db_error(path, e))?;
        db.check_integrity().map_err(|e| db_error(path, e))
    }

    /// Per-table row counts and bytes (`pipec store stats`), with the file's length.
    pub fn stats_at(path: &Path) -> Result<StoreStats, StoreError> {
        let mut builder = Builder::new();
        builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
        let db = builder.open(path).map_err(|e| db_error(path, e))?;
        stats_of(&db, path)
    }

    /// [`RedbStore::stats_at`] of this open store.
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        stats_of(&self.inner.db, &self.inner.path)
    }
}

fn stats_of(db: &Database, path: &Path) -> Result<StoreStats, StoreError> {
    let txn = db.begin_read().map_err(io)?;
    let mut tables = Vec::new();
    macro_rules! table {
        ($def:expr, $name:literal) => {
            match txn.open_table($def) {
                Ok(t) => {
                    let s = t.stats().map_err(io)?;
                    tables.push(TableStat {
                        name: $name,
                        rows: t.len().map_err(io)?,
                        stored_bytes: s.stored_bytes(),
                        metadata_bytes: s.metadata_bytes(),
                        fragmented_bytes: s.fragmented_bytes(),
                        pages: s.leaf_pages() + s.branch_pages(),
                    });
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(io(e)),
            }
        };
    }
    table!(META, "meta");
    table!(PLANS, "plans");
    table!(THREADS, "threads");
    table!(BY_STATUS, "by_status");
    table!(NODES, "nodes");
    table!(ITEMS, "items");
    table!(CALLS, "calls");
    table!(GATES, "gates");
    table!(ATTEMPTS, "attempts");
    table!(EVENTS, "events");
    table!(FENCES, "fences");
    drop(txn);
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let write = db.begin_write().map_err(io)?;
    let db_stats = write.stats().map_err(io)?;
    let allocated_bytes = db_stats.allocated_pages() * db_stats.page_size() as u64;
    write.abort().map_err(io)?;
    Ok(StoreStats {
        file_bytes,
        allocated_bytes,
        tables,
    })
}

pub(super) fn prune<'a>(
    store: &'a RedbStore,
    before_ms: u64,
    statuses: Vec<Status>,
) -> StoreFuture<'a, usize> {
    let path = store.inner.path.clone();
    Box::pin(async move {
        let mut statuses: Vec<Status> = statuses.into_iter().filter(|s| s.is_terminal()).collect();
        // A status named twice must not count its threads twice.
        statuses.sort();
        statuses.dedup();
        let victims: Vec<u128> = store
            .read(move |txn| {
                let by = txn.open_table(BY_STATUS).map_err(io)?;
                let threads = txn.open_table(THREADS).map_err(io)?;
                let mut v = Vec::new();
                for s in statuses {
                    for e in by
                        .range((s.code(), 0u128)..=(s.code(), u128::MAX))
                        .map_err(io)?
                    {
                        let (k, _) = e.map_err(io)?;
                        let id = k.value().1;
                        if let Some(g) = threads.get(id).map_err(io)? {
                            let rec: ThreadRec = decode(g.value(), &|| "thread".to_string())?;
                            if rec.updated_ms < before_ms && rec.status.is_terminal() {
                                v.push(id);
                            }
                        }
                    }
                }
                Ok(v)
            })
            .await?;
        let total = victims.len();
        // Short transactions of a few threads each, so running threads are not held up.
        for chunk in victims.chunks(16) {
            let chunk = chunk.to_vec();
            let names: Vec<String> = chunk.iter().map(|id| ids::encode(*id)).collect();
            store
                .on_store_thread(move |db| {
                    let txn = db.begin_write().map_err(io)?;
                    for id in &chunk {
                        let id = *id;
                        let next = id.wrapping_add(1);
                        // Re-check under the write lock: only terminal threads go.
                        let Some(rec) = get_thread(&txn, id)? else {
                            continue;
                        };
                        if !rec.status.is_terminal() {
                            continue;
                        }
                        txn.open_table(THREADS)
                            .map_err(io)?
                            .remove(id)
                            .map_err(io)?;
                        txn.open_table(BY_STATUS)
                            .map_err(io)?
                            .remove((rec.status.code(), id))
                            .map_err(io)?;
                        txn.open_table(FENCES).map_err(io)?.remove(id).map_err(io)?;
                        txn.open_table(NODES)
                            .map_err(io)?
                            .retain_in((id, "")..(next, ""), |_, _| false)
                            .map_err(io)?;
                        txn.open_table(ITEMS)
                            .map_err(io)?
                            .retain_in((id, "", 0u32, 0u32)..(next, "", 0u32, 0u32), |_, _| false)
                            .map_err(io)?;
                        txn.open_table(CALLS)
                            .map_err(io)?
                            .retain_in(
                                (id, "", 0u32, 0u32, 0u32, 0u32)
                                    ..(next, "", 0u32, 0u32, 0u32, 0u32),
                                |_, _| false,
                            )
                            .map_err(io)?;
                        txn.open_table(GATES)
                            .map_err(io)?
                            .retain_in((id, "")..(next, ""), |_, _| false)
                            .map_err(io)?;
                        txn.open_table(ATTEMPTS)
                            .map_err(io)?
                            .retain_in((id, 0u32)..(next, 0u32), |_, _| false)
                            .map_err(io)?;
                        txn.open_table(EVENTS)
                            .map_err(io)?
                            .retain_in((id, 0u64)..(next, 0u64), |_, _| false)
                            .map_err(io)?;
                    }
                    txn.commit().map_err(io)
                })
                .await?;
            for name in names {
                lock::remove(&path, &name);
            }
        }
        Ok(total)
    })
}
