//! Reads: thread ids and prefixes, a thread's whole state (one snapshot), pages of
//! threads, events and plans. They use the pool beside the writer.

use deadpool_postgres::{GenericClient, Transaction};

use super::sql::{self, row, rows};
use super::{Db, pg};
use crate::store::envelope::decode;
use crate::store::ids::{self, IdQuery};
use crate::store::*;

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

/// Everything stored about a thread, read inside `txn`.
pub(super) async fn load_state(txn: &Transaction<'_>, id: &str) -> Result<ThreadState, StoreError> {
    let mut st = ThreadState::default();
    if let Some(r) = row(txn, "SELECT rec FROM pipec_threads WHERE id = $1", &[&id]).await? {
        st.thread = Some(decode(r.get::<_, &[u8]>(0), &|| format!("thread {id}"))?);
    }
    for r in rows(
        txn,
        "SELECT name, rec FROM pipec_nodes WHERE thread = $1",
        &[&id],
    )
    .await?
    {
        let node = sql::name_of(&r, 0)?;
        let rec: NodeRec = decode(r.get::<_, &[u8]>(1), &|| {
            format!("thread {id}, node `{node}`")
        })?;
        st.nodes.insert(node, rec);
    }
    for r in rows(
        txn,
        "SELECT node, generation, item, rec FROM pipec_items WHERE thread = $1",
        &[&id],
    )
    .await?
    {
        let node = sql::name_of(&r, 0)?;
        let (generation, item) = (sql::u32_of(&r, 1), sql::u32_of(&r, 2));
        let rec: ItemRec = decode(r.get::<_, &[u8]>(3), &|| {
            format!("thread {id}, item {item} of `{node}`")
        })?;
        st.items.insert((node, generation, item), rec);
    }
    for r in rows(
        txn,
        "SELECT node, generation, item, seq, call, rec FROM pipec_calls WHERE thread = $1",
        &[&id],
    )
    .await?
    {
        let key = CallKey {
            node: sql::name_of(&r, 0)?,
            generation: sql::u32_of(&r, 1),
            item: sql::u32_of(&r, 2),
            seq: sql::u32_of(&r, 3),
            call: sql::u32_of(&r, 4),
        };
        let rec: CallRec = decode(r.get::<_, &[u8]>(5), &|| {
            format!("thread {id}, call {}", key.display())
        })?;
        st.calls.insert(key, rec);
    }
    for r in rows(
        txn,
        "SELECT name, rec FROM pipec_gates WHERE thread = $1",
        &[&id],
    )
    .await?
    {
        let gate = sql::name_of(&r, 0)?;
        let rec: GateRec = decode(r.get::<_, &[u8]>(1), &|| {
            format!("thread {id}, gate `{gate}`")
        })?;
        st.gates.insert(gate, rec);
    }
    for r in rows(
        txn,
        "SELECT rec FROM pipec_attempts WHERE thread = $1 ORDER BY number",
        &[&id],
    )
    .await?
    {
        st.attempts.push(decode(r.get::<_, &[u8]>(0), &|| {
            format!("thread {id}, attempt")
        })?);
    }
    for r in rows(
        txn,
        "SELECT node, generation, item, idx, rec FROM pipec_heals WHERE thread = $1",
        &[&id],
    )
    .await?
    {
        let key = RefOrigin {
            node: sql::name_of(&r, 0)?,
            generation: sql::u32_of(&r, 1),
            item: sql::u32_of(&r, 2),
            index: sql::u32_of(&r, 3),
        };
        let rec: HealRec = decode(r.get::<_, &[u8]>(4), &|| {
            format!(
                "thread {id}, the heal of link {} of `{}`",
                key.index, key.node
            )
        })?;
        st.heals.insert(key, rec);
    }
    Ok(st)
}

pub(super) async fn load(db: &Db, thread: &str) -> Result<ThreadState, StoreError> {
    let mut client = db.client().await?;
    let id = resolve(&client, db, thread).await?;
    // One snapshot: a commit landing meanwhile is seen whole or not at all.
    let txn = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg)?;
    let state = load_state(&txn, &id).await?;
    txn.commit().await.map_err(pg)?;
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
    let id = resolve(&client, db, thread).await?;
    Ok(row(
        &client,
        "SELECT cancel_requested FROM pipec_threads WHERE id = $1",
        &[&id],
    )
    .await?
    .is_some_and(|r| r.get::<_, bool>(0)))
}

/// A thread's record (the id exact or a unique prefix), in one statement when exact.
pub(super) async fn thread_rec(db: &Db, thread: &str) -> Result<Option<ThreadRec>, StoreError> {
    let client = db.client().await?;
    let id = match ids::query(thread) {
        Some(IdQuery::Exact(n)) => ids::encode(n),
        _ => match resolve(&client, db, thread).await {
            Ok(id) => id,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    match row(
        &client,
        "SELECT rec FROM pipec_threads WHERE id = $1",
        &[&id],
    )
    .await?
    {
        Some(r) => Ok(Some(decode(r.get::<_, &[u8]>(0), &|| {
            format!("thread {id}")
        })?)),
        None => Ok(None),
    }
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
    let id = resolve(&client, db, thread).await?;
    let mut out = Vec::new();
    for r in rows(
        &client,
        "SELECT seq, row FROM pipec_events WHERE thread = $1 AND seq >= $2 ORDER BY seq",
        &[&id, &(since.min(i64::MAX as u64) as i64)],
    )
    .await?
    {
        let seq = sql::u64_of(&r, 0);
        let event: EventRow = decode(r.get::<_, &[u8]>(1), &|| {
            format!("thread {id}, event {seq}")
        })?;
        out.push(event.recorded(&id, seq));
    }
    Ok(out)
}
