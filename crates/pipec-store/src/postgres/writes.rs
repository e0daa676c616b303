//! The writes: the writer task (group commit of concurrent commits into one
//! transaction), the fence every commit passes first, the rows a commit writes, and the
//! writes outside a commit: plans, creating and claiming a thread, answers and cancels
//! (compare-and-set, without a lease).
//!
//! Every write transaction locks its thread's row first (`SELECT ... FOR UPDATE`), so
//! writes of one thread are serialised across processes and machines, and event numbers
//! are given inside the committing transaction without gaps. A batch locks its threads in
//! id order, so two processes' batches cannot deadlock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use deadpool_postgres::Transaction;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::sql::{self, exec, row, rows};
use super::{Db, leases, pg, reads, rows, txn};
use crate::envelope::{decode, encode};
use crate::ids;
use crate::*;

/// How many commits one transaction may take.
pub(super) const BATCH: usize = 64;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

pub(crate) enum Job {
    Commit {
        thread: String,
        epoch: u64,
        writes: Vec<Write>,
        /// The attempt's last commit: its lease row goes in the same transaction.
        release: bool,
        reply: Reply<Vec<RecordedEvent>>,
    },
    /// A dropped lease: its row goes (best effort; its expiry is the backstop).
    Release {
        thread: String,
        epoch: u64,
        /// Its place among the releases this process handed over.
        number: u64,
    },
    Other(WriteFn),
}

/// A write run on the writer task.
pub(crate) type WriteFn =
    Box<dyn FnOnce(Arc<Db>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

struct Pending {
    thread: String,
    epoch: u64,
    writes: Vec<Write>,
    release: bool,
    reply: Reply<Vec<RecordedEvent>>,
}

/// The writer task: jobs in the order they were handed over; commits waiting together
/// share a transaction.
pub(super) async fn writer(db: Arc<Db>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut commits = Vec::new();
        let mut others = Vec::new();
        let mut take = |job: Job, commits: &mut Vec<Pending>| match job {
            Job::Commit {
                thread,
                epoch,
                writes,
                release,
                reply,
            } => commits.push(Pending {
                thread,
                epoch,
                writes,
                release,
                reply,
            }),
            other => others.push(other),
        };
        take(first, &mut commits);
        while commits.len() < BATCH {
            match rx.try_recv() {
                Ok(job) => take(job, &mut commits),
                Err(_) => break,
            }
        }
        if !commits.is_empty() {
            commit_batch(&db, commits).await;
        }
        // Releases that queued up together go in one statement; a write handed over
        // between them keeps its place (the releases before it are done first).
        let mut releasing: Vec<(String, u64)> = Vec::new();
        let mut last = 0;
        for job in others {
            match job {
                Job::Release {
                    thread,
                    epoch,
                    number,
                } => {
                    releasing.push((thread, epoch));
                    last = number;
                }
                Job::Other(f) => {
                    release_now(&db, &mut releasing, last).await;
                    f(db.clone()).await
                }
                Job::Commit { .. } => {}
            }
        }
        release_now(&db, &mut releasing, last).await;
    }
}

/// Deletes the lease rows in `releasing` and marks the releases up to `last` done.
async fn release_now(db: &Db, releasing: &mut Vec<(String, u64)>, last: u64) {
    if releasing.is_empty() {
        return;
    }
    let _ = leases::release_all(db, releasing).await;
    releasing.clear();
    db.releases.done(last);
}

/// Applies a batch in one transaction. A commit whose fence fails writes nothing and is
/// answered so; when the transaction fails for another reason, each commit is tried on
/// its own.
fn commit_batch<'a>(
    db: &'a Db,
    commits: Vec<Pending>,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        match try_batch(db, &commits).await {
            Ok(outcomes) => {
                for (c, outcome) in commits.into_iter().zip(outcomes) {
                    let _ = c.reply.send(outcome);
                }
            }
            Err(_) if commits.len() > 1 => {
                for c in commits {
                    commit_batch(db, vec![c]).await;
                }
            }
            Err(e) => {
                for c in commits {
                    let _ = c.reply.send(Err(e.clone()));
                }
            }
        }
    })
}

