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
use super::{Db, leases, pg, reads};
use crate::store::envelope::{decode, encode};
use crate::store::ids;
use crate::store::*;

/// How many commits one transaction may take.
pub(super) const BATCH: usize = 64;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

pub(crate) enum Job {
    Commit {
        thread: String,
        epoch: u64,
        writes: Vec<Write>,
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
                reply,
            } => commits.push(Pending {
                thread,
                epoch,
                writes,
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
    let txn = client.transaction().await.map_err(pg)?;
    let mut order: Vec<usize> = (0..commits.len()).collect();
    order.sort_by(|a, b| commits[*a].thread.cmp(&commits[*b].thread));
    let mut outcomes: Vec<Option<Outcome>> = commits.iter().map(|_| None).collect();
    for i in order {
        let c = &commits[i];
        let outcome = apply_fenced(&txn, &c.thread, c.epoch, &c.writes).await;
        if let Err(e @ (StoreError::Io(_) | StoreError::Corrupt { .. })) = &outcome {
            let e = e.clone();
            let _ = txn.rollback().await;
            return Err(e);
        }
        outcomes[i] = Some(outcome);
    }
    txn.commit().await.map_err(pg)?;
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(StoreError::Io("a commit was left out".into()))))
        .collect())
}

/// The fence, then the writes: only the holder of the thread's current epoch, whose
/// lease has not expired, writes; after a cancel request only the write that records the
/// cancellation passes.
async fn apply_fenced(
    txn: &Transaction<'_>,
    thread: &str,
    epoch: u64,
    writes: &[Write],
) -> Outcome {
    let fence = row(
        txn,
        "SELECT t.epoch, t.cancel_requested, l.epoch, l.expires_at > now()
         FROM pipec_threads t LEFT JOIN pipec_leases l ON l.thread = t.id
         WHERE t.id = $1 FOR UPDATE OF t",
        &[&thread],
    )
    .await?
    .ok_or_else(|| StoreError::NotFound {
        thread: thread.to_string(),
        store: String::new(),
    })?;
    let current = sql::u64_of(&fence, 0);
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
        let mut rec = get_thread(txn, thread).await?;
        let events = apply_writes(txn, thread, Some(&mut rec), writes).await?;
        put_thread(txn, &rec).await?;
        Ok(events)
    } else {
        apply_writes(txn, thread, None, writes).await
    }
}

/// The thread's record (its row is locked by the caller).
pub(super) async fn get_thread(
    txn: &Transaction<'_>,
    thread: &str,
) -> Result<ThreadRec, StoreError> {
    let r = row(
        txn,
        "SELECT rec FROM pipec_threads WHERE id = $1",
        &[&thread],
    )
    .await?
    .ok_or_else(|| StoreError::NotFound {
        thread: thread.to_string(),
        store: String::new(),
    })?;
    decode(r.get::<_, &[u8]>(0), &|| format!("thread {thread}"))
}

/// Rewrites the thread's record and the columns queries use, stamped with now.
pub(super) async fn put_thread(txn: &Transaction<'_>, rec: &ThreadRec) -> Result<(), StoreError> {
    let mut rec = rec.clone();
    rec.updated_ms = ids::now_ms();
    let bytes = encode(&rec)?;
    exec(
        txn,
        "UPDATE pipec_threads SET pipeline = $2, status = $3, epoch = $4,
         cancel_requested = $5, updated_ms = $6, rec = $7 WHERE id = $1",
        &[
            &rec.id,
            &rec.pipeline,
            &rec.status.as_str(),
            &(rec.epoch as i64),
            &rec.cancel_requested,
            &(rec.updated_ms as i64),
            &bytes,
        ],
    )
    .await?;
    Ok(())
}

