//! The embedded store: one redb file, opened by every pipec process in `MultiWriter`
//! mode (so `runs`, `show` and other runs work beside a running one), all writes of a
//! process through one store thread that commits them in batches.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use redb::{
    Builder, ConcurrencyMode, Database, ReadTransaction, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use serde_json::Value;
use tokio::sync::oneshot;

use super::envelope::{decode, encode};
use super::ids;
use super::lock;
use super::*;

/// The format of the store file. Additive changes keep it; a breaking change bumps it
/// and comes with `pipec store migrate`.
pub const STORE_FORMAT: u32 = 1;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const PLANS: TableDefinition<&str, &[u8]> = TableDefinition::new("plans");
const THREADS: TableDefinition<u128, &[u8]> = TableDefinition::new("threads");
const BY_STATUS: TableDefinition<(u8, u128), ()> = TableDefinition::new("by_status");
const NODES: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("nodes");
const ITEMS: TableDefinition<(u128, &str, u32, u32), &[u8]> = TableDefinition::new("items");
const CALLS: TableDefinition<CallCols, &[u8]> = TableDefinition::new("calls");
const GATES: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("gates");
const ATTEMPTS: TableDefinition<(u128, u32), &[u8]> = TableDefinition::new("attempts");
const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events");
/// Each thread's fence, (epoch, cancel requested), kept apart from the thread record so
/// that checking it does not decode the record (whose inputs may be large). Written with
/// every write of the thread record; a thread without one (older stores) is fenced by
/// its record.
const FENCES: TableDefinition<u128, (u64, bool)> = TableDefinition::new("fences");

/// A journal key: thread, node, generation, item, sequence, call.
type CallCols = (u128, &'static str, u32, u32, u32, u32);

/// A commit waiting on the store thread: thread, epoch, writes, and who to tell.
type PendingCommit = (u128, u64, Vec<Write>, Reply<Vec<u64>>);

/// How many commit requests one transaction may take.
const BATCH: usize = 64;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Job {
    Commit {
        thread: u128,
        epoch: u64,
        writes: Vec<Write>,
        reply: Reply<Vec<u64>>,
    },
    Other(Box<dyn FnOnce(&Database) + Send>),
}

struct Inner {
    db: Arc<Database>,
    path: PathBuf,
    jobs: Mutex<mpsc::Sender<Job>>,
}

/// The redb store. Cheap to clone; one store thread per process and file.
#[derive(Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

fn io<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Io(e.to_string())
}

fn db_error(path: &Path, e: redb::DatabaseError) -> StoreError {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(what)) => StoreError::Corrupt {
            what: format!("{} is corrupt: {what}", path.display()),
        },
        redb::DatabaseError::Storage(redb::StorageError::Io(e))
            if e.kind() == std::io::ErrorKind::InvalidData
                || e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            StoreError::Corrupt {
                what: format!(
                    "{} is not a pipec store or is truncated: {e}",
                    path.display()
                ),
            }
        }
        redb::DatabaseError::UpgradeRequired(v) => StoreError::Corrupt {
            what: format!(
                "{} was written by an older redb (file format {v})",
                path.display()
            ),
        },
        other => StoreError::Corrupt {
            what: format!("{}: {other}", path.display()),
        },
    }
}

impl RedbStore {
    /// Opens (or creates) the store at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        if path.exists() {
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if len == 0 {
                return Err(StoreError::Corrupt {
                    what: format!("{} is empty, not a pipec store", path.display()),
                });
            }
        }
        let mut builder = Builder::new();
        builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
        builder.set_cache_size(64 * 1024 * 1024);
        // redb reports some damaged files by panicking deep inside; contain that.
        let opened =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.create(&path)));
        let db = match opened {
            Ok(Ok(db)) => db,
            Ok(Err(e)) => return Err(db_error(&path, e)),
            Err(_) => {
                return Err(StoreError::Corrupt {
                    what: format!("{} is not a pipec store or is damaged", path.display()),
                });
            }
        };
        let db = Arc::new(db);
        init(&db)?;
        let (tx, rx) = mpsc::channel::<Job>();
        let thread_db = db.clone();
        std::thread::Builder::new()
            .name("pipec-store".into())
            .spawn(move || store_thread(thread_db, rx))
            .map_err(io)?;
        Ok(RedbStore {
            inner: Arc::new(Inner {
                db,
                path,
                jobs: Mutex::new(tx),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        let jobs = self.inner.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.send(job)
            .map_err(|_| StoreError::Io("the store thread stopped".into()))
    }

    /// Runs `f` on the store thread and waits for its answer.
    async fn on_store_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Job::Other(Box::new(move |db| {
            let _ = reply.send(f(db));
        })))?;
        rx.await
            .map_err(|_| StoreError::Io("the store thread stopped".into()))?
    }

    /// Runs a read on a blocking thread.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.inner.db.clone();
        tokio::task::spawn_blocking(move || {
            let txn = db.begin_read().map_err(io)?;
            f(&txn)
        })
        .await
        .map_err(io)?
    }

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

    /// The store format recorded in the file.
    pub fn format_of(path: &Path) -> Result<u32, StoreError> {
        let mut builder = Builder::new();
        builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
        let db = builder.open(path).map_err(|e| db_error(path, e))?;
        let txn = db.begin_read().map_err(io)?;
        read_format(&txn)
    }
}

