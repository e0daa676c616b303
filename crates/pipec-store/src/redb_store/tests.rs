//! Tests of what only the redb store has: its tables and fence rows. What every store
//! does is in `store::contract`.

use super::contain::quiet_contained_panics;
use super::tables::FENCES;
use super::*;
use crate::contract::{attempt, node, redb_store, rt, stale, thread_rec};

#[test]
fn a_thread_without_a_fence_row_is_fenced_by_its_record() {
    let (store, _dir) = redb_store("nofence");
    let rt = rt();
    let first = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let old = stale(&first);
    drop(first);
    let (second, _, _) = rt
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

#[test]
fn a_panic_on_the_store_thread_answers_r0410_and_every_later_call_too() {
    quiet_contained_panics();
    let (store, _dir) = redb_store("panic-thread");
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let err = rt
        .block_on(store.on_store_thread(|_db| -> Result<(), StoreError> {
            panic!("entered unreachable code")
        }))
        .expect_err("contained");
    let file = store.path().display().to_string();
    assert!(
        matches!(&err, StoreError::Corrupt { what } if what.contains(&file) && what.contains("unreachable")),
        "{err:?}"
    );
    // The thread still answers, and every answer is the broken store's error.
    for result in [
        rt.block_on(store.commit(&lease, vec![node(1)])).map(|_| ()),
        rt.block_on(store.request_cancel(&lease.thread)).map(|_| ()),
        rt.block_on(store.load(&lease.thread)).map(|_| ()),
        rt.block_on(store.list(ListQuery::default())).map(|_| ()),
        store.stats().map(|_| ()),
    ] {
        let err = result.expect_err("broken");
        assert!(
            matches!(&err, StoreError::Corrupt { what } if what.contains(&file)),
            "{err:?}"
        );
    }
    drop(lease);
    // Dropping a broken store neither panics nor waits forever.
    drop(store);
}

#[test]
fn a_panic_inside_a_read_answers_r0410() {
    quiet_contained_panics();
    let (store, _dir) = redb_store("panic-read");
    let rt = rt();
    let err = rt
        .block_on(store.read(|_txn| -> Result<(), StoreError> { panic!("index out of range") }))
        .expect_err("contained");
    assert!(err.to_string().contains("index out of range"), "{err}");
    assert!(
        rt.block_on(store.get_plan("sha256:1")).is_err(),
        "broken for good"
    );
}

#[test]
fn a_read_only_store_sees_the_commits_of_a_writer_and_refuses_to_write() {
    let (writer, _dir) = redb_store("read-only");
    let rt = rt();
    let reader = RedbStore::open_read_only(writer.path()).expect("read-only beside a writer");
    let lease = rt
        .block_on(writer.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    rt.block_on(writer.commit(&lease, vec![node(7)]))
        .expect("commit");
    let state = rt
        .block_on(reader.load(&lease.thread))
        .expect("the reader sees it");
    assert_eq!(state.nodes["n"].value, Some(serde_json::json!(7)));
    let locks = lock::locks_dir(writer.path());
    let before: Vec<_> = std::fs::read_dir(&locks)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    for result in [
        rt.block_on(reader.commit(&lease, vec![node(8)]))
            .map(|_| ()),
        rt.block_on(reader.claim(&lease.thread, attempt()))
            .map(|_| ()),
        rt.block_on(reader.create_thread(thread_rec(), attempt()))
            .map(|_| ()),
        rt.block_on(reader.request_cancel(&lease.thread))
            .map(|_| ()),
        rt.block_on(reader.put_plan("sha256:1", "{}")),
        rt.block_on(reader.prune(u64::MAX, Status::ALL.to_vec()))
            .map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(StoreError::ReadOnly { .. })),
            "{result:?}"
        );
    }
    let after: Vec<_> = std::fs::read_dir(&locks)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert_eq!(before, after, "a refused write takes no lock");
    let state = rt.block_on(writer.load(&lease.thread)).expect("load");
    assert_eq!(state.nodes["n"].value, Some(serde_json::json!(7)));
}
