//! Leases across machines: one row per thread (holder, epoch, heartbeat, expiry), times
//! from the database's clock only (`now()`), so the clocks of the machines do not
//! matter. A claim takes a thread whose lease is gone or expired (epoch + 1); a holder
//! renews its lease while its attempt runs; a commit is fenced unless its lease is the
//! thread's current one and has not expired. Dropping a lease deletes its row at once,
//! best effort; a holder that dies without that is outlived by its expiry.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::GenericClient;
use tokio::sync::{mpsc, watch};

use super::Db;
use super::rows::{Stmt, pipeline};
use super::sql::{self, exec};
use super::writes::Job;
use crate::*;

/// The statement that writes the thread's lease row for a new holder, expiring a time
/// to live from now.
pub(super) fn take(db: &Db, thread: &str, epoch: u64, attempt: &AttemptRec) -> Stmt {
    Stmt::new(
        "INSERT INTO pipec_leases (thread, epoch, run_id, pid, host, since_ms, heartbeat_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now(), now() + $7::bigint * interval '1 millisecond')
         ON CONFLICT (thread) DO UPDATE SET epoch = EXCLUDED.epoch, run_id = EXCLUDED.run_id,
           pid = EXCLUDED.pid, host = EXCLUDED.host, since_ms = EXCLUDED.since_ms,
           heartbeat_at = EXCLUDED.heartbeat_at, expires_at = EXCLUDED.expires_at",
        vec![
            Box::new(thread.to_string()),
            Box::new(epoch as i64),
            Box::new(attempt.run_id.clone()),
            Box::new(i64::from(attempt.pid)),
            Box::new(attempt.host.clone()),
            Box::new(attempt.started_ms as i64),
            Box::new(db.ttl_ms()),
        ],
    )
}

/// The statement that reads who holds the thread, when a lease that has not expired
/// does (a row for [`holder_of`]). Sent after the statement that locks the thread's row,
/// it sees a lease a claim that held the lock just committed.
pub(super) fn holder(thread: &str) -> Stmt {
    Stmt::new(
        "SELECT run_id, pid, host, since_ms FROM pipec_leases
         WHERE thread = $1 AND expires_at > now()",
        vec![Box::new(thread.to_string())],
    )
}

pub(super) fn holder_of(r: &tokio_postgres::Row) -> Holder {
    Holder {
        run_id: r.get(0),
        pid: sql::u32_of(r, 1),
        host: r.get(2),
        since_ms: sql::u64_of(r, 3),
    }
}

/// Who holds the thread, when a lease that has not expired does.
pub(super) async fn live_holder<C: GenericClient>(
    c: &C,
    thread: &str,
) -> Result<Option<Holder>, StoreError> {
    let found = pipeline(c, &[holder(thread)]).await?;
    Ok(found.first().and_then(|rows| rows.first()).map(holder_of))
}

pub(super) async fn is_held(db: &Db, thread: &str) -> Result<bool, StoreError> {
    let client = db.client().await?;
    Ok(live_holder(&client, thread).await?.is_some())
}

/// Extends a live lease by its time to live. A lease that expired, or that another
/// process took, is not renewed: the holder is fenced.
pub(super) async fn renew(db: &Db, thread: &str, epoch: u64) -> Result<(), StoreError> {
    let client = db.client().await?;
    let renewed = exec(
        &client,
        "UPDATE pipec_leases SET heartbeat_at = now(),
           expires_at = now() + $3::bigint * interval '1 millisecond'
         WHERE thread = $1 AND epoch = $2 AND expires_at > now()",
        &[&thread, &(epoch as i64), &db.ttl_ms()],
    )
    .await?;
    if renewed == 0 {
        return Err(StoreError::Fenced {
            thread: thread.to_string(),
            reason: "the lease expired or was taken over before its heartbeat".into(),
        });
    }
    Ok(())
}

/// Deletes the lease row of a holder that is done with the thread.
pub(super) async fn release(db: &Db, thread: &str, epoch: u64) -> Result<(), StoreError> {
    let client = db.client().await?;
    pipeline(&client, &[release_stmt(thread, epoch)]).await?;
    Ok(())
}

/// The condition on a released thread `t` under which its release leaves work for a
/// worker: it went back to the queue, its holder left it mid-run, or it waits at a gate
/// that was answered since its holder claimed it (a claim sets `answers` back to 0).
macro_rules! leaves_work {
    () => {
        "(t.status IN ('queued', 'running') OR (t.status = 'paused' AND t.answers > 0))"
    };
}