type Outcome = Result<Vec<RecordedEvent>, StoreError>;

async fn try_batch(db: &Db, commits: &[Pending]) -> Result<Vec<Outcome>, StoreError> {
    let mut client = db.client().await?;
    // Sent whole when it can be. When a fence fails (or anything else does) nothing was
    // written, and the batch is decided commit by commit below, each answered with its
    // own reason.
    if let Some(whole) = at_once(commits)?
        && let Ok(answers) = txn::at_once(&client, whole.stmts).await
    {
        return Ok(whole
            .commits
            .into_iter()
            .map(|(i, events, range)| {
                Ok(rows::recorded(
                    &commits[i].thread,
                    events,
                    &answers[range],
                    None,
                ))
            })
            .collect());
    }
    let txn = client.transaction().await.map_err(pg)?;
    match batch_in(&txn, commits).await {
        Ok(outcomes) => {
            txn.commit().await.map_err(pg)?;
            Ok(outcomes)
        }
        Err(e) => {
            let _ = txn.rollback().await;
            Err(e)
        }
    }
}

/// A batch as one transaction sent whole.
struct Whole {
    stmts: Vec<rows::Stmt>,
    /// Each commit (by its place in the batch), its events, and the answers of its
    /// rows (the last one numbers its events).
    commits: Vec<(usize, Vec<EventRow>, std::ops::Range<usize>)>,
}

/// The batch as one transaction of statements that need no answer before it ends: the
/// fences (`pipec_fence`, in id order), then each commit's rows and record. A commit
/// that passes its fence writes a record that is already known: its own, with the
/// epoch it holds and no cancel asked (the fence passed only so). `None` when a commit
/// needs what the database holds first: a rename (it reads the rows it moves), or the
/// record of a cancellation (which keeps the request).
fn at_once(commits: &[Pending]) -> Result<Option<Whole>, StoreError> {
    let order = in_id_order(commits);
    let mut stmts: Vec<rows::Stmt> = order
        .iter()
        .map(|&i| rows::fence_check(&commits[i].thread, commits[i].epoch))
        .collect();
    let mut planned = Vec::with_capacity(commits.len());
    for &i in &order {
        let c = &commits[i];
        let mut record = None;
        for w in &c.writes {
            match w {
                Write::Rename { .. } => return Ok(None),
                Write::Thread(t) if t.status == Status::Cancelled => return Ok(None),
                Write::Thread(t) => record = Some(t),
                _ => {}
            }
        }
        let rows::Planned { parts, events } = rows::plan(&c.thread, None, &c.writes)?;
        let Some(parts) = rows::Planned::statements(parts) else {
            return Ok(None);
        };
        let start = stmts.len();
        stmts.extend(parts);
        planned.push((i, events, start..stmts.len()));
        if let Some(t) = record {
            let mut rec = t.clone();
            rec.epoch = c.epoch;
            rec.cancel_requested = false;
            stmts.push(rows::thread_update(&rec)?);
        }
        if c.release {
            stmts.push(leases::release_stmt(&c.thread, c.epoch));
        }
    }
    Ok(Some(Whole {
        stmts,
        commits: planned,
    }))
}

