//! Maintenance: `prune` (whole terminal threads, in short transactions), the integrity
//! check and the per-table statistics of `pipec store check|stats`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use redb::{Builder, ConcurrencyMode, ReadTransaction, ReadableTable, ReadableTableMetadata};

use super::contain::{self, Health};
use super::open::{db_error, read_format, require_store_file};
use super::store_thread::get_thread;
use super::tables::*;
use super::{Reader, RedbStore, io};
use crate::envelope::decode;
use crate::ids;
use crate::lock;
use crate::*;

/// What `pipec store check` found in a store without damage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    pub threads: u64,
    /// Every row of every table, each decoded.
    pub rows: u64,
    /// Whether redb's check of every page's checksum ran too; it needs the file to
    /// itself for a moment, so it is left out while another process has the store open.
    pub pages_verified: bool,
}

impl RedbStore {
    /// The integrity check of `pipec store check`, which only reads the file. Every row
    /// of every table is decoded and the indexes are compared with the thread records;
    /// this runs beside processes that use the store. When no other process has it
    /// open, redb's own check of every page's checksum runs too, on a private copy taken
    /// while no process can open the file, so the file itself is never repaired or
    /// changed. Damage is `StoreError::Corrupt` saying what the check found.
    pub fn check(path: &Path) -> Result<CheckReport, StoreError> {
        let found_damage = |e: StoreError| match e {
            StoreError::Corrupt { what } => StoreError::Corrupt {
                what: format!("the integrity check found damage: {what}"),
            },
            other => other,
        };
        let (threads, rows) = {
            let store = RedbStore::open_read_only(path).map_err(found_damage)?;
            store.read_now(verify_records).map_err(found_damage)?
        };
        let pages_verified = verify_pages(path).map_err(found_damage)?;
        Ok(CheckReport {
            threads,
            rows,
            pages_verified,
        })
    }

    /// redb's check and repair on the file itself (`pipec store check --repair`): it
    /// writes, and waits for other processes' writes. `Ok(false)`: damage was found and
    /// repaired (redb went back to the last state it could verify).
    pub fn repair(path: &Path) -> Result<bool, StoreError> {
        require_store_file(path)?;
        let health = Health::new(path);
        health.run("repairing", || {
            let mut builder = Builder::new();
            builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
            let mut db = builder.open(path).map_err(|e| db_error(path, e))?;
            db.check_integrity().map_err(|e| db_error(path, e))
        })
    }

    /// Per-table row counts and bytes (`pipec store stats`), with the file's length; opens
    /// the store read-only.
    pub fn stats_at(path: &Path) -> Result<StoreStats, StoreError> {
        RedbStore::open_read_only(path)?.stats()
    }

    /// [`RedbStore::stats_at`] of this open store. `allocated_bytes` counts every page in
    /// use when the store is open to write, and the pages of its tables when it is open
    /// read-only (redb counts the rest only in a write transaction).
    pub fn stats(&self) -> Result<StoreStats, StoreError> {
        let reader = self.reader()?;
        let path = self.inner.path.clone();
        self.inner
            .health
            .run("reading statistics", || stats_of(&reader, &path))
    }
}

/// redb's page check, on a copy taken while no other process can open the file. `false`
/// when another process has it open.
fn verify_pages(path: &Path) -> Result<bool, StoreError> {
    let health = Health::new(path);
    // A read-only open in the exclusive mode is refused while a process has the file open
    // to write, and while it is held, no such process can open it: the copy is whole.
    let held = health.run("opening", || match Builder::new().open_read_only(path) {
        Ok(db) => Ok(Some(db)),
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => Ok(None),
        Err(e) => Err(db_error(path, e)),
    })?;
    let Some(held) = held else {
        return Ok(false);
    };
    let copy = PrivateCopy::new();
    let copied = std::fs::copy(path, &copy.0);
    let _ = contain::contained(move || drop(held));
    let cannot_copy = |e: std::io::Error| {
        StoreError::Io(format!(
            "cannot copy {} to {} to check it: {e}",
            path.display(),
            copy.0.display()
        ))
    };
    copied.map_err(cannot_copy)?;
    // The copy takes the file's permissions; a read-only store gives a read-only copy,
    // which redb's check cannot open.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&copy.0, std::fs::Permissions::from_mode(0o600))
            .map_err(cannot_copy)?;
    }
    let copy_health = Health::new(path);
    let intact = copy_health.run("checking pages", || {
        let mut db = Builder::new()
            .open(&copy.0)
            .map_err(|e| db_error(path, e))?;
        db.check_integrity().map_err(|e| db_error(path, e))
    })?;
    if !intact {
        return Err(StoreError::Corrupt {
            what: format!(
                "{}: pages do not match their checksums; `pipec store check --repair` makes redb go back to the last state it can verify",
                path.display()
            ),
        });
    }
    Ok(true)
}

/// A temporary copy of a store file, removed on drop.
struct PrivateCopy(PathBuf);