/// Applies the rows of a commit. `rec` is the thread's record when the caller rewrites
/// it afterwards: `Write::Thread` is merged into it (keeping its fence) and it learns the
/// next event number.
pub(super) async fn apply_writes(
    txn: &Transaction<'_>,
    thread: &str,
    mut rec: Option<&mut ThreadRec>,
    writes: &[Write],
) -> Result<Vec<RecordedEvent>, StoreError> {
    let now = ids::now_ms();
    let mut events = Vec::new();
    let mut next_seq: Option<u64> = None;
    for w in writes {
        match w {
            Write::Node(name, n) => {
                exec(
                    txn,
                    "INSERT INTO pipec_nodes (thread, name, rec) VALUES ($1, $2, $3)
                     ON CONFLICT (thread, name) DO UPDATE SET rec = EXCLUDED.rec",
                    &[&thread, &name.as_bytes(), &encode(n)?],
                )
                .await?;
            }
            Write::Item(name, generation, item, r) => {
                put_item(txn, thread, name, *generation, *item, &encode(r)?).await?;
            }
            Write::Call(k, r) => {
                put_call(txn, thread, &k.node, k, &encode(r)?).await?;
            }
            Write::Gate(name, g) => {
                put_gate(txn, thread, name, &encode(g)?).await?;
            }
            Write::Attempt(a) => {
                exec(
                    txn,
                    "INSERT INTO pipec_attempts (thread, number, rec) VALUES ($1, $2, $3)
                     ON CONFLICT (thread, number) DO UPDATE SET rec = EXCLUDED.rec",
                    &[&thread, &i64::from(a.number), &encode(a)?],
                )
                .await?;
            }
            Write::RemoveGate(name) => {
                exec(
                    txn,
                    "DELETE FROM pipec_gates WHERE thread = $1 AND name = $2",
                    &[&thread, &name.as_bytes()],
                )
                .await?;
            }
            Write::Heal(k, h) => {
                put_heal(txn, thread, &k.node, k, &encode(h)?).await?;
            }
            Write::Rename { from, to } => rename(txn, thread, from, to).await?,
            Write::Thread(new) => {
                if let Some(rec) = rec.as_deref_mut() {
                    let (epoch, cancel) = (rec.epoch, rec.cancel_requested);
                    *rec = new.clone();
                    rec.epoch = epoch;
                    rec.cancel_requested = cancel;
                }
            }
            Write::Event(event) => {
                let seq = match next_seq {
                    Some(n) => n,
                    None => {
                        let r = row(
                            txn,
                            "SELECT COALESCE(MAX(seq) + 1, 0) FROM pipec_events WHERE thread = $1",
                            &[&thread],
                        )
                        .await?;
                        r.map_or(0, |r| sql::u64_of(&r, 0))
                    }
                };
                let event_row = EventRow {
                    ts: now,
                    event: event.clone(),
                };
                exec(
                    txn,
                    "INSERT INTO pipec_events (thread, seq, row) VALUES ($1, $2, $3)",
                    &[&thread, &(seq as i64), &encode(&event_row)?],
                )
                .await?;
                events.push(event_row.recorded(thread, seq));
                next_seq = Some(seq + 1);
            }
        }
    }
    if let (Some(n), Some(rec)) = (next_seq, rec) {
        rec.next_seq = n;
    }
    Ok(events)
}

async fn put_item(
    txn: &Transaction<'_>,
    thread: &str,
    node: &str,
    generation: u32,
    item: u32,
    bytes: &[u8],
) -> Result<(), StoreError> {
    exec(
        txn,
        "INSERT INTO pipec_items (thread, node, generation, item, rec) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (thread, node, generation, item) DO UPDATE SET rec = EXCLUDED.rec",
        &[
            &thread,
            &node.as_bytes(),
            &i64::from(generation),
            &i64::from(item),
            &bytes,
        ],
    )
    .await?;
    Ok(())
}

async fn put_call(
    txn: &Transaction<'_>,
    thread: &str,
    node: &str,
    k: &CallKey,
    bytes: &[u8],
) -> Result<(), StoreError> {
    exec(
        txn,
        "INSERT INTO pipec_calls (thread, node, generation, item, seq, call, rec)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (thread, node, generation, item, seq, call) DO UPDATE SET rec = EXCLUDED.rec",
        &[
            &thread,
            &node.as_bytes(),
            &i64::from(k.generation),
            &i64::from(k.item),
            &i64::from(k.seq),
            &i64::from(k.call),
            &bytes,
        ],
    )
    .await?;
    Ok(())
}