/// The batch inside its transaction, in three pipelines: the fences (rows locked in id
/// order), the writes of every commit that passed, the records of their threads.
///
/// Two commits of one thread in a batch (concurrent nodes of an attempt) end as they
/// would one after the other: a fence reads the epoch, the cancel request and the lease,
/// which no commit changes, and the statements run in the order given, so events are
/// numbered on and the later commit's rows and record are the ones left.
async fn batch_in(txn: &Transaction<'_>, commits: &[Pending]) -> Result<Vec<Outcome>, StoreError> {
    let order = in_id_order(commits);
    let mut outcomes: Vec<Option<Outcome>> = commits.iter().map(|_| None).collect();
    let fences: Vec<rows::Stmt> = order
        .iter()
        .map(|&i| rows::fence(&commits[i].thread))
        .collect();
    let fences = rows::pipeline(txn, &fences).await?;
    let mut parts = Vec::new();
    let mut passed = Vec::new();
    for (&i, fence) in order.iter().zip(&fences) {
        let c = &commits[i];
        match fenced(fence.first(), &c.thread, c.epoch, &c.writes) {
            Ok(mut rec) => {
                let planned = rows::plan(&c.thread, rec.as_mut(), &c.writes)?;
                let start = parts.len();
                parts.extend(planned.parts);
                passed.push((i, planned.events, rec, start..parts.len()));
            }
            Err(e @ (StoreError::Io(_) | StoreError::Corrupt { .. })) => return Err(e),
            Err(e) => outcomes[i] = Some(Err(e)),
        }
    }
    let answers = rows::send(txn, parts).await?;
    let mut records = Vec::new();
    for (i, events, mut rec, range) in passed {
        let recorded = rows::recorded(&commits[i].thread, events, &answers[range], rec.as_mut());
        if let Some(rec) = &rec {
            records.push(rows::thread_update(rec)?);
        }
        if commits[i].release {
            records.push(leases::release_stmt(&commits[i].thread, commits[i].epoch));
        }
        outcomes[i] = Some(Ok(recorded));
    }
    rows::pipeline(txn, &records).await?;
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(StoreError::Io("a commit was left out".into()))))
        .collect())
}

/// The places of a batch's commits by thread id, the order their rows are locked in
/// (stable: a thread's commits keep their order).
fn in_id_order(commits: &[Pending]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..commits.len()).collect();
    order.sort_by(|a, b| commits[*a].thread.cmp(&commits[*b].thread));
    order
}

/// Whether a commit passes its fence (`fence` is its thread's row as [`rows::fence`]
/// reads it, locked): only the holder of the thread's current epoch, whose lease has
/// not expired, writes; after a cancel request only the write that records the
/// cancellation passes. The thread's record when the commit rewrites it.
fn fenced(
    fence: Option<&tokio_postgres::Row>,
    thread: &str,
    epoch: u64,
    writes: &[Write],
) -> Result<Option<ThreadRec>, StoreError> {
    let fence = fence.ok_or_else(|| StoreError::NotFound {
        thread: thread.to_string(),
        store: String::new(),
    })?;
    let current = sql::u64_of(fence, 0);
    let cancel_requested: bool = fence.get(1);
    let lease_epoch: Option<i64> = fence.get(2);
    let live: Option<bool> = fence.get(3);
    if current != epoch {
        return Err(StoreError::Fenced {
            thread: thread.to_string(),
            reason: format!("another process took the thread over (epoch {current} ≠ {epoch})"),
        });
    }
    if lease_epoch != Some(epoch as i64) || live != Some(true) {
        return Err(StoreError::Fenced {
            thread: thread.to_string(),
            reason: "the lease expired: its holder sent no heartbeat in time, so another process may take the thread over".into(),
        });
    }
    let records_cancel = writes
        .iter()
        .any(|w| matches!(w, Write::Thread(t) if t.status == Status::Cancelled));
    if cancel_requested && !records_cancel {
        return Err(StoreError::Cancelled {
            thread: thread.to_string(),
        });
    }
    if writes.iter().any(|w| matches!(w, Write::Thread(_))) {
        Ok(Some(decode(fence.get::<_, &[u8]>(4), &|| {
            format!("thread {thread}")
        })?))
    } else {
        Ok(None)
    }
}

/// Rewrites the thread's record and the columns queries use, stamped with now.
pub(super) async fn put_thread(txn: &Transaction<'_>, rec: &ThreadRec) -> Result<(), StoreError> {
    rows::pipeline(txn, &[rows::thread_update(rec)?]).await?;
    Ok(())
}

pub(super) async fn put_plan(db: &Db, hash: &str, plan: &str) -> Result<(), StoreError> {
    let client = db.client().await?;
    exec(
        &client,
        "INSERT INTO pipec_plans (hash, plan) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
        &[&hash, &plan],
    )
    .await?;
    Ok(())
}

/// Inserts a thread's row; `false` when a thread of that id is there already.
pub(super) async fn insert_thread(
    txn: &Transaction<'_>,
    rec: &ThreadRec,
) -> Result<bool, StoreError> {
    let inserted = rows::pipeline(txn, &[rows::new_thread_unless_taken(rec)?]).await?;
    Ok(inserted.first().is_some_and(|rows| !rows.is_empty()))
}

