//! The embedded store: one redb file, opened by every pipec process in `MultiWriter`
//! mode (so `runs`, `show` and other runs work beside a running one), to write (all
//! writes of a process through one store thread that commits them in batches) or
//! read-only (no store thread; the file does not change).
//!
//! `tables` has the file's layout, `open` opening it, `store_thread` the writer with
//! group commit and fencing, `writes` the other writes, `reads` the reads,
//! `maintenance` prune, the integrity check and the statistics, and `contain` keeps
//! redb's panics from reaching the user.

mod contain;
mod maintenance;
mod open;
mod queue;
mod reads;
mod store_thread;
mod tables;
mod writes;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use redb::{Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase};
use serde_json::Value;

pub use contain::quiet_contained_panics;
pub use maintenance::CheckReport;
pub use tables::STORE_FORMAT;

use super::*;
use contain::Health;
use store_thread::Job;

struct Inner {
    path: PathBuf,
    health: Arc<Health>,
    /// The wake file's content when this process last looked for work (`queue.rs`).
    wake_seen: Mutex<Option<Vec<u8>>>,
    /// Always `Some` until the store is dropped (see `Drop for Inner`).
    handle: Option<Handle>,
}

/// The open file.
enum Handle {
    /// Opened to write: reads go to the file directly, writes to the store thread.
    Writable {
        db: Arc<Database>,
        jobs: Mutex<mpsc::Sender<Job>>,
        store_thread: Option<std::thread::JoinHandle<()>>,
    },
    /// Opened to read only: nothing in the file changes, writes are refused.
    ReadOnly { db: Arc<ReadOnlyDatabase> },
}

/// Either handle, as a read needs it.
#[derive(Clone)]
enum Reader {
    Writable(Arc<Database>),
    ReadOnly(Arc<ReadOnlyDatabase>),
}

impl Reader {
    fn begin_read(&self) -> Result<ReadTransaction, StoreError> {
        match self {
            Reader::Writable(db) => db.begin_read().map_err(io),
            Reader::ReadOnly(db) => db.begin_read().map_err(io),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        if self.health.is_broken() {
            // redb's shutdown would run on the state a panic left behind; the kernel
            // releases the file and its locks when the process ends.
            std::mem::forget(handle);
            return;
        }
        match handle {
            Handle::Writable {
                db,
                jobs,
                store_thread,
            } => {
                // The store thread holds the database too. Closing its queue ends it, and
                // waiting for it means the file is closed cleanly before the process may
                // exit: a file left open counts as a crash, which the next open repairs
                // (and a read-only open cannot).
                let _ = contain::contained(move || drop(db));
                drop(jobs);
                if let Some(thread) = store_thread
                    && thread.thread().id() != std::thread::current().id()
                {
                    let _ = thread.join();
                }
            }
            read_only => {
                let _ = contain::contained(move || drop(read_only));
            }
        }
    }
}

/// The redb store. Cheap to clone; one store thread per process and file (none when it
/// is open read-only).
#[derive(Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

fn io<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Io(e.to_string())
}

impl RedbStore {
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether the store was opened with [`RedbStore::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        matches!(self.inner.handle, Some(Handle::ReadOnly { .. }))
    }

    fn reader(&self) -> Result<Reader, StoreError> {
        match &self.inner.handle {
            Some(Handle::Writable { db, .. }) => Ok(Reader::Writable(db.clone())),
            Some(Handle::ReadOnly { db }) => Ok(Reader::ReadOnly(db.clone())),
            None => Err(self.inner.health.broken_error()),
        }
    }

    /// Refuses a write on a store opened read-only.
    fn writable(&self, operation: &'static str) -> Result<(), StoreError> {
        if self.is_read_only() {
            return Err(StoreError::ReadOnly {
                store: self.inner.path.display().to_string(),
                operation,
            });
        }
        Ok(())
    }
}

impl Store for RedbStore {
    fn location(&self) -> String {
        self.inner.path.display().to_string()
    }

    fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()> {
        writes::put_plan(self, hash, plan_json)
    }

    fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>> {
        reads::get_plan(self, hash)
    }

    fn create_thread(
        &self,
        rec: ThreadRec,
        attempt: AttemptRec,
    ) -> StoreFuture<'_, (Lease, Vec<RecordedEvent>)> {
        writes::create_thread(self, rec, attempt)
    }

    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, Claimed> {
        writes::claim(self, thread, attempt, Vec::new(), "")
    }

    fn claim_answering(
        &self,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Claimed> {
        writes::claim(self, thread, attempt, answers, by)
    }

    fn commit<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        writes::commit(self, lease, writes)
    }

    fn answer(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Vec<RecordedEvent>> {
        writes::answer(self, thread, answers, by)
    }

    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, (CancelOutcome, Vec<RecordedEvent>)> {
        writes::request_cancel(self, thread)
    }

    fn cancel_requested<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, bool> {
        reads::cancel_requested(self, thread)
    }

    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
        reads::load(self, thread)
    }

    fn is_held(&self, thread: &str) -> bool {
        lock::is_locked(&self.inner.path, thread)
    }

    fn import(&self, state: ThreadState, events: Vec<RecordedEvent>) -> StoreFuture<'_, ()> {
        writes::import(self, state, events)
    }

    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
        reads::list(self, query)
    }

    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<RecordedEvent>> {
        reads::events(self, thread, since)
    }

    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
        maintenance::prune(self, before_ms, statuses)
    }

    fn submit(&self, rec: ThreadRec) -> StoreFuture<'_, Vec<RecordedEvent>> {
        queue::submit(self, rec)
    }

    fn runnable(&self, query: RunnableQuery) -> StoreFuture<'_, Vec<RunnableThread>> {
        queue::runnable(self, query)
    }

    fn wait_for_work(&self, timeout: std::time::Duration) -> StoreFuture<'_, ()> {
        queue::wait_for_work(self, timeout)
    }
}
