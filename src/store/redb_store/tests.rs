//! Tests of what only the redb store has: its tables, the fence rows, its files.

use super::tables::FENCES;
use super::*;
use serde_json::json;

fn temp_store(tag: &str) -> (RedbStore, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pipec-store-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("runs.redb");
    (RedbStore::open(&path).expect("store"), dir)
}

fn thread_rec() -> ThreadRec {
    ThreadRec {
        id: ids::new_thread_id(),
        pipeline: "p".into(),
        plan_hash: "sha256:0".into(),
        source: "p.pipe".into(),
        project_root: ".".into(),
        status: Status::Running,
        cancel_requested: false,
        epoch: 1,
        holder: None,
        created_ms: 0,
        updated_ms: 0,
        inputs: json!({ "doc": "x".repeat(10_000) }),
        config: Default::default(),
        model_overrides: Default::default(),
        pre_answers: Default::default(),
        outputs: None,
        error: None,
        next_seq: 0,
        attempts: 1,
        due_ms: None,
    }
}

fn attempt() -> AttemptRec {
    AttemptRec {
        number: 1,
        run_id: "r".into(),
        pid: 0,
        host: "h".into(),
        started_ms: 0,
        ended_ms: 0,
        end: None,
        plan_hash: String::new(),
        pipec: String::new(),
    }
}

fn node(v: i64) -> Write {
    Write::Node("n".into(), NodeRec::done(json!(v)))
}

/// A lease as a process that lost its thread still holds it: its epoch, no lock.
fn stale(lease: &Lease) -> Lease {
    Lease {
        thread: lease.thread.clone(),
        epoch: lease.epoch,
        run_id: lease.run_id.clone(),
        attempt: lease.attempt,
        _lock: None,
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn a_writer_whose_epoch_moved_on_writes_nothing() {
    let (store, dir) = temp_store("fence");
    let rt = rt();
    let first = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    let old = stale(&first);
    drop(first);
    let (second, _) = rt
        .block_on(store.claim(&old.thread, attempt()))
        .expect("claim");
    assert_eq!(second.epoch, old.epoch + 1);
    let err = rt
        .block_on(store.commit(&old, vec![node(1)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    rt.block_on(store.commit(&second, vec![node(2)]))
        .expect("the holder writes");
    let state = rt.block_on(store.load(&old.thread)).expect("load");
    assert_eq!(state.nodes["n"].value, Some(json!(2)));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn after_a_cancel_request_only_the_cancellation_is_written() {
    let (store, dir) = temp_store("cancel");
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    // The lease holds the lock, so the cancel is a request.
    let outcome = rt
        .block_on(store.request_cancel(&lease.thread))
        .expect("cancel");
    assert_eq!(outcome, CancelOutcome::Requested);
    let err = rt
        .block_on(store.commit(&lease, vec![node(1)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    let mut rec = rt
        .block_on(store.load(&lease.thread))
        .expect("load")
        .thread
        .expect("thread");
    rec.status = Status::Cancelled;
    rt.block_on(store.commit(&lease, vec![Write::Thread(rec)]))
        .expect("the cancellation is recorded");
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    assert_eq!(state.thread.map(|t| t.status), Some(Status::Cancelled));
    assert!(!state.nodes.contains_key("n"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_thread_without_a_fence_row_is_fenced_by_its_record() {
    let (store, dir) = temp_store("nofence");
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
    let _ = std::fs::remove_dir_all(dir);
}