pub(super) async fn create_thread(
    db: &Db,
    rec: ThreadRec,
    attempt: AttemptRec,
) -> Result<Vec<RecordedEvent>, StoreError> {
    if ids::decode(&rec.id).is_none() {
        return Err(StoreError::Io(format!("`{}` is not a thread id", rec.id)));
    }
    let mut client = db.client().await?;
    let txn = client.transaction().await.map_err(pg)?;
    if !insert_thread(&txn, &rec).await? {
        return Err(StoreError::Io(format!("thread {} already exists", rec.id)));
    }
    let number = attempt.number;
    let mut rec = rec;
    let events = start_attempt(
        &txn,
        db,
        &mut rec,
        attempt,
        Event::ThreadCreated { attempt: number },
    )
    .await?;
    put_thread(&txn, &rec).await?;
    txn.commit().await.map_err(pg)?;
    Ok(events)
}

/// The lease, the attempt's row and the event that starts it, in one pipeline; `rec`
/// learns the next event number.
async fn start_attempt(
    txn: &Transaction<'_>,
    db: &Db,
    rec: &mut ThreadRec,
    attempt: AttemptRec,
    started: Event,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let id = rec.id.clone();
    let lease = leases::take(db, &id, rec.epoch, &attempt);
    let rows::Planned { parts, events } = rows::plan(
        &id,
        Some(rec),
        &[Write::Attempt(attempt), Write::Event(started)],
    )?;
    let parts: Vec<rows::Part> = std::iter::once(rows::Part::Sql(lease))
        .chain(parts)
        .collect();
    let answers = rows::send(txn, parts).await?;
    Ok(rows::recorded(&id, events, &answers, Some(rec)))
}

/// A claimed thread: its id, the new epoch, the attempt number, its state, the events.
pub(super) type ClaimedRows = (String, u64, u32, ThreadState, Vec<RecordedEvent>);

/// Takes a thread's lease; with `answers`, answers its pending gates (as `by`) in the
/// same transaction, first.
pub(super) async fn claim(
    db: &Db,
    thread: &str,
    attempt: AttemptRec,
    answers: Vec<(String, Value)>,
    by: &str,
) -> Result<ClaimedRows, StoreError> {
    let client = db.client().await?;
    let id = reads::id_of(&client, db, thread).await?;
    // Two round trips: the lock (with BEGIN), then the rows and COMMIT. The lease is
    // read by a statement of its own sent after the lock: it sees a lease that a claim
    // which held the lock just committed (a join in the locking statement would see the
    // rows of its snapshot from before the wait). Answers read the gates with them.
    let mut first = vec![rows::lock(&id), leases::holder(&id)];
    if !answers.is_empty() {
        first.push(gates_stmt(&id));
    }
    let (tx, found) = txn::Tx::begin(client, first).await?;
    let planned = claimed_rows(db, thread, &id, &found, attempt, &answers, by);
    let (stmts, sent, events, epoch, number) = match planned {
        Ok(c) => c,
        Err(e) => {
            tx.rollback().await;
            return Err(e);
        }
    };
    let answers = tx.commit(stmts).await?;
    let (events, state) = claimed(&id, sent, events, &answers)?;
    Ok((id, epoch, number, state, events))
}

/// A claim's statements, how many after the lease are the attempt's rows, its events,
/// the new epoch, the attempt's number.
pub(super) type ClaimStmts = (Vec<rows::Stmt>, usize, Vec<EventRow>, u64, u32);