impl PrivateCopy {
    fn new() -> PrivateCopy {
        static N: AtomicU32 = AtomicU32::new(0);
        PrivateCopy(std::env::temp_dir().join(format!(
            "pipec-check-{}-{}.redb",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )))
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Decodes every row of every table and compares the indexes with the thread records;
/// returns how many threads and rows there are.
fn verify_records(txn: &ReadTransaction) -> Result<(u64, u64), StoreError> {
    let damage = |what: String| StoreError::Corrupt { what };
    let threads = txn.open_table(THREADS).map_err(io)?;
    let by_status = txn.open_table(BY_STATUS).map_err(io)?;
    let fences = txn.open_table(FENCES).map_err(io)?;
    let mut statuses = BTreeMap::new();
    let mut rows = 0u64;
    for e in threads.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let id = k.value();
        let name = ids::encode(id);
        let rec: ThreadRec = decode(v.value(), &|| format!("thread {name}"))?;
        if ids::decode(&rec.id) != Some(id) {
            return Err(damage(format!(
                "the record of thread {name} names thread {}",
                rec.id
            )));
        }
        if by_status
            .get((rec.status.code(), id))
            .map_err(io)?
            .is_none()
        {
            return Err(damage(format!(
                "thread {name} is {} but the status index does not list it",
                rec.status.as_str()
            )));
        }
        if let Some(f) = fences.get(id).map_err(io)?
            && f.value() != (rec.epoch, rec.cancel_requested)
        {
            return Err(damage(format!(
                "the fence of thread {name} does not match its record"
            )));
        }
        statuses.insert(id, rec.status.code());
        rows += 1;
    }
    let known = |id: u128, table: &str| -> Result<(), StoreError> {
        if statuses.contains_key(&id) {
            Ok(())
        } else {
            Err(damage(format!(
                "the {table} table has a row of thread {}, which does not exist",
                ids::encode(id)
            )))
        }
    };
    for e in by_status.iter().map_err(io)? {
        let (k, _) = e.map_err(io)?;
        let (code, id) = k.value();
        if statuses.get(&id) != Some(&code) {
            return Err(damage(format!(
                "the status index lists thread {} with a status its record does not have",
                ids::encode(id)
            )));
        }
        rows += 1;
    }
    for e in fences.iter().map_err(io)? {
        let (k, _) = e.map_err(io)?;
        known(k.value(), "fences")?;
        rows += 1;
    }
    for e in txn.open_table(NODES).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let (id, node) = k.value();
        known(id, "nodes")?;
        let _: NodeRec = decode(v.value(), &|| {
            format!("thread {}, node `{node}`", ids::encode(id))
        })?;
        rows += 1;
    }
    for e in txn.open_table(ITEMS).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let (id, node, _, item) = k.value();
        known(id, "items")?;
        let _: ItemRec = decode(v.value(), &|| {
            format!("thread {}, item {item} of `{node}`", ids::encode(id))
        })?;
        rows += 1;
    }
    for e in txn.open_table(CALLS).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let (id, node, ..) = k.value();
        known(id, "calls")?;
        let _: CallRec = decode(v.value(), &|| {
            format!("thread {}, a call of `{node}`", ids::encode(id))
        })?;
        rows += 1;
    }
    match txn.open_table(HEALS) {
        Ok(t) => {
            for e in t.iter().map_err(io)? {
                let (k, v) = e.map_err(io)?;
                let (id, node, ..) = k.value();
                known(id, "heals")?;
                let _: HealRec = decode(v.value(), &|| {
                    format!("thread {}, a heal of a link of `{node}`", ids::encode(id))
                })?;
                rows += 1;
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(io(e)),
    }
    for e in txn.open_table(GATES).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let (id, gate) = k.value();
        known(id, "gates")?;
        let _: GateRec = decode(v.value(), &|| {
            format!("thread {}, gate `{gate}`", ids::encode(id))
        })?;
        rows += 1;
    }
    for e in txn.open_table(ATTEMPTS).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let (id, n) = k.value();
        known(id, "attempts")?;
        let _: AttemptRec = decode(v.value(), &|| {
            format!("thread {}, attempt {n}", ids::encode(id))
        })?;
        rows += 1;
    }
    for e in txn.open_table(EVENTS).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let (id, seq) = k.value();
        known(id, "events")?;
        let _: serde_json::Value = decode(v.value(), &|| {
            format!("thread {}, event {seq}", ids::encode(id))
        })?;
        rows += 1;
    }
    for e in txn.open_table(PLANS).map_err(io)?.iter().map_err(io)? {
        let (k, v) = e.map_err(io)?;
        let hash = k.value();
        let text = unpack_plan(v.value(), hash)?;
        if serde_json::from_str::<serde_json::Value>(&text).is_err() {
            return Err(damage(format!("the stored plan {hash} is not JSON")));
        }
        rows += 1;
    }
    read_format(txn)?;
    Ok((statuses.len() as u64, rows))
}

/// redb's page size (fixed in redb 4).
const PAGE_BYTES: u64 = 4096;

fn stats_of(reader: &Reader, path: &Path) -> Result<StoreStats, StoreError> {
    let txn = reader.begin_read()?;
    let mut tables = Vec::new();
    let mut table_pages = 0u64;

    macro_rules! table {
        ($def:expr, $name:literal) => {
            match txn.open_table($def) {
                Ok(t) => {
                    let s = t.stats().map_err(io)?;
                    table_pages += s.leaf_pages() + s.branch_pages();

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
    table!(HEALS, "heals");
    drop(txn);
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let allocated_bytes = match reader {
        Reader::Writable(db) => {
            let write = db.begin_write().map_err(io)?;
            let db_stats = write.stats().map_err(io)?;
            write.abort().map_err(io)?;
            db_stats.allocated_pages() * db_stats.page_size() as u64
        }
        Reader::ReadOnly(_) => table_pages * PAGE_BYTES,
    };
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
        store.writable("prune")?;
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
                        txn.open_table(HEALS)
                            .map_err(io)?
                            .retain_in(
                                (id, "", 0u32, 0u32, 0u32)..(next, "", 0u32, 0u32, 0u32),
                                |_, _| false,
                            )
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
