//! Prune, the integrity check and the statistics of a Postgres store.

use serde::Serialize;

use super::Db;
use super::schema::{SCHEMA_VERSION, TABLES};
use super::sql::{self, exec, rows};
use crate::envelope::decode;
use crate::*;

/// Deletes terminal threads last updated before `before_ms` (their rows go with them).
pub(super) async fn prune(
    db: &Db,
    before_ms: u64,
    statuses: Vec<Status>,
) -> Result<usize, StoreError> {
    let statuses: Vec<&str> = statuses
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(Status::as_str)
        .collect();
    if statuses.is_empty() {
        return Ok(0);
    }
    let client = db.client().await?;
    let n = exec(
        &client,
        "DELETE FROM pipec_threads WHERE status = ANY($1) AND updated_ms < $2",
        &[&statuses, &(before_ms.min(i64::MAX as u64) as i64)],
    )
    .await?;
    Ok(n as usize)
}

/// Sizes from the catalogues (`pipec store stats`).
#[derive(Clone, Debug, Serialize)]
pub struct PgStats {
    pub schema_version: u32,
    /// The whole database, as `pg_database_size` gives it.
    pub database_bytes: u64,
    pub tables: Vec<PgTableStat>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PgTableStat {
    pub name: String,
    pub rows: u64,
    /// The table's heap (with its TOAST data).
    pub table_bytes: u64,
    pub index_bytes: u64,
}

pub(super) async fn stats(db: &Db) -> Result<PgStats, StoreError> {
    let client = db.client().await?;
    let database_bytes = rows(&client, "SELECT pg_database_size(current_database())", &[])
        .await?
        .first()
        .map_or(0, |r| sql::u64_of(r, 0));
    let mut tables = Vec::new();
    for name in TABLES {
        let sql = format!(
            "SELECT count(*), pg_table_size('{name}'), pg_indexes_size('{name}') FROM {name}"
        );
        let r = rows(&client, &sql, &[]).await?;
        let Some(r) = r.first() else { continue };
        tables.push(PgTableStat {
            name: name.to_string(),
            rows: sql::u64_of(r, 0),
            table_bytes: sql::u64_of(r, 1),
            index_bytes: sql::u64_of(r, 2),
        });
    }
    Ok(PgStats {
        schema_version: SCHEMA_VERSION,
        database_bytes,
        tables,
    })
}

/// What the check read.
#[derive(Clone, Debug, Serialize)]
pub struct PgCheck {
    pub threads: u64,
    pub rows: u64,
}

/// Reads every row, decodes it, and checks that each thread's columns agree with its
/// record and its events are numbered from 0 without gaps.
pub(super) async fn check(db: &Db) -> Result<PgCheck, StoreError> {
    let client = db.client().await?;
    let mut report = PgCheck {
        threads: 0,
        rows: 0,
    };
    let corrupt = |what: String| StoreError::Corrupt { what };
    for r in rows(
        &client,
        "SELECT id, status, epoch, cancel_requested, rec FROM pipec_threads",
        &[],
    )
    .await?
    {
        let id: String = r.get(0);
        let rec: ThreadRec = decode(r.get::<_, &[u8]>(4), &|| format!("thread {id}"))?;
        let status: String = r.get(1);
        if rec.id != id
            || rec.status.as_str() != status
            || rec.epoch != sql::u64_of(&r, 2)
            || rec.cancel_requested != r.get::<_, bool>(3)
        {
            return Err(corrupt(format!(
                "thread {id}: its columns and its record disagree"
            )));
        }
        report.threads += 1;
        report.rows += 1;
    }
    for (table, column) in [
        ("pipec_nodes", "rec"),
        ("pipec_items", "rec"),
        ("pipec_calls", "rec"),
        ("pipec_gates", "rec"),
        ("pipec_attempts", "rec"),
        ("pipec_heals", "rec"),
    ] {
        let sql = format!("SELECT thread, {column} FROM {table}");
        for r in rows(&client, &sql, &[]).await? {
            let thread: String = r.get(0);
            let what = || format!("{table}, thread {thread}");
            match table {
                "pipec_nodes" => drop(decode::<NodeRec>(r.get::<_, &[u8]>(1), &what)?),
                "pipec_items" => drop(decode::<ItemRec>(r.get::<_, &[u8]>(1), &what)?),
                "pipec_calls" => drop(decode::<CallRec>(r.get::<_, &[u8]>(1), &what)?),
                "pipec_gates" => drop(decode::<GateRec>(r.get::<_, &[u8]>(1), &what)?),
                "pipec_attempts" => drop(decode::<AttemptRec>(r.get::<_, &[u8]>(1), &what)?),
                _ => drop(decode::<HealRec>(r.get::<_, &[u8]>(1), &what)?),
            }
            report.rows += 1;
        }
    }
    for r in rows(
        &client,
        "SELECT thread, seq, row FROM pipec_events ORDER BY thread, seq",
        &[],
    )
    .await?
    {
        let thread: String = r.get(0);
        let seq = sql::u64_of(&r, 1);
        decode::<EventRow>(r.get::<_, &[u8]>(2), &|| {
            format!("thread {thread}, event {seq}")
        })?;
        report.rows += 1;
    }
    let gaps = rows(
        &client,
        "SELECT thread FROM pipec_events GROUP BY thread HAVING count(*) <> max(seq) + 1 OR min(seq) <> 0",
        &[],
    )
    .await?;
    if let Some(r) = gaps.first() {
        return Err(corrupt(format!(
            "thread {}: its events are not numbered from 0 without gaps",
            r.get::<_, String>(0)
        )));
    }
    Ok(report)
}