/// What a claim writes, from the thread's locked row and live lease as `found` holds
/// them; refused when the thread is held or has ended.
fn claimed_rows(
    db: &Db,
    thread: &str,
    id: &str,
    found: &[Vec<tokio_postgres::Row>],
    attempt: AttemptRec,
    answers: &[(String, Value)],
    by: &str,
) -> Result<ClaimStmts, StoreError> {
    let locked = found
        .first()
        .and_then(|rows| rows.first())
        .ok_or_else(|| db.not_found(thread))?;
    let rec: ThreadRec = decode(locked.get::<_, &[u8]>(0), &|| format!("thread {id}"))?;
    if let Some(holder) = found.get(1).and_then(|rows| rows.first()) {
        return Err(StoreError::Locked {
            thread: id.to_string(),
            holder: Some(leases::holder_of(holder)),
        });
    }
    let before = if answers.is_empty() {
        Vec::new()
    } else {
        let mut gates = BTreeMap::new();
        for r in found.get(2).map_or(&[][..], Vec::as_slice) {
            let name = sql::name_of(r, 0)?;
            let g: GateRec = decode(r.get::<_, &[u8]>(1), &|| format!("gate `{name}`"))?;
            gates.insert(name, g);
        }
        if matches!(rec.status, Status::Completed | Status::Cancelled) {
            return claim_stmts(db, rec, attempt, Vec::new());
        }
        answer_writes(&rec, &gates, answers, by, ids::now_ms())?
    };
    claim_stmts(db, rec, attempt, before)
}

/// The statement that reads a thread's gate rows: name, record.
fn gates_stmt(thread: &str) -> rows::Stmt {
    rows::Stmt::new(
        "SELECT name, rec FROM pipec_gates WHERE thread = $1",
        vec![Box::new(thread.to_string())],
    )
}

/// What a claim of the thread `rec` (its row locked, no live lease) writes, after the
/// writes `before` (a resume's answers): the statements (the lease, those writes, the
/// attempt and its event, the record, then the whole thread
/// as the claim leaves it), how many of them after the lease are the attempt's rows,
/// its events, the new epoch and the attempt's number. Refused when the thread has
/// ended.
pub(super) fn claim_stmts(
    db: &Db,
    mut rec: ThreadRec,
    attempt: AttemptRec,
    before: Vec<Write>,
) -> Result<ClaimStmts, StoreError> {
    let id = rec.id.clone();
    let id = id.as_str();
    if matches!(rec.status, Status::Completed | Status::Cancelled) {
        return Err(StoreError::Ended {
            thread: id.to_string(),
            status: rec.status,
        });
    }
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
    let lease = leases::take(db, id, rec.epoch, &attempt);
    let mut writes = before;
    writes.extend([
        Write::Attempt(attempt),
        Write::Event(Event::AttemptStarted { attempt: number }),
    ]);
    let rows::Planned { parts, events } = rows::plan(id, None, &writes)?;
    let mut stmts = vec![lease];
    // Answers, an attempt and an event: no rename among them.
    stmts.extend(rows::Planned::statements(parts).unwrap_or_default());
    let sent = stmts.len() - 1;
    stmts.push(rows::claim_update(&rec)?);
    stmts.push(reads::load_stmt(id));
    Ok((stmts, sent, events, rec.epoch, number))
}

/// What a claim left, from the answers of its statements ([`claim_stmts`]): the
/// events it wrote and the thread's state.
pub(super) fn claimed(
    id: &str,
    sent: usize,
    events: Vec<EventRow>,
    answers: &[Vec<tokio_postgres::Row>],
) -> Result<(Vec<RecordedEvent>, ThreadState), StoreError> {
    let written = answers.get(1..1 + sent).unwrap_or_default();
    let events = rows::recorded(id, events, written, None);
    let state = reads::state_of(answers.last().map_or(&[][..], Vec::as_slice), id)?;
    Ok((events, state))
}

pub(super) async fn answer(
    db: &Db,
    thread: &str,
    answers: Vec<(String, Value)>,
    by: &str,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let mut client = db.client().await?;
    let id = reads::resolve(&client, db, thread).await?;
    let txn = client.transaction().await.map_err(pg)?;
    let locked = row(
        &txn,
        "SELECT rec FROM pipec_threads WHERE id = $1 FOR UPDATE",
        &[&id],
    )
    .await?
    .ok_or_else(|| db.not_found(thread))?;
    let mut rec: ThreadRec = decode(locked.get::<_, &[u8]>(0), &|| format!("thread {id}"))?;
    let mut gates = BTreeMap::new();
    for r in rows(
        &txn,
        "SELECT name, rec FROM pipec_gates WHERE thread = $1",
        &[&id],
    )
    .await?
    {
        let name = sql::name_of(&r, 0)?;
        let g: GateRec = decode(r.get::<_, &[u8]>(1), &|| format!("gate `{name}`"))?;
        gates.insert(name, g);
    }
    let writes = answer_writes(&rec, &gates, &answers, by, ids::now_ms())?;
    let events = rows::apply(&txn, &id, Some(&mut rec), &writes).await?;
    if events.is_empty() {
        // The answers it has already: nothing changes.
        put_thread(&txn, &rec).await?;
    } else {
        rows::pipeline(
            &txn,
            &[rows::answered_update(&rec)?, super::queue::notify_stmt()],
        )
        .await?;
    }
    txn.commit().await.map_err(pg)?;
    Ok(events)
}

