//! Statements run through the connection's statement cache, on a client or inside a
//! transaction alike, with database errors turned into store errors.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::pg;
use crate::StoreError;

pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

pub(crate) async fn exec<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, StoreError> {
    let st = c.prepare_cached(sql).await.map_err(pg)?;
    c.execute(&st, params).await.map_err(pg)
}

pub(crate) async fn rows<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, StoreError> {
    let st = c.prepare_cached(sql).await.map_err(pg)?;
    c.query(&st, params).await.map_err(pg)
}

pub(crate) async fn row<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>, StoreError> {
    let st = c.prepare_cached(sql).await.map_err(pg)?;
    c.query_opt(&st, params).await.map_err(pg)
}

/// A column as a `u64` (stored as `bigint`).
pub(crate) fn u64_of(row: &Row, i: usize) -> u64 {
    row.get::<_, i64>(i).max(0) as u64
}

/// A column as a `u32` (stored as `bigint`).
pub(crate) fn u32_of(row: &Row, i: usize) -> u32 {
    row.get::<_, i64>(i).clamp(0, i64::from(u32::MAX)) as u32
}

/// A node or gate name (stored as its UTF-8 bytes).
pub(crate) fn name_of(row: &Row, i: usize) -> Result<String, StoreError> {
    String::from_utf8(row.get::<_, Vec<u8>>(i)).map_err(|_| StoreError::Corrupt {
        what: "a stored node name is not UTF-8".into(),
    })
}
