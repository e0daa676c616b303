//! The PostgreSQL store, for runs that outgrow one machine: the same domain operations
//! as the redb store, each one transaction, fenced by the thread's epoch inside it, with
//! a lease row per thread that its holder renews (a heartbeat), so a holder on another
//! machine that stops loses the thread after the lease's time to live.
//!
//! The store runs its database work on a small runtime of its own, so it serves any
//! caller (a CLI command, a test without a runtime, a lease dropped outside one). Writes
//! go through one writer task per store, which takes every commit already waiting into
//! one transaction (group commit), as the redb store thread does; reads use the pool
//! beside it.
//!
//! `config` has the URL, TLS and the pool, `schema` the tables and their version,
//! `writes` the fenced writes, `reads` the reads, `leases` the lease rows and
//! `maintenance` prune, check and statistics.

mod config;
mod leases;
mod maintenance;
mod queue;
mod reads;
mod rows;
mod schema;
mod sql;
mod txn;
mod writes;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::{Arc, Mutex};

use deadpool_postgres::Pool;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::{password_of, redact};
pub use config::PgOptions;
pub(crate) use leases::Release;
pub use maintenance::{PgCheck, PgStats};
pub use schema::SCHEMA_VERSION;

use super::*;
use writes::Job;

pub(crate) type PgError = tokio_postgres::Error;

/// A database error as a store error: the server's message and code, or the client's
/// reason (connecting, TLS, a closed connection).
pub(crate) fn pg(e: PgError) -> StoreError {
    StoreError::Io(describe(&e))
}

fn describe(e: &PgError) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!(
            "PostgreSQL: {}: {} ({})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            s.push_str(&format!("; {detail}"));
        }
        return s;
    }
    let mut s = format!("PostgreSQL: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(&format!(": {text}"));
        }
        source = inner.source();
    }
    s
}

/// What the store's tasks share.
pub(crate) struct Db {
    pub pool: Pool,
    /// The URL as it may be shown.
    pub location: String,
    pub options: PgOptions,
    /// Scrubbed from every error, in case a message ever carries it.
    password: Option<String>,
    /// The leases this process dropped, and how many of them are released.
    pub releases: Arc<leases::Releases>,
    /// What workers wait on (`queue.rs`).
    pub(crate) queue: queue::Queue,
}

impl Db {
    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Client, StoreError> {
        // Where it failed, as it may be shown (no password).
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => {
                StoreError::Io(format!("{}: {}", self.location, describe(&e)))
            }
            other => StoreError::Io(format!("{}: PostgreSQL: {other}", self.location)),
        })
    }

    /// The lease time to live as an interval parameter, in milliseconds.
    pub(crate) fn ttl_ms(&self) -> i64 {
        self.options.lease_ttl.as_millis() as i64
    }

    fn scrub(&self, e: StoreError) -> StoreError {
        let pw = self.password.as_deref();
        let s = |t: String| config::scrub(&t, pw);
        match e {
            StoreError::Io(m) => StoreError::Io(s(m)),
            StoreError::Corrupt { what } => StoreError::Corrupt { what: s(what) },
            StoreError::Fenced { thread, reason } => StoreError::Fenced {
                thread,
                reason: s(reason),
            },
            StoreError::NotFound { thread, store } => StoreError::NotFound {
                thread,
                store: s(store),
            },
            StoreError::Missing { store } => StoreError::Missing { store: s(store) },
            other => other,
        }
    }
}

struct Inner {
    db: Arc<Db>,
    /// Always `Some` until the store is dropped.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    jobs: Mutex<mpsc::UnboundedSender<Job>>,
    /// The plans this store has stored (a plan is kept by its hash and never changes
    /// or goes), so that every submit of one pipeline does not store its plan again.
    plans: Mutex<std::collections::HashSet<String>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The releases still queued for the writer are made before its runtime stops;
        // the leases' expiry is only the backstop of a process that dies.
        self.db
            .releases
            .settle_blocking(std::time::Duration::from_secs(2));
        if let Some(rt) = self.runtime.take() {
            // A store may be dropped inside another runtime, where waiting is not allowed.
            rt.shutdown_background();
        }
    }
}

/// A store in a PostgreSQL database. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

/// How a database without a pipec store is treated when it is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgOpen {
    /// Create the tables (`pipec run`).
    Create,
    /// Refuse a database with no store (`R0413`); create nothing.
    Existing,
}

