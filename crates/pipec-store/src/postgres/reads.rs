//! Reads: thread ids and prefixes, a thread's whole state (one snapshot), pages of
//! threads, events and plans. They use the pool beside the writer.

use deadpool_postgres::GenericClient;

use super::Db;
use super::sql::{self, row, rows};
use crate::envelope::decode;
use crate::ids::{self, IdQuery};
use crate::*;

/// The thread an id or a unique prefix names (`R0401`, or ambiguous with the matches).
pub(super) async fn resolve<C: GenericClient>(
    c: &C,
    db: &Db,
    thread: &str,
) -> Result<String, StoreError> {
    let not_found = || db.not_found(thread);
    match ids::query(thread).ok_or_else(not_found)? {
        IdQuery::Exact(n) => {
            let id = ids::encode(n);
            row(c, "SELECT id FROM pipec_threads WHERE id = $1", &[&id])
                .await?
                .map(|r| r.get::<_, String>(0))
                .ok_or_else(not_found)
        }
        IdQuery::Prefix(lo, hi) => {
            let (lo, hi) = (ids::encode(lo), ids::encode(hi));
            let found: Vec<String> = rows(
                c,
                "SELECT id FROM pipec_threads WHERE id >= $1 AND id <= $2 ORDER BY id LIMIT $3",
                &[&lo, &hi, &(ids::AMBIGUOUS_SHOWN as i64)],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
            match found.as_slice() {
                [one] => Ok(one.clone()),
                [] => Err(not_found()),
                _ => Err(StoreError::Ambiguous {
                    prefix: thread.to_string(),
                    matches: found,
                }),
            }
        }
    }
}

/// The id a thread is named by: an exact id as it is (the statement that reads or
/// locks the row finds out whether it exists), a prefix resolved to the one it names.
pub(super) async fn id_of<C: GenericClient>(
    c: &C,
    db: &Db,
    thread: &str,
) -> Result<String, StoreError> {
    match ids::query(thread) {
        Some(IdQuery::Exact(n)) => Ok(ids::encode(n)),
        _ => resolve(c, db, thread).await,
    }
}

/// [`id_of`], with `None` for a prefix that names no thread.
async fn existing_id<C: GenericClient>(
    c: &C,
    db: &Db,
    thread: &str,
) -> Result<Option<String>, StoreError> {
    match id_of(c, db, thread).await {
        Ok(id) => Ok(Some(id)),
        Err(StoreError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every row of a thread in one statement, so in one round trip and one snapshot: a
/// commit landing meanwhile is seen whole or not at all. Each row says its table
/// (`kind`) and carries the parts of its key that table has. The thread's row carries
/// its next event number: a commit sent whole rewrites the record without waiting for
/// the numbers its events were given, so the number kept in the record may be behind.
const LOAD: &str = "
    SELECT 0::int4, NULL::bytea,
           (SELECT COALESCE(MAX(seq) + 1, 0) FROM pipec_events WHERE thread = $1),
           0::int8, 0::int8, 0::int8, rec
      FROM pipec_threads WHERE id = $1
    UNION ALL SELECT 1, name, 0, 0, 0, 0, rec FROM pipec_nodes WHERE thread = $1
    UNION ALL SELECT 2, node, generation, item, 0, 0, rec FROM pipec_items WHERE thread = $1
    UNION ALL SELECT 3, node, generation, item, seq, call, rec FROM pipec_calls WHERE thread = $1
    UNION ALL SELECT 4, name, 0, 0, 0, 0, rec FROM pipec_gates WHERE thread = $1
    UNION ALL SELECT 5, NULL, number, 0, 0, 0, rec FROM pipec_attempts WHERE thread = $1
    UNION ALL SELECT 6, node, generation, item, idx, 0, rec FROM pipec_heals WHERE thread = $1";

/// Everything stored about a thread (`thread` empty when there is no such thread).
pub(super) async fn load_state<C: GenericClient>(
    c: &C,
    id: &str,
) -> Result<ThreadState, StoreError> {
    state_of(&rows(c, LOAD, &[&id]).await?, id)
}

/// The statement that reads a whole thread, to send with others.
pub(super) fn load_stmt(id: &str) -> super::rows::Stmt {
    super::rows::Stmt::new(LOAD, vec![Box::new(id.to_string())])
}

/// A thread's state from the rows its load returned.
pub(super) fn state_of(found: &[tokio_postgres::Row], id: &str) -> Result<ThreadState, StoreError> {
    let mut st = ThreadState::default();
    let mut attempts = Vec::new();
    for r in found {
        let kind: i32 = r.get(0);
        let rec: &[u8] = r.get(6);
        match kind {
            0 => {
                let mut t: ThreadRec = decode(rec, &|| format!("thread {id}"))?;
                t.next_seq = sql::u64_of(r, 2);
                st.thread = Some(t);
            }
            1 => {
                let node = sql::name_of(r, 1)?;
                let n: NodeRec = decode(rec, &|| format!("thread {id}, node `{node}`"))?;
                st.nodes.insert(node, n);
            }
            2 => {
                let node = sql::name_of(r, 1)?;
                let (generation, item) = (sql::u32_of(r, 2), sql::u32_of(r, 3));
                let i: ItemRec = decode(rec, &|| format!("thread {id}, item {item} of `{node}`"))?;
                st.items.insert((node, generation, item), i);
            }
            3 => {
                let key = CallKey {
                    node: sql::name_of(r, 1)?,
                    generation: sql::u32_of(r, 2),
                    item: sql::u32_of(r, 3),
                    seq: sql::u32_of(r, 4),
                    call: sql::u32_of(r, 5),
                };
                let call: CallRec =
                    decode(rec, &|| format!("thread {id}, call {}", key.display()))?;
                st.calls.insert(key, call);
            }
            4 => {
                let gate = sql::name_of(r, 1)?;
                let g: GateRec = decode(rec, &|| format!("thread {id}, gate `{gate}`"))?;
                st.gates.insert(gate, g);
            }
            5 => {
                let a: AttemptRec = decode(rec, &|| format!("thread {id}, attempt"))?;
                attempts.push((sql::u64_of(r, 2), a));
            }
            _ => {
                let key = RefOrigin {
                    node: sql::name_of(r, 1)?,
                    generation: sql::u32_of(r, 2),
                    item: sql::u32_of(r, 3),
                    index: sql::u32_of(r, 4),
                };
                let h: HealRec = decode(rec, &|| {
                    format!(
                        "thread {id}, the heal of link {} of `{}`",
                        key.index, key.node
                    )
                })?;
                st.heals.insert(key, h);
            }
        }
    }
    attempts.sort_by_key(|(number, _)| *number);
    st.attempts = attempts.into_iter().map(|(_, a)| a).collect();
    Ok(st)
}

pub(super) async fn load(db: &Db, thread: &str) -> Result<ThreadState, StoreError> {
    let client = db.client().await?;
    let id = id_of(&client, db, thread).await?;
    let state = load_state(&client, &id).await?;
    if state.thread.is_none() {
        return Err(db.not_found(thread));
    }
    Ok(state)
}

pub(super) async fn get_plan(db: &Db, hash: &str) -> Result<Option<String>, StoreError> {
    let client = db.client().await?;
    Ok(row(
        &client,
        "SELECT plan FROM pipec_plans WHERE hash = $1",
        &[&hash],
    )
    .await?
    .map(|r| r.get(0)))
}

pub(super) async fn cancel_requested(db: &Db, thread: &str) -> Result<bool, StoreError> {
    let client = db.client().await?;
    let id = id_of(&client, db, thread).await?;
    row(
        &client,
        "SELECT cancel_requested FROM pipec_threads WHERE id = $1",
        &[&id],
    )
    .await?
    .map(|r| r.get::<_, bool>(0))
    .ok_or_else(|| db.not_found(thread))
}

/// A thread's record (the id exact or a unique prefix), in one statement when exact.
pub(super) async fn thread_rec(db: &Db, thread: &str) -> Result<Option<ThreadRec>, StoreError> {
    let client = db.client().await?;
    let Some(id) = existing_id(&client, db, thread).await? else {
        return Ok(None);
    };
    row(
        &client,
        "SELECT rec FROM pipec_threads WHERE id = $1",
        &[&id],
    )
    .await?
    .map(|r| rec_of(&r, &id))
    .transpose()
}

/// A thread's record unless a claim has its row locked right now or a live lease holds
/// it (one statement, its own transaction: the lock is let go at once).
pub(super) async fn untaken_thread_rec(
    db: &Db,
    thread: &str,
) -> Result<Option<ThreadRec>, StoreError> {
    let client = db.client().await?;
    let Some(id) = existing_id(&client, db, thread).await? else {
        return Ok(None);
    };
    row(
        &client,
        "SELECT t.rec FROM pipec_threads t
         WHERE t.id = $1
           AND NOT EXISTS (SELECT 1 FROM pipec_leases l WHERE l.thread = t.id AND l.expires_at > now())
         FOR UPDATE OF t SKIP LOCKED",
        &[&id],
    )
    .await?
    .map(|r| rec_of(&r, &id))
    .transpose()
}

/// The thread record in a row's first column.
fn rec_of(r: &tokio_postgres::Row, id: &str) -> Result<ThreadRec, StoreError> {
    decode(r.get::<_, &[u8]>(0), &|| format!("thread {id}"))
}

/// A page of threads, newest first. Each filter picks its own statement, so each runs
/// on its index (`id`, `(status, id)`, `(pipeline, id)`) backwards and stops at the
/// page's end.
pub(super) async fn list(db: &Db, query: ListQuery) -> Result<Vec<ThreadSummary>, StoreError> {
    let client = db.client().await?;
    if let Some(b) = &query.before
        && ids::decode(b).is_none()
    {
        return Err(db.not_found(b));
    }
    let limit = if query.limit == 0 { 50 } else { query.limit } as i64;
    let status = query.status.map(Status::as_str);
    let mut conditions = Vec::new();
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = Vec::new();
    if let Some(s) = &status {
        params.push(s);
        conditions.push(format!("t.status = ${}", params.len()));
    }
    if let Some(p) = &query.pipeline {
        params.push(p);
        conditions.push(format!("t.pipeline = ${}", params.len()));
    }
    if let Some(b) = &query.before {
        params.push(b);
        conditions.push(format!("t.id < ${}", params.len()));
    }
    params.push(&limit);
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let order = match (&status, &query.pipeline) {
        (Some(_), None) => "t.status DESC, t.id DESC",
        (None, Some(_)) => "t.pipeline DESC, t.id DESC",
        _ => "t.id DESC",
    };
    let sql = format!(
        "SELECT t.id, t.pipeline, t.status, t.created_ms, t.updated_ms,
           l.thread IS NOT NULL, l.run_id, l.pid, l.host, l.since_ms
         FROM pipec_threads t
         LEFT JOIN pipec_leases l ON l.thread = t.id AND l.expires_at > now()
         {filter} ORDER BY {order} LIMIT ${}",
        params.len()
    );
    let found = rows(&client, &sql, &params).await?;
    let mut out = Vec::with_capacity(found.len());
    for r in found {
        let id: String = r.get(0);
        let status_text: String = r.get(2);
        let status = Status::parse(&status_text).ok_or_else(|| StoreError::Corrupt {
            what: format!("thread {id} has the status `{status_text}`"),
        })?;
        let held: bool = r.get(5);
        out.push(ThreadSummary {
            id,
            pipeline: r.get(1),
            status,
            stale: status == Status::Running && !held,
            holder: held.then(|| Holder {
                run_id: r.get(6),
                pid: sql::u32_of(&r, 7),
                host: r.get(8),
                since_ms: sql::u64_of(&r, 9),
            }),
            created_ms: sql::u64_of(&r, 3),
            updated_ms: sql::u64_of(&r, 4),
        });
    }
    Ok(out)
}

pub(super) async fn events(
    db: &Db,
    thread: &str,
    since: u64,
) -> Result<Vec<RecordedEvent>, StoreError> {
    let client = db.client().await?;
    // An exact id is read at once; only when it has no events is the thread looked up,
    // so that one that does not exist is an error and not an empty log.
    let id = id_of(&client, db, thread).await?;
    let found = rows(
        &client,
        "SELECT seq, row FROM pipec_events WHERE thread = $1 AND seq >= $2 ORDER BY seq",
        &[&id, &(since.min(i64::MAX as u64) as i64)],
    )
    .await?;
    if found.is_empty() {
        resolve(&client, db, &id).await?;
    }
    let mut out = Vec::new();
    for r in found {
        let seq = sql::u64_of(&r, 0);
        let event: EventRow = decode(r.get::<_, &[u8]>(1), &|| {
            format!("thread {id}, event {seq}")
        })?;
        out.push(event.recorded(&id, seq));
    }
    Ok(out)
}
