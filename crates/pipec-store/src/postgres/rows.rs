//! A commit's rows as statements sent together. The writes of a commit become owned
//! statements; a pipeline sends them all before it reads the first answer, so a commit
//! of many rows costs one round trip to the server instead of one per row.
//!
//! tokio-postgres sends a request when its future is first polled, and the server runs
//! a connection's requests in the order they arrive: the statements are prepared first
//! (from the connection's cache) and then polled in order, so they run in the order
//! given. When one fails the transaction is aborted and the rest fail with it.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{pg, sql};
use crate::envelope::{decode, encode};
use crate::ids;
use crate::*;

pub(super) type Param = Box<dyn ToSql + Sync + Send>;

/// One statement with the values it is run with.
pub(super) struct Stmt {
    sql: &'static str,
    params: Vec<Param>,
}

impl Stmt {
    pub(super) fn new(sql: &'static str, params: Vec<Param>) -> Stmt {
        Stmt { sql, params }
    }
}

/// What a commit does, in order: statements, or a node's rows moved to a new name (a
/// read and then writes, so it waits for what was sent before it).
pub(super) enum Part {
    Sql(Stmt),
    Rename {
        thread: String,
        from: String,
        to: String,
    },
}

/// Runs `parts` in order, the statements between renames in one pipeline each; the
/// rows each part returned (none for a rename).
pub(super) async fn send(
    txn: &Transaction<'_>,
    parts: Vec<Part>,
) -> Result<Vec<Vec<Row>>, StoreError> {
    let mut out = Vec::with_capacity(parts.len());
    let mut chunk = Vec::new();
    for part in parts {
        match part {
            Part::Sql(s) => chunk.push(s),
            Part::Rename { thread, from, to } => {
                out.extend(pipeline(txn, &std::mem::take(&mut chunk)).await?);
                rename(txn, &thread, &from, &to).await?;
                out.push(Vec::new());
            }
        }
    }
    out.extend(pipeline(txn, &chunk).await?);
    Ok(out)
}

/// Sends every statement before reading any answer; the rows of each, in order.
pub(super) async fn pipeline<C: GenericClient>(
    c: &C,
    stmts: &[Stmt],
) -> Result<Vec<Vec<Row>>, StoreError> {
    let mut prepared = Vec::with_capacity(stmts.len());
    for s in stmts {
        prepared.push(c.prepare_cached(s.sql).await.map_err(pg)?);
    }
    type Running<'f> =
        Pin<Box<dyn Future<Output = Result<Vec<Row>, tokio_postgres::Error>> + Send + 'f>>;
    let mut running: Vec<Running<'_>> = stmts
        .iter()
        .zip(&prepared)
        .map(|(s, st)| {
            let params: Vec<&(dyn ToSql + Sync)> = s
                .params
                .iter()
                .map(|p| &**p as &(dyn ToSql + Sync))
                .collect();
            Box::pin(async move { c.query(st, &params).await }) as Running<'_>
        })
        .collect();
    let mut answers: Vec<Option<Result<Vec<Row>, tokio_postgres::Error>>> =
        running.iter().map(|_| None).collect();
    // Polled in order every time, so each request is sent in its place.
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, answer) in running.iter_mut().zip(answers.iter_mut()) {
            if answer.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(r) => *answer = Some(r),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Ok(Vec::new())).map_err(pg))
        .collect()
}

/// A commit's writes as parts, the last of them the statement that inserts its events.
pub(super) struct Planned {
    pub parts: Vec<Part>,
    /// The events, in order; the last part inserts them.
    pub events: Vec<EventRow>,
}