impl PostgresStore {
    /// Connects with the options from the environment (`PIPEC_LEASE_TTL_MS`).
    pub fn connect(url: &str, open: PgOpen) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect_with(url, open, PgOptions::from_env()?)
    }

    pub fn connect_with(
        url: &str,
        open: PgOpen,
        options: PgOptions,
    ) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::unchecked(url, options)?;
        let db = store.inner.db.clone();
        store.block_on(async move {
            let mut client = db.client().await?;
            let found = schema::version(&client).await.map_err(pg)?;
            schema::refuse_newer(found)?;
            if found < SCHEMA_VERSION {
                match open {
                    PgOpen::Create => {
                        schema::migrate(&mut client).await?;
                    }
                    PgOpen::Existing if found == 0 => {
                        return Err(StoreError::Missing {
                            store: db.location.clone(),
                        });
                    }
                    PgOpen::Existing => {
                        return Err(StoreError::Corrupt {
                            what: format!(
                                "{} has store schema {found}, and this pipec reads schema {SCHEMA_VERSION}; run `pipec store migrate --store URL`",
                                db.location
                            ),
                        });
                    }
                }
            }
            Ok(())
        })?;
        Ok(store)
    }

    /// The pool and the runtime, without looking at the database.
    fn unchecked(url: &str, options: PgOptions) -> Result<PostgresStore, StoreError> {
        let pool = config::pool(url, &options)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pipec-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Io(format!("cannot start the store's runtime: {e}")))?;
        let db = Arc::new(Db {
            pool,
            location: redact(url),
            options,
            password: password_of(url),
            releases: Arc::default(),
            queue: queue::Queue::new(url),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        runtime.spawn(writes::writer(db.clone(), rx));
        let handle = runtime.handle().clone();
        Ok(PostgresStore {
            inner: Arc::new(Inner {
                db,
                runtime: Some(runtime),
                handle,
                jobs: Mutex::new(tx),
                plans: Mutex::default(),
            }),
        })
    }

    /// The schema version of the database at `url` (0: no store), looking only.
    pub fn version_at(url: &str) -> Result<u32, StoreError> {
        let store = PostgresStore::unchecked(url, PgOptions::default())?;
        let db = store.inner.db.clone();
        store.block_on(async move {
            let client = db.client().await?;
            schema::version(&client).await.map_err(pg)
        })
    }

    /// Creates or upgrades the store's tables; returns the version the database had.
    pub fn migrate(url: &str) -> Result<u32, StoreError> {
        let store = PostgresStore::unchecked(url, PgOptions::default())?;
        let db = store.inner.db.clone();
        store.block_on(async move {
            let mut client = db.client().await?;
            schema::migrate(&mut client).await
        })
    }

    #[cfg(test)]
    pub(crate) fn db(&self) -> &Arc<Db> {
        &self.inner.db
    }

    /// Runs `f` on the store's runtime and waits for it here (for callers without a
    /// runtime, and for the trait's one synchronous probe).
    pub(crate) fn block_on<T: Send + 'static>(
        &self,
        f: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let db = self.inner.db.clone();
        let upto = db.releases.handed_over();
        self.inner.handle.spawn(async move {
            db.releases.settle(upto).await;
            let _ = tx.send(f.await.map_err(|e| db.scrub(e)));
        });
        rx.recv()
            .map_err(|_| StoreError::Io("the store's runtime stopped".into()))?
    }

    /// Runs `f` on the store's runtime; the future answers in any runtime.
    pub(crate) fn run<'a, T: Send + 'static>(
        &'a self,
        f: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> StoreFuture<'a, T> {
        let db = self.inner.db.clone();
        let upto = db.releases.handed_over();
        let releases = db.releases.clone();
        let task = self.inner.handle.spawn(async move {
            releases.settle(upto).await;
            f.await
        });
        Box::pin(async move {
            match task.await {
                Ok(result) => result.map_err(|e| db.scrub(e)),
                Err(e) => Err(StoreError::Io(format!("a store task failed: {e}"))),
            }
        })
    }

    /// Hands a job to the writer task.
    pub(crate) fn send(&self, job: Job) -> Result<(), StoreError> {
        let jobs = self.inner.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.send(job)
            .map_err(|_| StoreError::Io("the store's writer stopped".into()))
    }

    /// Runs `f` on the writer task, after every write handed to it before.
    pub(crate) fn write<'a, T: Send + 'static, F>(
        &'a self,
        f: impl FnOnce(Arc<Db>) -> F + Send + 'static,
    ) -> StoreFuture<'a, T>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let sent = self.send(Job::Other(Box::new(move |db| {
            Box::pin(async move {
                let _ = reply.send(f(db).await);
            })
        })));
        let db = self.inner.db.clone();
        Box::pin(async move {
            sent?;
            rx.await
                .map_err(|_| StoreError::Io("the store's writer stopped".into()))?
                .map_err(|e| db.scrub(e))
        })
    }

    pub(crate) fn guard(&self, thread: &str, epoch: u64) -> LeaseGuard {
        LeaseGuard::Postgres {
            _release: Release::new(
                self.inner.jobs_sender(),
                self.inner.db.releases.clone(),
                thread,
                epoch,
                leases::Keep(self.inner.clone()),
            ),
        }
    }

    /// Hands a commit to the writer; `release` deletes the lease row with it, and a
    /// lease whose row went so has nothing left to release when dropped.
    fn commit_as<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
        release: bool,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        let (reply, rx) = oneshot::channel();
        let sent = self.send(Job::Commit {
            thread: lease.thread.clone(),
            epoch: lease.epoch,
            writes,
            release,
            reply,
        });
        let db = self.inner.db.clone();
        Box::pin(async move {
            sent?;
            let committed = rx
                .await
                .map_err(|_| StoreError::Io("the store's writer stopped".into()))?
                .map_err(|e| db.scrub(e))?;
            if release && let LeaseGuard::Postgres { _release: row } = &lease._guard {
                row.freed();
            }
            Ok(committed)
        })
    }

    /// The lease of a claim this store made: dropped, its row goes.
    fn lease(&self, thread: String, epoch: u64, run_id: String, attempt: u32) -> Lease {
        Lease {
            _guard: self.guard(&thread, epoch),
            thread,
            epoch,
            run_id,
            attempt,
        }
    }

    /// Table sizes from the catalogues (`pipec store stats`).
    pub fn stats(&self) -> Result<PgStats, StoreError> {
        let db = self.inner.db.clone();
        self.block_on(async move { maintenance::stats(&db).await })
    }

    /// Reads every row and decodes it (`pipec store check`).
    pub fn check(&self) -> Result<PgCheck, StoreError> {
        let db = self.inner.db.clone();
        self.block_on(async move { maintenance::check(&db).await })
    }
}

