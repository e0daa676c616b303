//! An in-memory store: the whole `Store` trait with the redb store's semantics (fencing
//! by epoch inside each commit, cancel requests, event numbers given by the store,
//! compare-and-set answers, id prefixes, pages, prune), for tests that need no file.
//!
//! Every record passes through the same envelope as on disk, so what a test reads back
//! is what the redb store would give it. A lease marks its thread taken until the
//! `Lease` is dropped, so dropping an attempt's lease is how a test simulates a crash.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::envelope::{decode, encode};
use super::ids::{self, IdQuery};
use super::*;

/// A store that lives in memory. Clones share the same data.
#[derive(Clone)]
pub struct MemoryStore {
    name: String,
    shared: Arc<Mutex<Tables>>,
    wake: Arc<Wake>,
}

/// Tells waiting workers of new work: a generation bumped by every such write.
#[derive(Default)]
struct Wake {
    generation: AtomicU64,
    /// The generation when the store was last asked for runnable threads.
    seen: AtomicU64,
    notify: tokio::sync::Notify,
}

impl Wake {
    fn wake(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.notify.notify_waiters();
    }
}

#[derive(Default)]
struct Tables {
    plans: BTreeMap<String, String>,
    threads: BTreeMap<u128, Rows>,
    /// Threads a live lease holds.
    held: BTreeSet<u128>,
}

/// Everything stored about one thread.
struct Rows {
    rec: ThreadRec,
    nodes: BTreeMap<String, NodeRec>,
    items: BTreeMap<(String, u32, u32), ItemRec>,
    calls: BTreeMap<CallKey, CallRec>,
    gates: BTreeMap<String, GateRec>,
    attempts: BTreeMap<u32, AttemptRec>,
    events: BTreeMap<u64, EventRow>,
    heals: BTreeMap<RefOrigin, HealRec>,
}

/// A thread taken by a lease of a memory store; dropping it frees the thread.
#[derive(Debug)]
pub(crate) struct Hold {
    shared: Weak<Mutex<Tables>>,
    id: u128,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            lock_tables(&shared).held.remove(&self.id);
        }
    }
}

fn lock_tables(shared: &Mutex<Tables>) -> MutexGuard<'_, Tables> {
    // The tables stay consistent under a panic: every change is applied after the
    // checks that can fail, so a poisoned lock still guards whole records.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A record as the store keeps it: through its envelope and back.
fn stored<T: Serialize + DeserializeOwned>(
    value: &T,
    what: &dyn Fn() -> String,
) -> Result<T, StoreError> {
    decode(&encode(value)?, what)
}

fn ready<'a, T: Send + 'a>(result: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(result))
}

