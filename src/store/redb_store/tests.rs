//! Tests of what only the redb store has: its tables and fence rows. What every store
//! does is in `store::contract`.

use super::tables::FENCES;
use super::*;
use crate::store::contract::{attempt, node, redb_store, rt, stale, thread_rec};

#[test]
fn a_thread_without_a_fence_row_is_fenced_by_its_record() {
    let (store, _dir) = redb_store("nofence");
    let rt = rt();
    let first = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    let old = stale(&first);
    drop(first);
    let (second, _) = rt
        .block_on(store.claim(&old.thread, attempt()))
        .expect("claim");
    // As a store written before fences had their own rows.
    let id = ids::decode(&old.thread).expect("id");
    rt.block_on(store.on_store_thread(move |db| {
        let txn = db.begin_write().map_err(io)?;
        txn.open_table(FENCES).map_err(io)?.remove(id).map_err(io)?;
        txn.commit().map_err(io)
    }))
    .expect("fence removed");
    let err = rt
        .block_on(store.commit(&old, vec![node(1)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    rt.block_on(store.commit(&second, vec![node(2)]))
        .expect("the holder writes");
}
