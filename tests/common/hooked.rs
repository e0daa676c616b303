//! A store in front of another that passes every call on, except what a test hooks: a
//! claim or a commit, where a test steps in between the runtime and a real store.

use std::sync::Arc;

use pipec::store::*;
use serde_json::Value;

/// What a test does instead of the inner store's claims and commits; each default
/// passes the call on.
pub trait Hooks: Send + Sync {
    fn claim<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        attempt: AttemptRec,
    ) -> StoreFuture<'a, Claimed> {
        inner.claim(thread, attempt)
    }

    fn claim_answering<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, serde_json::Value)>,
        by: &str,
    ) -> StoreFuture<'a, Claimed> {
        inner.claim_answering(thread, attempt, answers, by)
    }

    fn answer<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        answers: Vec<(String, serde_json::Value)>,
        by: &str,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        inner.answer(thread, answers, by)
    }

    /// A commit; `last` when it is the attempt's last (`Store::commit_last`).
    fn commit<'a>(
        &'a self,
        inner: &'a dyn Store,
        lease: &'a Lease,
        writes: Vec<Write>,
        last: bool,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        pass_commit(inner, lease, writes, last)
    }
}

/// A commit passed on to `inner` as it came.
pub fn pass_commit<'a>(
    inner: &'a dyn Store,
    lease: &'a Lease,
    writes: Vec<Write>,
    last: bool,
) -> StoreFuture<'a, Vec<RecordedEvent>> {
    if last {
        inner.commit_last(lease, writes)
    } else {
        inner.commit(lease, writes)
    }
}

/// `inner`, with `hooks` in front of it.
pub struct Hooked<H> {
    pub inner: Arc<dyn Store>,
    pub hooks: H,
}

impl<H: Hooks> Store for Hooked<H> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()> {
        self.inner.put_plan(hash, plan_json)
    }
    fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>> {
        self.inner.get_plan(hash)
    }
    fn create_thread(
        &self,
        rec: ThreadRec,
        attempt: AttemptRec,
    ) -> StoreFuture<'_, (Lease, Vec<RecordedEvent>)> {
        self.inner.create_thread(rec, attempt)
    }
    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, Claimed> {
        self.hooks.claim(&*self.inner, thread, attempt)
    }
    fn claim_answering(
        &self,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, serde_json::Value)>,
        by: &str,
    ) -> StoreFuture<'_, Claimed> {
        self.hooks
            .claim_answering(&*self.inner, thread, attempt, answers, by)
    }
    fn commit<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.hooks.commit(&*self.inner, lease, writes, false)
    }
    fn commit_last<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.hooks.commit(&*self.inner, lease, writes, true)
    }
    fn answer(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Vec<RecordedEvent>> {
        self.hooks.answer(&*self.inner, thread, answers, by)
    }
    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, (CancelOutcome, Vec<RecordedEvent>)> {
        self.inner.request_cancel(thread)
    }
    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
        self.inner.load(thread)
    }
    fn is_held(&self, thread: &str) -> bool {
        self.inner.is_held(thread)
    }
    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
        self.inner.list(query)
    }
    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<RecordedEvent>> {
        self.inner.events(thread, since)
    }
    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
        self.inner.prune(before_ms, statuses)
    }
}
