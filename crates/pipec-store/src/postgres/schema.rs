//! The tables of a Postgres store and their version. Every table is named `pipec_*`, so
//! a store can share a database with other applications. The version is recorded in
//! `pipec_meta`; `migrate` brings a database up to this pipec's version in one
//! transaction (under an advisory lock, so two processes migrating at once do it once),
//! and a database of a newer version is refused (`R0409`).
//!
//! Values are the store's versioned envelopes (`bytea`); keys and the columns the
//! queries filter on (status, pipeline, epoch, cancel flag, times) are columns of their
//! own. Ids use the "C" collation so that they sort by their bytes, as in the redb
//! store; node and gate names are `bytea`, since a name may hold any character (a
//! rename passes through a staging name that starts with NUL, which `text` refuses).

use deadpool_postgres::Client;

use super::{PgError, pg};
use crate::StoreError;

/// The schema version this pipec writes and reads.
pub const SCHEMA_VERSION: u32 = 3;

/// The advisory lock key `migrate` takes ("pipec" in ASCII).
const MIGRATE_LOCK: i64 = 0x0070_6970_6563;

/// The steps from version N-1 to N, in order (index 0 makes version 1).
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE IF NOT EXISTS pipec_plans (
    hash text COLLATE "C" PRIMARY KEY,
    plan text NOT NULL
);
CREATE TABLE IF NOT EXISTS pipec_threads (
    id text COLLATE "C" PRIMARY KEY,
    pipeline text COLLATE "C" NOT NULL,
    status text NOT NULL,
    epoch bigint NOT NULL,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    rec bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS pipec_threads_by_status ON pipec_threads (status, id);
CREATE INDEX IF NOT EXISTS pipec_threads_by_pipeline ON pipec_threads (pipeline, id);
CREATE INDEX IF NOT EXISTS pipec_threads_by_update ON pipec_threads (updated_ms);
CREATE TABLE IF NOT EXISTS pipec_leases (
    thread text COLLATE "C" PRIMARY KEY REFERENCES pipec_threads (id) ON DELETE CASCADE,
    epoch bigint NOT NULL,
    run_id text NOT NULL,
    pid bigint NOT NULL,
    host text NOT NULL,
    since_ms bigint NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS pipec_nodes (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    name bytea NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (thread, name)
);
CREATE TABLE IF NOT EXISTS pipec_items (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    node bytea NOT NULL,
    generation bigint NOT NULL,
    item bigint NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (thread, node, generation, item)
);
CREATE TABLE IF NOT EXISTS pipec_calls (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    node bytea NOT NULL,
    generation bigint NOT NULL,
    item bigint NOT NULL,
    seq bigint NOT NULL,
    call bigint NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (thread, node, generation, item, seq, call)
);
CREATE TABLE IF NOT EXISTS pipec_gates (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    name bytea NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (thread, name)
);
CREATE TABLE IF NOT EXISTS pipec_attempts (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    number bigint NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (thread, number)
);
CREATE TABLE IF NOT EXISTS pipec_events (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    row bytea NOT NULL,
    PRIMARY KEY (thread, seq)
);
CREATE TABLE IF NOT EXISTS pipec_heals (
    thread text COLLATE "C" NOT NULL REFERENCES pipec_threads (id) ON DELETE CASCADE,
    node bytea NOT NULL,
    generation bigint NOT NULL,
    item bigint NOT NULL,
    idx bigint NOT NULL,
    rec bytea NOT NULL,
    PRIMARY KEY (thread, node, generation, item, idx)
);
"#,
    r#"
-- The fence of a commit sent in one round trip with its rows: locks the thread's row
-- and fails the statement (so the transaction) unless the writer holds the thread's
-- current epoch, its lease is live and no cancel was asked.
CREATE OR REPLACE FUNCTION pipec_fence(thread_id text, writer_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $fence$
BEGIN
    PERFORM 1 FROM pipec_threads t
     WHERE t.id = thread_id AND t.epoch = writer_epoch AND NOT t.cancel_requested
       AND EXISTS (SELECT 1 FROM pipec_leases l
                    WHERE l.thread = t.id AND l.epoch = writer_epoch AND l.expires_at > now())
     FOR UPDATE OF t;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pipec: the commit of thread % at epoch % is fenced', thread_id, writer_epoch
            USING ERRCODE = 'PF405';
    END IF;
END
$fence$;
"#,
    r#"
-- What makes a paused thread work for a worker, beside its record, so that a look at
-- the queue reads only the paused threads that may go on rather than every one: the
-- earliest deadline of its gates (from the record), and how many answers were given
-- since a holder last took it (a claim sets it to 0). A thread paused before this
-- version counts one answer, so the first look reads its gates and record once.
ALTER TABLE pipec_threads ADD COLUMN IF NOT EXISTS due_ms bigint;
ALTER TABLE pipec_threads ADD COLUMN IF NOT EXISTS answers bigint NOT NULL DEFAULT 0;
UPDATE pipec_threads SET answers = 1 WHERE status = 'paused';
CREATE INDEX IF NOT EXISTS pipec_threads_waking ON pipec_threads (id)
    WHERE status = 'paused' AND (answers > 0 OR due_ms IS NOT NULL);
"#,
];

/// The tables of this version, for statistics and the check.
pub(super) const TABLES: [&str; 10] = [
    "pipec_plans",
    "pipec_threads",
    "pipec_leases",
    "pipec_nodes",
    "pipec_items",
    "pipec_calls",
    "pipec_gates",
    "pipec_attempts",
    "pipec_events",
    "pipec_heals",
];

/// The version recorded in the database; 0 when it holds no pipec store.
pub(super) async fn version(client: &Client) -> Result<u32, PgError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('pipec_meta') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_opt(
            "SELECT value FROM pipec_meta WHERE key = 'schema_version'",
            &[],
        )
        .await?;
    Ok(row
        .and_then(|r| r.get::<_, String>(0).parse().ok())
        .unwrap_or(0))
}

/// Refuses a database of a newer version than this pipec's.
pub(super) fn refuse_newer(found: u32) -> Result<(), StoreError> {
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerFormat {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Brings the database to this pipec's version; returns the version it had.
pub(super) async fn migrate(client: &mut Client) -> Result<u32, StoreError> {
    let txn = client.transaction().await.map_err(pg)?;
    txn.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])
        .await
        .map_err(pg)?;
    txn.batch_execute(
        "CREATE TABLE IF NOT EXISTS pipec_meta (key text PRIMARY KEY, value text NOT NULL)",
    )
    .await
    .map_err(pg)?;
    let found: u32 = txn
        .query_opt(
            "SELECT value FROM pipec_meta WHERE key = 'schema_version'",
            &[],
        )
        .await
        .map_err(pg)?
        .and_then(|r| r.get::<_, String>(0).parse().ok())
        .unwrap_or(0);
    refuse_newer(found)?;
    for step in MIGRATIONS.iter().skip(found as usize) {
        txn.batch_execute(step).await.map_err(pg)?;
    }
    if found < SCHEMA_VERSION {
        txn.execute(
            "INSERT INTO pipec_meta (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            &[&SCHEMA_VERSION.to_string()],
        )
        .await
        .map_err(pg)?;
        txn.execute(
            "INSERT INTO pipec_meta (key, value) VALUES ('created_by', $1)
             ON CONFLICT (key) DO NOTHING",
            &[&format!("pipec {}", env!("CARGO_PKG_VERSION"))],
        )
        .await
        .map_err(pg)?;
    }
    txn.commit().await.map_err(pg)?;
    Ok(found)
}