/// Marks a plan stored deflated. A stored plan is either plain JSON text (it starts with
/// `{`) or this byte followed by the deflated JSON.
const PLAN_DEFLATED: u8 = 0x02;

/// The largest plan a store will inflate (a damaged or hostile row cannot exhaust memory).
const MAX_PLAN_BYTES: usize = 256 * 1024 * 1024;

/// Plans are written once and read at every resume; deflated they take a tenth of the
/// space, and inflating one is far below a millisecond.
fn pack_plan(json: &str) -> Vec<u8> {
    let mut out = vec![PLAN_DEFLATED];
    out.extend(miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6));
    out
}

fn unpack_plan(bytes: &[u8], hash: &str) -> Result<String, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt {
        what: format!("the stored plan {hash}: {why}"),
    };
    let text = match bytes.split_first() {
        Some((&PLAN_DEFLATED, body)) => {
            miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_PLAN_BYTES)
                .map_err(|e| corrupt(format!("cannot inflate it ({e})")))?
        }
        Some((b'{', _)) => bytes.to_vec(),
        _ => return Err(corrupt("not a plan".into())),
    };
    String::from_utf8(text).map_err(|_| corrupt("not UTF-8".into()))
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

fn read_format(txn: &ReadTransaction) -> Result<u32, StoreError> {
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(io(e)),
    };
    let v = meta.get("store_format").map_err(io)?;
    Ok(v.and_then(|g| {
        std::str::from_utf8(g.value())
            .ok()
            .and_then(|s| s.parse().ok())
    })
    .unwrap_or(0))
}

/// Creates the tables and records the format; refuses a newer format.
fn init(db: &Database) -> Result<(), StoreError> {
    {
        let txn = db.begin_read().map_err(io)?;
        let found = read_format(&txn)?;
        if found > STORE_FORMAT {
            return Err(StoreError::NewerFormat {
                found,
                supported: STORE_FORMAT,
            });
        }
        if found == STORE_FORMAT {
            return Ok(());
        }
    }
    let txn = db.begin_write().map_err(io)?;
    {
        let mut meta = txn.open_table(META).map_err(io)?;
        let existing = meta.get("store_format").map_err(io)?.and_then(|g| {
            std::str::from_utf8(g.value())
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
        });
        match existing {
            Some(v) if v > STORE_FORMAT => {
                return Err(StoreError::NewerFormat {
                    found: v,
                    supported: STORE_FORMAT,
                });
            }
            Some(_) => {}
            None => {
                meta.insert("store_format", STORE_FORMAT.to_string().as_bytes())
                    .map_err(io)?;
                meta.insert(
                    "created_by",
                    format!("pipec {}", env!("CARGO_PKG_VERSION")).as_bytes(),
                )
                .map_err(io)?;
                meta.insert("redb", b"4.6 multi-writer".as_slice())
                    .map_err(io)?;
            }
        }
        txn.open_table(PLANS).map_err(io)?;
        txn.open_table(THREADS).map_err(io)?;
        txn.open_table(BY_STATUS).map_err(io)?;
        txn.open_table(NODES).map_err(io)?;
        txn.open_table(ITEMS).map_err(io)?;
        txn.open_table(CALLS).map_err(io)?;
        txn.open_table(GATES).map_err(io)?;
        txn.open_table(ATTEMPTS).map_err(io)?;
        txn.open_table(EVENTS).map_err(io)?;
        txn.open_table(FENCES).map_err(io)?;
    }
    txn.commit().map_err(io)
}

// ---------------------------------------------------------------- the store thread

fn store_thread(db: Arc<Database>, rx: mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut commits = Vec::new();
        let mut others = Vec::new();
        match first {
            Job::Commit {
                thread,
                epoch,
                writes,
                reply,
            } => commits.push((thread, epoch, writes, reply)),
            Job::Other(f) => others.push(f),
        }
        // Group commit: take whatever else is already waiting.
        while commits.len() < BATCH {
            match rx.try_recv() {
                Ok(Job::Commit {
                    thread,
                    epoch,
                    writes,
                    reply,
                }) => commits.push((thread, epoch, writes, reply)),
                Ok(Job::Other(f)) => others.push(f),
                Err(_) => break,
            }
        }
        if !commits.is_empty() {
            commit_batch(&db, commits);
        }
        for f in others {
            f(&db);
        }
    }
}

