//! The checkpoint store: the `Store` trait (domain operations, not get/put, so a server
//! database can implement it too), its embedded default on redb, and an in-memory
//! store with the same semantics for tests.
//!
//! Every write happens inside a *fenced* transaction: it first checks that the thread's
//! epoch is still the one its lease was granted with, so a process that lost its lease
//! can never write over the one that took it.
#![warn(unreachable_pub)]

#[cfg(any(test, feature = "testing"))]
pub mod contract;
mod envelope;
mod event;
pub mod ids;
mod import;
pub mod lock;
mod manifest;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod queue;
mod records;
mod redb_store;
mod select;

use std::future::Future;
use std::pin::Pin;

pub use event::*;
pub use import::{Export, export};
pub use manifest::*;
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::{PgCheck, PgOpen, PgOptions, PgStats, PostgresStore, SCHEMA_VERSION};
pub use queue::{DEFAULT_POLL, News, RunnableQuery, RunnableThread, Taken, Why, why_runnable};
pub use records::*;
pub use redb_store::{CheckReport, RedbStore, STORE_FORMAT, quiet_contained_panics};
pub use select::{OpenMode, is_postgres_url, open, password_of, redact, shown};

use lock::ThreadLock;

/// A future returned by a store operation.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The right to write to a thread: its epoch, and what keeps the thread taken (the OS
/// lock of a redb store, the entry of a memory store) until the lease is dropped.
#[derive(Debug)]
pub struct Lease {
    pub thread: ThreadId,
    pub epoch: u64,
    pub run_id: String,
    pub attempt: u32,
    pub(crate) _guard: LeaseGuard,
}