impl Inner {
    fn stored_plans(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.plans.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn jobs_sender(&self) -> mpsc::UnboundedSender<Job> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Store for PostgresStore {
    fn location(&self) -> String {
        self.inner.db.location.clone()
    }

    fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()> {
        if self.inner.stored_plans().contains(hash) {
            return Box::pin(std::future::ready(Ok(())));
        }
        let (hash, plan) = (hash.to_string(), plan_json.to_string());
        let put = {
            let hash = hash.clone();
            self.write(move |db| async move { writes::put_plan(&db, &hash, &plan).await })
        };
        Box::pin(async move {
            put.await?;
            self.inner.stored_plans().insert(hash);
            Ok(())
        })
    }

    fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>> {
        let (db, hash) = (self.inner.db.clone(), hash.to_string());
        self.run(async move { reads::get_plan(&db, &hash).await })
    }

    fn create_thread(
        &self,
        rec: ThreadRec,
        attempt: AttemptRec,
    ) -> StoreFuture<'_, (Lease, Vec<RecordedEvent>)> {
        let (thread, epoch, run_id, number) = (
            rec.id.clone(),
            rec.epoch,
            attempt.run_id.clone(),
            attempt.number,
        );
        let created =
            self.write(move |db| async move { writes::create_thread(&db, rec, attempt).await });
        Box::pin(async move {
            let events = created.await?;
            Ok((
                Lease {
                    _guard: self.guard(&thread, epoch),
                    thread,
                    epoch,
                    run_id,
                    attempt: number,
                },
                events,
            ))
        })
    }

    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, Claimed> {
        self.claim_answering(thread, attempt, Vec::new(), "")
    }

    fn claim_answering(
        &self,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Claimed> {
        let (thread, by) = (thread.to_string(), by.to_string());
        let run_id = attempt.run_id.clone();
        let claimed = self.write(move |db| async move {
            writes::claim(&db, &thread, attempt, answers, &by).await
        });
        Box::pin(async move {
            let (id, epoch, number, state, events) = claimed.await?;
            Ok((self.lease(id, epoch, run_id, number), state, events))
        })
    }

    fn commit<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.commit_as(lease, writes, false)
    }

    /// The lease row is deleted in the commit's transaction, so ending an attempt costs
    /// no round trip of its own; dropping the lease then does nothing more.
    fn commit_last<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.commit_as(lease, writes, true)
    }