/// Applies a batch of commits in one transaction. A commit whose fence fails is left
/// out; if applying fails for another reason, each commit is retried on its own.
fn commit_batch(db: &Database, commits: Vec<PendingCommit>) {
    let result = (|| -> Result<Vec<Result<Vec<u64>, StoreError>>, StoreError> {
        let txn = db.begin_write().map_err(io)?;
        let mut outcomes = Vec::with_capacity(commits.len());
        for (thread, epoch, writes, _) in &commits {
            outcomes.push(apply_fenced(&txn, *thread, *epoch, writes));
        }
        if outcomes
            .iter()
            .any(|o| matches!(o, Err(StoreError::Io(_)) | Err(StoreError::Corrupt { .. })))
        {
            let _ = txn.abort();
            return Err(StoreError::Io("batch failed".into()));
        }
        txn.commit().map_err(io)?;
        Ok(outcomes)
    })();
    match result {
        Ok(outcomes) => {
            for ((_, _, _, reply), outcome) in commits.into_iter().zip(outcomes) {
                let _ = reply.send(outcome);
            }
        }
        Err(_) if commits.len() > 1 => {
            for c in commits {
                commit_batch(db, vec![c]);
            }
        }
        Err(e) => {
            for (_, _, _, reply) in commits {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

fn get_thread(txn: &WriteTransaction, id: u128) -> Result<Option<ThreadRec>, StoreError> {
    let threads = txn.open_table(THREADS).map_err(io)?;
    let v = threads.get(id).map_err(io)?;
    match v {
        Some(g) => Ok(Some(decode(g.value(), &|| {
            format!("thread {}", ids::encode(id))
        })?)),
        None => Ok(None),
    }
}

fn put_thread(
    txn: &WriteTransaction,
    id: u128,
    old_status: Option<Status>,
    rec: &ThreadRec,
) -> Result<(), StoreError> {
    let mut rec = rec.clone();
    rec.updated_ms = ids::now_ms();
    let mut threads = txn.open_table(THREADS).map_err(io)?;
    threads.insert(id, encode(&rec)?.as_slice()).map_err(io)?;
    txn.open_table(FENCES)
        .map_err(io)?
        .insert(id, (rec.epoch, rec.cancel_requested))
        .map_err(io)?;
    if old_status != Some(rec.status) {
        let mut by = txn.open_table(BY_STATUS).map_err(io)?;
        if let Some(old) = old_status {
            by.remove((old.code(), id)).map_err(io)?;
        }
        by.insert((rec.status.code(), id), ()).map_err(io)?;
    }
    Ok(())
}

/// The fence, then the writes. Only a writer with the current epoch may write; after a
/// cancel request, only the write that records the cancellation passes.
fn apply_fenced(
    txn: &WriteTransaction,
    thread: u128,
    epoch: u64,
    writes: &[Write],
) -> Result<Vec<u64>, StoreError> {
    let name = ids::encode(thread);
    let not_found = || StoreError::NotFound {
        thread: ids::encode(thread),
        store: String::new(),
    };
    let fence = txn
        .open_table(FENCES)
        .map_err(io)?
        .get(thread)
        .map_err(io)?
        .map(|g| g.value());
    let (current, cancel_requested) = match fence {
        Some(f) => f,
        None => {
            let rec = get_thread(txn, thread)?.ok_or_else(not_found)?;
            (rec.epoch, rec.cancel_requested)
        }
    };
    if current != epoch {
        return Err(StoreError::Fenced {
            thread: name,
            reason: format!("another process took the thread over (epoch {current} ≠ {epoch})"),
        });
    }
    let records_cancel = writes
        .iter()
        .any(|w| matches!(w, Write::Thread(t) if t.status == Status::Cancelled));
    if cancel_requested && !records_cancel {
        return Err(StoreError::Cancelled { thread: name });
    }
    // The thread record is read and rewritten only when the commit changes it: a step's
    // commit touches the tables of what it wrote, not the thread's record too.
    if writes.iter().any(|w| matches!(w, Write::Thread(_))) {
        let mut rec = get_thread(txn, thread)?.ok_or_else(not_found)?;
        let old_status = rec.status;
        let seqs = apply_writes(txn, thread, Some(&mut rec), writes)?;
        put_thread(txn, thread, Some(old_status), &rec)?;
        Ok(seqs)
    } else {
        apply_writes(txn, thread, None, writes)
    }
}

/// The next event number of a thread: one past its last event row.
fn next_event_seq(txn: &WriteTransaction, thread: u128) -> Result<u64, StoreError> {
    let t = txn.open_table(EVENTS).map_err(io)?;
    let last = t
        .range((thread, 0u64)..=(thread, u64::MAX))
        .map_err(io)?
        .next_back()
        .transpose()
        .map_err(io)?;
    Ok(last.map_or(0, |(k, _)| k.value().1 + 1))
}

/// Applies the rows of a commit. `rec` is the thread's record when the caller rewrites
/// it afterwards: `Write::Thread` is merged into it (keeping its fence) and it learns the
/// next event number.
fn apply_writes(
    txn: &WriteTransaction,
    thread: u128,
    mut rec: Option<&mut ThreadRec>,
    writes: &[Write],
) -> Result<Vec<u64>, StoreError> {
    let now = ids::now_ms();
    let mut seqs = Vec::new();
    let mut next_seq = None;
    for w in writes {
        match w {
            Write::Node(name, n) => {
                let mut t = txn.open_table(NODES).map_err(io)?;
                t.insert((thread, name.as_str()), encode(n)?.as_slice())
                    .map_err(io)?;
            }
            Write::Item(name, generation, item, r) => {
                let mut t = txn.open_table(ITEMS).map_err(io)?;
                t.insert(
                    (thread, name.as_str(), *generation, *item),
                    encode(r)?.as_slice(),
                )
                .map_err(io)?;
            }
            Write::Call(k, r) => {
                let mut t = txn.open_table(CALLS).map_err(io)?;
                t.insert(
                    (thread, k.node.as_str(), k.generation, k.item, k.seq, k.call),
                    encode(r)?.as_slice(),
                )
                .map_err(io)?;
            }
            Write::Gate(name, g) => {
                let mut t = txn.open_table(GATES).map_err(io)?;
                t.insert((thread, name.as_str()), encode(g)?.as_slice())
                    .map_err(io)?;
            }
            Write::Attempt(a) => {
                let mut t = txn.open_table(ATTEMPTS).map_err(io)?;
                t.insert((thread, a.number), encode(a)?.as_slice())
                    .map_err(io)?;
            }
            Write::Thread(new) => {
                if let Some(rec) = rec.as_deref_mut() {
                    let epoch = rec.epoch;
                    let cancel = rec.cancel_requested;
                    *rec = new.clone();
                    rec.epoch = epoch;
                    rec.cancel_requested = cancel;
                }
            }
            Write::Event(v) => {
                // The thread and the sequence number are the row's key; reads add them back.
                let mut ev = v.clone();
                if let Value::Object(m) = &mut ev {
                    m.remove("seq");
                    m.remove("thread");
                    m.remove("v");
                    m.entry("ts").or_insert(Value::from(now));
                }
                let seq = match next_seq {
                    Some(n) => n,
                    None => next_event_seq(txn, thread)?,
                };
                let mut t = txn.open_table(EVENTS).map_err(io)?;
                t.insert((thread, seq), encode(&ev)?.as_slice())
                    .map_err(io)?;
                seqs.push(seq);
                next_seq = Some(seq + 1);
            }
        }
    }
    if let (Some(n), Some(rec)) = (next_seq, rec) {
        rec.next_seq = n;
    }
    Ok(seqs)
}

// ---------------------------------------------------------------- reads

fn resolve_id(txn: &ReadTransaction, id: &str, store: &Path) -> Result<u128, StoreError> {
    let not_found = || StoreError::NotFound {
        thread: id.to_string(),
        store: store.display().to_string(),
    };
    let upper = id.trim().to_ascii_uppercase();
    if upper.is_empty() || upper.len() > 26 {
        return Err(not_found());
    }
    if let Some(n) = ids::decode(&upper) {
        let threads = txn.open_table(THREADS).map_err(io)?;
        return match threads.get(n).map_err(io)? {
            Some(_) => Ok(n),
            None => Err(not_found()),
        };
    }
    // A prefix: the range of ids that start with it.
    let lo =
        ids::decode(&format!("{upper}{}", "0".repeat(26 - upper.len()))).ok_or_else(not_found)?;
    let hi = ids::decode(&format!("{upper}{}", "Z".repeat(26 - upper.len()))).unwrap_or(u128::MAX);
    let threads = txn.open_table(THREADS).map_err(io)?;
    let mut found = Vec::new();
    for entry in threads.range(lo..=hi).map_err(io)? {
        let (k, _) = entry.map_err(io)?;
        found.push(k.value());
        if found.len() > 3 {
            break;
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(not_found()),
        many => Err(StoreError::Ambiguous {
            prefix: id.to_string(),
            matches: many.iter().map(|n| ids::encode(*n)).collect(),
        }),
    }
}

fn read_thread(txn: &ReadTransaction, id: u128) -> Result<Option<ThreadRec>, StoreError> {
    let threads = txn.open_table(THREADS).map_err(io)?;
    let v = threads.get(id).map_err(io)?;
    match v {
        Some(g) => Ok(Some(decode(g.value(), &|| {
            format!("thread {}", ids::encode(id))
        })?)),
        None => Ok(None),
    }
}

fn load_state(txn: &ReadTransaction, id: u128) -> Result<ThreadState, StoreError> {
    let name = ids::encode(id);
    let mut st = ThreadState {
        thread: read_thread(txn, id)?,
        ..Default::default()
    };
    let next = id.wrapping_add(1);
    {
        let t = txn.open_table(NODES).map_err(io)?;
        for e in t.range((id, "")..(next, "")).map_err(io)? {
            let (k, v) = e.map_err(io)?;
            let node = k.value().1.to_string();
            let rec: NodeRec = decode(v.value(), &|| format!("thread {name}, node `{node}`"))?;
            st.nodes.insert(node, rec);
        }
    }
    {
        let t = txn.open_table(ITEMS).map_err(io)?;
        for e in t
            .range((id, "", 0u32, 0u32)..(next, "", 0u32, 0u32))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, node, generation, item) = k.value();
            let rec: ItemRec = decode(v.value(), &|| {
                format!("thread {name}, item {item} of `{node}`")
            })?;
            st.items.insert((node.to_string(), generation, item), rec);
        }
    }
    {
        let t = txn.open_table(CALLS).map_err(io)?;
        for e in t
            .range((id, "", 0u32, 0u32, 0u32, 0u32)..(next, "", 0u32, 0u32, 0u32, 0u32))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, node, generation, item, seq, call) = k.value();
            let key = CallKey {
                node: node.to_string(),
                generation,
                item,
                seq,
                call,
            };
            let rec: CallRec = decode(v.value(), &|| {
                format!("thread {name}, call {}", key.display())
            })?;
            st.calls.insert(key, rec);
        }
    }
    {
        let t = txn.open_table(GATES).map_err(io)?;
        for e in t.range((id, "")..(next, "")).map_err(io)? {
            let (k, v) = e.map_err(io)?;
            let gate = k.value().1.to_string();
            let rec: GateRec = decode(v.value(), &|| format!("thread {name}, gate `{gate}`"))?;
            st.gates.insert(gate, rec);
        }
    }
    {
        let t = txn.open_table(ATTEMPTS).map_err(io)?;
        for e in t.range((id, 0u32)..(next, 0u32)).map_err(io)? {
            let (_, v) = e.map_err(io)?;
            st.attempts
                .push(decode(v.value(), &|| format!("thread {name}, attempt"))?);
        }
    }
    Ok(st)
}

impl Store for RedbStore {
    fn location(&self) -> String {
        self.inner.path.display().to_string()
    }

    fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()> {
        let (hash, json) = (hash.to_string(), plan_json.to_string());
        Box::pin(self.on_store_thread(move |db| {
            let txn = db.begin_write().map_err(io)?;
            {
                let mut t = txn.open_table(PLANS).map_err(io)?;
                if t.get(hash.as_str()).map_err(io)?.is_none() {
                    t.insert(hash.as_str(), pack_plan(&json).as_slice())
                        .map_err(io)?;
                }
            }
            txn.commit().map_err(io)
        }))
    }

    fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>> {
        let hash = hash.to_string();
        Box::pin(self.read(move |txn| {
            let t = txn.open_table(PLANS).map_err(io)?;
            let v = t.get(hash.as_str()).map_err(io)?;
            v.map(|g| unpack_plan(g.value(), &hash)).transpose()
        }))
    }

    fn create_thread(&self, rec: ThreadRec, attempt: AttemptRec) -> StoreFuture<'_, Lease> {
        let path = self.inner.path.clone();
        Box::pin(async move {
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
            self.on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                if get_thread(&txn, id)?.is_some() {
                    return Err(StoreError::Io(format!("thread {} already exists", rec.id)));
                }
                let mut rec = rec;
                apply_writes(
                    &txn,
                    id,
                    Some(&mut rec),
                    &[
                        Write::Attempt(attempt),
                        Write::Event(
                            serde_json::json!({ "type": "thread_created", "attempt": number }),
                        ),
                    ],
                )?;
                put_thread(&txn, id, None, &rec)?;
                txn.commit().map_err(io)
            })
            .await?;
            Ok(Lease {
                thread,
                epoch,
                run_id,
                attempt: number,
                _lock: Some(lock),
            })
        })
    }

    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, (Lease, ThreadState)> {
        let thread = thread.to_string();
        let path = self.inner.path.clone();
        Box::pin(async move {
            let p2 = path.clone();
            let t2 = thread.clone();
            let (id, rec) = self
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
            let (epoch, number) = self
                .on_store_thread(move |db| {
                    let txn = db.begin_write().map_err(io)?;
                    let Some(mut rec) = get_thread(&txn, id)? else {
                        return Err(StoreError::NotFound {
                            thread: ids::encode(id),
                            store: String::new(),
                        });
                    };
                    let old = rec.status;
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
                    apply_writes(
                        &txn,
                        id,
                        Some(&mut rec),
                        &[
                            Write::Attempt(attempt),
                            Write::Event(
                                serde_json::json!({ "type": "attempt_started", "attempt": number }),
                            ),
                        ],
                    )?;
                    put_thread(&txn, id, Some(old), &rec)?;
                    let epoch = rec.epoch;
                    txn.commit().map_err(io)?;
                    Ok((epoch, number))
                })
                .await?;
            let state = self.read(move |txn| load_state(txn, id)).await?;
            Ok((
                Lease {
                    thread: name,
                    epoch,
                    run_id,
                    attempt: number,
                    _lock: Some(lock),
                },
                state,
            ))
        })
    }

    fn commit<'a>(&'a self, lease: &'a Lease, writes: Vec<Write>) -> StoreFuture<'a, Vec<u64>> {
        Box::pin(async move {
            let Some(thread) = ids::decode(&lease.thread) else {
                return Err(StoreError::Io(format!(
                    "`{}` is not a thread id",
                    lease.thread
                )));
            };
            let (reply, rx) = oneshot::channel();
            self.send(Job::Commit {
                thread,
                epoch: lease.epoch,
                writes,
                reply,
            })?;
            rx.await
                .map_err(|_| StoreError::Io("the store thread stopped".into()))?
        })
    }

    fn answer(&self, thread: &str, answers: Vec<(String, Value)>, by: &str) -> StoreFuture<'_, ()> {
        let (thread, by) = (thread.to_string(), by.to_string());
        let path = self.inner.path.clone();
        Box::pin(async move {
            let p2 = path.clone();
            let id = self.read(move |txn| resolve_id(txn, &thread, &p2)).await?;
            self.on_store_thread(move |db| {
                let txn = db.begin_write().map_err(io)?;
                let Some(mut rec) = get_thread(&txn, id)? else {
                    return Err(StoreError::NotFound { thread: ids::encode(id), store: path.display().to_string() });
                };
                let now = ids::now_ms();
                let mut writes = Vec::new();
                {
                    let gates = txn.open_table(GATES).map_err(io)?;
                    let mut pending = Vec::new();
                    let mut all: Vec<(String, GateRec)> = Vec::new();
                    for e in gates.range((id, "")..(id.wrapping_add(1), "")).map_err(io)? {
                        let (k, v) = e.map_err(io)?;
                        let name = k.value().1.to_string();
                        let g: GateRec = decode(v.value(), &|| format!("gate `{name}`"))?;
                        if g.state == GateState::Pending {
                            pending.push(name.clone());
                        }
                        all.push((name, g));
                    }
                    // All answers are checked first: all or none are written.
                    for (gate, value) in &answers {
                        let Some((_, g)) = all.iter().find(|(n, _)| n == gate) else {
                            return Err(StoreError::NoSuchGate { gate: gate.clone(), pending: pending.clone() });
                        };
                        match g.state {
                            GateState::Answered if g.answer.as_ref() == Some(value) => {}
                            GateState::Answered => {
                                return Err(StoreError::AlreadyAnswered { gate: gate.clone(), by: g.answered_by.clone().unwrap_or_default() });
                            }
                            GateState::Pending => {
                                let mut g = g.clone();
                                g.state = GateState::Answered;
                                g.answer = Some(value.clone());
                                g.answered_ms = now;
                                g.answered_by = Some(by.clone());
                                writes.push(Write::Gate(gate.clone(), g));
                                writes.push(Write::Event(serde_json::json!({ "type": "gate_answered", "gate": gate, "by": by })));
                            }
                        }
                    }
                }
                let old = rec.status;
                apply_writes(&txn, id, Some(&mut rec), &writes)?;
                put_thread(&txn, id, Some(old), &rec)?;
                txn.commit().map_err(io)
            })
            .await
        })
    }

    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, CancelOutcome> {
        let thread = thread.to_string();
        let path = self.inner.path.clone();
        Box::pin(async move {
            let p2 = path.clone();
            let id = self.read(move |txn| resolve_id(txn, &thread, &p2)).await?;
            let name = ids::encode(id);
            // If no process holds it, hold it ourselves while cancelling.
            let lock = lock::try_lock(&path, &name, Duration::from_millis(0)).map_err(io)?;
            let held_by_other = lock.is_none();
            let outcome = self
                .on_store_thread(move |db| {
                    let txn = db.begin_write().map_err(io)?;
                    let Some(mut rec) = get_thread(&txn, id)? else {
                        return Err(StoreError::NotFound {
                            thread: ids::encode(id),
                            store: String::new(),
                        });
                    };
                    if rec.status.is_terminal() {
                        return Ok(CancelOutcome::AlreadyEnded(rec.status));
                    }
                    let old = rec.status;
                    let outcome = if held_by_other {
                        rec.cancel_requested = true;
                        apply_writes(
                            &txn,
                            id,
                            Some(&mut rec),
                            &[Write::Event(
                                serde_json::json!({ "type": "cancel_requested" }),
                            )],
                        )?;
                        CancelOutcome::Requested
                    } else {
                        rec.status = Status::Cancelled;
                        rec.holder = None;
                        apply_writes(
                            &txn,
                            id,
                            Some(&mut rec),
                            &[Write::Event(
                                serde_json::json!({ "type": "thread_cancelled" }),
                            )],
                        )?;
                        CancelOutcome::Cancelled
                    };
                    put_thread(&txn, id, Some(old), &rec)?;
                    txn.commit().map_err(io)?;
                    Ok(outcome)
                })
                .await;
            drop(lock);
            outcome
        })
    }

    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
        let thread = thread.to_string();
        let path = self.inner.path.clone();
        Box::pin(self.read(move |txn| {
            let id = resolve_id(txn, &thread, &path)?;
            load_state(txn, id)
        }))
    }

    fn is_held(&self, thread: &str) -> bool {
        lock::is_locked(&self.inner.path, thread)
    }

    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
        let path = self.inner.path.clone();
        Box::pin(self.read(move |txn| {
            let before = match &query.before {
                Some(b) => Some(ids::decode(b).ok_or_else(|| StoreError::NotFound {
                    thread: b.clone(),
                    store: path.display().to_string(),
                })?),
                None => None,
            };
            let limit = if query.limit == 0 { 50 } else { query.limit };
            let threads = txn.open_table(THREADS).map_err(io)?;
            let mut out = Vec::new();
            let mut push = |id: u128| -> Result<bool, StoreError> {
                if let Some(g) = threads.get(id).map_err(io)? {
                    let rec: ThreadRec =
                        decode(g.value(), &|| format!("thread {}", ids::encode(id)))?;
                    if query.pipeline.as_ref().is_some_and(|p| *p != rec.pipeline) {
                        return Ok(false);
                    }
                    let stale = rec.status == Status::Running && !lock::is_locked(&path, &rec.id);
                    out.push(ThreadSummary {
                        id: rec.id,
                        pipeline: rec.pipeline,
                        status: rec.status,
                        stale,
                        created_ms: rec.created_ms,
                        updated_ms: rec.updated_ms,
                    });
                }
                Ok(out.len() >= limit)
            };
            match query.status {
                Some(status) => {
                    let by = txn.open_table(BY_STATUS).map_err(io)?;
                    let hi = match before {
                        Some(b) => Bound::Excluded((status.code(), b)),
                        None => Bound::Included((status.code(), u128::MAX)),
                    };
                    let range = by
                        .range::<(u8, u128)>((Bound::Included((status.code(), 0u128)), hi))
                        .map_err(io)?;
                    for e in range.rev() {
                        let (k, _) = e.map_err(io)?;
                        if push(k.value().1)? {
                            break;
                        }
                    }
                }
                None => {
                    let hi = match before {
                        Some(b) => Bound::Excluded(b),
                        None => Bound::Unbounded,
                    };
                    let ids_in_range: Vec<u128> = {
                        let mut v = Vec::new();
                        for e in threads
                            .range::<u128>((Bound::Unbounded, hi))
                            .map_err(io)?
                            .rev()
                        {
                            let (k, _) = e.map_err(io)?;
                            v.push(k.value());
                            if v.len() >= limit * 4 + 64 && query.pipeline.is_none() {
                                break;
                            }
                        }
                        v
                    };
                    for id in ids_in_range {
                        if push(id)? {
                            break;
                        }
                    }
                }
            }
            Ok(out)
        }))
    }

    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<Value>> {
        let thread = thread.to_string();
        let path = self.inner.path.clone();
        Box::pin(self.read(move |txn| {
            let id = resolve_id(txn, &thread, &path)?;
            let t = txn.open_table(EVENTS).map_err(io)?;
            let mut out = Vec::new();
            for e in t
                .range((id, since)..(id.wrapping_add(1), 0u64))
                .map_err(io)?
            {
                let (k, v) = e.map_err(io)?;
                let mut ev: Value = decode(v.value(), &|| "event".to_string())?;
                if let Value::Object(m) = &mut ev {
                    m.insert("seq".into(), Value::from(k.value().1));
                    m.insert("thread".into(), Value::String(ids::encode(id)));
                    m.insert("v".into(), Value::from(1));
                }
                out.push(ev);
            }
            Ok(out)
        }))
    }

    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
        let path = self.inner.path.clone();
        Box::pin(async move {
            let statuses: Vec<Status> = statuses.into_iter().filter(|s| s.is_terminal()).collect();
            let victims: Vec<u128> = self
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
                self.on_store_thread(move |db| {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn temp_store(tag: &str) -> (RedbStore, PathBuf) {
        let dir = std::env::temp_dir().join(format!("pipec-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("runs.redb");
        (RedbStore::open(&path).expect("store"), dir)
    }

    fn thread_rec() -> ThreadRec {
        ThreadRec {
            id: ids::new_thread_id(),
            pipeline: "p".into(),
            plan_hash: "sha256:0".into(),
            source: "p.pipe".into(),
            project_root: ".".into(),
            status: Status::Running,
            cancel_requested: false,
            epoch: 1,
            holder: None,
            created_ms: 0,
            updated_ms: 0,
            inputs: json!({ "doc": "x".repeat(10_000) }),
            config: Default::default(),
            model_overrides: Default::default(),
            pre_answers: Default::default(),
            outputs: None,
            error: None,
            next_seq: 0,
            attempts: 1,
            due_ms: None,
        }
    }

    fn attempt() -> AttemptRec {
        AttemptRec {
            number: 1,
            run_id: "r".into(),
            pid: 0,
            host: "h".into(),
            started_ms: 0,
            ended_ms: 0,
            end: None,
            plan_hash: String::new(),
            pipec: String::new(),
        }
    }

    fn node(v: i64) -> Write {
        Write::Node("n".into(), NodeRec::done(json!(v)))
    }

    /// A lease as a process that lost its thread still holds it: its epoch, no lock.
    fn stale(lease: &Lease) -> Lease {
        Lease {
            thread: lease.thread.clone(),
            epoch: lease.epoch,
            run_id: lease.run_id.clone(),
            attempt: lease.attempt,
            _lock: None,
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_writer_whose_epoch_moved_on_writes_nothing() {
        let (store, dir) = temp_store("fence");
        let rt = rt();
        let first = rt
            .block_on(store.create_thread(thread_rec(), attempt()))
            .expect("create");
        let old = stale(&first);
        drop(first);
        let (second, _) = rt
            .block_on(store.claim(&old.thread, attempt()))
            .expect("claim");
        assert_eq!(second.epoch, old.epoch + 1);
        let err = rt
            .block_on(store.commit(&old, vec![node(1)]))
            .expect_err("fenced");
        assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
        rt.block_on(store.commit(&second, vec![node(2)]))
            .expect("the holder writes");
        let state = rt.block_on(store.load(&old.thread)).expect("load");
        assert_eq!(state.nodes["n"].value, Some(json!(2)));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn after_a_cancel_request_only_the_cancellation_is_written() {
        let (store, dir) = temp_store("cancel");
        let rt = rt();
        let lease = rt
            .block_on(store.create_thread(thread_rec(), attempt()))
            .expect("create");
        // The lease holds the lock, so the cancel is a request.
        let outcome = rt
            .block_on(store.request_cancel(&lease.thread))
            .expect("cancel");
        assert_eq!(outcome, CancelOutcome::Requested);
        let err = rt
            .block_on(store.commit(&lease, vec![node(1)]))
            .expect_err("fenced");
        assert!(matches!(err, StoreError::Cancelled { .. }), "{err:?}");
        let mut rec = rt
            .block_on(store.load(&lease.thread))
            .expect("load")
            .thread
            .expect("thread");
        rec.status = Status::Cancelled;
        rt.block_on(store.commit(&lease, vec![Write::Thread(rec)]))
            .expect("the cancellation is recorded");
        let state = rt.block_on(store.load(&lease.thread)).expect("load");
        assert_eq!(state.thread.map(|t| t.status), Some(Status::Cancelled));
        assert!(!state.nodes.contains_key("n"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_thread_without_a_fence_row_is_fenced_by_its_record() {
        let (store, dir) = temp_store("nofence");
        let rt = rt();
        let first = rt
            .block_on(store.create_thread(thread_rec(), attempt()))
            .expect("create");
        let old = stale(&first);
        drop(first);
        let (second, _) = rt
            .block_on(store.claim(&old.thread, attempt()))
            .expect("claim");
        // As a store written before fences had their own rows.
        let id = ids::decode(&old.thread).expect("id");
        rt.block_on(store.on_store_thread(move |db| {
            let txn = db.begin_write().map_err(io)?;
            txn.open_table(FENCES).map_err(io)?.remove(id).map_err(io)?;
            txn.commit().map_err(io)
        }))
        .expect("fence removed");
        let err = rt
            .block_on(store.commit(&old, vec![node(1)]))
            .expect_err("fenced");
        assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
        rt.block_on(store.commit(&second, vec![node(2)]))
            .expect("the holder writes");
        let _ = std::fs::remove_dir_all(dir);
    }
}