/// The parts that write `writes`. `rec` is the thread's record when the caller
/// rewrites it afterwards: `Write::Thread` is merged into it (keeping its fence).
pub(super) fn plan(
    thread: &str,
    mut rec: Option<&mut ThreadRec>,
    writes: &[Write],
) -> Result<Planned, StoreError> {
    let now = ids::now_ms();
    let mut parts = Vec::with_capacity(writes.len() + 1);
    let mut events = Vec::new();
    for w in writes {
        let part = match w {
            Write::Node(name, n) => node(thread, name, encode(n)?),
            Write::Item(name, generation, item, r) => {
                self::item(thread, name, *generation, *item, encode(r)?)
            }
            Write::Call(k, r) => call(thread, &k.node, k, encode(r)?),
            Write::Gate(name, g) => gate(thread, name, encode(g)?),
            Write::Attempt(a) => attempt(thread, a)?,
            Write::RemoveGate(name) => Stmt::new(
                "DELETE FROM pipec_gates WHERE thread = $1 AND name = $2",
                vec![
                    Box::new(thread.to_string()),
                    Box::new(name.as_bytes().to_vec()),
                ],
            ),
            Write::Heal(k, h) => heal(thread, &k.node, k, encode(h)?),
            Write::Rename { from, to } => {
                parts.push(Part::Rename {
                    thread: thread.to_string(),
                    from: from.clone(),
                    to: to.clone(),
                });
                continue;
            }
            Write::Thread(new) => {
                if let Some(rec) = rec.as_deref_mut() {
                    let (epoch, cancel) = (rec.epoch, rec.cancel_requested);
                    *rec = new.clone();
                    rec.epoch = epoch;
                    rec.cancel_requested = cancel;
                }
                continue;
            }
            Write::Event(event) => {
                events.push(EventRow {
                    ts: now,
                    event: event.clone(),
                });
                continue;
            }
        };
        parts.push(Part::Sql(part));
    }
    if !events.is_empty() {
        let rows = events.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        // Numbered after the thread's last event, in the statement that inserts them:
        // every writer of a thread's events holds its row locked.
        parts.push(Part::Sql(Stmt::new(
            "INSERT INTO pipec_events (thread, seq, row)
             SELECT $1, b.next + u.ord - 1, u.row
             FROM (SELECT COALESCE(MAX(seq) + 1, 0) AS next FROM pipec_events WHERE thread = $1) b,
                  unnest($2::bytea[]) WITH ORDINALITY AS u(row, ord)
             RETURNING seq",
            vec![Box::new(thread.to_string()), Box::new(rows)],
        )));
    }
    Ok(Planned { parts, events })
}

impl Planned {
    /// The statements alone, to send in one pipeline; `None` when a part is a rename
    /// (it reads before it writes).
    pub(super) fn statements(parts: Vec<Part>) -> Option<Vec<Stmt>> {
        parts
            .into_iter()
            .map(|p| match p {
                Part::Sql(s) => Some(s),
                Part::Rename { .. } => None,
            })
            .collect()
    }
}

/// The events of a commit as recorded, from the rows the last of its parts returned;
/// the next event number goes into `rec`.
pub(super) fn recorded(
    thread: &str,
    events: Vec<EventRow>,
    answers: &[Vec<Row>],
    rec: Option<&mut ThreadRec>,
) -> Vec<RecordedEvent> {
    if events.is_empty() {
        return Vec::new();
    }
    let first = answers
        .last()
        .and_then(|rows| rows.iter().map(|r| sql::u64_of(r, 0)).min())
        .unwrap_or(0);
    if let Some(rec) = rec {
        rec.next_seq = first + events.len() as u64;
    }
    events
        .into_iter()
        .zip(first..)
        .map(|(e, seq)| e.recorded(thread, seq))
        .collect()
}

/// Applies the rows of a commit: one pipeline (and a round trip for each rename). `rec`
/// is the thread's record when the caller rewrites it afterwards; it learns the next
/// event number.
pub(super) async fn apply(
    txn: &Transaction<'_>,
    thread: &str,
    mut rec: Option<&mut ThreadRec>,
    writes: &[Write],
) -> Result<Vec<RecordedEvent>, StoreError> {
    let Planned { parts, events } = plan(thread, rec.as_deref_mut(), writes)?;
    let answers = send(txn, parts).await?;
    Ok(recorded(thread, events, &answers, rec))
}