pub(super) async fn request_cancel(
    db: &Db,
    thread: &str,
) -> Result<(CancelOutcome, Vec<RecordedEvent>), StoreError> {
    let mut client = db.client().await?;
    let id = reads::resolve(&client, db, thread).await?;
    let txn = client.transaction().await.map_err(pg)?;
    let locked = row(
        &txn,
        "SELECT rec FROM pipec_threads WHERE id = $1 FOR UPDATE",
        &[&id],
    )
    .await?
    .ok_or_else(|| db.not_found(thread))?;
    let mut rec: ThreadRec = decode(locked.get::<_, &[u8]>(0), &|| format!("thread {id}"))?;
    if rec.status.is_terminal() {
        return Ok((CancelOutcome::AlreadyEnded(rec.status), Vec::new()));
    }
    let held_by_other = leases::live_holder(&txn, &id).await?.is_some();
    let (outcome, event) = if held_by_other {
        rec.cancel_requested = true;
        (CancelOutcome::Requested, Event::CancelRequested {})
    } else {
        rec.status = Status::Cancelled;
        rec.holder = None;
        (CancelOutcome::Cancelled, Event::ThreadCancelled {})
    };
    let events = rows::apply(&txn, &id, Some(&mut rec), &[Write::Event(event)]).await?;
    put_thread(&txn, &rec).await?;
    super::queue::notify(&txn).await?;
    txn.commit().await.map_err(pg)?;
    Ok((outcome, events))
}

impl Db {
    pub(super) fn not_found(&self, thread: &str) -> StoreError {
        StoreError::NotFound {
            thread: thread.to_string(),
            store: self.location.clone(),
        }
    }
}

/// Writes a whole thread exported from another store, in one transaction: the thread's
/// row with its own `updated_ms` (not the time of the copy), every row as it was, no
/// lease (no process of this store holds it), and a notification for waiting workers.
pub(super) async fn import(
    db: &Db,
    state: ThreadState,
    events: Vec<RecordedEvent>,
) -> Result<(), StoreError> {
    let checked = crate::import::check(&state, &events)?;
    let rec = &checked.rec;
    let thread = rec.id.as_str();
    let mut client = db.client().await?;
    let txn = client.transaction().await.map_err(pg)?;
    if !insert_thread(&txn, rec).await? {
        return Err(crate::import::exists(thread, db.location.clone()));
    }
    // Every row in one pipeline.
    let mut put = Vec::new();
    for (name, n) in &state.nodes {
        put.push(rows::node(thread, name, encode(n)?));
    }
    for ((name, generation, item), r) in &state.items {
        put.push(rows::item(thread, name, *generation, *item, encode(r)?));
    }
    for (k, r) in &state.calls {
        put.push(rows::call(thread, &k.node, k, encode(r)?));
    }
    for (name, g) in &state.gates {
        put.push(rows::gate(thread, name, encode(g)?));
    }
    for a in &state.attempts {
        put.push(rows::attempt(thread, a)?);
    }
    for (k, h) in &state.heals {
        put.push(rows::heal(thread, &k.node, k, encode(h)?));
    }
    for (seq, event_row) in &checked.events {
        put.push(rows::event(thread, *seq, event_row)?);
    }
    rows::pipeline(&txn, &put).await?;
    super::queue::notify(&txn).await?;
    txn.commit().await.map_err(pg)?;
    Ok(())
}