async fn put_gate(
    txn: &Transaction<'_>,
    thread: &str,
    name: &str,
    bytes: &[u8],
) -> Result<(), StoreError> {
    exec(
        txn,
        "INSERT INTO pipec_gates (thread, name, rec) VALUES ($1, $2, $3)
         ON CONFLICT (thread, name) DO UPDATE SET rec = EXCLUDED.rec",
        &[&thread, &name.as_bytes(), &bytes],
    )
    .await?;
    Ok(())
}

async fn put_heal(
    txn: &Transaction<'_>,
    thread: &str,
    node: &str,
    k: &RefOrigin,
    bytes: &[u8],
) -> Result<(), StoreError> {
    exec(
        txn,
        "INSERT INTO pipec_heals (thread, node, generation, item, idx, rec)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (thread, node, generation, item, idx) DO UPDATE SET rec = EXCLUDED.rec",
        &[
            &thread,
            &node.as_bytes(),
            &i64::from(k.generation),
            &i64::from(k.item),
            &i64::from(k.index),
            &bytes,
        ],
    )
    .await?;
    Ok(())
}

/// Moves a node's rows (node, gate, items, calls, heals) from one name to another; a
/// row already under the new name with the same key is replaced.
async fn rename(
    txn: &Transaction<'_>,
    thread: &str,
    from: &str,
    to: &str,
) -> Result<(), StoreError> {
    let moved = rows(
        txn,
        "DELETE FROM pipec_nodes WHERE thread = $1 AND name = $2 RETURNING rec",
        &[&thread, &from.as_bytes()],
    )
    .await?;
    for r in moved {
        exec(
            txn,
            "INSERT INTO pipec_nodes (thread, name, rec) VALUES ($1, $2, $3)
             ON CONFLICT (thread, name) DO UPDATE SET rec = EXCLUDED.rec",
            &[&thread, &to.as_bytes(), &r.get::<_, Vec<u8>>(0)],
        )
        .await?;
    }
    let gates = rows(
        txn,
        "DELETE FROM pipec_gates WHERE thread = $1 AND name = $2 RETURNING rec",
        &[&thread, &from.as_bytes()],
    )
    .await?;
    for r in gates {
        // The row names its node too.
        let mut g: GateRec = decode(r.get::<_, &[u8]>(0), &|| format!("gate `{from}`"))?;
        g.node = to.to_string();
        put_gate(txn, thread, to, &encode(&g)?).await?;
    }
    let items = rows(
        txn,
        "DELETE FROM pipec_items WHERE thread = $1 AND node = $2 RETURNING generation, item, rec",
        &[&thread, &from.as_bytes()],
    )
    .await?;
    for r in items {
        let (generation, item) = (sql::u32_of(&r, 0), sql::u32_of(&r, 1));
        put_item(txn, thread, to, generation, item, r.get::<_, &[u8]>(2)).await?;
    }
    let calls = rows(
        txn,
        "DELETE FROM pipec_calls WHERE thread = $1 AND node = $2
         RETURNING generation, item, seq, call, rec",
        &[&thread, &from.as_bytes()],
    )
    .await?;
    for r in calls {
        let k = CallKey {
            node: to.to_string(),
            generation: sql::u32_of(&r, 0),
            item: sql::u32_of(&r, 1),
            seq: sql::u32_of(&r, 2),
            call: sql::u32_of(&r, 3),
        };
        put_call(txn, thread, to, &k, r.get::<_, &[u8]>(4)).await?;
    }
    let heals = rows(
        txn,
        "DELETE FROM pipec_heals WHERE thread = $1 AND node = $2
         RETURNING generation, item, idx, rec",
        &[&thread, &from.as_bytes()],
    )
    .await?;
    for r in heals {
        let k = RefOrigin {
            node: to.to_string(),
            generation: sql::u32_of(&r, 0),
            item: sql::u32_of(&r, 1),
            index: sql::u32_of(&r, 2),
        };
        put_heal(txn, thread, to, &k, r.get::<_, &[u8]>(3)).await?;
    }
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
    let inserted = exec(
        txn,
        "INSERT INTO pipec_threads (id, pipeline, status, epoch, cancel_requested, created_ms, updated_ms, rec)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
        &[
            &rec.id,
            &rec.pipeline,
            &rec.status.as_str(),
            &(rec.epoch as i64),
            &rec.cancel_requested,
            &(rec.created_ms as i64),
            &(rec.updated_ms as i64),
            &encode(rec)?,
        ],
    )
    .await?;
    Ok(inserted > 0)
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
    leases::take(&txn, db, &rec.id, rec.epoch, &attempt).await?;
    let mut rec = rec;
    let events = apply_writes(
        &txn,
        &rec.id.clone(),
        Some(&mut rec),
        &[
            Write::Attempt(attempt),
            Write::Event(Event::ThreadCreated { attempt: number }),
        ],
    )
    .await?;
    put_thread(&txn, &rec).await?;
    txn.commit().await.map_err(pg)?;
    Ok(events)
}