/// The statement that locks a thread's row and reads its record.
pub(super) fn lock(thread: &str) -> Stmt {
    Stmt::new(
        "SELECT rec FROM pipec_threads WHERE id = $1 FOR UPDATE",
        vec![Box::new(thread.to_string())],
    )
}

/// The statement that locks a thread's row for a commit and reads what its fence needs:
/// the epoch, whether a cancel was asked, the lease's epoch and whether it is live, the
/// record.
pub(super) fn fence(thread: &str) -> Stmt {
    Stmt::new(
        "SELECT t.epoch, t.cancel_requested, l.epoch, l.expires_at > now(), t.rec
         FROM pipec_threads t LEFT JOIN pipec_leases l ON l.thread = t.id
         WHERE t.id = $1 FOR UPDATE OF t",
        vec![Box::new(thread.to_string())],
    )
}

/// The statement that locks a thread's row for a commit sent whole and fails (aborting
/// the transaction) unless `epoch` is the thread's, its lease is live and no cancel was
/// asked (the schema's `pipec_fence`).
pub(super) fn fence_check(thread: &str, epoch: u64) -> Stmt {
    Stmt::new(
        "SELECT pipec_fence($1, $2)",
        vec![Box::new(thread.to_string()), Box::new(epoch as i64)],
    )
}

/// The statement that inserts a new thread's row; it fails when the id is taken.
pub(super) fn new_thread(rec: &ThreadRec) -> Result<Stmt, StoreError> {
    thread_row(
        "INSERT INTO pipec_threads (id, pipeline, status, epoch, cancel_requested, created_ms, updated_ms, rec, due_ms, answers)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        rec,
    )
}

/// The statement that inserts a new thread's row unless the id is taken; it returns
/// the id when it inserted.
pub(super) fn new_thread_unless_taken(rec: &ThreadRec) -> Result<Stmt, StoreError> {
    thread_row(
        "INSERT INTO pipec_threads (id, pipeline, status, epoch, cancel_requested, created_ms, updated_ms, rec, due_ms, answers)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING RETURNING id",
        rec,
    )
}

fn thread_row(sql: &'static str, rec: &ThreadRec) -> Result<Stmt, StoreError> {
    Ok(Stmt::new(
        sql,
        vec![
            Box::new(rec.id.clone()),
            Box::new(rec.pipeline.clone()),
            Box::new(rec.status.as_str()),
            Box::new(rec.epoch as i64),
            Box::new(rec.cancel_requested),
            Box::new(rec.created_ms as i64),
            Box::new(rec.updated_ms as i64),
            Box::new(encode(rec)?),
            Box::new(rec.due_ms.map(|d| d as i64)),
            // A thread that arrives paused (an import) has its gates read once by the
            // next look, as if answered: they may be.
            Box::new(i64::from(rec.status == Status::Paused)),
        ],
    ))
}

/// The statement that rewrites the thread's record and the columns queries use,
/// stamped with now.
pub(super) fn thread_update(rec: &ThreadRec) -> Result<Stmt, StoreError> {
    record_update(
        "UPDATE pipec_threads SET pipeline = $2, status = $3, epoch = $4,
         cancel_requested = $5, updated_ms = $6, rec = $7, due_ms = $8 WHERE id = $1",
        rec,
    )
}

/// [`thread_update`] for a claim: the new holder takes in every answer given so far,
/// so none of them makes the thread work for another worker any more.
pub(super) fn claim_update(rec: &ThreadRec) -> Result<Stmt, StoreError> {
    record_update(
        "UPDATE pipec_threads SET pipeline = $2, status = $3, epoch = $4,
         cancel_requested = $5, updated_ms = $6, rec = $7, due_ms = $8, answers = 0 WHERE id = $1",
        rec,
    )
}