    fn answer(
        &self,
        thread: &str,
        answers: Vec<(String, Value)>,
        by: &str,
    ) -> StoreFuture<'_, Vec<RecordedEvent>> {
        let (thread, by) = (thread.to_string(), by.to_string());
        self.write(move |db| async move { writes::answer(&db, &thread, answers, &by).await })
    }

    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, (CancelOutcome, Vec<RecordedEvent>)> {
        let thread = thread.to_string();
        self.write(move |db| async move { writes::request_cancel(&db, &thread).await })
    }

    fn cancel_requested<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, bool> {
        let (db, thread) = (self.inner.db.clone(), thread.to_string());
        self.run(async move { reads::cancel_requested(&db, &thread).await })
    }

    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
        let (db, thread) = (self.inner.db.clone(), thread.to_string());
        self.run(async move { reads::load(&db, &thread).await })
    }

    fn thread_rec<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, Option<ThreadRec>> {
        let (db, thread) = (self.inner.db.clone(), thread.to_string());
        self.run(async move { reads::thread_rec(&db, &thread).await })
    }

    fn untaken_thread_rec<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, Option<ThreadRec>> {
        let (db, thread) = (self.inner.db.clone(), thread.to_string());
        self.run(async move { reads::untaken_thread_rec(&db, &thread).await })
    }

    fn is_held(&self, thread: &str) -> bool {
        let (db, thread) = (self.inner.db.clone(), thread.to_string());
        self.block_on(async move { leases::is_held(&db, &thread).await })
            .unwrap_or(false)
    }

    fn renew<'a>(&'a self, lease: &'a Lease) -> StoreFuture<'a, ()> {
        let (db, thread, epoch) = (self.inner.db.clone(), lease.thread.clone(), lease.epoch);
        self.run(async move { leases::renew(&db, &thread, epoch).await })
    }

    fn renew_every(&self) -> Option<std::time::Duration> {
        Some(self.inner.db.options.lease_ttl / 3)
    }

    fn import(&self, state: ThreadState, events: Vec<RecordedEvent>) -> StoreFuture<'_, ()> {
        self.write(move |db| async move { writes::import(&db, state, events).await })
    }

    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
        let db = self.inner.db.clone();
        self.run(async move { reads::list(&db, query).await })
    }

    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<RecordedEvent>> {
        let (db, thread) = (self.inner.db.clone(), thread.to_string());
        self.run(async move { reads::events(&db, &thread, since).await })
    }

    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
        self.write(move |db| async move { maintenance::prune(&db, before_ms, statuses).await })
    }

    fn submit(&self, rec: ThreadRec) -> StoreFuture<'_, Vec<RecordedEvent>> {
        self.write(move |db| async move { queue::submit(&db, rec).await })
    }

    fn runnable(&self, query: RunnableQuery) -> StoreFuture<'_, Vec<RunnableThread>> {
        let db = self.inner.db.clone();
        self.run(async move { queue::runnable(&db, query).await })
    }

    fn take(
        &self,
        query: RunnableQuery,
        attempt: AttemptRec,
    ) -> StoreFuture<'_, Option<Vec<Taken>>> {
        let taken = self.write(move |db| async move { queue::take(&db, query, attempt).await });
        Box::pin(async move {
            let taken = taken.await?;
            Ok(Some(
                taken
                    .into_iter()
                    .map(|((id, epoch, number, state, events), run_id)| Taken {
                        why: Why::Queued,
                        lease: self.lease(id, epoch, run_id, number),
                        state,
                        events,
                    })
                    .collect(),
            ))
        })
    }

    fn wait_for_work(&self, timeout: std::time::Duration) -> StoreFuture<'_, ()> {
        let db = self.inner.db.clone();
        self.run(queue::wait_for_work(db, timeout))
    }

    fn news(&self) -> Option<crate::News> {
        self.inner.db.queue.news()
    }
}