/// What keeps a lease's thread taken; dropping it frees the thread, as a process's death
/// frees its locks.
#[derive(Debug)]
pub(crate) enum LeaseGuard {
    /// A held thread lock file (redb).
    File { _lock: ThreadLock },
    /// A thread marked taken in a memory store.
    Memory { _hold: memory::Hold },
    /// A lease row of a Postgres store, released when dropped (its expiry is the
    /// backstop when the process dies).
    #[cfg(feature = "postgres")]
    Postgres { _release: postgres::Release },
    /// Nothing: what a process that lost its thread still has (tests build these).
    #[cfg(any(test, feature = "testing"))]
    Nothing,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StoreError {
    /// No thread with this id (or unique prefix) in this store.
    NotFound {
        thread: String,
        store: String,
    },
    /// The prefix names several threads.
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
    /// Another live process holds the thread.
    Locked {
        thread: String,
        holder: Option<Holder>,
    },
    /// The lease was lost: another process claimed the thread.
    Fenced {
        thread: String,
        reason: String,
    },
    /// The thread was cancelled: only the write that records the cancellation passes.
    Cancelled {
        thread: String,
    },
    /// A claim of a thread that has completed or was cancelled: there is nothing left to
    /// run (another process may have finished it since it was looked at).
    Ended {
        thread: String,
        status: Status,
    },
    /// An answer to a gate that is not pending.
    NoSuchGate {
        gate: String,
        pending: Vec<String>,
    },
    AlreadyAnswered {
        gate: String,
        by: String,
    },
    /// The store file is of a newer format than this pipec reads.
    NewerFormat {
        found: u32,
        supported: u32,
    },
    /// The file or a record cannot be read: corrupt, truncated, not a store.
    Corrupt {
        what: String,
    },
    /// No store at this path (a command that only uses a store creates none).
    Missing {
        store: String,
    },
    /// A write asked of a store opened read-only.
    ReadOnly {
        store: String,
        operation: &'static str,
    },
    /// An import of a thread the store already has.
    Exists {
        thread: String,
        store: String,
    },
    Io(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NotFound { thread, store } => {
                write!(f, "no thread `{thread}` in the store {store}")
            }
            StoreError::Ambiguous { prefix, matches } => write!(
                f,
                "`{prefix}` matches several threads: {}",
                matches.join(", ")
            ),
            StoreError::Locked { thread, holder } => match holder {
                Some(h) => write!(
                    f,
                    "thread {thread} is being run by process {} on {} (run {})",
                    h.pid, h.host, h.run_id
                ),
                None => write!(f, "thread {thread} is being run by another process"),
            },
            StoreError::Fenced { thread, reason } => write!(f, "thread {thread}: {reason}"),
            StoreError::Cancelled { thread } => write!(f, "thread {thread} was cancelled"),
            StoreError::Ended { thread, status } => {
                write!(f, "thread {thread} has ended ({})", status.as_str())
            }
            StoreError::NoSuchGate { gate, pending } => {
                if pending.is_empty() {
                    write!(f, "no gate `{gate}` is waiting for an answer")
                } else {
                    write!(
                        f,
                        "no gate `{gate}` is waiting for an answer; pending: {}",
                        pending.join(", ")
                    )
                }
            }
            StoreError::AlreadyAnswered { gate, by } => {
                write!(f, "the gate `{gate}` was already answered ({by})")
            }
            StoreError::NewerFormat { found, supported } => write!(
                f,
                "the store has format {found}, and this pipec reads format {supported}; use a newer pipec"
            ),
            StoreError::Corrupt { what } => write!(f, "the store cannot be read: {what}"),
            StoreError::Missing { store } => write!(f, "no store at {store}"),
            StoreError::ReadOnly { store, operation } => write!(
                f,
                "the store {store} is open read-only here, and `{operation}` writes"
            ),
            StoreError::Exists { thread, store } => {
                write!(f, "the store {store} already has a thread {thread}")
            }
            StoreError::Io(e) => write!(f, "store I/O error: {e}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// The writes that answer gates, checked against the gates as they are: all or none
/// (compare-and-set). An answer equal to the one a gate has is accepted and writes
/// nothing; another answer to an answered gate, or an answer to no gate, refuses them all.
/// Both stores answer through this, inside their write transaction.
///
/// A paused thread always has the rows of the gates it paused at, so one with none is
/// a damaged store (say a gate table page that still decodes but lost its keys), not an
/// answer to a gate that is not there.
pub(crate) fn answer_writes(
    rec: &ThreadRec,
    gates: &std::collections::BTreeMap<String, GateRec>,
    answers: &[(String, serde_json::Value)],
    by: &str,
    now_ms: u64,
) -> Result<Vec<Write>, StoreError> {
    if rec.status == Status::Paused && gates.is_empty() {
        return Err(StoreError::Corrupt {
            what: format!(
                "thread {} is paused, but no row of a gate it waits at is stored; `pipec store check` says what else is damaged",
                rec.id
            ),
        });
    }
    let pending: Vec<String> = gates
        .iter()
        .filter(|(_, g)| g.state == GateState::Pending)
        .map(|(n, _)| n.clone())
        .collect();
    let mut writes = Vec::new();
    for (gate, value) in answers {
        let Some(g) = gates.get(gate) else {
            return Err(StoreError::NoSuchGate {
                gate: gate.clone(),
                pending,
            });
        };
        match g.state {
            GateState::Answered if g.answer.as_ref() == Some(value) => {}
            GateState::Answered => {
                return Err(StoreError::AlreadyAnswered {
                    gate: gate.clone(),
                    by: g.answered_by.clone().unwrap_or_default(),
                });
            }
            GateState::Pending => {
                let mut g = g.clone();
                g.state = GateState::Answered;
                g.answer = Some(value.clone());
                g.answered_ms = now_ms;
                g.answered_by = Some(by.to_string());
                writes.push(Write::Gate(gate.clone(), g));
                writes.push(Write::Event(Event::GateAnswered {
                    gate: gate.clone(),
                    by: by.to_string(),
                }));
            }
        }
    }
    Ok(writes)
}

/// A claimed thread: the lease, everything stored about the thread, and the events the
/// claim wrote.
pub type Claimed = (Lease, ThreadState, Vec<RecordedEvent>);

/// A page of `pipec runs`.
#[derive(Clone, Debug, Default)]
pub struct ListQuery {
    pub status: Option<Status>,
    /// Only threads older than this id (the cursor of the previous page).
    pub before: Option<ThreadId>,
    pub limit: usize,
    pub pipeline: Option<String>,
}

/// What `cancel` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// No process held it: it is cancelled now.
    Cancelled,
    /// A live process runs it: it stops at its next write.
    Requested,
    /// It had already ended.
    AlreadyEnded(Status),
}

/// The checkpoint store.
pub trait Store: Send + Sync {
    /// Where the store is, for messages (`pipec runs --store ...`).
    fn location(&self) -> String;

    /// Stores a plan by hash (once).
    fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()>;
    fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>>;

    /// Creates a thread and takes its lease (epoch 1); returns the events it wrote
    /// (`thread_created`).
    fn create_thread(
        &self,
        rec: ThreadRec,
        attempt: AttemptRec,
    ) -> StoreFuture<'_, (Lease, Vec<RecordedEvent>)>;

    /// Takes a thread's lease: the lock, then the epoch bumped in one transaction.
    /// Also returns the events the claim wrote (`attempt_started`). A completed or
    /// cancelled thread is refused (`StoreError::Ended`) and left as it is.
    fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, Claimed>;

    /// Applies writes in one fenced transaction; returns the events among them as
    /// committed: numbered, stamped with the commit's time, in order.
    fn commit<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>>;

    /// The last commit of an attempt: [`Store::commit`], after which the lease is only
    /// dropped. A store may free the thread in the same transaction (Postgres deletes
    /// the lease row with it, so an attempt's end costs no round trip of its own); a
    /// later commit under the lease may then be fenced.
    fn commit_last<'a>(
        &'a self,
        lease: &'a Lease,
        writes: Vec<Write>,
    ) -> StoreFuture<'a, Vec<RecordedEvent>> {
        self.commit(lease, writes)
    }

    /// Answers pending gates and takes the thread's lease in one transaction: what
    /// [`Store::answer`] then [`Store::claim`] do, in one commit (a resume with
    /// answers). Refused as either would be, and then nothing is written. The events are
    /// the answers' (`gate_answered`), then the claim's.
    fn claim_answering(
        &self,
        thread: &str,
        attempt: AttemptRec,
        answers: Vec<(String, serde_json::Value)>,
        by: &str,
    ) -> StoreFuture<'_, Claimed>;

    /// Answers pending gates (all or none), without a lease: compare-and-set on each
    /// gate. Returns the events written (`gate_answered`).
    fn answer(
        &self,
        thread: &str,
        answers: Vec<(String, serde_json::Value)>,
        by: &str,
    ) -> StoreFuture<'_, Vec<RecordedEvent>>;

    /// Cancels a thread: at once when no process holds it, else at the holder's next
    /// write (a running attempt also polls [`Store::cancel_requested`]). Returns what
    /// happened and the events written.
    fn request_cancel(&self, thread: &str) -> StoreFuture<'_, (CancelOutcome, Vec<RecordedEvent>)>;

    /// Everything stored about a thread (the id may be a unique prefix).
    fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState>;

    /// Whether a live process holds the thread (a probe; it takes nothing).
    fn is_held(&self, thread: &str) -> bool;

    /// A thread's record alone (`None` when there is no such thread): what a worker
    /// looks at before it takes a thread, cheaper than [`Store::load`] where the rows are
    /// apart. The default loads the whole thread.
    fn thread_rec<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, Option<ThreadRec>> {
        Box::pin(async move {
            match self.load(thread).await {
                Ok(state) => Ok(state.thread),
                Err(StoreError::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    /// A thread's record when no process is taking it at this moment (`None` then, and
    /// when there is no such thread): what a worker looks at before it takes a thread.
    /// Where claims from many processes meet (PostgreSQL), workers offered the same
    /// thread at once then give up at this one read, not at the claim. The default is
    /// [`Store::thread_rec`].
    fn untaken_thread_rec<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, Option<ThreadRec>> {
        self.thread_rec(thread)
    }

    /// Whether someone asked to cancel the thread: what a running attempt polls, so a
    /// cancel stops it while its effects are in flight, not only at its next write.
    fn cancel_requested<'a>(&'a self, thread: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            Ok(self
                .load(thread)
                .await?
                .thread
                .is_some_and(|t| t.cancel_requested))
        })
    }

    /// Keeps a lease alive: what a running attempt calls every [`Store::renew_every`]
    /// (its heartbeat). A lease that expired or was taken over is `StoreError::Fenced`.
    /// Stores whose leases last as long as their process (redb, memory) have nothing to
    /// do.
    fn renew<'a>(&'a self, _lease: &'a Lease) -> StoreFuture<'a, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// How often a holder must renew its leases; `None` when they need no heartbeat.
    fn renew_every(&self) -> Option<std::time::Duration> {
        None
    }

    /// Writes a whole thread read from another store ([`export`]): its record (holder
    /// cleared; status, epoch, next event number and attempts as they were), every row,
    /// and every event with its number and time, in one transaction, with the status
    /// index and the queue in step (a queued, answered or due thread is runnable here,
    /// and waiting workers hear of it). A thread the store has is refused
    /// (`StoreError::Exists`) and nothing is written. Plans go separately (`put_plan`).
    ///
    /// The default refuses: only a store that can write rows as they are imports.
    fn import(&self, state: ThreadState, _events: Vec<RecordedEvent>) -> StoreFuture<'_, ()> {
        let thread = state.thread.map(|t| t.id).unwrap_or_default();
        let store = self.location();
        Box::pin(std::future::ready(Err(StoreError::Io(format!(
            "the store {store} cannot import threads (thread {thread})"
        )))))
    }

    /// Threads, newest first.
    fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>>;

    /// A thread's events from `since` on.
    fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<RecordedEvent>>;

    /// Deletes terminal threads last updated before `before_ms`; returns how many.
    fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize>;

    // ------------------------------------------------------------ workers
    //
    // What `pipec worker` needs: threads created for workers, the threads one could take,
    // and a wait for more. Each has a default built on the operations above, so a store
    // works with workers before it implements them natively (the defaults poll).

    /// Creates a thread for the workers: status `queued`, no lease taken (its epoch is
    /// the one the first claim bumps). Returns the events written (`thread_queued`).
    ///
    /// The default creates the thread with a lease (an attempt row numbered 0, ended
    /// `queued`), rewrites its record as queued and drops the lease.
    fn submit(&self, rec: ThreadRec) -> StoreFuture<'_, Vec<RecordedEvent>> {
        Box::pin(async move {
            let mut rec = rec;
            rec.status = Status::Queued;
            rec.holder = None;
            rec.attempts = 0;
            let attempt = AttemptRec {
                number: 0,
                run_id: String::new(),
                pid: std::process::id(),
                host: String::new(),
                started_ms: rec.created_ms,
                ended_ms: rec.created_ms,
                end: Some("queued".into()),
                plan_hash: rec.plan_hash.clone(),
                pipec: env!("CARGO_PKG_VERSION").into(),
            };
            let (lease, mut events) = self.create_thread(rec.clone(), attempt).await?;
            events.extend(
                self.commit(
                    &lease,
                    vec![Write::Thread(rec), Write::Event(Event::ThreadQueued {})],
                )
                .await?,
            );
            Ok(events)
        })
    }

    /// Threads a worker could take now (see `queue.rs` for what makes one runnable),
    /// queued ones first, oldest first within each kind.
    ///
    /// The default pages through `list` and loads each paused thread.
    fn runnable(&self, query: RunnableQuery) -> StoreFuture<'_, Vec<RunnableThread>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for status in queue::CANDIDATE_STATUSES {
                let mut found = Vec::new();
                let mut before = None;
                loop {
                    let page = self
                        .list(ListQuery {
                            status: Some(status),
                            before: before.clone(),
                            limit: 200,
                            pipeline: None,
                        })
                        .await?;
                    let Some(last) = page.last() else { break };
                    before = Some(last.id.clone());
                    for t in page {
                        if !query.wants(&t.id, &t.pipeline) || self.is_held(&t.id) {
                            continue;
                        }
                        let why = if status == Status::Paused {
                            let st = self.load(&t.id).await?;
                            let Some(rec) = &st.thread else { continue };
                            let gates = st.gates.values().map(|g| (g, st.nodes.get(&g.node)));
                            queue::why_runnable(rec, gates, query.now_ms, false)
                        } else {
                            Some(if status == Status::Queued {
                                Why::Queued
                            } else {
                                Why::Orphaned
                            })
                        };
                        if let Some(why) = why {
                            found.push(RunnableThread {
                                id: t.id,
                                pipeline: t.pipeline,
                                why,
                            });
                        }
                    }
                }
                // `list` pages newest first; work is offered oldest first.
                found.reverse();
                out.extend(found);
                if out.len() >= query.max() {
                    break;
                }
            }
            out.truncate(query.max());
            Ok(out)
        })
    }

    /// Takes up to `query.limit` queued threads, each claimed for an attempt like
    /// `attempt` (every thread gets its own number, run id and plan hash): what a worker
    /// runs next, found and claimed together. Threads in `query.except`, and threads
    /// another process is writing or taking at that moment, are passed over.
    ///
    /// `None` when the store takes one thread at a time; a worker then looks with
    /// [`Store::runnable`] and claims each. Answered and due gates and threads whose
    /// holder died are found by `runnable` on every store.
    fn take(
        &self,
        _query: RunnableQuery,
        _attempt: AttemptRec,
    ) -> StoreFuture<'_, Option<Vec<Taken>>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Waits until the store may have new work (a thread queued or released, a gate
    /// answered), or `timeout` passes, whichever is first. It may return early without
    /// news: a worker then looks at `runnable` again.
    ///
    /// The default sleeps for `timeout`.
    fn wait_for_work(&self, timeout: std::time::Duration) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            tokio::time::sleep(timeout).await;
            Ok(())
        })
    }

    /// What the store's notifications said so far ([`News`]), when it hears them; `None`
    /// when it does not (or does not yet), and a worker then takes and looks at every
    /// turn.
    fn news(&self) -> Option<News> {
        None
    }
}

/// Sizes of a store file (`pipec store stats`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct StoreStats {
    /// The file's length on disk, including free space the store keeps for reuse.
    pub file_bytes: u64,
    /// The pages in use; the rest of the file is free space kept for reuse.
    pub allocated_bytes: u64,
    pub tables: Vec<TableStat>,
}

/// One table of a store.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TableStat {
    pub name: &'static str,
    pub rows: u64,
    /// Keys and values.
    pub stored_bytes: u64,
    /// Page headers and offsets.
    pub metadata_bytes: u64,
    /// Unused space inside the table's pages.
    pub fragmented_bytes: u64,
    pub pages: u64,
}
