//! The embedded store: one redb file, opened by every pipec process in `MultiWriter`
//! mode (so `runs`, `show` and other runs work beside a running one), all writes of a
//! process through one store thread that commits them in batches.
//!
//! `tables` has the file's layout, `open` opening it, `store_thread` the writer with
//! group commit and fencing, `writes` the other writes, `reads` the reads and
//! `maintenance` prune, the integrity check and the statistics.

mod maintenance;
mod open;
mod reads;
mod store_thread;
mod tables;
mod writes;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use redb::Database;
use serde_json::Value;

pub use tables::STORE_FORMAT;

use super::*;
use store_thread::Job;

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

impl RedbStore {
    pub fn path(&self) -> &Path {
        &self.inner.path
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

    fn create_thread(&self, rec: ThreadRec, attempt: AttemptRec) -> StoreFuture<'_, Lease> {
        writes::create_thread(self, rec, attempt)
    }

    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, (Lease, ThreadState)> {
        writes::claim(self, thread, attempt)
    }

    fn commit<'a>(&'a self, lease: &'a Lease, writes: Vec<Write>) -> StoreFuture<'a, Vec<u64>> {
        writes::commit(self, lease, writes)
    }

    fn answer(&self, thread: &str, answers: Vec<(String, Value)>, by: &str) -> StoreFuture<'_, ()> {
        writes::answer(self, thread, answers, by)
    }

    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, CancelOutcome> {
        writes::request_cancel(self, thread)
    }

    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
        reads::load(self, thread)
    }

    fn is_held(&self, thread: &str) -> bool {
        lock::is_locked(&self.inner.path, thread)
    }

    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
        reads::list(self, query)
    }

    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<Value>> {
        reads::events(self, thread, since)
    }

    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
        maintenance::prune(self, before_ms, statuses)
    }
}
