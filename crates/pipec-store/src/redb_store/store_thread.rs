//! The store thread: every write of a process goes through it, so the commits of
//! concurrent nodes share one transaction and its fsync (group commit). Each commit is
//! fenced by its thread's epoch inside that transaction.

use std::sync::{Arc, mpsc};

use redb::{Database, ReadableTable, WriteTransaction};
use tokio::sync::oneshot;

use super::contain::{Health, contained};
use super::tables::*;
use super::{Handle, RedbStore, io};
use crate::envelope::{decode, encode};
use crate::ids;
use crate::*;

/// A commit waiting on the store thread: thread, epoch, writes, and who to tell.
pub(super) type PendingCommit = (u128, u64, Vec<Write>, Reply<Vec<RecordedEvent>>);

/// How many commit requests one transaction may take.
pub(super) const BATCH: usize = 64;

pub(super) type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

pub(super) enum Job {
    Commit {
        thread: u128,
        epoch: u64,
        writes: Vec<Write>,
        reply: Reply<Vec<RecordedEvent>>,
    },
    Other(Box<dyn FnOnce(&Database) + Send>),
}

impl RedbStore {
    pub(super) fn send(&self, job: Job) -> Result<(), StoreError> {
        match &self.inner.handle {
            Some(Handle::Writable { jobs, .. }) => {
                let jobs = jobs.lock().unwrap_or_else(|e| e.into_inner());
                jobs.send(job).map_err(|_| self.stopped())
            }
            Some(Handle::ReadOnly { .. }) => Err(StoreError::ReadOnly {
                store: self.inner.path.display().to_string(),
                operation: "write",
            }),
            None => Err(self.stopped()),
        }
    }

    /// Why the store thread gave no answer.
    pub(super) fn stopped(&self) -> StoreError {
        if self.inner.health.is_broken() {
            self.inner.health.broken_error()
        } else {
            StoreError::Io(format!(
                "the store thread of {} stopped",
                self.inner.path.display()
            ))
        }
    }

    /// Runs `f` on the store thread (contained: a panic answers `R0410`) and waits for
    /// its answer.
    pub(super) async fn on_store_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, rx) = oneshot::channel();
        let health = self.inner.health.clone();
        self.send(Job::Other(Box::new(move |db| {
            let _ = reply.send(health.run("writing", || f(db)));
        })))?;
        rx.await.map_err(|_| self.stopped())?
    }
}

pub(super) fn store_thread(db: Arc<Database>, health: Arc<Health>, rx: mpsc::Receiver<Job>) {
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
            commit_batch(&db, &health, commits);
        }
        // Each job contains its own panics and answers a broken store's error.
        for f in others {
            f(&db);
        }
    }
    if health.is_broken() {
        // See `Drop for Inner`: redb's shutdown must not run on a panic's leftovers.
        std::mem::forget(db);
    } else {
        let _ = contained(move || drop(db));
    }
}