/// [`thread_update`] for answers given without a lease: each counts, so the thread is
/// work for a worker once nobody holds it (`queue.rs`).
pub(super) fn answered_update(rec: &ThreadRec) -> Result<Stmt, StoreError> {
    record_update(
        "UPDATE pipec_threads SET pipeline = $2, status = $3, epoch = $4,
         cancel_requested = $5, updated_ms = $6, rec = $7, due_ms = $8, answers = answers + 1 WHERE id = $1",
        rec,
    )
}

fn record_update(sql: &'static str, rec: &ThreadRec) -> Result<Stmt, StoreError> {
    let mut rec = rec.clone();
    rec.updated_ms = ids::now_ms();
    let bytes = encode(&rec)?;
    Ok(Stmt::new(
        sql,
        vec![
            Box::new(rec.id.clone()),
            Box::new(rec.pipeline.clone()),
            Box::new(rec.status.as_str()),
            Box::new(rec.epoch as i64),
            Box::new(rec.cancel_requested),
            Box::new(rec.updated_ms as i64),
            Box::new(bytes),
            Box::new(rec.due_ms.map(|d| d as i64)),
        ],
    ))
}

pub(super) fn node(thread: &str, name: &str, bytes: Vec<u8>) -> Stmt {
    Stmt::new(
        "INSERT INTO pipec_nodes (thread, name, rec) VALUES ($1, $2, $3)
         ON CONFLICT (thread, name) DO UPDATE SET rec = EXCLUDED.rec",
        vec![
            Box::new(thread.to_string()),
            Box::new(name.as_bytes().to_vec()),
            Box::new(bytes),
        ],
    )
}

pub(super) fn item(thread: &str, node: &str, generation: u32, item: u32, bytes: Vec<u8>) -> Stmt {
    Stmt::new(
        "INSERT INTO pipec_items (thread, node, generation, item, rec) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (thread, node, generation, item) DO UPDATE SET rec = EXCLUDED.rec",
        vec![
            Box::new(thread.to_string()),
            Box::new(node.as_bytes().to_vec()),
            Box::new(i64::from(generation)),
            Box::new(i64::from(item)),
            Box::new(bytes),
        ],
    )
}

pub(super) fn call(thread: &str, node: &str, k: &CallKey, bytes: Vec<u8>) -> Stmt {
    Stmt::new(
        "INSERT INTO pipec_calls (thread, node, generation, item, seq, call, rec)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (thread, node, generation, item, seq, call) DO UPDATE SET rec = EXCLUDED.rec",
        vec![
            Box::new(thread.to_string()),
            Box::new(node.as_bytes().to_vec()),
            Box::new(i64::from(k.generation)),
            Box::new(i64::from(k.item)),
            Box::new(i64::from(k.seq)),
            Box::new(i64::from(k.call)),
            Box::new(bytes),
        ],
    )
}

pub(super) fn gate(thread: &str, name: &str, bytes: Vec<u8>) -> Stmt {
    Stmt::new(
        "INSERT INTO pipec_gates (thread, name, rec) VALUES ($1, $2, $3)
         ON CONFLICT (thread, name) DO UPDATE SET rec = EXCLUDED.rec",
        vec![
            Box::new(thread.to_string()),
            Box::new(name.as_bytes().to_vec()),
            Box::new(bytes),
        ],
    )
}

pub(super) fn heal(thread: &str, node: &str, k: &RefOrigin, bytes: Vec<u8>) -> Stmt {
    Stmt::new(
        "INSERT INTO pipec_heals (thread, node, generation, item, idx, rec)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (thread, node, generation, item, idx) DO UPDATE SET rec = EXCLUDED.rec",
        vec![
            Box::new(thread.to_string()),
            Box::new(node.as_bytes().to_vec()),
            Box::new(i64::from(k.generation)),
            Box::new(i64::from(k.item)),
            Box::new(i64::from(k.index)),
            Box::new(bytes),
        ],
    )
}