static STORES: AtomicU64 = AtomicU64::new(0);

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore {
            name: format!("memory:{}", STORES.fetch_add(1, Ordering::Relaxed) + 1),
            shared: Arc::default(),
            wake: Arc::default(),
        }
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        lock_tables(&self.shared)
    }

    fn not_found(&self, thread: &str) -> StoreError {
        StoreError::NotFound {
            thread: thread.to_string(),
            store: self.name.clone(),
        }
    }

    fn hold(&self, id: u128) -> LeaseGuard {
        LeaseGuard::Memory {
            _hold: Hold {
                shared: Arc::downgrade(&self.shared),
                id,
            },
        }
    }

    fn create(
        &self,
        rec: ThreadRec,
        attempt: AttemptRec,
    ) -> Result<(Lease, Vec<RecordedEvent>), StoreError> {
        let id = ids::decode(&rec.id)
            .ok_or_else(|| StoreError::Io(format!("`{}` is not a thread id", rec.id)))?;
        let mut tables = self.tables();
        if tables.held.contains(&id) {
            return Err(StoreError::Locked {
                thread: rec.id,
                holder: None,
            });
        }
        if tables.threads.contains_key(&id) {
            return Err(StoreError::Io(format!("thread {} already exists", rec.id)));
        }
        let (run_id, number) = (attempt.run_id.clone(), attempt.number);
        let mut rows = Rows::new(stored(&rec, &|| format!("thread {}", rec.id))?);
        let writes = [
            Write::Attempt(attempt),
            Write::Event(Event::ThreadCreated { attempt: number }),
        ];
        let events = rows.apply(&prepare(&writes)?, true);
        let lease = Lease {
            thread: rows.rec.id.clone(),
            epoch: rows.rec.epoch,
            run_id,
            attempt: number,
            _guard: self.hold(id),
        };
        tables.threads.insert(id, rows);
        tables.held.insert(id);
        Ok((lease, events))
    }

    fn queue(&self, rec: ThreadRec) -> Result<Vec<RecordedEvent>, StoreError> {
        let id = ids::decode(&rec.id)
            .ok_or_else(|| StoreError::Io(format!("`{}` is not a thread id", rec.id)))?;
        let mut tables = self.tables();
        if tables.threads.contains_key(&id) {
            return Err(StoreError::Io(format!("thread {} already exists", rec.id)));
        }
        let mut rec = stored(&rec, &|| format!("thread {}", rec.id))?;
        rec.status = Status::Queued;
        rec.holder = None;
        rec.attempts = 0;
        let mut rows = Rows::new(rec);
        let events = rows.apply(&prepare(&[Write::Event(Event::ThreadQueued {})])?, true);
        tables.threads.insert(id, rows);
        Ok(events)
    }

    fn take(&self, thread: &str, attempt: AttemptRec) -> Result<Claimed, StoreError> {
        self.take_answering(thread, attempt, &[], "")
    }

    /// Takes a thread, answering its gates first in the same step (all refused or all
    /// done).
    fn take_answering(
        &self,
        thread: &str,
        attempt: AttemptRec,
        answers: &[(String, Value)],
        by: &str,
    ) -> Result<Claimed, StoreError> {
        let mut tables = self.tables();
        let id = resolve(&tables, thread).map_err(|e| self.named(e, thread))?;
        let held = tables.held.contains(&id);
        let Some(rows) = tables.threads.get_mut(&id) else {
            return Err(self.not_found(thread));
        };
        if held {
            return Err(StoreError::Locked {
                thread: rows.rec.id.clone(),
                holder: rows.rec.holder.clone(),
            });
        }
        if matches!(rows.rec.status, Status::Completed | Status::Cancelled) {
            return Err(StoreError::Ended {
                thread: rows.rec.id.clone(),
                status: rows.rec.status,
            });
        }
        let mut writes = if answers.is_empty() {
            Vec::new()
        } else {
            answer_writes(&rows.rec, &rows.gates, answers, by, ids::now_ms())?
        };
        let mut attempt = stored(&attempt, &|| "attempt".to_string())?;
        rows.rec.epoch += 1;
        rows.rec.attempts += 1;
        rows.rec.status = Status::Running;
        rows.rec.holder = Some(Holder {
            run_id: attempt.run_id.clone(),
            pid: attempt.pid,
            host: attempt.host.clone(),
            since_ms: attempt.started_ms,
        });
        attempt.number = rows.rec.attempts;
        let (run_id, number) = (attempt.run_id.clone(), attempt.number);
        writes.extend([
            Write::Attempt(attempt),
            Write::Event(Event::AttemptStarted { attempt: number }),
        ]);
        let events = rows.apply(&prepare(&writes)?, true);
        let lease = Lease {
            thread: rows.rec.id.clone(),
            epoch: rows.rec.epoch,
            run_id,
            attempt: number,
            _guard: self.hold(id),
        };
        let state = rows.state();
        tables.held.insert(id);
        Ok((lease, state, events))
    }

    fn apply_commit(
        &self,
        lease: &Lease,
        writes: &[Write],
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let Some(id) = ids::decode(&lease.thread) else {
            return Err(StoreError::Io(format!(
                "`{}` is not a thread id",
                lease.thread
            )));
        };
        let mut tables = self.tables();
        let Some(rows) = tables.threads.get_mut(&id) else {
            return Err(self.not_found(&lease.thread));
        };
        let (current, cancel_requested) = (rows.rec.epoch, rows.rec.cancel_requested);
        if current != lease.epoch {
            return Err(StoreError::Fenced {
                thread: rows.rec.id.clone(),
                reason: format!(
                    "another process took the thread over (epoch {current} ≠ {})",
                    lease.epoch
                ),
            });
        }
        let records_cancel = writes
            .iter()
            .any(|w| matches!(w, Write::Thread(t) if t.status == Status::Cancelled));
        if cancel_requested && !records_cancel {
            return Err(StoreError::Cancelled {
                thread: rows.rec.id.clone(),
            });
        }
        let rewrites_thread = writes.iter().any(|w| matches!(w, Write::Thread(_)));
        let prepared = prepare(writes)?;
        Ok(rows.apply(&prepared, rewrites_thread))
    }

    fn apply_answers(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> Result<Vec<RecordedEvent>, StoreError> {
        let mut tables = self.tables();
        let id = resolve(&tables, thread).map_err(|e| self.named(e, thread))?;
        let Some(rows) = tables.threads.get_mut(&id) else {
            return Err(self.not_found(thread));
        };
        let writes = answer_writes(&rows.rec, &rows.gates, &answers, by, ids::now_ms())?;
        let prepared = prepare(&writes)?;
        Ok(rows.apply(&prepared, true))
    }

    fn cancel(&self, thread: &str) -> Result<(CancelOutcome, Vec<RecordedEvent>), StoreError> {
        let mut tables = self.tables();
        let id = resolve(&tables, thread).map_err(|e| self.named(e, thread))?;
        let held_by_other = tables.held.contains(&id);
        let Some(rows) = tables.threads.get_mut(&id) else {
            return Err(self.not_found(thread));
        };
        if rows.rec.status.is_terminal() {
            return Ok((CancelOutcome::AlreadyEnded(rows.rec.status), Vec::new()));
        }
        let (outcome, event) = if held_by_other {
            rows.rec.cancel_requested = true;
            (CancelOutcome::Requested, Event::CancelRequested {})
        } else {
            rows.rec.status = Status::Cancelled;
            rows.rec.holder = None;
            (CancelOutcome::Cancelled, Event::ThreadCancelled {})
        };
        let prepared = prepare(&[Write::Event(event)])?;
        let events = rows.apply(&prepared, true);
        Ok((outcome, events))
    }

    fn import_thread(
        &self,
        state: ThreadState,
        events: Vec<RecordedEvent>,
    ) -> Result<(), StoreError> {
        let checked = super::import::check(&state, &events)?;
        let name = checked.rec.id.clone();
        // Every row through its envelope first: a record that cannot be kept refuses the
        // import before anything is written.
        let mut rows = Rows::new(stored(&checked.rec, &|| format!("thread {name}"))?);
        for (node, n) in &state.nodes {
            rows.nodes
                .insert(node.clone(), stored(n, &|| format!("node `{node}`"))?);
        }
        for (key, r) in &state.items {
            rows.items
                .insert(key.clone(), stored(r, &|| format!("item of `{}`", key.0))?);
        }
        for (key, r) in &state.calls {
            rows.calls
                .insert(key.clone(), stored(r, &|| key.display())?);
        }
        for (gate, g) in &state.gates {
            rows.gates
                .insert(gate.clone(), stored(g, &|| format!("gate `{gate}`"))?);
        }
        for a in &state.attempts {
            rows.attempts
                .insert(a.number, stored(a, &|| "attempt".to_string())?);
        }
        for (key, h) in &state.heals {
            rows.heals
                .insert(key.clone(), stored(h, &|| key.node.clone())?);
        }
        for (seq, row) in checked.events {
            rows.events
                .insert(seq, stored(&row, &|| format!("event {seq}"))?);
        }
        let mut tables = self.tables();
        if tables.threads.contains_key(&checked.id) {
            return Err(super::import::exists(&name, self.name.clone()));
        }
        tables.threads.insert(checked.id, rows);
        Ok(())
    }

    fn page(&self, query: &ListQuery) -> Result<Vec<ThreadSummary>, StoreError> {
        let tables = self.tables();
        let before = match &query.before {
            Some(b) => Some(ids::decode(b).ok_or_else(|| self.not_found(b))?),
            None => None,
        };
        let limit = if query.limit == 0 { 50 } else { query.limit };
        let mut out = Vec::new();
        let hi = match before {
            Some(b) => Bound::Excluded(b),
            None => Bound::Unbounded,
        };
        for (id, rows) in tables.threads.range((Bound::Unbounded, hi)).rev() {
            let rec = &rows.rec;
            if query.status.is_some_and(|s| s != rec.status)
                || query.pipeline.as_ref().is_some_and(|p| *p != rec.pipeline)
            {
                continue;
            }
            out.push(ThreadSummary {
                id: rec.id.clone(),
                pipeline: rec.pipeline.clone(),
                status: rec.status,
                stale: rec.status == Status::Running && !tables.held.contains(id),
                holder: rec.holder.clone().filter(|_| rec.status == Status::Running),
                created_ms: rec.created_ms,
                updated_ms: rec.updated_ms,
            });
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// A resolution error as the caller typed the id.
    fn named(&self, e: Resolve, thread: &str) -> StoreError {
        match e {
            Resolve::NotFound => self.not_found(thread),
            Resolve::Ambiguous(matches) => StoreError::Ambiguous {
                prefix: thread.to_string(),
                matches,
            },
        }
    }
}

enum Resolve {
    NotFound,
    Ambiguous(Vec<String>),
}

fn resolve(tables: &Tables, thread: &str) -> Result<u128, Resolve> {
    match ids::query(thread).ok_or(Resolve::NotFound)? {
        IdQuery::Exact(n) if tables.threads.contains_key(&n) => Ok(n),
        IdQuery::Exact(_) => Err(Resolve::NotFound),
        IdQuery::Prefix(lo, hi) => {
            let found: Vec<u128> = tables
                .threads
                .range(lo..=hi)
                .map(|(id, _)| *id)
                .take(ids::AMBIGUOUS_SHOWN)
                .collect();
            match found.as_slice() {
                [one] => Ok(*one),
                [] => Err(Resolve::NotFound),
                many => Err(Resolve::Ambiguous(
                    many.iter().map(|n| ids::encode(*n)).collect(),
                )),
            }
        }
    }
}

/// The writes of a commit as the store keeps them. Everything that can fail happens
/// here, before any row changes, so a commit is applied whole or not at all.
fn prepare(writes: &[Write]) -> Result<Vec<Write>, StoreError> {
    writes
        .iter()
        .map(|w| {
            Ok(match w {
                Write::Node(name, n) => Write::Node(name.clone(), stored(n, &|| name.clone())?),
                Write::Item(name, generation, item, r) => Write::Item(
                    name.clone(),
                    *generation,
                    *item,
                    stored(r, &|| name.clone())?,
                ),
                Write::Call(k, r) => Write::Call(k.clone(), stored(r, &|| k.display())?),
                Write::Gate(name, g) => Write::Gate(name.clone(), stored(g, &|| name.clone())?),
                Write::Attempt(a) => Write::Attempt(stored(a, &|| "attempt".to_string())?),
                Write::Thread(t) => Write::Thread(stored(t, &|| t.id.clone())?),
                Write::RemoveGate(name) => Write::RemoveGate(name.clone()),
                Write::Heal(k, h) => Write::Heal(k.clone(), stored(h, &|| k.node.clone())?),
                Write::Rename { from, to } => Write::Rename {
                    from: from.clone(),
                    to: to.clone(),
                },
                Write::Event(e) => Write::Event(stored(e, &|| "event".to_string())?),
            })
        })
        .collect()
}

impl Rows {
    fn new(rec: ThreadRec) -> Rows {
        Rows {
            rec,
            nodes: BTreeMap::new(),
            items: BTreeMap::new(),
            calls: BTreeMap::new(),
            gates: BTreeMap::new(),
            attempts: BTreeMap::new(),
            events: BTreeMap::new(),
            heals: BTreeMap::new(),
        }
    }

    /// Applies prepared writes; returns the numbers given to the events among them. The
    /// thread record is rewritten (its `updated_ms` and `next_seq` with it) only when
    /// `rewrite_thread` is set, as the redb store rewrites it only then; a
    /// `Write::Thread` keeps the record's fence (epoch and cancel flag).
    fn apply(&mut self, writes: &[Write], rewrite_thread: bool) -> Vec<RecordedEvent> {
        let now = ids::now_ms();
        let mut seqs = Vec::new();
        let mut next_seq = self.events.keys().next_back().map_or(0, |n| n + 1);
        for w in writes {
            match w {
                Write::Node(name, n) => {
                    self.nodes.insert(name.clone(), n.clone());
                }
                Write::Item(name, generation, item, r) => {
                    self.items
                        .insert((name.clone(), *generation, *item), r.clone());
                }
                Write::Call(k, r) => {
                    self.calls.insert(k.clone(), r.clone());
                }
                Write::Gate(name, g) => {
                    self.gates.insert(name.clone(), g.clone());
                }
                Write::Attempt(a) => {
                    self.attempts.insert(a.number, a.clone());
                }
                Write::RemoveGate(name) => {
                    self.gates.remove(name);
                }
                Write::Heal(k, h) => {
                    self.heals.insert(k.clone(), h.clone());
                }
                Write::Rename { from, to } => self.rename(from, to),
                Write::Thread(new) => {
                    if rewrite_thread {
                        let (epoch, cancel) = (self.rec.epoch, self.rec.cancel_requested);
                        self.rec = new.clone();
                        self.rec.epoch = epoch;
                        self.rec.cancel_requested = cancel;
                    }
                }
                Write::Event(event) => {
                    let row = EventRow {
                        ts: now,
                        event: event.clone(),
                    };
                    self.events.insert(next_seq, row.clone());
                    seqs.push(row.recorded(&self.rec.id, next_seq));
                    next_seq += 1;
                }
            }
        }
        if rewrite_thread {
            if !seqs.is_empty() {
                self.rec.next_seq = next_seq;
            }
            self.rec.updated_ms = ids::now_ms();
        }
        seqs
    }

    /// Moves a node's rows (node, items, calls, gate) from one name to another.
    fn rename(&mut self, from: &str, to: &str) {
        if let Some(n) = self.nodes.remove(from) {
            self.nodes.insert(to.to_string(), n);
        }
        if let Some(mut g) = self.gates.remove(from) {
            g.node = to.to_string();
            self.gates.insert(to.to_string(), g);
        }
        let items: Vec<_> = self
            .items
            .keys()
            .filter(|(n, _, _)| n == from)
            .cloned()
            .collect();
        for key in items {
            if let Some(r) = self.items.remove(&key) {
                self.items.insert((to.to_string(), key.1, key.2), r);
            }
        }
        let calls: Vec<CallKey> = self
            .calls
            .keys()
            .filter(|k| k.node == from)
            .cloned()
            .collect();
        for key in calls {
            if let Some(r) = self.calls.remove(&key) {
                self.calls.insert(
                    CallKey {
                        node: to.to_string(),
                        ..key
                    },
                    r,
                );
            }
        }
        let heals: Vec<RefOrigin> = self
            .heals
            .keys()
            .filter(|k| k.node == from)
            .cloned()
            .collect();
        for key in heals {
            if let Some(h) = self.heals.remove(&key) {
                self.heals.insert(
                    RefOrigin {
                        node: to.to_string(),
                        ..key
                    },
                    h,
                );
            }
        }
    }

    fn state(&self) -> ThreadState {
        ThreadState {
            thread: Some(self.rec.clone()),
            nodes: self.nodes.clone(),
            items: self.items.clone(),
            calls: self.calls.clone(),
            gates: self.gates.clone(),
            attempts: self.attempts.values().cloned().collect(),
            heals: self.heals.clone(),
        }
    }

    fn events_from(&self, since: u64) -> Vec<RecordedEvent> {
        self.events
            .range(since..)
            .map(|(seq, row)| row.clone().recorded(&self.rec.id, *seq))
            .collect()
    }
}

impl Store for MemoryStore {
    fn location(&self) -> String {
        self.name.clone()
    }

    fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()> {
        self.tables()
            .plans
            .entry(hash.to_string())
            .or_insert_with(|| plan_json.to_string());
        ready(Ok(()))
    }

    fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>> {
        ready(Ok(self.tables().plans.get(hash).cloned()))
    }

    fn create_thread(
        &self,
        rec: ThreadRec,
        attempt: AttemptRec,
    ) -> StoreFuture<'_, (Lease, Vec<RecordedEvent>)> {
        ready(self.create(rec, attempt))
    }

    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, Claimed> {
        ready(self.take(thread, attempt))
    }

    fn claim_answering(
        &self,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Claimed> {
        ready(self.take_answering(thread, attempt, &answers, by))
    }

    fn commit<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        let result = self.apply_commit(lease, &writes);
        if result.is_ok()
            && writes
                .iter()
                .any(|w| matches!(w, Write::Thread(t) if t.status == Status::Queued))
        {
            self.wake.wake();
        }
        ready(result)
    }

    fn answer(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Vec<RecordedEvent>> {
        let result = self.apply_answers(thread, answers, by);
        if result.as_ref().is_ok_and(|e| !e.is_empty()) {
            self.wake.wake();
        }
        ready(result)
    }

    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, (CancelOutcome, Vec<RecordedEvent>)> {
        ready(self.cancel(thread))
    }

    fn cancel_requested<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, bool> {
        let tables = self.tables();
        let asked = resolve(&tables, thread)
            .map_err(|e| self.named(e, thread))
            .map(|id| {
                tables
                    .threads
                    .get(&id)
                    .is_some_and(|r| r.rec.cancel_requested)
            });
        ready(asked)
    }

    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
        let tables = self.tables();
        let state = resolve(&tables, thread)
            .map_err(|e| self.named(e, thread))
            .and_then(|id| {
                tables
                    .threads
                    .get(&id)
                    .map(Rows::state)
                    .ok_or_else(|| self.not_found(thread))
            });
        ready(state)
    }

    fn is_held(&self, thread: &str) -> bool {
        ids::decode(thread).is_some_and(|id| self.tables().held.contains(&id))
    }

    fn import(&self, state: ThreadState, events: Vec<RecordedEvent>) -> StoreFuture<'_, ()> {
        let result = self.import_thread(state, events);
        if result.is_ok() {
            self.wake.wake();
        }
        ready(result)
    }

    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
        ready(self.page(&query))
    }

    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<RecordedEvent>> {
        let tables = self.tables();
        let events = resolve(&tables, thread)
            .map_err(|e| self.named(e, thread))
            .and_then(|id| {
                tables
                    .threads
                    .get(&id)
                    .map(|rows| rows.events_from(since))
                    .ok_or_else(|| self.not_found(thread))
            });
        ready(events)
    }

    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
        let mut tables = self.tables();
        let victims: Vec<u128> = tables
            .threads
            .iter()
            .filter(|(_, rows)| {
                let rec = &rows.rec;
                rec.status.is_terminal()
                    && statuses.contains(&rec.status)
                    && rec.updated_ms < before_ms
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &victims {
            tables.threads.remove(id);
        }
        ready(Ok(victims.len()))
    }

    fn submit(&self, rec: ThreadRec) -> StoreFuture<'_, Vec<RecordedEvent>> {
        let result = self.queue(rec);
        if result.is_ok() {
            self.wake.wake();
        }
        ready(result)
    }

    fn runnable(&self, query: RunnableQuery) -> StoreFuture<'_, Vec<RunnableThread>> {
        self.wake.seen.store(
            self.wake.generation.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
        let tables = self.tables();
        let mut out = Vec::new();
        for status in queue::CANDIDATE_STATUSES {
            for (id, rows) in &tables.threads {
                if out.len() >= query.max() {
                    break;
                }
                let rec = &rows.rec;
                if rec.status != status || !query.wants(&rec.id, &rec.pipeline) {
                    continue;
                }
                let gates = rows.gates.values().map(|g| (g, rows.nodes.get(&g.node)));
                let held = tables.held.contains(id);
                if let Some(why) = queue::why_runnable(rec, gates, query.now_ms, held) {
                    out.push(RunnableThread {
                        id: rec.id.clone(),
                        pipeline: rec.pipeline.clone(),
                        why,
                    });
                }
            }
        }
        ready(Ok(out))
    }

    fn wait_for_work(&self, timeout: std::time::Duration) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let notified = self.wake.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.wake.generation.load(Ordering::SeqCst) != self.wake.seen.load(Ordering::SeqCst)
            {
                return Ok(());
            }
            let _ = tokio::time::timeout(timeout, notified).await;
            Ok(())
        })
    }
}