/// Applies a batch of commits in one transaction. A commit whose fence fails is left
/// out; if applying fails for another reason, each commit is retried on its own. A
/// panic inside redb answers every commit of the batch with `R0410`.
fn commit_batch(db: &Database, health: &Health, commits: Vec<PendingCommit>) {
    let result = health.run("committing", || {
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
    });
    match result {
        Ok(outcomes) => {
            for ((_, _, _, reply), outcome) in commits.into_iter().zip(outcomes) {
                let _ = reply.send(outcome.map_err(|e| health.locate(e)));
            }
        }
        Err(_) if commits.len() > 1 && !health.is_broken() => {
            for c in commits {
                commit_batch(db, health, vec![c]);
            }
        }
        Err(e) => {
            for (_, _, _, reply) in commits {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

pub(super) fn get_thread(
    txn: &WriteTransaction,
    id: u128,
) -> Result<Option<ThreadRec>, StoreError> {
    let threads = txn.open_table(THREADS).map_err(io)?;
    let v = threads.get(id).map_err(io)?;
    match v {
        Some(g) => Ok(Some(decode(g.value(), &|| {
            format!("thread {}", ids::encode(id))
        })?)),
        None => Ok(None),
    }
}

pub(super) fn put_thread(
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
pub(super) fn apply_fenced(
    txn: &WriteTransaction,
    thread: u128,
    epoch: u64,
    writes: &[Write],
) -> Result<Vec<RecordedEvent>, StoreError> {
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
pub(super) fn next_event_seq(txn: &WriteTransaction, thread: u128) -> Result<u64, StoreError> {
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
pub(super) fn apply_writes(
    txn: &WriteTransaction,
    thread: u128,
    mut rec: Option<&mut ThreadRec>,
    writes: &[Write],
) -> Result<Vec<RecordedEvent>, StoreError> {
    let now = ids::now_ms();
    let name = ids::encode(thread);
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
            Write::RemoveGate(name) => {
                let mut t = txn.open_table(GATES).map_err(io)?;
                t.remove((thread, name.as_str())).map_err(io)?;
            }
            Write::Heal(k, h) => {
                let mut t = txn.open_table(HEALS).map_err(io)?;
                t.insert(
                    (thread, k.node.as_str(), k.generation, k.item, k.index),
                    encode(h)?.as_slice(),
                )
                .map_err(io)?;
            }
            Write::Rename { from, to } => rename(txn, thread, from, to)?,
            Write::Thread(new) => {
                if let Some(rec) = rec.as_deref_mut() {
                    let epoch = rec.epoch;
                    let cancel = rec.cancel_requested;
                    *rec = new.clone();
                    rec.epoch = epoch;
                    rec.cancel_requested = cancel;
                }
            }
            Write::Event(event) => {
                // The thread and the sequence number are the row's key; reads add them
                // back.
                let row = EventRow {
                    ts: now,
                    event: event.clone(),
                };
                let seq = match next_seq {
                    Some(n) => n,
                    None => next_event_seq(txn, thread)?,
                };
                let mut t = txn.open_table(EVENTS).map_err(io)?;
                t.insert((thread, seq), encode(&row)?.as_slice())
                    .map_err(io)?;
                seqs.push(row.recorded(&name, seq));
                next_seq = Some(seq + 1);
            }
        }
    }
    if let (Some(n), Some(rec)) = (next_seq, rec) {
        rec.next_seq = n;
    }
    Ok(seqs)
}

/// Moves a node's rows (node, items, calls, gate) from one name to another.
fn rename(txn: &WriteTransaction, thread: u128, from: &str, to: &str) -> Result<(), StoreError> {
    const M: u32 = u32::MAX;
    {
        let mut t = txn.open_table(NODES).map_err(io)?;
        let row = t
            .remove((thread, from))
            .map_err(io)?
            .map(|g| g.value().to_vec());
        if let Some(row) = row {
            t.insert((thread, to), row.as_slice()).map_err(io)?;
        }
    }
    {
        let mut t = txn.open_table(GATES).map_err(io)?;
        let row = t
            .remove((thread, from))
            .map_err(io)?
            .map(|g| g.value().to_vec());
        if let Some(row) = row {
            // The row names its node too.
            let mut g: GateRec = decode(&row, &|| format!("gate `{from}`"))?;
            g.node = to.to_string();
            t.insert((thread, to), encode(&g)?.as_slice()).map_err(io)?;
        }
    }
    {
        let mut t = txn.open_table(ITEMS).map_err(io)?;
        let mut moved = Vec::new();
        for e in t
            .range((thread, from, 0u32, 0u32)..=(thread, from, M, M))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, _, generation, item) = k.value();
            moved.push((generation, item, v.value().to_vec()));
        }
        for (generation, item, v) in moved {
            t.remove((thread, from, generation, item)).map_err(io)?;
            t.insert((thread, to, generation, item), v.as_slice())
                .map_err(io)?;
        }
    }
    {
        let mut t = txn.open_table(CALLS).map_err(io)?;
        let mut moved = Vec::new();
        for e in t
            .range((thread, from, 0u32, 0u32, 0u32, 0u32)..=(thread, from, M, M, M, M))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, _, generation, item, seq, call) = k.value();
            moved.push(((generation, item, seq, call), v.value().to_vec()));
        }
        for ((generation, item, seq, call), v) in moved {
            t.remove((thread, from, generation, item, seq, call))
                .map_err(io)?;
            t.insert((thread, to, generation, item, seq, call), v.as_slice())
                .map_err(io)?;
        }
    }
    {
        let mut t = txn.open_table(HEALS).map_err(io)?;
        let mut moved = Vec::new();
        for e in t
            .range((thread, from, 0u32, 0u32, 0u32)..=(thread, from, M, M, M))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, _, generation, item, index) = k.value();
            moved.push(((generation, item, index), v.value().to_vec()));
        }
        for ((generation, item, index), v) in moved {
            t.remove((thread, from, generation, item, index))
                .map_err(io)?;
            t.insert((thread, to, generation, item, index), v.as_slice())
                .map_err(io)?;
        }
    }
    Ok(())
}
