//! A resume looks at a thread, then claims it. Between the two, another process may
//! take the thread, start an effect and die (a worker killed while it ran the effect).
//! The resume must then decide on what that attempt left — an effect that started and
//! did not finish blocks the thread — and not on what it saw before the claim: run
//! again, the effect would happen twice with nobody having asked for a retry.
//!
//! The interleaving is made exact with a store that, at the first claim, first lets an
//! "interloper" attempt claim the thread, record the effect's `started` row and vanish,
//! as a killed process does.

#![cfg(unix)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common;

use common::hooked::{Hooked, Hooks};
use pipec::runtime::{Outcome, Runner};
use pipec::store::*;
use serde_json::{Value, json};

const PIPE: &str = r#"type Approval {
  approved: bool
}

type Done {
  n: int
}

input n: int

gate review(n: int = input.n) -> Approval {
  message = "go?"
}

node apply(ack: Approval = review, n: int = input.n) -> Done {
  exec = ["./effect.sh"]
}

output done = apply
"#;

const EFFECT: &str = "#!/bin/sh\ncat >/dev/null\necho ran >> effects.log\necho '{\"n\": 1}'\n";

/// Runs `interlude` on the inner store just before the first claim.
struct Interleaved {
    fired: AtomicBool,
}

type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

impl Interleaved {
    /// What a worker that took the thread and was killed mid-effect leaves: an attempt
    /// that claimed it, the node running, the call's `started` row; then its lease gone.
    fn interlude<'a>(inner: &'a dyn Store, thread: &'a str) -> Fut<'a, ()> {
        Box::pin(async move {
            let attempt = AttemptRec {
                number: 0,
                run_id: "interloper".into(),
                pid: std::process::id(),
                host: "elsewhere".into(),
                started_ms: ids::now_ms(),
                ended_ms: 0,
                end: None,
                plan_hash: String::new(),
                pipec: String::new(),
            };
            let (lease, state, _) = inner.claim(thread, attempt).await?;
            let plan_node = state.nodes.get("review").map(|n| n.fingerprint.clone());
            let node = NodeRec {
                state: NodeState::Running,
                started_ms: ids::now_ms(),
                value: None,
                fingerprint: plan_node.unwrap_or_default(),
                ..NodeRec::done(Value::Null)
            };
            let call = CallRec {
                kind: CallKind::Exec,
                target: "./effect.sh".into(),
                args: None,
                args_hash: String::new(),
                idempotent: false,
                idem_key: "k".into(),
                state: CallState::Started,
                result: None,
                error: None,
                attempt: lease.attempt,
                started_ms: ids::now_ms(),
                finished_ms: 0,
                decision: None,
                watched_by: None,
                task: None,
            };
            let key = CallKey {
                node: "apply".into(),
                generation: 0,
                item: 0,
                seq: 0,
                call: 0,
            };
            inner
                .commit(
                    &lease,
                    vec![Write::Node("apply".into(), node), Write::Call(key, call)],
                )
                .await?;
            drop(lease);
            Ok(())
        })
    }
}

impl Hooks for Interleaved {
    fn claim<'a>(
        &'a self,
        inner: &'a dyn Store,
        thread: &str,
        attempt: AttemptRec,
    ) -> StoreFuture<'a, Claimed> {
        let thread = thread.to_string();
        Box::pin(async move {
            if !self.fired.swap(true, Ordering::SeqCst) {
                Interleaved::interlude(inner, &thread).await?;
            }
            inner.claim(&thread, attempt).await
        })
    }
}

fn project(tag: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("pipec-claim-race-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let script = dir.join("effect.sh");
    std::fs::write(&script, EFFECT).expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn an_effect_started_by_an_attempt_between_a_resumes_look_and_its_claim_blocks_the_thread() {
    let dir = project("effect");
    let inner: Arc<dyn Store> = Arc::new(RedbStore::open(dir.join("runs.redb")).expect("store"));
    let plan = || pipec::compile_str("race.pipe", PIPE).expect("compiles");
    rt().block_on(async {
        let first = Runner::with_store(plan(), inner.clone()).project_root(&dir);
        let thread = match first.start(json!({"n": 1})).await.expect("starts") {
            Outcome::Paused { thread, .. } => thread,
            other => panic!("paused at the gate: {other:?}"),
        };
        first
            .answer(&thread, vec![("review".into(), json!({"approved": true}))])
            .await
            .expect("answered");
        let store = Arc::new(Hooked {
            inner: inner.clone(),
            hooks: Interleaved {
                fired: AtomicBool::new(false),
            },
        });
        let resumed = Runner::with_store(plan(), store.clone()).project_root(&dir);
        let outcome = resumed.resume(&thread, Vec::new()).await.expect("resumes");
        assert!(
            store.hooks.fired.load(Ordering::SeqCst),
            "the interloper ran"
        );
        assert!(
            matches!(outcome, Outcome::Blocked { .. }),
            "the effect the interloper started blocks the thread: {outcome:?}"
        );
        assert!(
            !dir.join("effects.log").exists(),
            "the effect was not run a second time"
        );
        let state = inner.load(&thread).await.expect("loads");
        let t = state.thread.expect("thread");
        assert_eq!(t.status, Status::Blocked);
        assert!(t.holder.is_none(), "no holder is left");
        let calls: Vec<_> = state.calls.values().collect();
        assert_eq!(calls.len(), 1, "one call row: {calls:?}");
        assert_eq!(calls[0].state, CallState::Started);
        // A person's word settles it: the effect happened, with this result.
        let again = Runner::with_store(plan(), inner.clone()).project_root(&dir);
        let opts = pipec::runtime::RunOptions {
            decisions: vec![(
                "all".into(),
                pipec::runtime::Decision::Performed(json!({"n": 1})),
            )],
            ..Default::default()
        };
        let outcome = again
            .resume_with(&thread, Vec::new(), opts)
            .await
            .expect("resolved");
        match outcome {
            Outcome::Completed { outputs, .. } => assert_eq!(outputs.to_value()["done"]["n"], 1),
            other => panic!("completed: {other:?}"),
        }
        assert!(
            !dir.join("effects.log").exists(),
            "the effect never ran in this process"
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}