/// An attempt's row as it was (a copy), or written anew.
pub(super) fn attempt(thread: &str, a: &AttemptRec) -> Result<Stmt, StoreError> {
    Ok(Stmt::new(
        "INSERT INTO pipec_attempts (thread, number, rec) VALUES ($1, $2, $3)
         ON CONFLICT (thread, number) DO UPDATE SET rec = EXCLUDED.rec",
        vec![
            Box::new(thread.to_string()),
            Box::new(i64::from(a.number)),
            Box::new(encode(a)?),
        ],
    ))
}

/// An event's row with the number it has (a copy from another store).
pub(super) fn event(thread: &str, seq: u64, e: &EventRow) -> Result<Stmt, StoreError> {
    Ok(Stmt::new(
        "INSERT INTO pipec_events (thread, seq, row) VALUES ($1, $2, $3)",
        vec![
            Box::new(thread.to_string()),
            Box::new(seq as i64),
            Box::new(encode(e)?),
        ],
    ))
}

/// Moves a node's rows (node, gate, items, calls, heals) from one name to another; a
/// row already under the new name with the same key is replaced.
async fn rename(
    txn: &Transaction<'_>,
    thread: &str,
    from: &str,
    to: &str,
) -> Result<(), StoreError> {
    let (t, f) = (thread.to_string(), from.as_bytes().to_vec());
    let taken = |sql: &'static str| Stmt::new(sql, vec![Box::new(t.clone()), Box::new(f.clone())]);
    let moved = pipeline(
        txn,
        &[
            taken("DELETE FROM pipec_nodes WHERE thread = $1 AND name = $2 RETURNING rec"),
            taken("DELETE FROM pipec_gates WHERE thread = $1 AND name = $2 RETURNING rec"),
            taken(
                "DELETE FROM pipec_items WHERE thread = $1 AND node = $2
                 RETURNING generation, item, rec",
            ),
            taken(
                "DELETE FROM pipec_calls WHERE thread = $1 AND node = $2
                 RETURNING generation, item, seq, call, rec",
            ),
            taken(
                "DELETE FROM pipec_heals WHERE thread = $1 AND node = $2
                 RETURNING generation, item, idx, rec",
            ),
        ],
    )
    .await?;
    let [nodes, gates, items, calls, heals] = <[Vec<Row>; 5]>::try_from(moved)
        .map_err(|_| StoreError::Io("a rename read fewer answers than it asked".into()))?;
    let mut put = Vec::new();
    for r in nodes {
        put.push(node(thread, to, r.get::<_, Vec<u8>>(0)));
    }
    for r in gates {
        // The row names its node too.
        let mut g: GateRec = decode(r.get::<_, &[u8]>(0), &|| format!("gate `{from}`"))?;
        g.node = to.to_string();
        put.push(gate(thread, to, encode(&g)?));
    }
    for r in items {
        let (generation, i) = (sql::u32_of(&r, 0), sql::u32_of(&r, 1));
        put.push(item(thread, to, generation, i, r.get::<_, Vec<u8>>(2)));
    }
    for r in calls {
        let k = CallKey {
            node: to.to_string(),
            generation: sql::u32_of(&r, 0),
            item: sql::u32_of(&r, 1),
            seq: sql::u32_of(&r, 2),
            call: sql::u32_of(&r, 3),
        };
        put.push(call(thread, to, &k, r.get::<_, Vec<u8>>(4)));
    }
    for r in heals {
        let k = RefOrigin {
            node: to.to_string(),
            generation: sql::u32_of(&r, 0),
            item: sql::u32_of(&r, 1),
            index: sql::u32_of(&r, 2),
        };
        put.push(heal(thread, to, &k, r.get::<_, Vec<u8>>(3)));
    }
    pipeline(txn, &put).await?;
    Ok(())
}
