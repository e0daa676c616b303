//! The embedding API: host functions (typed and checked), models, `each`, joins,
//! skips, retries and timeouts, on a real store file.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pipec::llm::{Model, ModelFuture, ModelReply, ModelRequest, Usage};
use pipec::runtime::{Outcome, Runner};
use pipec::store::{RedbStore, Store};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn new_store(tag: &str) -> (RedbStore, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("pipec-embed-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("runs.redb");
    (RedbStore::open(&path).expect("store"), dir)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

const FANOUT: &str = r##"
input words: string[]
input prefix: string = "#"

type Tagged {
  word: string
  tag: string
}

node tag(word: string = each(input.words, max: 10), prefix: string = input.prefix) -> Tagged {
  host = "tag"
  retries = 2
  backoff = 10ms
  concurrency = 2
  on_item_error = "drop"
}

node longest(items: Tagged[] = tag) -> string[] {
  when = len(items) > 0
  return = items[*].tag
}

node count(items: Tagged[] = tag, best: json? = longest) -> { n: int, any: bool } {
  return = { n: len(items), any: best != null }
}

output count = count
output tags = tag[*].tag
"##;

#[derive(Deserialize, JsonSchema)]
struct TagIn {
    word: String,
    prefix: String,
}

#[derive(Serialize, JsonSchema)]
struct TagOut {
    word: String,
    tag: String,
}

#[test]
fn host_functions_over_each_items_with_retries_and_dropped_items() {
    let (store, dir) = new_store("fanout");
    let plan = pipec::compile_str("fanout.pipe", FANOUT).expect("compiles");
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let runner = Runner::new(plan, store)
        .host_fn("tag", move |i: TagIn| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                match i.word.as_str() {
                    // Always fails: dropped.
                    "bad" => Err("no tag for bad words".to_string()),
                    // Fails once, then succeeds on a retry.
                    "flaky" if n < 3 => Err("try again".to_string()),
                    w => Ok(TagOut {
                        word: w.to_string(),
                        tag: format!("{}{w}", i.prefix),
                    }),
                }
            }
        })
        .expect("types fit");
    let out = rt()
        .block_on(runner.start(json!({ "words": ["alpha", "bad", "flaky", "beta"] })))
        .expect("runs");
    let Outcome::Completed { outputs, thread } = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        outputs.to_value()["tags"],
        json!(["#alpha", "#flaky", "#beta"]),
        "source order, bad dropped"
    );
    assert_eq!(outputs.to_value()["count"], json!({ "n": 3, "any": true }));
    // Item rows were stored one by one.
    let state = rt()
        .block_on(
            pipec::store::RedbStore::open(dir.join("runs.redb"))
                .expect("reopen")
                .load(&thread),
        )
        .expect("load");
    assert_eq!(state.items.len(), 4);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_empty_list_is_an_empty_result_not_a_skip() {
    let (store, dir) = new_store("empty");
    let plan = pipec::compile_str("fanout.pipe", FANOUT).expect("compiles");
    let runner = Runner::new(plan, store)
        .host_fn("tag", |i: TagIn| async move {
            Ok(TagOut {
                word: i.word.clone(),
                tag: i.word,
            })
        })
        .expect("fits");
    let out = rt()
        .block_on(runner.start(json!({ "words": [] })))
        .expect("runs");
    let Outcome::Completed { outputs, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(outputs.to_value()["tags"], json!([]));
    assert_eq!(
        outputs.to_value()["count"],
        json!({ "n": 0, "any": false }),
        "`longest` was skipped by its when"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_longer_list_than_max_fails_the_node() {
    let (store, dir) = new_store("max");
    let plan = pipec::compile_str("fanout.pipe", FANOUT).expect("compiles");
    let runner = Runner::new(plan, store)
        .host_fn("tag", |i: TagIn| async move {
            Ok(TagOut {
                word: i.word.clone(),
                tag: i.word,
            })
        })
        .expect("fits");
    let words: Vec<String> = (0..11).map(|i| format!("w{i}")).collect();
    let out = rt()
        .block_on(runner.start(json!({ "words": words })))
        .expect("runs");
    let Outcome::Failed { error, .. } = out else {
        panic!("{out:?}")
    };
    assert!(
        error.message.contains("more than its `max` of 10"),
        "{}",
        error.message
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn host_function_types_are_checked_when_registered() {
    #[derive(Serialize, JsonSchema)]
    struct Wrong {
        word: String,
    }
    let plan = pipec::compile_str("fanout.pipe", FANOUT).expect("compiles");
    let (store, dir) = new_store("types");
    let err = Runner::new(plan.clone(), store)
        .host_fn("tag", |i: TagIn| async move { Ok(Wrong { word: i.word }) })
        .err()
        .expect("refused");
    assert_eq!(err.code, "R0411");
    assert!(err.message.contains("`tag`"), "{}", err.message);
    #[derive(Deserialize, JsonSchema)]
    struct WrongIn {
        #[allow(dead_code)]
        color: String,
    }
    let (store2, dir2) = new_store("types2");
    let err = Runner::new(plan.clone(), store2)
        .host_fn("tag", |_: WrongIn| async move {
            Ok(TagOut {
                word: String::new(),
                tag: String::new(),
            })
        })
        .err()
        .expect("refused");
    assert!(err.message.contains("color"), "{}", err.message);
    // Not registered at all: refused at start, before anything is stored.
    let (store3, dir3) = new_store("types3");
    let runner = Runner::new(plan, store3);
    let err = rt()
        .block_on(runner.start(json!({ "words": ["a"] })))
        .expect_err("refused");
    assert_eq!(err.code, "R0411");
    for d in [dir, dir2, dir3] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Answers with the node's name and turn, counting calls.
struct Echo(Arc<AtomicU32>);

impl Model for Echo {
    fn complete<'a>(&'a self, request: &'a ModelRequest) -> ModelFuture<'a> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let content = if request.schema.is_some() {
                json!({ "label": format!("{}#{}", request.node, request.turn) }).to_string()
            } else {
                format!("plain from {}", request.node)
            };
            Ok(ModelReply {
                content,
                tool_calls: vec![],
                usage: Usage::default(),
                model: "echo".into(),
            })
        })
    }
}

const JOINS: &str = r#"
model m {
  provider = "openai"
  name = "x"
}

input fast: bool

type Label {
  label: string
}

think quick(fast: bool = input.fast) -> Label {
  when = fast
  model = m
  prompt = "Label this quickly."
}

think careful(fast: bool = input.fast) -> Label {
  when = !fast
  model = m
  prompt = "Label this carefully."
}

node pick(label: Label = quick ?? careful) -> string {
  return = label.label
}

output label: string? = pick
"#;

#[test]
fn joins_take_the_branch_that_ran() {
    for (fast, expected) in [(true, "quick#0"), (false, "careful#0")] {
        let (store, dir) = new_store(&format!("join{fast}"));
        let calls = Arc::new(AtomicU32::new(0));
        let plan = pipec::compile_str("joins.pipe", JOINS).expect("compiles");
        let runner = Runner::new(plan, store).model("m", Echo(calls.clone()));
        let out = rt()
            .block_on(runner.start(json!({ "fast": fast })))
            .expect("runs");
        let Outcome::Completed { outputs, .. } = out else {
            panic!("{out:?}")
        };
        assert_eq!(outputs.to_value()["label"], Value::String(expected.into()));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "only one branch called the model"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn a_slow_host_function_times_out() {
    let src = "input x: int\n\nnode slow(x: int = input.x) -> int {\n  host = \"slow\"\n  timeout = 50ms\n}\n\noutput y = slow\n";
    let plan = pipec::compile_str("slow.pipe", src).expect("compiles");
    let (store, dir) = new_store("timeout");
    let runner = Runner::new(plan, store).host_fn_json("slow", |_| async {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        Ok(json!(1))
    });
    let started = std::time::Instant::now();
    let out = rt()
        .block_on(runner.start(json!({ "x": 1 })))
        .expect("runs");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    let Outcome::Failed { error, .. } = out else {
        panic!("{out:?}")
    };
    assert!(error.message.contains("timeout"), "{}", error.message);
    let _ = std::fs::remove_dir_all(dir);
}

const RERUN: &str = r##"
input words: string[]

type Tagged {
  word: string
  tag: string
}

node tag(word: string = each(input.words), prefix: string = "#") -> Tagged {
  host = "tag"
  on_item_error = "drop"
}

node publish(items: Tagged[] = tag) -> int {
  host = "publish"
}

output published = publish
"##;

#[derive(Deserialize, JsonSchema)]
struct PublishIn {
    items: Vec<serde_json::Value>,
}

#[test]
fn a_rerun_stores_a_new_generation_of_items_and_a_completed_thread_stays_final() {
    let (store, dir) = new_store("rerun");
    let plan = pipec::compile_str("rerun.pipe", RERUN).expect("compiles");
    let publishes = Arc::new(AtomicU32::new(0));
    let seen = publishes.clone();
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let got = received.clone();
    let runner = Runner::new(plan, store.clone())
        .host_fn("tag", |i: TagIn| async move {
            if i.word == "bad" {
                Err("no tag for bad words".to_string())
            } else {
                Ok(TagOut {
                    tag: format!("{}{}", i.prefix, i.word),
                    word: i.word,
                })
            }
        })
        .expect("fits")
        .host_fn("publish", move |i: PublishIn| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            got.lock().expect("lock").push(i.items.len());
            async move {
                if n < 2 {
                    Err("the publisher is down".to_string())
                } else {
                    Ok(i.items.len() as i64)
                }
            }
        })
        .expect("fits");
    let rt = rt();
    let out = rt
        .block_on(runner.start(json!({ "words": ["alpha", "bad", "beta"] })))
        .expect("runs");
    let Outcome::Failed { thread, .. } = out else {
        panic!("{out:?}")
    };
    // A plain resume: `tag` is not run again; its list comes back from its item rows.
    let out = rt
        .block_on(runner.resume(&thread, Vec::new()))
        .expect("resumes");
    assert!(matches!(out, Outcome::Failed { .. }), "{out:?}");
    let row = &rt.block_on(store.load(&thread)).expect("load").nodes["tag"];
    assert!(
        row.value.is_none(),
        "an each node's list is not stored twice"
    );
    let out = rt
        .block_on(runner.resume_with(
            &thread,
            Vec::new(),
            pipec::runtime::RunOptions {
                rerun_from: vec!["tag".into()],
                ..Default::default()
            },
        ))
        .expect("reruns");
    let Outcome::Completed { outputs, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(outputs.to_value()["published"], json!(2));
    let state = rt.block_on(store.load(&thread)).expect("load");
    let generation = state.nodes["tag"].generation;
    assert!(generation > 0, "a rerun starts a new generation");
    let current: Vec<_> = state
        .items
        .iter()
        .filter(|((n, g, _), _)| n == "tag" && *g == generation)
        .map(|((_, _, i), r)| (*i, r.state))
        .collect();
    assert_eq!(
        current,
        vec![
            (0, pipec::store::ItemState::Done),
            (1, pipec::store::ItemState::Dropped),
            (2, pipec::store::ItemState::Done)
        ]
    );

    // A completed thread is final: a rerun is refused and changes nothing.
    let before = rt.block_on(store.events(&thread, 0)).expect("events").len();
    let err = rt
        .block_on(runner.resume_with(
            &thread,
            Vec::new(),
            pipec::runtime::RunOptions {
                rerun_from: vec!["tag".into()],
                ..Default::default()
            },
        ))
        .expect_err("refused");
    assert_eq!(err.code, "R0412", "{err}");
    let after = rt.block_on(store.events(&thread, 0)).expect("events").len();
    assert_eq!(before, after);
    // Resuming it with nothing to change gives its outputs again.
    let again = rt.block_on(runner.resume(&thread, Vec::new())).expect("ok");
    assert!(
        matches!(&again, Outcome::Completed { outputs, .. } if outputs.to_value()["published"] == json!(2)),
        "{again:?}"
    );
    assert_eq!(publishes.load(Ordering::SeqCst), 3);
    assert_eq!(*received.lock().expect("lock"), vec![2, 2, 2]);
    let _ = std::fs::remove_dir_all(dir);
}

/// A host function that panics fails its node, whether the node runs alone (in the
/// scheduler's own task) or beside another (in a task of its own); the process goes on,
/// the failure is stored, and the sibling's result is kept.
#[test]
fn a_panicking_host_function_fails_its_node_not_the_process() {
    const ALONE: &str = r#"
input x: int

node boom(x: int = input.x) -> int {
  host = "boom"
}

output y = boom
"#;
    const BESIDE: &str = r#"
input x: int

node boom(x: int = input.x) -> int {
  host = "boom"
}

node calm(x: int = input.x) -> int {
  host = "calm"
}

output y = boom
output z = calm
"#;
    let rt = rt();
    for (tag, source) in [("alone", ALONE), ("beside", BESIDE)] {
        let (store, dir) = new_store(&format!("panic-{tag}"));
        let plan = pipec::compile_str("panic.pipe", source).expect("compiles");
        let runner = Runner::new(plan, store.clone())
            .host_fn_json("boom", |_v: Value| async move {
                if std::hint::black_box(true) {
                    panic!("the host function broke");
                }
                Ok(json!(0))
            })
            .host_fn_json("calm", |v: Value| async move { Ok(v["x"].clone()) });
        let out = rt.block_on(runner.start(json!({ "x": 7 }))).expect("runs");
        let Outcome::Failed { thread, error } = out else {
            panic!("{tag}: {out:?}")
        };
        assert!(
            error.message.contains("panicked") && error.message.contains("the host function broke"),
            "{tag}: {}",
            error.message
        );
        let state = rt.block_on(store.load(&thread)).expect("load");
        let status = state.thread.as_ref().map(|t| t.status);
        assert_eq!(status, Some(pipec::store::Status::Failed), "{tag}");
        if tag == "beside" {
            assert_eq!(
                state.nodes.get("calm").and_then(|n| n.value.clone()),
                Some(json!(7)),
                "{tag}: the sibling's result is kept"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

// ------------------------------------------------------------ the store contract

mod store_contract {
    use pipec::store::contract;
    use pipec::store::*;

    /// A store of another crate: every operation handed to a memory store, except that
    /// `prune` may be made to forget its work, as a faulty implementation would.
    struct Wrapped {
        inner: MemoryStore,
        prune_deletes: bool,
    }

    impl Store for Wrapped {
        fn location(&self) -> String {
            format!("wrapped {}", self.inner.location())
        }
        fn put_plan(&self, hash: &str, plan_json: &str) -> StoreFuture<'_, ()> {
            self.inner.put_plan(hash, plan_json)
        }
        fn get_plan(&self, hash: &str) -> StoreFuture<'_, Option<String>> {
            self.inner.get_plan(hash)
        }
        fn create_thread(
            &self,
            rec: ThreadRec,
            attempt: AttemptRec,
        ) -> StoreFuture<'_, (Lease, Vec<RecordedEvent>)> {
            self.inner.create_thread(rec, attempt)
        }
        fn claim(&self, thread: &str, attempt: AttemptRec) -> StoreFuture<'_, Claimed> {
            self.inner.claim(thread, attempt)
        }
        fn claim_answering(
            &self,
            thread: &str,
            attempt: AttemptRec,
            answers: Vec<(String, serde_json::Value)>,
            by: &str,
        ) -> StoreFuture<'_, Claimed> {
            self.inner.claim_answering(thread, attempt, answers, by)
        }
        fn commit<'a>(
            &'a self,
            lease: &'a Lease,
            writes: Vec<Write>,
        ) -> StoreFuture<'a, Vec<RecordedEvent>> {
            self.inner.commit(lease, writes)
        }
        fn commit_last<'a>(
            &'a self,
            lease: &'a Lease,
            writes: Vec<Write>,
        ) -> StoreFuture<'a, Vec<RecordedEvent>> {
            self.inner.commit_last(lease, writes)
        }
        fn answer(
            &self,
            thread: &str,
            answers: Vec<(String, serde_json::Value)>,
            by: &str,
        ) -> StoreFuture<'_, Vec<RecordedEvent>> {
            self.inner.answer(thread, answers, by)
        }
        fn request_cancel(
            &self,
            thread: &str,
        ) -> StoreFuture<'_, (CancelOutcome, Vec<RecordedEvent>)> {
            self.inner.request_cancel(thread)
        }
        fn load(&self, thread: &str) -> StoreFuture<'_, ThreadState> {
            self.inner.load(thread)
        }
        fn is_held(&self, thread: &str) -> bool {
            self.inner.is_held(thread)
        }
        fn import(&self, state: ThreadState, events: Vec<RecordedEvent>) -> StoreFuture<'_, ()> {
            self.inner.import(state, events)
        }
        fn list(&self, query: ListQuery) -> StoreFuture<'_, Vec<ThreadSummary>> {
            self.inner.list(query)
        }
        fn events(&self, thread: &str, since: u64) -> StoreFuture<'_, Vec<RecordedEvent>> {
            self.inner.events(thread, since)
        }
        fn prune(&self, before_ms: u64, statuses: Vec<Status>) -> StoreFuture<'_, usize> {
            if self.prune_deletes {
                self.inner.prune(before_ms, statuses)
            } else {
                Box::pin(std::future::ready(Ok(0)))
            }
        }
        fn submit(&self, rec: ThreadRec) -> StoreFuture<'_, Vec<RecordedEvent>> {
            self.inner.submit(rec)
        }
        fn runnable(&self, query: RunnableQuery) -> StoreFuture<'_, Vec<RunnableThread>> {
            self.inner.runnable(query)
        }
        fn take(
            &self,
            query: RunnableQuery,
            attempt: AttemptRec,
        ) -> StoreFuture<'_, Option<Vec<Taken>>> {
            self.inner.take(query, attempt)
        }
        fn wait_for_work(&self, timeout: std::time::Duration) -> StoreFuture<'_, ()> {
            self.inner.wait_for_work(timeout)
        }
        fn news(&self) -> Option<News> {
            self.inner.news()
        }
    }

    #[test]
    fn a_store_of_another_crate_passes_the_public_contract() {
        assert!(
            contract::CASES.len() >= 20,
            "{} cases",
            contract::CASES.len()
        );
        contract::check(|_case| {
            Box::new(Wrapped {
                inner: MemoryStore::new(),
                prune_deletes: true,
            })
        });
        // The redb store passes it through the same door.
        let dir = std::env::temp_dir().join(format!("pipec-contract-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        contract::check(|case| Box::new(RedbStore::open(dir.join(case)).expect("store")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_store_that_breaks_the_contract_is_named_with_the_case() {
        let failed = std::panic::catch_unwind(|| {
            contract::check(|_case| {
                Box::new(Wrapped {
                    inner: MemoryStore::new(),
                    prune_deletes: false,
                })
            })
        })
        .expect_err("a prune that deletes nothing passes the contract");
        let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            message.contains("prune_deletes_old_terminal_threads_only"),
            "{message}"
        );
    }
}