/// A claimed thread: its id, the new epoch, the attempt number, its state, the events.
pub(super) type ClaimedRows = (String, u64, u32, ThreadState, Vec<RecordedEvent>);

pub(super) async fn claim(
    db: &Db,
    thread: &str,
    attempt: AttemptRec,
) -> Result<ClaimedRows, StoreError> {
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
    if let Some(holder) = leases::live_holder(&txn, &id).await? {
        return Err(StoreError::Locked {
            thread: id,
            holder: Some(holder),
        });
    }
    if matches!(rec.status, Status::Completed | Status::Cancelled) {
        return Err(StoreError::Ended {
            thread: id,
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
    leases::take(&txn, db, &id, rec.epoch, &attempt).await?;
    let events = apply_writes(
        &txn,
        &id,
        Some(&mut rec),
        &[
            Write::Attempt(attempt),
            Write::Event(Event::AttemptStarted { attempt: number }),
        ],
    )
    .await?;
    put_thread(&txn, &rec).await?;
    let state = reads::load_state(&txn, &id).await?;
    txn.commit().await.map_err(pg)?;
    Ok((id, rec.epoch, number, state, events))
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
    let writes = answer_writes(&gates, &answers, by, ids::now_ms())?;
    let events = apply_writes(&txn, &id, Some(&mut rec), &writes).await?;
    put_thread(&txn, &rec).await?;
    if !events.is_empty() {
        super::queue::notify(&txn).await?;
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
    let events = apply_writes(&txn, &id, Some(&mut rec), &[Write::Event(event)]).await?;
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
    let checked = crate::store::import::check(&state, &events)?;
    let rec = &checked.rec;
    let thread = rec.id.as_str();
    let mut client = db.client().await?;
    let txn = client.transaction().await.map_err(pg)?;
    if !insert_thread(&txn, rec).await? {
        return Err(crate::store::import::exists(thread, db.location.clone()));
    }
    for (name, n) in &state.nodes {
        exec(
            &txn,
            "INSERT INTO pipec_nodes (thread, name, rec) VALUES ($1, $2, $3)",
            &[&thread, &name.as_bytes(), &encode(n)?],
        )
        .await?;
    }
    for ((name, generation, item), r) in &state.items {
        put_item(&txn, thread, name, *generation, *item, &encode(r)?).await?;
    }
    for (k, r) in &state.calls {
        put_call(&txn, thread, &k.node, k, &encode(r)?).await?;
    }
    for (name, g) in &state.gates {
        put_gate(&txn, thread, name, &encode(g)?).await?;
    }
    for a in &state.attempts {
        exec(
            &txn,
            "INSERT INTO pipec_attempts (thread, number, rec) VALUES ($1, $2, $3)",
            &[&thread, &i64::from(a.number), &encode(a)?],
        )
        .await?;
    }
    for (k, h) in &state.heals {
        put_heal(&txn, thread, &k.node, k, &encode(h)?).await?;
    }
    for (seq, event_row) in &checked.events {
        exec(
            &txn,
            "INSERT INTO pipec_events (thread, seq, row) VALUES ($1, $2, $3)",
            &[&thread, &(*seq as i64), &encode(event_row)?],
        )
        .await?;
    }
    super::queue::notify(&txn).await?;
    txn.commit().await.map_err(pg)?;
    Ok(())
}