/// The statement that deletes the lease row of the holder of `epoch`, and tells the
/// workers when that leaves work: a thread given back to the queue, or one whose gate
/// was answered meanwhile. One that ended, or waits for a person, leaves none, and
/// waking every worker for it would cost each a look at the queue. Sent inside a
/// commit (the attempt's last), it sees the thread's status as the commit left it.
pub(super) fn release_stmt(thread: &str, epoch: u64) -> Stmt {
    Stmt::new(
        concat!(
            "WITH gone AS (DELETE FROM pipec_leases WHERE thread = $1 AND epoch = $2 RETURNING thread)
             SELECT pg_notify('pipec_work', current_schema())
             WHERE EXISTS (SELECT 1 FROM gone JOIN pipec_threads t ON t.id = gone.thread WHERE ",
            leaves_work!(),
            ")"
        ),
        vec![Box::new(thread.to_string()), Box::new(epoch as i64)],
    )
}

/// Deletes the lease rows of several holders that are done, in one statement: what the
/// writer does with the releases that queued up while it wrote (a worker ends many
/// attempts a second), so they cost one round trip and one notification, not one each.
pub(super) async fn release_all(db: &Db, leases: &[(String, u64)]) -> Result<(), StoreError> {
    if let [(thread, epoch)] = leases {
        return release(db, thread, *epoch).await;
    }
    let threads: Vec<&str> = leases.iter().map(|(t, _)| t.as_str()).collect();
    let epochs: Vec<i64> = leases.iter().map(|(_, e)| *e as i64).collect();
    let client = db.client().await?;
    exec(
        &client,
        concat!(
            "WITH gone AS (DELETE FROM pipec_leases l USING unnest($1::text[], $2::bigint[]) AS r(thread, epoch)
                           WHERE l.thread = r.thread AND l.epoch = r.epoch RETURNING l.thread)
             SELECT pg_notify('pipec_work', current_schema())
             WHERE EXISTS (SELECT 1 FROM gone JOIN pipec_threads t ON t.id = gone.thread WHERE ",
            leaves_work!(),
            ")"
        ),
        &[&threads, &epochs],
    )
    .await?;
    Ok(())
}

/// What a Postgres lease holds: dropping it hands the release of its row to the store's
/// writer, which does it before any write handed over later (a claim of the same thread
/// by this process finds it free).
#[derive(Debug)]
pub(crate) struct Release {
    jobs: mpsc::UnboundedSender<Job>,
    releases: Arc<Releases>,
    thread: String,
    epoch: u64,
    /// Set when the row went with the attempt's last commit: nothing is left to do.
    freed: std::sync::atomic::AtomicBool,
    /// The store, kept until the release is handed over: a store goes away only after
    /// its last lease, so the releases it makes before it goes include this one.
    _store: Keep,
}

/// Something kept alive, whatever it is.
pub(super) struct Keep(#[allow(dead_code)] pub Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Keep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keep")
    }
}

impl Release {
    pub(super) fn new(
        jobs: mpsc::UnboundedSender<Job>,
        releases: Arc<Releases>,
        thread: &str,
        epoch: u64,
        store: Keep,
    ) -> Release {
        Release {
            jobs,
            releases,
            thread: thread.to_string(),
            epoch,
            freed: std::sync::atomic::AtomicBool::new(false),
            _store: store,
        }
    }

    /// The lease row was deleted in a commit of its holder's: dropping the lease does
    /// nothing more.
    pub(super) fn freed(&self) {
        self.freed.store(true, Ordering::SeqCst);
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if self.freed.load(Ordering::SeqCst) {
            return;
        }
        let number = self.releases.sent.fetch_add(1, Ordering::SeqCst) + 1;
        let sent = self.jobs.send(Job::Release {
            thread: std::mem::take(&mut self.thread),
            epoch: self.epoch,
            number,
        });
        if sent.is_err() {
            // No writer (the store is gone): nothing waits for this one.
            self.releases.done(number);
        }
    }
}

/// The releases this process handed to the writer and how many it has done, so that a
/// read of this process sees the leases it dropped as gone (as a redb store's reader
/// sees a lock file it closed).
#[derive(Debug)]
pub(crate) struct Releases {
    sent: AtomicU64,
    done: watch::Sender<u64>,
}

impl Default for Releases {
    fn default() -> Self {
        Releases {
            sent: AtomicU64::new(0),
            done: watch::channel(0).0,
        }
    }
}

impl Releases {
    pub(super) fn done(&self, number: u64) {
        self.done.send_modify(|n| *n = (*n).max(number));
    }

    /// How many releases were handed over so far.
    pub(super) fn handed_over(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Blocks this thread (not an async task) until every release handed over so far is
    /// done, or `at_most` has passed: what a store does before it goes away, so that a
    /// process that ends leaves no lease row behind for others to wait out.
    pub(super) fn settle_blocking(&self, at_most: std::time::Duration) {
        let upto = self.handed_over();
        let start = std::time::Instant::now();
        while *self.done.borrow() < upto && start.elapsed() < at_most {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Waits until the releases handed over before `upto` are done.
    pub(super) async fn settle(&self, upto: u64) {
        let mut rx = self.done.subscribe();
        let _ = rx.wait_for(|n| *n >= upto).await;
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Commit { thread, epoch, .. } => write!(f, "commit {thread}@{epoch}"),
            Job::Release { thread, epoch, .. } => write!(f, "release {thread}@{epoch}"),
            Job::Other(_) => write!(f, "write"),
        }
    }
}
