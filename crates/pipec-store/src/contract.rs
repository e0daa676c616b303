//! The store contract: the same cases, with the same assertions, against every `Store`
//! (the redb store on a temporary file, the memory store, and the Postgres store in a
//! schema of its own on the test server). A behaviour the runtime
//! relies on is written here once, so the stores cannot drift apart. With the `testing`
//! feature it is public: [`check`] runs it against a `Store` of another crate.

#[cfg(test)]
use std::path::PathBuf;
#[cfg(test)]
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use super::*;

// ---------------------------------------------------------------- fixtures

/// A temporary folder, removed on drop.
#[cfg(test)]
pub(crate) struct TempDir(pub PathBuf);

#[cfg(test)]
impl TempDir {
    pub(crate) fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pipec-store-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        TempDir(dir)
    }
}

#[cfg(test)]
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A redb store in a folder of its own.
#[cfg(test)]
pub(crate) fn redb_store(tag: &str) -> (RedbStore, TempDir) {
    let dir = TempDir::new(tag);
    let store = RedbStore::open(dir.0.join("runs.redb")).expect("store");
    (store, dir)
}

pub(crate) fn thread_rec() -> ThreadRec {
    thread_with_id(ids::new_thread_id())
}

pub(crate) fn thread_with_id(id: String) -> ThreadRec {
    ThreadRec {
        id,
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

pub(crate) fn attempt() -> AttemptRec {
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

pub(crate) fn node(v: i64) -> Write {
    Write::Node("n".into(), NodeRec::done(json!(v)))
}

/// A lease as a process that lost its thread still has it: its epoch, holding nothing.
pub(crate) fn stale(lease: &Lease) -> Lease {
    Lease {
        thread: lease.thread.clone(),
        epoch: lease.epoch,
        run_id: lease.run_id.clone(),
        attempt: lease.attempt,
        _guard: LeaseGuard::Nothing,
    }
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn event(kind: &str) -> Write {
    Write::Event(match kind {
        "node_started" => Event::NodeStarted {
            node: "n".into(),
            items: None,
        },
        "node_finished" => Event::NodeFinished {
            node: "n".into(),
            ms: Some(1),
        },
        "thread_paused" => Event::ThreadPaused { gates: Vec::new() },
        "thread_cancelled" => Event::ThreadCancelled {},
        other => panic!("no test event `{other}`"),
    })
}

/// Events as the JSON the live stream and `show --events` print.
fn values(events: Vec<RecordedEvent>) -> Vec<Value> {
    events
        .iter()
        .map(|e| serde_json::to_value(e).expect("an event serialises"))
        .collect()
}

/// A pending gate of `node` that takes a boolean.
pub(crate) fn gate(node: &str) -> GateRec {
    GateRec {
        node: node.into(),
        state: GateState::Pending,
        message: format!("{node}?"),
        schema: json!({ "type": "boolean" }),
        pending_ms: 1,
        deadline_ms: None,
        answer: None,
        answered_ms: 0,
        answered_by: None,
        ask: None,
    }
}

/// The thread's record with another status, as a commit writes it.
/// The thread's record as it is now, with status `s`, as a write.
pub(crate) fn with_status(
    store: &dyn Store,
    rt: &tokio::runtime::Runtime,
    thread: &str,
    s: Status,
) -> Write {
    let mut rec = rt
        .block_on(store.load(thread))
        .expect("load")
        .thread
        .expect("thread");
    rec.status = s;
    Write::Thread(rec)
}

fn seqs_of(events: &[Value]) -> Vec<u64> {
    events.iter().filter_map(|e| e["seq"].as_u64()).collect()
}

fn types_of(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["type"].as_str().map(str::to_string))
        .collect()
}

// ---------------------------------------------------------------- the cases

fn a_writer_whose_epoch_moved_on_writes_nothing(store: &dyn Store) {
    let rt = rt();
    let first = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    assert_eq!(first.epoch, 1);
    let old = stale(&first);
    // The first process dies: its lease goes with it.
    drop(first);
    let (second, state, _) = rt
        .block_on(store.claim(&old.thread, attempt()))
        .expect("claim");
    assert_eq!(second.epoch, old.epoch + 1);
    assert_eq!(second.attempt, 2, "attempt numbers count every claim");
    let rec = state.thread.expect("thread");
    assert_eq!(rec.status, Status::Running);
    assert_eq!(rec.epoch, second.epoch);
    assert_eq!(rec.holder.map(|h| h.run_id), Some("r".to_string()));
    let err = rt
        .block_on(store.commit(&old, vec![node(1), event("node_finished")]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    rt.block_on(store.commit(&second, vec![node(2)]))
        .expect("the holder writes");
    let state = rt.block_on(store.load(&old.thread)).expect("load");
    assert_eq!(state.nodes["n"].value, Some(json!(2)));
    let events = rt
        .block_on(store.events(&old.thread, 0))
        .map(values)
        .expect("events");
    assert_eq!(
        types_of(&events),
        ["thread_created", "attempt_started"],
        "the fenced commit wrote no event"
    );
}

fn a_held_thread_is_not_claimed_twice_and_is_free_once_its_lease_drops(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    assert!(store.is_held(&lease.thread));
    let mut other = attempt();
    other.run_id = "r2".into();
    let (second, _, _) = {
        // Claimed by the first attempt: the second is refused and names the holder.
        let err = rt
            .block_on(store.claim(&lease.thread, other.clone()))
            .expect_err("locked");
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        // Creating it again is refused too.
        let mut again = thread_rec();
        again.id = lease.thread.clone();
        assert!(
            rt.block_on(store.create_thread(again, attempt())).is_err(),
            "a thread is created once"
        );
        let thread = lease.thread.clone();
        drop(lease);
        assert!(released(store, &thread));
        rt.block_on(store.claim(&thread, other.clone()))
            .expect("free once the holder is gone")
    };
    let err = rt
        .block_on(store.claim(&second.thread, attempt()))
        .expect_err("locked");
    match err {
        StoreError::Locked { thread, holder } => {
            assert_eq!(thread, second.thread);
            assert_eq!(holder.map(|h| h.run_id), Some("r2".to_string()));
        }
        other => panic!("{other:?}"),
    }
    let thread = second.thread.clone();
    drop(second);
    assert!(released(store, &thread));
    let summary = rt.block_on(store.list(ListQuery::default())).expect("list");
    assert_eq!(summary.len(), 1);
    assert!(
        summary[0].stale,
        "running with no holder is stale: {summary:?}"
    );
    assert!(!store.is_held(&thread));
}

fn after_a_cancel_request_only_the_cancellation_is_written(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    // The lease holds the thread, so the cancel is a request.
    let outcome = rt
        .block_on(store.request_cancel(&lease.thread))
        .map(|(outcome, _)| outcome)
        .expect("cancel");
    assert_eq!(outcome, CancelOutcome::Requested);
    let rec = rt
        .block_on(store.load(&lease.thread))
        .expect("load")
        .thread
        .expect("thread");
    assert!(rec.cancel_requested);
    assert_eq!(rec.status, Status::Running);
    let err = rt
        .block_on(store.commit(&lease, vec![node(1)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Cancelled { .. }), "{err:?}");
    let cancelled = with_status(store, &rt, &lease.thread, Status::Cancelled);
    rt.block_on(store.commit(&lease, vec![cancelled, event("thread_cancelled")]))
        .expect("the cancellation is recorded");
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    assert_eq!(state.thread.map(|t| t.status), Some(Status::Cancelled));
    assert!(!state.nodes.contains_key("n"));
    let events = rt
        .block_on(store.events(&lease.thread, 0))
        .map(values)
        .expect("events");
    assert_eq!(
        types_of(&events),
        ["thread_created", "cancel_requested", "thread_cancelled"]
    );
    assert_eq!(
        rt.block_on(store.request_cancel(&lease.thread))
            .map(|(outcome, _)| outcome),
        Ok(CancelOutcome::AlreadyEnded(Status::Cancelled))
    );
}

fn a_thread_no_process_holds_is_cancelled_at_once(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let paused = with_status(store, &rt, &lease.thread, Status::Paused);
    rt.block_on(store.commit(&lease, vec![paused]))
        .expect("paused");
    let thread = lease.thread.clone();
    drop(lease);
    let outcome = rt
        .block_on(store.request_cancel(&thread))
        .map(|(outcome, _)| outcome)
        .expect("cancel");
    assert_eq!(outcome, CancelOutcome::Cancelled);
    let rec = rt
        .block_on(store.load(&thread))
        .expect("load")
        .thread
        .expect("thread");
    assert_eq!(rec.status, Status::Cancelled);
    assert_eq!(rec.holder, None);
    assert!(!rec.cancel_requested);
    let events = rt
        .block_on(store.events(&thread, 0))
        .map(values)
        .expect("events");
    assert_eq!(
        types_of(&events).last().map(String::as_str),
        Some("thread_cancelled")
    );
    let cancelled = rt
        .block_on(store.list(ListQuery {
            status: Some(Status::Cancelled),
            ..Default::default()
        }))
        .expect("list");
    assert_eq!(cancelled.len(), 1, "the status index follows the cancel");
    assert!(!store.is_held(&thread), "cancelling took nothing for good");
    assert_eq!(
        rt.block_on(store.request_cancel(&thread))
            .map(|(outcome, _)| outcome),
        Ok(CancelOutcome::AlreadyEnded(Status::Cancelled))
    );
}

/// A new thread with the pending gates `a` and `b`; its lease.
fn thread_with_gates(store: &dyn Store, rt: &tokio::runtime::Runtime) -> Lease {
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    rt.block_on(store.commit(
        &lease,
        vec![
            Write::Gate("a".into(), gate("a")),
            Write::Gate("b".into(), gate("b")),
        ],
    ))
    .expect("gates");
    lease
}

fn answers_are_compare_and_set_and_all_or_none(store: &dyn Store) {
    let rt = rt();
    let lease = thread_with_gates(store, &rt);
    let thread = lease.thread.clone();
    drop(lease);

    // One unknown gate: nothing is written.
    let err = rt
        .block_on(store.answer(
            &thread,
            vec![("a".into(), json!(true)), ("nope".into(), json!(true))],
            "cli",
        ))
        .expect_err("no such gate");
    match err {
        StoreError::NoSuchGate { gate, pending } => {
            assert_eq!(gate, "nope");
            assert_eq!(pending, ["a", "b"]);
        }
        other => panic!("{other:?}"),
    }
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert!(
        state.gates.values().all(|g| g.state == GateState::Pending),
        "all or none"
    );

    rt.block_on(store.answer(
        &thread,
        vec![("a".into(), json!(true)), ("b".into(), json!(false))],
        "cli",
    ))
    .expect("answered");
    let state = rt.block_on(store.load(&thread)).expect("load");
    let a = &state.gates["a"];
    assert_eq!(a.state, GateState::Answered);
    assert_eq!(a.answer, Some(json!(true)));
    assert_eq!(a.answered_by.as_deref(), Some("cli"));
    assert!(a.answered_ms > 0);
    assert_eq!(state.gates["b"].answer, Some(json!(false)));

    // The same answer again changes nothing; another one is refused.
    rt.block_on(store.answer(&thread, vec![("a".into(), json!(true))], "api"))
        .expect("the same answer is accepted again");
    let err = rt
        .block_on(store.answer(&thread, vec![("a".into(), json!(false))], "api"))
        .expect_err("already answered");
    assert_eq!(
        err,
        StoreError::AlreadyAnswered {
            gate: "a".into(),
            by: "cli".into()
        }
    );
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert_eq!(state.gates["a"].answered_by.as_deref(), Some("cli"));
    let events = rt
        .block_on(store.events(&thread, 0))
        .map(values)
        .expect("events");
    let answered: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "gate_answered")
        .collect();
    assert_eq!(answered.len(), 2, "{events:?}");
    assert_eq!(answered[0]["gate"], "a");
    assert_eq!(answered[0]["by"], "cli");
    let err = rt
        .block_on(store.answer("7ZZZZZZZZZZZZZZZZZZZZZZZZZ", vec![], "cli"))
        .expect_err("no thread");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

/// A resume's answers and its claim are one transaction: both land, the answers' events
/// first; refused (an unknown gate, a thread another process holds), neither does.
fn answers_and_a_claim_are_one_transaction(store: &dyn Store) {
    let rt = rt();
    let lease = thread_with_gates(store, &rt);
    let thread = lease.thread.clone();
    let epoch = lease.epoch;
    drop(lease);
    assert!(released(store, &thread));
    let untouched = |why: &str| {
        let state = rt.block_on(store.load(&thread)).expect("load");
        assert!(
            state.gates.values().all(|g| g.state == GateState::Pending),
            "{why}: no gate answered"
        );
        let rec = state.thread.expect("thread");
        assert_eq!((rec.epoch, rec.attempts), (epoch, 1), "{why}: not claimed");
    };

    let err = rt
        .block_on(store.claim_answering(
            &thread,
            attempt(),
            vec![("a".into(), json!(true)), ("nope".into(), json!(true))],
            "cli",
        ))
        .expect_err("no such gate");
    assert!(matches!(err, StoreError::NoSuchGate { .. }), "{err:?}");
    untouched("an unknown gate");
    assert!(!store.is_held(&thread), "the refused claim holds nothing");

    let mut other = attempt();
    other.run_id = "r2".into();
    let (held, _, _) = rt
        .block_on(store.claim(&thread, other))
        .expect("another claim");
    let held_epoch = held.epoch;
    let err = rt
        .block_on(store.claim_answering(&thread, attempt(), vec![("a".into(), json!(true))], "cli"))
        .expect_err("held");
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert!(
        state.gates.values().all(|g| g.state == GateState::Pending),
        "a held thread: no gate answered"
    );
    drop(held);
    assert!(released(store, &thread));

    let (lease, state, events) = rt
        .block_on(store.claim_answering(
            &thread,
            attempt(),
            vec![("a".into(), json!(true)), ("b".into(), json!(false))],
            "cli",
        ))
        .expect("answered and claimed");
    assert_eq!(lease.epoch, held_epoch + 1);
    assert!(store.is_held(&thread));
    assert_eq!(state.gates["a"].answer, Some(json!(true)));
    assert_eq!(state.gates["a"].answered_by.as_deref(), Some("cli"));
    assert_eq!(state.gates["b"].answer, Some(json!(false)));
    let events = values(events);
    assert_eq!(
        types_of(&events),
        ["gate_answered", "gate_answered", "attempt_started"],
        "{events:?}"
    );
    let stored = rt
        .block_on(store.events(&thread, 0))
        .map(values)
        .expect("events");
    let seqs = seqs_of(&stored);
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "numbered without gaps: {stored:?}"
    );
    assert_eq!(seqs_of(&events), seqs[seqs.len() - 3..]);
}

/// A paused thread without the rows of its gates is damage (a store page that decodes
/// but lost its keys), and an answer to it says so instead of "no such gate".
fn an_answer_to_a_paused_thread_without_gate_rows_is_refused_as_damage(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let thread = lease.thread.clone();
    let paused = with_status(store, &rt, &thread, Status::Paused);
    rt.block_on(store.commit_last(&lease, vec![paused]))
        .expect("paused");
    drop(lease);
    let err = rt
        .block_on(store.answer(&thread, vec![("review".into(), json!(true))], "cli"))
        .expect_err("damage");
    match &err {
        StoreError::Corrupt { what } => assert!(
            what.contains(&thread) && what.contains("no row of a gate"),
            "{what}"
        ),
        other => panic!("{other:?}"),
    }
    let events = rt.block_on(store.events(&thread, 0)).expect("events");
    assert!(
        values(events).iter().all(|e| e["type"] != "gate_answered"),
        "nothing is written"
    );
    // A thread that is not paused has no gate to answer, which is no damage.
    let running = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let other = running.thread.clone();
    drop(running);
    let err = rt
        .block_on(store.answer(&other, vec![("review".into(), json!(true))], "cli"))
        .expect_err("no gate");
    assert!(matches!(err, StoreError::NoSuchGate { .. }), "{err:?}");
}

fn events_are_numbered_from_zero_without_gaps_across_commits_and_claims(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let seqs = rt
        .block_on(store.commit(
            &lease,
            vec![event("node_started"), node(1), event("node_finished")],
        ))
        .expect("commit");
    assert_eq!(seqs_of(&values(seqs)), [1, 2], "thread_created took 0");
    let seqs = rt
        .block_on(store.commit(&lease, vec![node(2)]))
        .expect("commit");
    assert!(seqs.is_empty());
    let thread = lease.thread.clone();
    drop(lease);
    let (lease, _, _) = rt.block_on(store.claim(&thread, attempt())).expect("claim");
    let paused = with_status(store, &rt, &thread, Status::Paused);
    let seqs = rt
        .block_on(store.commit(&lease, vec![paused, event("thread_paused")]))
        .expect("commit");
    assert_eq!(seqs_of(&values(seqs)), [4], "attempt_started took 3");
    let all = rt
        .block_on(store.events(&thread, 0))
        .map(values)
        .expect("events");
    assert_eq!(seqs_of(&all), [0, 1, 2, 3, 4]);
    assert_eq!(
        types_of(&all),
        [
            "thread_created",
            "node_started",
            "node_finished",
            "attempt_started",
            "thread_paused"
        ]
    );
    for e in &all {
        assert_eq!(e["thread"], thread.as_str());
        assert_eq!(e["v"], 1);
        assert!(e["ts"].as_u64().is_some_and(|t| t > 0), "{e}");
    }
    assert_eq!(all[3]["attempt"], 2);
    let rec = rt
        .block_on(store.load(&thread))
        .expect("load")
        .thread
        .expect("thread");
    assert_eq!(rec.next_seq, 5);
    let tail = rt
        .block_on(store.events(&thread, 3))
        .map(values)
        .expect("events");
    assert_eq!(seqs_of(&tail), [3, 4]);
    assert!(
        rt.block_on(store.events(&thread, 5))
            .map(values)
            .expect("events")
            .is_empty()
    );
    // What a commit returns is what a read gives back.
    let committed = rt
        .block_on(store.commit(&lease, vec![event("node_finished")]))
        .expect("commit");
    let read = rt.block_on(store.events(&thread, 5)).expect("events");
    assert_eq!(committed, read);
    assert_eq!(committed[0].seq, 5);
}

fn load_returns_every_row_a_commit_wrote(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let key = CallKey {
        node: "fetch".into(),
        generation: 0,
        item: 0,
        seq: 1,
        call: 0,
    };
    let call = CallRec {
        kind: CallKind::Exec,
        target: "./fetch.sh".into(),
        args: None,
        args_hash: "sha256:1".into(),
        idempotent: false,
        idem_key: "k".into(),
        state: CallState::Started,
        result: None,
        error: None,
        attempt: 1,
        started_ms: 5,
        finished_ms: 0,
        decision: None,
        watched_by: None,
        task: None,
    };
    let mut each = NodeRec::done(json!(null));
    each.value = None;
    each.items = Some(3);
    let item = |state: ItemState, v: Value| ItemRec {
        state,
        value: Some(v),
        error: None,
        manifest: Vec::new(),
    };
    let mut a2 = attempt();
    a2.number = 7;
    let mut fp = NodeRec::done(json!({ "id": "A" }));
    fp.fingerprint = format!("sha256:{}", "ab".repeat(32));
    rt.block_on(store.commit(
        &lease,
        vec![
            Write::Node("fetch".into(), fp),
            Write::Node("tags".into(), each),
            Write::Item("tags".into(), 0, 0, item(ItemState::Done, json!("x"))),
            Write::Item("tags".into(), 0, 1, item(ItemState::Dropped, json!("y"))),
            Write::Item("tags".into(), 0, 2, item(ItemState::Done, json!("z"))),
            Write::Item("tags".into(), 1, 0, item(ItemState::Done, json!("new"))),
            Write::Call(key.clone(), call.clone()),
            Write::Gate("review".into(), gate("review")),
            Write::Attempt(a2.clone()),
        ],
    ))
    .expect("commit");
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    let rec = state.thread.clone().expect("thread");
    assert_eq!(rec.id, lease.thread);
    assert_eq!(rec.inputs["doc"].as_str().map(str::len), Some(10_000));
    assert_eq!(state.value_of("fetch"), Some(json!({ "id": "A" })));
    assert_eq!(
        state.nodes["fetch"].fingerprint,
        "ab".repeat(16),
        "node rows keep 128 bits of the fingerprint"
    );
    assert_eq!(
        state.value_of("tags"),
        Some(json!(["x", "z"])),
        "an each node's value is its done items of its generation"
    );
    assert_eq!(state.items.len(), 4);
    assert_eq!(state.calls[&key], call);
    assert_eq!(state.gates["review"], gate("review"));
    assert_eq!(
        state.attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 7]
    );
    assert_eq!(state.attempts[1], a2);
    // A node row is replaced by the next write of the same node.
    rt.block_on(store.commit(
        &lease,
        vec![Write::Node("fetch".into(), NodeRec::done(json!(2)))],
    ))
    .expect("commit");
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    assert_eq!(state.value_of("fetch"), Some(json!(2)));
    assert_eq!(state.value_of("missing"), None);
}

fn a_rename_moves_every_row_of_a_node_and_a_gate_row_can_be_removed(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let key = |node: &str, generation: u32, seq: u32| CallKey {
        node: node.into(),
        generation,
        item: 1,
        seq,
        call: 0,
    };
    let call = CallRec {
        kind: CallKind::Exec,
        target: "./x".into(),
        args: None,
        args_hash: "h".into(),
        idempotent: false,
        idem_key: "k".into(),
        state: CallState::Started,
        result: None,
        error: None,
        attempt: 1,
        started_ms: 1,
        finished_ms: 0,
        decision: None,
        watched_by: None,
        task: None,
    };
    let done = ItemRec {
        state: ItemState::Done,
        value: Some(json!(1)),
        error: None,
        manifest: Vec::new(),
    };
    rt.block_on(store.commit(
        &lease,
        vec![
            Write::Node("old".into(), NodeRec::done(json!("v"))),
            Write::Item("old".into(), 0, 0, done.clone()),
            Write::Item("old".into(), 2, 1, done.clone()),
            Write::Call(key("old", 0, 0), call.clone()),
            Write::Call(key("old", 2, 3), call.clone()),
            Write::Gate("old".into(), gate("old")),
            Write::Heal(origin("old", 3), heal(1)),
            Write::Node("other".into(), NodeRec::done(json!("o"))),
            Write::Gate("asked".into(), gate("asked")),
        ],
    ))
    .expect("commit");
    // A swap through a staging name, as a resume applies renames, and a removed gate.
    rt.block_on(store.commit(
        &lease,
        vec![
            Write::Rename {
                from: "old".into(),
                to: "\0staging".into(),
            },
            Write::Rename {
                from: "other".into(),
                to: "old".into(),
            },
            Write::Rename {
                from: "\0staging".into(),
                to: "new".into(),
            },
            Write::RemoveGate("asked".into()),
        ],
    ))
    .expect("commit");
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    assert_eq!(state.value_of("new"), Some(json!("v")));
    assert_eq!(
        state.value_of("old"),
        Some(json!("o")),
        "the other node took the name"
    );
    assert_eq!(
        state.items.keys().cloned().collect::<Vec<_>>(),
        [("new".to_string(), 0, 0), ("new".to_string(), 2, 1)],
        "items of every generation moved"
    );
    assert_eq!(
        state.calls.keys().cloned().collect::<Vec<_>>(),
        [key("new", 0, 0), key("new", 2, 3)]
    );
    assert_eq!(state.gates.keys().cloned().collect::<Vec<_>>(), ["new"]);
    assert_eq!(
        state.gates["new"].node, "new",
        "the gate row names its node"
    );
    assert!(!state.nodes.contains_key("\0staging"));
    assert_eq!(
        state.heals.keys().cloned().collect::<Vec<_>>(),
        [origin("new", 3)],
        "heals of the node's links moved with it"
    );
}

fn origin(node: &str, index: u32) -> RefOrigin {
    RefOrigin {
        node: node.into(),
        generation: 0,
        item: 0,
        index,
    }
}

fn heal(number: u32) -> HealRec {
    HealRec {
        number,
        from_uri: format!("mcp://crm/old/{number}"),
        to: ResourceRef {
            uri: format!("mcp://crm/new/{number}"),
            server: "crm".into(),
            kind: Some("k".into()),
            captures: Default::default(),
            name: String::new(),
            mime: None,
            size: None,
            producing_call: None,
            origin: None,
            produced_ms: 0,
            max_bytes: None,
            embedded: None,
        },
        replay_call: "consume:g0:i0:s0:c1048576".into(),
        by_node: "consume".into(),
        cause: "-32602: gone".into(),
        at_ms: 1,
    }
}

fn a_heal_is_kept_per_link_and_replaced_by_the_next(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let mut row = NodeRec::done(json!({ "ok": true }));
    row.manifest = vec![heal(0).to];
    rt.block_on(store.commit(
        &lease,
        vec![
            Write::Node("research".into(), row.clone()),
            Write::Heal(origin("research", 0), heal(1)),
            Write::Heal(origin("research", 1), heal(1)),
        ],
    ))
    .expect("commit");
    rt.block_on(store.commit(&lease, vec![Write::Heal(origin("research", 0), heal(2))]))
        .expect("commit");
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    assert_eq!(
        state.nodes["research"].manifest, row.manifest,
        "the manifest is kept with the row"
    );
    assert_eq!(state.heals.len(), 2);
    assert_eq!(
        state.heals[&origin("research", 0)],
        heal(2),
        "the latest heal of a link wins"
    );
    assert_eq!(state.heals[&origin("research", 1)], heal(1));
}

fn a_thread_record_write_keeps_the_fence_and_the_status_index(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let mut rec = rt
        .block_on(store.load(&lease.thread))
        .expect("load")
        .thread
        .expect("thread");
    let before = rec.updated_ms;
    std::thread::sleep(std::time::Duration::from_millis(3));
    rec.status = Status::Failed;
    rec.epoch = 40;
    rec.cancel_requested = true;
    rec.pipeline = "renamed".into();
    rt.block_on(store.commit(&lease, vec![Write::Thread(rec)]))
        .expect("commit");
    let rec = rt
        .block_on(store.load(&lease.thread))
        .expect("load")
        .thread
        .expect("thread");
    assert_eq!(rec.status, Status::Failed);
    assert_eq!(rec.pipeline, "renamed");
    assert_eq!(rec.epoch, 1, "a writer cannot move its own fence");
    assert!(!rec.cancel_requested);
    assert!(rec.updated_ms > before, "{} > {before}", rec.updated_ms);
    rt.block_on(store.commit(&lease, vec![node(1)]))
        .expect("still the holder");
    let failed = rt
        .block_on(store.list(ListQuery {
            status: Some(Status::Failed),
            ..Default::default()
        }))
        .expect("list");
    assert_eq!(failed.len(), 1);
    let running = rt
        .block_on(store.list(ListQuery {
            status: Some(Status::Running),
            ..Default::default()
        }))
        .expect("list");
    assert!(running.is_empty(), "the old status is gone from the index");
}

fn list_pages_newest_first_with_status_and_pipeline_filters(store: &dyn Store) {
    let rt = rt();
    let mut ids = Vec::new();
    let mut leases = Vec::new();
    for (i, (pipeline, status)) in [
        ("a", Status::Completed),
        ("b", Status::Paused),
        ("a", Status::Paused),
        ("b", Status::Running),
        ("a", Status::Failed),
    ]
    .into_iter()
    .enumerate()
    {
        let mut rec = thread_rec();
        rec.pipeline = pipeline.into();
        rec.created_ms = i as u64;
        let lease = rt
            .block_on(store.create_thread(rec, attempt()))
            .map(|(lease, _)| lease)
            .expect("create");
        if status != Status::Running {
            let w = with_status(store, &rt, &lease.thread, status);
            rt.block_on(store.commit(&lease, vec![w])).expect("status");
        }
        ids.push(lease.thread.clone());
        leases.push(lease);
    }
    let page = |q: ListQuery| -> Vec<String> {
        rt.block_on(store.list(q))
            .expect("list")
            .into_iter()
            .map(|s| s.id)
            .collect()
    };
    let newest: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(page(ListQuery::default()), newest);
    let first = page(ListQuery {
        limit: 2,
        ..Default::default()
    });
    assert_eq!(first, newest[..2]);
    let second = page(ListQuery {
        limit: 2,
        before: first.last().cloned(),
        ..Default::default()
    });
    assert_eq!(second, newest[2..4]);
    let third = page(ListQuery {
        limit: 2,
        before: second.last().cloned(),
        ..Default::default()
    });
    assert_eq!(third, newest[4..]);
    assert_eq!(
        page(ListQuery {
            status: Some(Status::Paused),
            ..Default::default()
        }),
        [ids[2].clone(), ids[1].clone()]
    );
    assert_eq!(
        page(ListQuery {
            status: Some(Status::Paused),
            before: Some(ids[2].clone()),
            ..Default::default()
        }),
        [ids[1].clone()]
    );
    assert_eq!(
        page(ListQuery {
            pipeline: Some("a".into()),
            ..Default::default()
        }),
        [ids[4].clone(), ids[2].clone(), ids[0].clone()]
    );
    assert_eq!(
        page(ListQuery {
            pipeline: Some("a".into()),
            status: Some(Status::Paused),
            ..Default::default()
        }),
        [ids[2].clone()]
    );
    assert!(
        page(ListQuery {
            pipeline: Some("c".into()),
            ..Default::default()
        })
        .is_empty()
    );
    let summaries = rt.block_on(store.list(ListQuery::default())).expect("list");
    let running = &summaries[1];
    assert_eq!(running.id, ids[3]);
    assert_eq!(running.status, Status::Running);
    assert!(!running.stale, "its lease is alive");
    assert_eq!(running.pipeline, "b");
    assert_eq!(running.created_ms, 3);
    drop(leases);
    let summaries = rt.block_on(store.list(ListQuery::default())).expect("list");
    assert!(summaries[1].stale, "running, and no one holds it");
    assert!(summaries.iter().filter(|s| s.stale).count() == 1);
    let err = rt
        .block_on(store.list(ListQuery {
            before: Some("not an id".into()),
            ..Default::default()
        }))
        .expect_err("a cursor is a thread id");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

fn prune_deletes_old_terminal_threads_only(store: &dyn Store) {
    let rt = rt();
    let mut by_status = Vec::new();
    for status in [
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
        Status::Paused,
        Status::Blocked,
        Status::Running,
    ] {
        let lease = rt
            .block_on(store.create_thread(thread_rec(), attempt()))
            .map(|(lease, _)| lease)
            .expect("create");
        let w = with_status(store, &rt, &lease.thread, status);
        rt.block_on(store.commit(
            &lease,
            vec![
                w,
                node(1),
                Write::Gate("g".into(), gate("g")),
                event("node_finished"),
            ],
        ))
        .expect("commit");
        by_status.push((status, lease.thread.clone()));
    }
    let later = ids::now_ms() + 60_000;
    let everything = Status::ALL.to_vec();
    assert_eq!(
        rt.block_on(store.prune(0, everything.clone())),
        Ok(0),
        "nothing is older than the epoch"
    );
    assert_eq!(rt.block_on(store.prune(later, vec![Status::Failed])), Ok(1));
    assert_eq!(rt.block_on(store.prune(later, everything)), Ok(2));
    for (status, thread) in &by_status {
        let loaded = rt.block_on(store.load(thread));
        if status.is_terminal() {
            assert!(
                matches!(loaded, Err(StoreError::NotFound { .. })),
                "{status:?} is pruned"
            );
            assert!(
                matches!(
                    rt.block_on(store.events(thread, 0)),
                    Err(StoreError::NotFound { .. })
                ),
                "with its events"
            );
        } else {
            let state = loaded.expect("kept");
            assert_eq!(state.thread.map(|t| t.status), Some(*status));
            assert!(state.gates.contains_key("g"));
        }
    }
    let left = rt.block_on(store.list(ListQuery::default())).expect("list");
    assert_eq!(left.len(), 3);
}

fn ids_may_be_shortened_to_a_unique_prefix(store: &dyn Store) {
    let rt = rt();
    let base = ids::new_ulid() & !0xFF;
    let a = ids::encode(base);
    let b = ids::encode(base + 1);
    let c = ids::encode(base + 0x100_0000);
    for id in [&a, &b, &c] {
        rt.block_on(store.create_thread(thread_with_id(id.clone()), attempt()))
            .map(|(lease, _)| lease)
            .expect("create");
    }
    let loaded = |q: &str| rt.block_on(store.load(q)).map(|s| s.thread.map(|t| t.id));
    assert_eq!(loaded(&a), Ok(Some(a.clone())));
    assert_eq!(loaded(&a.to_ascii_lowercase()), Ok(Some(a.clone())));
    assert_eq!(loaded(&format!("  {b} ")), Ok(Some(b.clone())));
    assert_eq!(loaded(&c[..22]), Ok(Some(c.clone())), "a unique prefix");
    match loaded(&a[..25]) {
        Err(StoreError::Ambiguous { prefix, matches }) => {
            assert_eq!(prefix, a[..25]);
            assert_eq!(matches, [a.clone(), b.clone()]);
        }
        other => panic!("{other:?}"),
    }
    for missing in [
        "",
        "nope!",
        "8ZZZZ",
        &"0".repeat(27),
        "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
    ] {
        assert!(
            matches!(loaded(missing), Err(StoreError::NotFound { .. })),
            "`{missing}`"
        );
    }
    // Every operation that names a thread takes a prefix.
    assert!(rt.block_on(store.events(&c[..22], 0)).is_ok());
    // An exact id that names no thread is an error, not an empty log; one past the end of
    // a thread's log is an empty log.
    let none = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ";
    assert!(matches!(
        rt.block_on(store.events(none, 0)),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        rt.block_on(store.cancel_requested(none)),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        rt.block_on(store.events(&c, u64::MAX)).ok(),
        Some(Vec::new())
    );
    assert_eq!(rt.block_on(store.cancel_requested(&c)).ok(), Some(false));
    assert!(matches!(
        rt.block_on(store.request_cancel(&a[..25]))
            .map(|(outcome, _)| outcome),
        Err(StoreError::Ambiguous { .. })
    ));
    assert!(matches!(
        rt.block_on(store.answer(&a[..25], vec![], "cli")),
        Err(StoreError::Ambiguous { .. })
    ));
}

fn a_claim_by_prefix_takes_the_thread_it_names(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let thread = lease.thread.clone();
    drop(lease);
    let (lease, state, _) = rt
        .block_on(store.claim(&thread[..20].to_ascii_lowercase(), attempt()))
        .expect("claim");
    assert_eq!(lease.thread, thread);
    assert_eq!(state.thread.map(|t| t.id), Some(thread.clone()));
    assert!(store.is_held(&thread));
    let err = rt
        .block_on(store.claim("7ZZZZZZZZZZZZZZZZZZZZZZZZZ", attempt()))
        .expect_err("none");
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
}

fn plans_are_stored_once_by_hash(store: &dyn Store) {
    let rt = rt();
    let plan = format!("{{\"nodes\":[],\"doc\":\"{}\"}}", "x".repeat(5_000));
    rt.block_on(store.put_plan("sha256:1", &plan)).expect("put");
    rt.block_on(store.put_plan("sha256:1", "{\"other\":true}"))
        .expect("put again");
    assert_eq!(rt.block_on(store.get_plan("sha256:1")), Ok(Some(plan)));
    assert_eq!(rt.block_on(store.get_plan("sha256:2")), Ok(None));
}

// ---------------------------------------------------------------- workers

fn queued_rec() -> ThreadRec {
    let mut rec = thread_rec();
    rec.status = Status::Queued;
    rec.epoch = 0;
    rec.attempts = 0;
    rec
}

fn runnable_now(store: &dyn Store, rt: &tokio::runtime::Runtime) -> Vec<(String, Why)> {
    rt.block_on(store.runnable(RunnableQuery {
        now_ms: ids::now_ms(),
        pipelines: None,
        limit: 0,
        except: Vec::new(),
    }))
    .expect("runnable")
    .into_iter()
    .map(|t| (t.id, t.why))
    .collect()
}

fn a_submitted_thread_is_queued_until_a_claim_and_orphaned_when_its_lease_drops(store: &dyn Store) {
    let rt = rt();
    let rec = queued_rec();
    let id = rec.id.clone();
    let events = rt.block_on(store.submit(rec)).expect("submit");
    assert_eq!(types_of(&values(events)), ["thread_queued"]);
    let st = rt.block_on(store.load(&id)).expect("load");
    let t = st.thread.expect("thread");
    assert_eq!(
        (t.status, t.epoch, t.holder.is_none()),
        (Status::Queued, 0, true)
    );
    assert!(!store.is_held(&id), "a submit takes no lease");
    assert_eq!(runnable_now(store, &rt), [(id.clone(), Why::Queued)]);
    // A second submit of the same id is refused.
    let mut again = queued_rec();
    again.id = id.clone();
    assert!(rt.block_on(store.submit(again)).is_err());
    let (lease, state, _) = rt.block_on(store.claim(&id, attempt())).expect("claim");
    assert_eq!(lease.epoch, 1);
    assert_eq!(state.thread.expect("thread").status, Status::Running);
    assert!(
        runnable_now(store, &rt).is_empty(),
        "a held thread is not offered"
    );
    drop(lease);
    assert!(released(store, &id));
    assert_eq!(runnable_now(store, &rt), [(id, Why::Orphaned)]);
}

fn paused_threads_are_runnable_once_a_gate_is_answered_or_due(store: &dyn Store) {
    let rt = rt();
    let (lease, _) = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    let id = lease.thread.clone();
    let paused = with_status(store, &rt, &id, Status::Paused);
    rt.block_on(store.commit(&lease, vec![paused, Write::Gate("g".into(), gate("g"))]))
        .expect("pause");
    drop(lease);
    assert!(runnable_now(store, &rt).is_empty(), "a pending gate waits");
    // A pipeline filter that leaves it out, then the answer.
    rt.block_on(store.answer(&id, vec![("g".into(), json!(true))], "cli"))
        .expect("answer");
    assert_eq!(runnable_now(store, &rt), [(id.clone(), Why::Answered)]);
    let other = rt
        .block_on(store.runnable(RunnableQuery {
            now_ms: ids::now_ms(),
            pipelines: Some(vec!["other".into()]),
            limit: 0,
            except: Vec::new(),
        }))
        .expect("runnable");
    assert!(other.is_empty(), "only the pipelines asked for");
    // Once the gate's node has consumed the answer, it is not offered again.
    let (lease, _, _) = rt.block_on(store.claim(&id, attempt())).expect("claim");
    let mut rec = rt
        .block_on(store.load(&id))
        .expect("load")
        .thread
        .expect("t");
    rec.status = Status::Paused;
    rec.due_ms = Some(ids::now_ms() + 3_600_000);
    rt.block_on(store.commit(
        &lease,
        vec![
            Write::Node("g".into(), NodeRec::done(json!(true))),
            Write::Thread(rec.clone()),
        ],
    ))
    .expect("consume");
    drop(lease);
    assert!(
        runnable_now(store, &rt).is_empty(),
        "consumed, and not yet due"
    );
    let (lease, _, _) = rt.block_on(store.claim(&id, attempt())).expect("claim");
    rec.due_ms = Some(1);
    rt.block_on(store.commit(&lease, vec![Write::Thread(rec)]))
        .expect("due");
    drop(lease);
    assert_eq!(runnable_now(store, &rt), [(id, Why::Due)]);
}

fn a_wait_for_work_ends_when_a_thread_is_queued(store: &dyn Store) {
    let rt = rt();
    assert!(runnable_now(store, &rt).is_empty());
    let start = std::time::Instant::now();
    rt.block_on(store.wait_for_work(std::time::Duration::from_millis(150)))
        .expect("wait");
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(140),
        "no news: the whole wait"
    );
    assert!(runnable_now(store, &rt).is_empty());
    // News after the look: the next wait ends at once.
    rt.block_on(store.submit(queued_rec())).expect("submit");
    let start = std::time::Instant::now();
    rt.block_on(store.wait_for_work(std::time::Duration::from_secs(20)))
        .expect("wait");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

/// A thread with a row of every kind, paused at an answered gate, in a memory store.
fn exported_thread(rt: &tokio::runtime::Runtime) -> Export {
    let source = MemoryStore::new();
    let (lease, _) = rt
        .block_on(source.create_thread(thread_rec(), attempt()))
        .expect("create");
    let id = lease.thread.clone();
    let key = CallKey {
        node: "fetch".into(),
        generation: 0,
        item: 1,
        seq: 2,
        call: 3,
    };
    let call = CallRec {
        kind: CallKind::Tool,
        target: "get_deal".into(),
        args: Some(json!({ "id": "D1" })),
        args_hash: "sha256:1".into(),
        idempotent: true,
        idem_key: "k".into(),
        state: CallState::Ok,
        result: Some(json!({ "ok": 1 })),
        error: None,
        attempt: 1,
        started_ms: 5,
        finished_ms: 6,
        decision: None,
        watched_by: None,
        task: None,
    };
    let mut fetch = NodeRec::done(json!({ "deal": "D1" }));
    fetch.fingerprint = format!("sha256:{}", "cd".repeat(32));
    fetch.manifest = vec![heal(1).to];
    fetch.started_ms = 3;
    fetch.finished_ms = 9;
    let mut each = NodeRec::done(json!(null));
    each.value = None;
    each.items = Some(2);
    let item = ItemRec {
        state: ItemState::Done,
        value: Some(json!("x")),
        error: None,
        manifest: vec![heal(2).to],
    };
    let mut upgraded = attempt();
    upgraded.number = 2;
    upgraded.plan_hash = "sha256:2".into();
    let mut rec = rt
        .block_on(source.load(&id))
        .expect("load")
        .thread
        .expect("thread");
    rec.status = Status::Paused;
    rec.plan_hash = "sha256:2".into();
    rec.due_ms = Some(ids::now_ms() + 3_600_000);
    rec.config.insert("REGION".into(), "eu".into());
    rec.pre_answers.insert("later".into(), json!(true));
    rt.block_on(source.commit(
        &lease,
        vec![
            Write::Node("fetch".into(), fetch),
            Write::Node("tags".into(), each),
            Write::Item("tags".into(), 0, 0, item.clone()),
            Write::Item("tags".into(), 0, 1, item),
            Write::Call(key, call),
            Write::Gate("review".into(), gate("review")),
            Write::Gate("later".into(), gate("later")),
            Write::Heal(origin("fetch", 0), heal(3)),
            Write::Attempt(upgraded),
            Write::Event(Event::PlanUpgraded {
                from: "sha256:0".into(),
                to: "sha256:2".into(),
            }),
            Write::Event(Event::ThreadPaused {
                gates: vec!["review".into(), "later".into()],
            }),
            Write::Thread(rec),
        ],
    ))
    .expect("commit");
    drop(lease);
    rt.block_on(source.answer(&id, vec![("review".into(), json!(true))], "cli"))
        .expect("answer");
    rt.block_on(export(&source, &id)).expect("export")
}

/// Two exports hold the same thread, row for row and event for event.
fn assert_same_thread(a: &Export, b: &Export) {
    assert_eq!(a.state.thread, b.state.thread, "the thread record");
    assert_eq!(a.state.nodes, b.state.nodes, "the node rows");
    assert_eq!(a.state.items, b.state.items, "the item rows");
    assert_eq!(a.state.calls, b.state.calls, "the journal");
    assert_eq!(a.state.gates, b.state.gates, "the gate rows");
    assert_eq!(a.state.attempts, b.state.attempts, "the attempts");
    assert_eq!(a.state.heals, b.state.heals, "the heals");
    assert_eq!(a.events, b.events, "the events, numbers and times");
}

fn an_imported_thread_is_the_exported_one_and_is_refused_a_second_time(store: &dyn Store) {
    let rt = rt();
    let exported = exported_thread(&rt);
    let id = exported.rec().expect("record").id.clone();
    assert_eq!(
        exported.plans().into_iter().collect::<Vec<_>>(),
        ["sha256:0", "sha256:2"],
        "the plan it runs, each attempt's and both sides of the upgrade"
    );
    assert_eq!(exported.events.len(), 4, "{:?}", exported.events);
    rt.block_on(store.import(exported.state.clone(), exported.events.clone()))
        .expect("import");
    let imported = rt.block_on(export(store, &id)).expect("export");
    assert_same_thread(&exported, &imported);
    // The status index, the queue and the event numbering are the target's own now.
    let listed = rt
        .block_on(store.list(ListQuery {
            status: Some(Status::Paused),
            limit: 10,
            ..Default::default()
        }))
        .expect("list");
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
    assert_eq!(listed[0].updated_ms, exported.rec().expect("r").updated_ms);
    assert_eq!(
        runnable_now(store, &rt),
        [(id.clone(), Why::Answered)],
        "an answered gate is runnable in the target"
    );
    assert!(!store.is_held(&id), "no process of the target holds it");
    // A second import is refused and changes nothing.
    let again = rt.block_on(store.import(exported.state.clone(), Vec::new()));
    assert!(
        matches!(&again, Err(StoreError::Exists { thread, .. }) if *thread == id),
        "{again:?}"
    );
    let after = rt.block_on(export(store, &id)).expect("export");
    assert_same_thread(&exported, &after);
    // A claim goes on from the imported epoch and event number.
    let (lease, state, events) = rt.block_on(store.claim(&id, attempt())).expect("claim");
    let old = exported.rec().expect("r");
    assert_eq!(lease.epoch, old.epoch + 1);
    assert_eq!(state.thread.expect("t").attempts, old.attempts + 1);
    let last = exported.events.last().expect("events").seq;
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [last + 1]);
    // And back into a memory store: the same thread again.
    drop(lease);
    let back = MemoryStore::new();
    rt.block_on(back.import(after.state.clone(), after.events.clone()))
        .expect("import back");
    assert_same_thread(&after, &rt.block_on(export(&back, &id)).expect("export"));
    // An export whose events are not the thread's, or out of order, is refused whole.
    let mut foreign = exported.events.clone();
    foreign[0].thread = ids::new_thread_id();
    let fresh = MemoryStore::new();
    assert!(matches!(
        rt.block_on(fresh.import(exported.state.clone(), foreign)),
        Err(StoreError::Corrupt { .. })
    ));
    let mut reversed = exported.events.clone();
    reversed.reverse();
    assert!(matches!(
        rt.block_on(fresh.import(exported.state.clone(), reversed)),
        Err(StoreError::Corrupt { .. })
    ));
    assert!(matches!(
        rt.block_on(fresh.load(&id)),
        Err(StoreError::NotFound { .. })
    ));
}

fn an_imported_thread_whose_gate_deadline_passed_is_due(store: &dyn Store) {
    let rt = rt();
    let mut exported = exported_thread(&rt);
    // As the source would have it had the answer not come and the deadline passed.
    let rec = exported.state.thread.as_mut().expect("record");
    rec.due_ms = Some(1);
    let id = rec.id.clone();
    let review = exported.state.gates.get_mut("review").expect("gate");
    *review = gate("review");
    review.deadline_ms = Some(1);
    exported.events.pop();
    let next = exported.events.len() as u64;
    exported.state.thread.as_mut().expect("record").next_seq = next;
    rt.block_on(store.import(exported.state.clone(), exported.events.clone()))
        .expect("import");
    assert_eq!(runnable_now(store, &rt), [(id.clone(), Why::Due)]);
    assert_same_thread(&exported, &rt.block_on(export(store, &id)).expect("export"));
}

fn an_imported_queued_thread_is_offered_to_workers(store: &dyn Store) {
    let rt = rt();
    let source = MemoryStore::new();
    let rec = queued_rec();
    let id = rec.id.clone();
    rt.block_on(source.submit(rec)).expect("submit");
    let exported = rt.block_on(export(&source, &id)).expect("export");
    assert!(runnable_now(store, &rt).is_empty());
    rt.block_on(store.import(exported.state.clone(), exported.events.clone()))
        .expect("import");
    // A worker waiting since its last look hears of it at once.
    let start = std::time::Instant::now();
    rt.block_on(store.wait_for_work(std::time::Duration::from_secs(20)))
        .expect("wait");
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(runnable_now(store, &rt), [(id.clone(), Why::Queued)]);
    assert_same_thread(&exported, &rt.block_on(export(store, &id)).expect("export"));
}

/// A claim of a thread that completed or was cancelled (by another process since it
/// was looked at, say) is refused and changes nothing: the thread stays as it ended.
fn an_ended_thread_is_not_claimed(store: &dyn Store) {
    let rt = rt();
    for status in [Status::Completed, Status::Cancelled] {
        let lease = rt
            .block_on(store.create_thread(thread_rec(), attempt()))
            .map(|(lease, _)| lease)
            .expect("create");
        let id = lease.thread.clone();
        let ended = with_status(store, &rt, &id, status);
        rt.block_on(store.commit(&lease, vec![ended]))
            .expect("ended");
        drop(lease);
        let before = rt.block_on(store.load(&id)).expect("load");
        let events = rt.block_on(store.events(&id, 0)).expect("events").len();
        let err = rt
            .block_on(store.claim(&id, attempt()))
            .map(|_| ())
            .expect_err("refused");
        assert!(
            matches!(&err, StoreError::Ended { status: s, .. } if *s == status),
            "{err:?}"
        );
        let after = rt.block_on(store.load(&id)).expect("load");
        assert_eq!(
            after.thread, before.thread,
            "{status:?}: the record is unchanged"
        );
        assert_eq!(after.attempts.len(), before.attempts.len());
        assert_eq!(
            rt.block_on(store.events(&id, 0)).expect("events").len(),
            events,
            "no event written"
        );
    }
}

/// A thread's record alone is the one a whole load gives, by id or unique prefix; an
/// unknown id is `None`.
fn a_threads_record_alone_is_the_loaded_one(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    rt.block_on(store.commit(&lease, vec![node(1)]))
        .expect("commit");
    let id = lease.thread.clone();
    let loaded = rt.block_on(store.load(&id)).expect("load").thread;
    assert!(loaded.is_some());
    assert_eq!(rt.block_on(store.thread_rec(&id)).expect("rec"), loaded);
    assert_eq!(
        rt.block_on(store.thread_rec(&id[..20])).expect("prefix"),
        loaded
    );
    let unknown = ids::new_thread_id();
    assert_eq!(
        rt.block_on(store.thread_rec(&unknown)).expect("unknown"),
        None
    );
}

/// Commits of one thread handed over at once (as concurrent nodes of an attempt do)
/// are applied in the order given: their events numbered on without gaps, the record
/// and the node row the last one wrote kept.
fn commits_of_one_thread_at_once_apply_in_order(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let base = rt
        .block_on(store.load(&lease.thread))
        .expect("load")
        .thread
        .expect("thread");
    let commits: Vec<Vec<Write>> = (0..4)
        .map(|k| {
            let mut rec = base.clone();
            rec.outputs = Some(json!(k));
            let mut writes = vec![Write::Thread(rec), node(k)];
            // The last commit rewrites the record and writes no event.
            if k < 3 {
                writes.push(event("node_started"));
                writes.push(event("node_finished"));
            }
            writes
        })
        .collect();
    let results = rt.block_on(futures::future::join_all(
        commits.into_iter().map(|w| store.commit(&lease, w)),
    ));
    let seqs: Vec<Vec<u64>> = results
        .into_iter()
        .map(|r| seqs_of(&values(r.expect("commit"))))
        .collect();
    assert_eq!(seqs, [vec![1, 2], vec![3, 4], vec![5, 6], vec![]]);
    let st = rt.block_on(store.load(&lease.thread)).expect("load");
    let rec = st.thread.expect("thread");
    assert_eq!(
        rec.outputs,
        Some(json!(3)),
        "the last record written is kept"
    );
    assert_eq!(st.nodes["n"], NodeRec::done(json!(3)));
    let all = rt
        .block_on(store.events(&lease.thread, 0))
        .map(values)
        .expect("events");
    assert_eq!(seqs_of(&all), (0..7).collect::<Vec<u64>>());
}

fn an_attempts_last_commit_writes_its_rows_and_the_thread_is_free_after_it(store: &dyn Store) {
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(lease, _)| lease)
        .expect("create");
    let thread = lease.thread.clone();
    // A stale holder's last commit is fenced like any other, and frees nothing.
    let mut newer = attempt();
    newer.run_id = "r2".into();
    drop(lease);
    let (lease, _, _) = rt
        .block_on(store.claim(&thread, newer))
        .expect("claimed again");
    let mut old = stale(&lease);
    old.epoch -= 1;
    let err = rt
        .block_on(store.commit_last(&old, vec![node(9)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    assert!(store.is_held(&thread), "the live holder keeps the thread");
    // The holder's last commit: its rows and events, as a commit writes them.
    let paused = with_status(store, &rt, &thread, Status::Paused);
    let events = rt
        .block_on(store.commit_last(&lease, vec![node(1), paused, event("thread_paused")]))
        .map(values)
        .expect("last commit");
    assert_eq!(types_of(&events), ["thread_paused"]);
    drop(lease);
    assert!(released(store, &thread));
    let state = rt.block_on(store.load(&thread)).expect("load");
    assert_eq!(
        state.thread.as_ref().map(|t| t.status),
        Some(Status::Paused)
    );
    assert_eq!(state.nodes["n"].value, Some(json!(1)));
    let (again, _, _) = rt
        .block_on(store.claim(&thread, attempt()))
        .expect("free after the last commit");
    assert_eq!(again.epoch, 3);
}

/// Whether the thread is free soon after its lease dropped. A file lock (the redb store's)
/// is held by every copy of its descriptor: a command another thread of the process is
/// starting at that moment holds a copy from its fork until its exec (the descriptor is
/// close-on-exec), so the release may take that long to be seen.
fn released(store: &dyn Store, thread: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while store.is_held(thread) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        /// Every case of the contract, by name: what the runtime relies on of a store.
        pub static CASES: &[(&str, fn(&dyn Store))] = &[$((stringify!($case), $case)),*];

        #[cfg(test)]
        mod redb {
            $(
                #[test]
                fn $case() {
                    let (store, _dir) = super::redb_store(stringify!($case));
                    super::$case(&store);
                }
            )*
        }
        #[cfg(test)]
        mod memory {
            $(
                #[test]
                fn $case() {
                    super::$case(&crate::MemoryStore::new());
                }
            )*
        }
        #[cfg(all(test, feature = "postgres"))]
        mod postgres {
            use crate::postgres::testing;
            $(
                #[test]
                fn $case() {
                    let Some(server) = testing::server(stringify!($case)) else {
                        return;
                    };
                    let schema = testing::TestSchema::new(&server, stringify!($case));
                    super::$case(&schema.store());
                }
            )*
        }
    };
}

/// Runs every case of the contract against a store of another implementation, one fresh
/// store per case (`make` is given the case's name), and panics at the first case it
/// fails, naming it. A `Store` that passes behaves as the runtime expects of one.
///
/// ```no_run
/// pipec_store::contract::check(|_case| Box::new(pipec_store::MemoryStore::new()));
/// ```
pub fn check(make: impl Fn(&str) -> Box<dyn Store>) {
    for (name, case) in CASES {
        let store = make(name);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case(&*store)));
        if let Err(panic) = outcome {
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            panic!("the store fails the contract case {name}: {why}");
        }
    }
}

contract!(
    a_writer_whose_epoch_moved_on_writes_nothing,
    a_held_thread_is_not_claimed_twice_and_is_free_once_its_lease_drops,
    after_a_cancel_request_only_the_cancellation_is_written,
    a_thread_no_process_holds_is_cancelled_at_once,
    answers_are_compare_and_set_and_all_or_none,
    answers_and_a_claim_are_one_transaction,
    an_answer_to_a_paused_thread_without_gate_rows_is_refused_as_damage,
    events_are_numbered_from_zero_without_gaps_across_commits_and_claims,
    load_returns_every_row_a_commit_wrote,
    a_thread_record_write_keeps_the_fence_and_the_status_index,
    list_pages_newest_first_with_status_and_pipeline_filters,
    prune_deletes_old_terminal_threads_only,
    ids_may_be_shortened_to_a_unique_prefix,
    a_claim_by_prefix_takes_the_thread_it_names,
    plans_are_stored_once_by_hash,
    a_rename_moves_every_row_of_a_node_and_a_gate_row_can_be_removed,
    a_heal_is_kept_per_link_and_replaced_by_the_next,
    a_submitted_thread_is_queued_until_a_claim_and_orphaned_when_its_lease_drops,
    paused_threads_are_runnable_once_a_gate_is_answered_or_due,
    a_wait_for_work_ends_when_a_thread_is_queued,
    an_imported_thread_is_the_exported_one_and_is_refused_a_second_time,
    an_imported_queued_thread_is_offered_to_workers,
    an_imported_thread_whose_gate_deadline_passed_is_due,
    an_ended_thread_is_not_claimed,
    a_threads_record_alone_is_the_loaded_one,
    commits_of_one_thread_at_once_apply_in_order,
    an_attempts_last_commit_writes_its_rows_and_the_thread_is_free_after_it,
);
