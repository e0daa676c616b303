//! What only the Postgres store has: leases across processes and machines (two pools
//! racing, expiry, heartbeats), its schema version, and URLs without passwords.

use std::time::Duration;

use super::testing::{TestSchema, admin, server};
use super::*;
use crate::contract::{attempt, gate, node, rt, thread_rec};

fn short(ttl_ms: u64) -> PgOptions {
    PgOptions {
        lease_ttl: Duration::from_millis(ttl_ms),
        ..PgOptions::default()
    }
}

#[test]
fn two_machines_racing_to_claim_never_both_win() {
    let Some(server) = server("two_machines_racing_to_claim_never_both_win") else {
        return;
    };
    let schema = TestSchema::new(&server, "race");
    let (a, b) = (schema.store(), schema.store());
    let rt = rt();
    let mut threads = Vec::new();
    for _ in 0..8 {
        let (lease, _) = rt
            .block_on(a.create_thread(thread_rec(), attempt()))
            .expect("create");
        threads.push(lease.thread.clone());
        drop(lease);
    }
    for thread in threads {
        let claims: Vec<_> = [a.clone(), b.clone()]
            .into_iter()
            .enumerate()
            .map(|(i, store)| {
                let thread = thread.clone();
                std::thread::spawn(move || {
                    let mut who = attempt();
                    who.run_id = format!("machine-{i}");
                    crate::contract::rt()
                        .block_on(store.claim(&thread, who))
                        .map(|(lease, _, _)| lease)
                })
            })
            .collect();
        let results: Vec<_> = claims
            .into_iter()
            .map(|h| h.join().expect("a claimer"))
            .collect();
        let won: Vec<&Lease> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "exactly one claimer wins: {results:?}");
        assert_eq!(won[0].epoch, 2);
        let lost = results.iter().find_map(|r| r.as_ref().err());
        match lost {
            Some(StoreError::Locked { holder, .. }) => {
                assert_eq!(
                    holder.as_ref().map(|h| h.run_id.clone()),
                    Some(won[0].run_id.clone())
                );
            }
            other => panic!("the loser is told who holds it: {other:?}"),
        }
    }
}

#[test]
fn a_lease_without_heartbeats_expires_and_its_next_write_is_fenced() {
    let Some(server) = server("a_lease_without_heartbeats_expires") else {
        return;
    };
    let schema = TestSchema::new(&server, "expiry");
    let (a, b) = (schema.store_with(short(300)), schema.store_with(short(300)));
    let rt = rt();
    let (lease, _) = rt
        .block_on(a.create_thread(thread_rec(), attempt()))
        .expect("create");
    let err = rt
        .block_on(b.claim(&lease.thread, attempt()))
        .expect_err("held");
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(b.is_held(&lease.thread));
    std::thread::sleep(Duration::from_millis(450));
    assert!(!b.is_held(&lease.thread), "expired");
    let err = rt
        .block_on(a.commit(&lease, vec![node(1)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    let err = rt.block_on(a.renew(&lease)).expect_err("not renewed");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    let (second, state, _) = rt
        .block_on(b.claim(&lease.thread, attempt()))
        .expect("an expired lease is taken over");
    assert_eq!(second.epoch, lease.epoch + 1);
    assert!(state.nodes.is_empty(), "the fenced commit wrote nothing");
    let err = rt
        .block_on(a.commit(&lease, vec![node(2)]))
        .expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err:?}");
    rt.block_on(b.commit(&second, vec![node(3)]))
        .expect("the new holder writes");
}

#[test]
fn heartbeats_keep_a_lease() {
    let Some(server) = server("heartbeats_keep_a_lease") else {
        return;
    };
    let schema = TestSchema::new(&server, "heartbeat");
    let (a, b) = (schema.store_with(short(300)), schema.store_with(short(300)));
    assert_eq!(a.renew_every(), Some(Duration::from_millis(100)));
    let rt = rt();
    let (lease, _) = rt
        .block_on(a.create_thread(thread_rec(), attempt()))
        .expect("create");
    for _ in 0..9 {
        std::thread::sleep(Duration::from_millis(100));
        rt.block_on(a.renew(&lease)).expect("renewed");
    }
    let err = rt
        .block_on(b.claim(&lease.thread, attempt()))
        .expect_err("still held");
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    rt.block_on(a.commit(&lease, vec![node(1)]))
        .expect("the holder still writes after three times its lease's life");
    // Dropped, the lease is released at once, long before it would expire.
    let thread = lease.thread.clone();
    drop(lease);
    assert!(!a.is_held(&thread));
    rt.block_on(b.claim(&thread, attempt())).expect("free");
}

#[test]
fn a_newer_schema_is_refused() {
    let Some(server) = server("a_newer_schema_is_refused") else {
        return;
    };
    let schema = TestSchema::new(&server, "newer");
    drop(schema.store());
    assert_eq!(PostgresStore::version_at(&schema.url), Ok(SCHEMA_VERSION));
    admin(
        &schema.url,
        "UPDATE pipec_meta SET value = '99' WHERE key = 'schema_version'",
    )
    .expect("bump");
    for open in [PgOpen::Create, PgOpen::Existing] {
        let err = PostgresStore::connect_with(&schema.url, open, PgOptions::default())
            .err()
            .expect("refused");
        assert_eq!(
            err,
            StoreError::NewerFormat {
                found: 99,
                supported: SCHEMA_VERSION
            }
        );
    }
    assert!(
        PostgresStore::migrate(&schema.url).is_err(),
        "not downgraded"
    );
    assert_eq!(PostgresStore::version_at(&schema.url), Ok(99));
}

#[test]
fn a_database_without_a_store_is_missing_and_nothing_is_created() {
    let Some(server) = server("a_database_without_a_store_is_missing") else {
        return;
    };
    let schema = TestSchema::new(&server, "missing");
    let err = PostgresStore::connect_with(&schema.url, PgOpen::Existing, PgOptions::default())
        .err()
        .expect("missing");
    assert!(matches!(err, StoreError::Missing { .. }), "{err:?}");
    assert_eq!(PostgresStore::version_at(&schema.url), Ok(0));
    assert_eq!(PostgresStore::migrate(&schema.url), Ok(0));
    assert_eq!(PostgresStore::migrate(&schema.url), Ok(SCHEMA_VERSION));
}

#[test]
fn the_password_is_in_no_error_and_no_location() {
    let Some(server) = server("the_password_is_in_no_error") else {
        return;
    };
    let secret = "pw-Zq81-s3cret";
    // A server that is not there.
    let url = format!("postgres://pipec:{secret}@127.0.0.1:1/runs?connect_timeout=2");
    let err = PostgresStore::connect_with(&url, PgOpen::Create, PgOptions::default())
        .err()
        .expect("no server");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(secret), "{text}");
    assert!(text.contains("127.0.0.1"), "says where: {text}");
    // A database that is not there, on the test server, and a store that works.
    let schema = TestSchema::new(&server, "password");
    let mut with_password = url::Url::parse(&server).expect("a URL");
    if with_password.username().is_empty() {
        let _ = with_password.set_username("postgres");
    }
    let _ = with_password.set_password(Some(secret));
    let mut missing_db = with_password.clone();
    missing_db.set_path("/no_such_database_here");
    let err =
        PostgresStore::connect_with(missing_db.as_str(), PgOpen::Create, PgOptions::default())
            .err()
            .expect("no database");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(secret), "{text}");
    let store_url = super::testing::with_schema(with_password.as_str(), &schema.name);
    assert!(!redact(&store_url).contains(secret));
    let store = PostgresStore::connect_with(&store_url, PgOpen::Create, PgOptions::default())
        .expect("connect");
    assert!(!store.location().contains(secret), "{}", store.location());
    let err = rt()
        .block_on(store.load("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"))
        .expect_err("none");
    let text = format!("{err} {err:?}");
    assert!(matches!(err, StoreError::NotFound { .. }), "{text}");
    assert!(!text.contains(secret), "{text}");
}

#[test]
fn concurrent_commits_share_transactions_and_keep_their_order() {
    let Some(server) = server("concurrent_commits_share_transactions") else {
        return;
    };
    let schema = TestSchema::new(&server, "group");
    let store = schema.store();
    let rt = rt();
    let lease = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .map(|(l, _)| l)
        .expect("create");
    let commits = (0..40).map(|i| {
        store.commit(
            &lease,
            vec![
                Write::Node(format!("n{i}"), NodeRec::done(serde_json::json!(i))),
                Write::Event(Event::NodeFinished {
                    node: format!("n{i}"),
                    ms: None,
                }),
            ],
        )
    });
    let results = rt.block_on(futures::future::join_all(commits));
    let mut seqs: Vec<u64> = results
        .into_iter()
        .flat_map(|r| r.expect("committed"))
        .map(|e| e.seq)
        .collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=40).collect::<Vec<u64>>(),
        "numbered without gaps"
    );
    let state = rt.block_on(store.load(&lease.thread)).expect("load");
    assert_eq!(state.nodes.len(), 40);
    let report = store.check().expect("check");
    assert_eq!(report.threads, 1);
}

/// What a worker reads before it takes a thread: nothing while a live lease holds the
/// thread or while a claim has its row locked, the record once it is free.
#[test]
fn a_thread_being_taken_or_held_is_not_untaken() {
    let Some(server) = server("a_thread_being_taken_or_held_is_not_untaken") else {
        return;
    };
    let schema = TestSchema::new(&server, "untaken");
    let (a, b) = (schema.store(), schema.store());
    let rt = rt();
    let (lease, _) = rt
        .block_on(a.create_thread(thread_rec(), attempt()))
        .expect("create");
    let thread = lease.thread.clone();
    assert_eq!(
        rt.block_on(b.untaken_thread_rec(&thread)).expect("read"),
        None,
        "a live lease holds it"
    );
    drop(lease);
    // The release is handed to `a`'s writer; another store sees it once it is done.
    let start = std::time::Instant::now();
    while b.is_held(&thread) && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let free = rt.block_on(b.untaken_thread_rec(&thread)).expect("read");
    assert_eq!(
        free.map(|r| r.id),
        Some(thread.clone()),
        "released, it is free"
    );
    // Another process in the middle of a claim: its transaction has the row locked.
    let locker = std::thread::spawn({
        let (url, thread) = (schema.url.clone(), thread.clone());
        move || {
            super::testing::admin(
                &url,
                &format!(
                    "BEGIN; SELECT 1 FROM pipec_threads WHERE id = '{thread}' FOR UPDATE;
                     SELECT pg_sleep(1); COMMIT"
                ),
            )
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    assert_eq!(
        rt.block_on(b.untaken_thread_rec(&thread)).expect("read"),
        None,
        "a claim has the row locked"
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "the read passes over the locked row, it does not wait for it"
    );
    locker
        .join()
        .expect("locker")
        .expect("the lock's transaction");
    assert!(
        rt.block_on(b.untaken_thread_rec(&thread))
            .expect("read")
            .is_some()
    );
    let unknown = crate::ids::new_thread_id();
    assert_eq!(
        rt.block_on(b.untaken_thread_rec(&unknown)).expect("read"),
        None
    );
}

/// A batch is sent whole (one round trip) until a commit in it fails its fence; then
/// the batch is decided commit by commit: the others are written, the fenced one is
/// told why and writes nothing.
#[test]
fn a_fenced_commit_among_others_writes_nothing_and_the_others_are_written() {
    let Some(server) = server("a_fenced_commit_among_others") else {
        return;
    };
    let schema = TestSchema::new(&server, "fencedbatch");
    let store = schema.store();
    let rt = rt();
    let (good, _) = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    let (taken, _) = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    // Its holder's lease as it kept it after another process took the thread over.
    let old = crate::contract::stale(&taken);
    let thread = taken.thread.clone();
    drop(taken);
    let (_now, _, _) = rt
        .block_on(store.claim(&thread, attempt()))
        .expect("taken over");
    let mut commits = Vec::new();
    for i in 0..8 {
        commits.push(store.commit(&good, vec![node(i)]));
        if i == 3 {
            commits.push(store.commit(&old, vec![node(99)]));
        }
    }
    let results = rt.block_on(futures::future::join_all(commits));
    for (i, r) in results.iter().enumerate() {
        if i == 4 {
            assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
        } else {
            assert!(r.is_ok(), "commit {i}: {r:?}");
        }
    }
    let fenced = rt.block_on(store.load(&thread)).expect("load");
    assert!(fenced.nodes.is_empty(), "{:?}", fenced.nodes);
    let written = rt.block_on(store.load(&good.thread)).expect("load");
    assert_eq!(written.nodes.len(), 1, "every commit wrote the same node");
    assert_eq!(
        written.nodes.values().next().and_then(|n| n.value.clone()),
        Some(serde_json::json!(7)),
        "the last commit's row is the one left"
    );
}

/// A transaction sent whole that fails part way took no effect, and its connection is
/// left outside any transaction for the next user of the pool.
#[test]
fn a_transaction_sent_whole_that_fails_leaves_nothing_and_its_connection_free() {
    let Some(server) = server("a_transaction_sent_whole_that_fails") else {
        return;
    };
    let schema = TestSchema::new(&server, "atonce");
    let store = schema.store();
    let db = store.db().clone();
    let plan = |hash: &'static str| {
        super::rows::Stmt::new(
            "INSERT INTO pipec_plans (hash, plan) VALUES ($1, '{}')",
            vec![Box::new(hash.to_string())],
        )
    };
    let (failed, then, stored) = store
        .block_on(async move {
            let client = db.client().await?;
            let failed = super::txn::at_once(
                &client,
                vec![plan("first"), super::rows::fence_check("no-such-thread", 1)],
            )
            .await;
            let then = super::txn::at_once(&client, vec![plan("second")]).await;
            let stored: Vec<String> = client
                .query("SELECT hash FROM pipec_plans ORDER BY hash", &[])
                .await
                .map_err(pg)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            Ok((failed.map(|_| ()), then.map(|_| ()), stored))
        })
        .expect("ran");
    let err = failed.expect_err("the fence fails");
    assert!(err.to_string().contains("PF405"), "{err}");
    assert_eq!(then, Ok(()), "the connection is usable at once");
    assert_eq!(stored, ["second"], "the failed transaction wrote nothing");
}

/// A transaction between its two pipelines whose future is dropped (a cancelled call)
/// does not go back to the pool open: its connection is closed, so its locks go.
#[test]
fn a_transaction_dropped_between_its_pipelines_holds_no_lock() {
    let Some(server) = server("a_transaction_dropped_between") else {
        return;
    };
    let schema = TestSchema::new(&server, "droppedtx");
    let store = schema.store();
    let rt = rt();
    let (lease, _) = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    let thread = lease.thread.clone();
    drop(lease);
    let db = store.db().clone();
    let locked_then_free = store
        .block_on(async move {
            let client = db.client().await?;
            let (tx, found) =
                super::txn::Tx::begin(client, vec![super::rows::lock(&thread)]).await?;
            assert_eq!(found[0].len(), 1, "the row is locked");
            // Another connection, kept: the pool could hand the dropped one back to it.
            let other = db.client().await?;
            let try_lock = || async {
                other
                    .query(
                        "SELECT 1 FROM pipec_threads WHERE id = $1 FOR UPDATE NOWAIT",
                        &[&thread],
                    )
                    .await
                    .is_ok()
            };
            let while_open = try_lock().await;
            drop(tx);
            let mut after = false;
            for _ in 0..100 {
                if try_lock().await {
                    after = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok((while_open, after))
        })
        .expect("ran");
    assert_eq!(locked_then_free, (false, true));
}

/// A database of store schema 1 has no `pipec_fence`: opened as an existing store it is
/// refused with the command that upgrades it, and once migrated its commits work.
#[test]
fn a_store_of_schema_1_is_refused_until_migrated() {
    let Some(server) = server("a_store_of_schema_1_is_refused") else {
        return;
    };
    let schema = TestSchema::new(&server, "schemaone");
    drop(schema.store());
    admin(
        &schema.url,
        "DROP FUNCTION pipec_fence(text, bigint);
         UPDATE pipec_meta SET value = '1' WHERE key = 'schema_version'",
    )
    .expect("back to schema 1");
    let err = PostgresStore::connect_with(&schema.url, PgOpen::Existing, PgOptions::default())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("pipec store migrate"), "{err}");
    assert_eq!(PostgresStore::migrate(&schema.url), Ok(1));
    assert_eq!(PostgresStore::version_at(&schema.url), Ok(SCHEMA_VERSION));
    let store = PostgresStore::connect_with(&schema.url, PgOpen::Existing, PgOptions::default())
        .expect("migrated");
    let rt = rt();
    let (lease, _) = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    rt.block_on(store.commit(&lease, vec![node(1)]))
        .expect("a commit sent whole");
}

/// `take` claims the oldest queued threads with their states in one transaction, passes
/// over the ones it is told to and the ones no longer queued, and two stores taking at
/// once never take the same thread.
#[test]
fn queued_threads_are_taken_claimed_oldest_first_and_never_twice() {
    let Some(server) = server("queued_threads_are_taken_claimed_oldest_first") else {
        return;
    };
    let schema = TestSchema::new(&server, "take");
    let (a, b) = (schema.store(), schema.store());
    let rt = rt();
    let mut queued = Vec::new();
    for _ in 0..24 {
        let rec = thread_rec();
        queued.push(rec.id.clone());
        rt.block_on(a.submit(rec)).expect("submit");
    }
    queued.sort();
    let query = |limit: usize, except: Vec<String>| RunnableQuery {
        now_ms: ids::now_ms(),
        pipelines: None,
        limit,
        except,
    };
    // The two oldest but one passed over: the oldest and the third.
    let taken = rt
        .block_on(a.take(query(2, vec![queued[1].clone()]), attempt()))
        .expect("take")
        .expect("the store takes at once");
    let ids: Vec<&str> = taken.iter().map(|t| t.lease.thread.as_str()).collect();
    assert_eq!(ids, [queued[0].as_str(), queued[2].as_str()]);
    for t in &taken {
        assert_eq!(t.why, Why::Queued);
        let rec = t.state.thread.as_ref().expect("the state as claimed");
        assert_eq!(rec.status, Status::Running);
        assert_eq!((rec.epoch, rec.attempts), (t.lease.epoch, 1));
        assert_eq!(t.lease.attempt, 1);
        assert_eq!(
            rec.holder.as_ref().map(|h| h.run_id.clone()),
            Some(t.lease.run_id.clone())
        );
        assert_eq!(t.state.attempts.last().map(|a| a.number), Some(1));
        assert!(
            matches!(
                t.events.as_slice(),
                [e] if matches!(e.event, Event::AttemptStarted { attempt: 1 })
            ),
            "the claim's event: {:?}",
            t.events.iter().map(|e| &e.event).collect::<Vec<_>>()
        );
        // Numbered after the submit's `thread_queued`.
        assert_eq!(t.events[0].seq, 1);
        assert!(a.is_held(&t.lease.thread));
    }
    // Taken ones are no longer offered, to anyone.
    let again: Vec<String> = rt
        .block_on(b.take(query(50, Vec::new()), attempt()))
        .expect("take")
        .expect("at once")
        .into_iter()
        .map(|t| t.lease.thread.clone())
        .collect();
    assert!(!again.contains(&queued[0]) && !again.contains(&queued[2]));
    assert_eq!(again.len(), 22);
    drop(taken);

    // Two stores taking from the same queue at once split it.
    let mut more = Vec::new();
    for _ in 0..40 {
        let rec = thread_rec();
        more.push(rec.id.clone());
        rt.block_on(a.submit(rec)).expect("submit");
    }
    let takers: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|store| {
            std::thread::spawn(move || {
                let rt = crate::contract::rt();
                let mut got = Vec::new();
                loop {
                    let q = RunnableQuery {
                        now_ms: ids::now_ms(),
                        pipelines: None,
                        limit: 3,
                        except: Vec::new(),
                    };
                    let taken = rt.block_on(store.take(q, attempt())).expect("take");
                    let taken = taken.expect("at once");
                    if taken.is_empty() {
                        return got;
                    }
                    got.extend(taken.into_iter().map(|t| t.lease.thread.clone()));
                }
            })
        })
        .collect();
    let mut all: Vec<String> = takers
        .into_iter()
        .flat_map(|h| h.join().expect("a taker"))
        .collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "no thread taken twice");
    more.sort();
    assert_eq!(all, more, "every queued thread taken");
}

/// A thread whose record was answered or is held is not `take`n: only queued ones are.
#[test]
fn take_passes_over_threads_that_are_not_queued() {
    let Some(server) = server("take_passes_over_threads_that_are_not_queued") else {
        return;
    };
    let schema = TestSchema::new(&server, "take_not_queued");
    let store = schema.store();
    let rt = rt();
    // Created with a lease (running, held), and one cancelled while queued.
    let (held, _) = rt
        .block_on(store.create_thread(thread_rec(), attempt()))
        .expect("create");
    let cancelled = thread_rec();
    rt.block_on(store.submit(cancelled.clone()))
        .expect("submit");
    rt.block_on(store.request_cancel(&cancelled.id))
        .expect("cancel");
    let q = RunnableQuery {
        now_ms: ids::now_ms(),
        pipelines: None,
        limit: 10,
        except: Vec::new(),
    };
    let taken = rt
        .block_on(store.take(q, attempt()))
        .expect("take")
        .expect("at once");
    assert!(
        taken.is_empty(),
        "{:?}",
        taken.iter().map(|t| &t.lease.thread).collect::<Vec<_>>()
    );
    drop(held);
}

/// A plan is stored once by its hash and never changes or goes, so a store that has
/// stored it does not send it again (every submit of a pipeline would): the second put
/// leaves the table as it is, and another store (another process) still stores it.
#[test]
fn a_plan_this_store_stored_is_not_sent_again() {
    let Some(server) = server("a_plan_this_store_stored_is_not_sent_again") else {
        return;
    };
    let schema = TestSchema::new(&server, "plans");
    let (store, other) = (schema.store(), schema.store());
    let rt = rt();
    let count = |store: &PostgresStore| {
        let db = store.db().clone();
        store
            .block_on(async move {
                let client = db.client().await?;
                let n: i64 = client
                    .query_one("SELECT count(*) FROM pipec_plans WHERE hash = 'h1'", &[])
                    .await
                    .map_err(pg)?
                    .get(0);
                client
                    .execute("DELETE FROM pipec_plans", &[])
                    .await
                    .map_err(pg)?;
                Ok(n)
            })
            .expect("counted")
    };
    rt.block_on(store.put_plan("h1", "{}")).expect("put");
    assert_eq!(
        count(&store),
        1,
        "stored, then removed behind the store's back"
    );
    rt.block_on(store.put_plan("h1", "{}")).expect("put again");
    assert_eq!(count(&store), 0, "not sent again");
    rt.block_on(other.put_plan("h1", "{}"))
        .expect("another store puts it");
    assert_eq!(count(&other), 1);
}

/// An attempt's last commit deletes its lease row in the commit's own transaction: the
/// thread is free to every other process as soon as the commit returns, and dropping
/// the lease afterwards hands the writer nothing. Ending so wakes the workers when it
/// leaves work (a paused thread, whose gate may be answered), and not when the thread
/// ended.
#[test]
fn the_last_commit_lets_the_thread_go_in_its_own_transaction() {
    let Some(server) = server("the_last_commit_lets_the_thread_go_in_its_own_transaction") else {
        return;
    };
    let schema = TestSchema::new(&server, "last");
    let (a, b) = (schema.store(), schema.store());
    let rt = rt();
    let quiet = RunnableQuery {
        now_ms: ids::now_ms(),
        pipelines: None,
        limit: 0,
        except: Vec::new(),
    };
    // Back in the queue: work for a worker; paused with no answer, or ended: none.
    for (status, wakes) in [
        (Status::Queued, true),
        (Status::Paused, false),
        (Status::Completed, false),
    ] {
        let (lease, _) = rt
            .block_on(a.create_thread(thread_rec(), attempt()))
            .expect("create");
        let thread = lease.thread.clone();
        // The look listens, and what it saw is not news to the next wait.
        rt.block_on(b.runnable(quiet.clone())).expect("look");
        let mut rec = rt
            .block_on(a.load(&thread))
            .expect("load")
            .thread
            .expect("t");
        rec.status = status;
        rec.holder = None;
        let handed = a.inner.db.releases.handed_over();
        rt.block_on(a.commit_last(&lease, vec![node(1), Write::Thread(rec)]))
            .expect("last commit");
        assert!(
            !b.is_held(&thread),
            "{status:?}: another process sees the thread free before the lease is dropped"
        );
        drop(lease);
        assert_eq!(
            a.inner.db.releases.handed_over(),
            handed,
            "{status:?}: nothing is left to release"
        );
        let start = std::time::Instant::now();
        rt.block_on(b.wait_for_work(Duration::from_millis(400)))
            .expect("wait");
        assert_eq!(
            start.elapsed() < Duration::from_millis(300),
            wakes,
            "{status:?}: woken after {:?}",
            start.elapsed()
        );
    }
}

/// The paused threads a look reads gates of: the ones answered since a holder last took
/// them, or with a deadline (columns beside the record), not every paused one.
fn waking(url: &str) -> Vec<String> {
    super::testing::texts(
        url,
        "SELECT id FROM pipec_threads WHERE status = 'paused'
           AND (answers > 0 OR due_ms IS NOT NULL) ORDER BY id",
    )
}

#[test]
fn a_look_reads_only_the_paused_threads_an_answer_or_a_deadline_may_move_on() {
    let Some(server) =
        server("a_look_reads_only_the_paused_threads_an_answer_or_a_deadline_may_move_on")
    else {
        return;
    };
    let schema = TestSchema::new(&server, "waking");
    let (a, b) = (schema.store(), schema.store());
    let rt = rt();
    let look = || {
        let q = RunnableQuery {
            now_ms: ids::now_ms(),
            pipelines: None,
            limit: 0,
            except: Vec::new(),
        };
        let mut found: Vec<(String, Why)> = rt
            .block_on(b.runnable(q))
            .expect("look")
            .into_iter()
            .map(|t| (t.id, t.why))
            .collect();
        found.sort_by(|x, y| x.0.cmp(&y.0));
        found
    };
    // A thread held by `a`, its record as paused by it, and the pending gate `g`.
    let held = || {
        let (lease, _) = rt
            .block_on(a.create_thread(thread_rec(), attempt()))
            .expect("create");
        let mut rec = rt
            .block_on(a.load(&lease.thread))
            .expect("load")
            .thread
            .expect("t");
        rec.status = Status::Paused;
        rec.holder = None;
        (lease, rec, vec![Write::Gate("g".into(), gate("g"))])
    };
    // Ten threads waiting for a person: no look reads them.
    for _ in 0..10 {
        let (lease, rec, mut writes) = held();
        writes.push(Write::Thread(rec));
        rt.block_on(a.commit_last(&lease, writes)).expect("pause");
    }
    assert_eq!(waking(&schema.url), Vec::<String>::new());
    assert_eq!(look(), Vec::new());
    // Answered while its holder ran, after the holder last read its gates: the pause
    // that follows keeps the answer's mark, and the thread is work once let go.
    let (lease, rec, writes) = held();
    let late = lease.thread.clone();
    rt.block_on(a.commit(&lease, writes)).expect("gate pending");
    rt.block_on(b.answer(&late, vec![("g".into(), serde_json::json!(true))], "web"))
        .expect("answer");
    rt.block_on(a.commit_last(&lease, vec![Write::Thread(rec)]))
        .expect("pause");
    drop(lease);
    assert_eq!(look(), vec![(late.clone(), Why::Answered)]);
    // Answered while its holder ran, and taken in by it (the gate's node done) before it
    // paused at the next gate: the first look reads its gates once and clears the mark.
    let (lease, mut rec, writes) = held();
    let taken_in = lease.thread.clone();
    rt.block_on(a.commit(&lease, writes)).expect("gate pending");
    rt.block_on(b.answer(
        &taken_in,
        vec![("g".into(), serde_json::json!(true))],
        "web",
    ))
    .expect("answer");
    rec.due_ms = Some(ids::now_ms() + 3_600_000);
    rt.block_on(a.commit_last(
        &lease,
        vec![
            Write::Node("g".into(), NodeRec::done(serde_json::json!(true))),
            Write::Gate("h".into(), gate("h")),
            Write::Thread(rec),
        ],
    ))
    .expect("pause at the next gate");
    drop(lease);
    let mut expect = vec![late.clone(), taken_in.clone()];
    expect.sort();
    assert_eq!(waking(&schema.url), expect);
    assert_eq!(look(), vec![(late.clone(), Why::Answered)]);
    // Its deadline is an hour away: still read by none until then.
    let marks = super::testing::texts(
        &schema.url,
        &format!(
            "SELECT answers || ',' || (due_ms IS NOT NULL) FROM pipec_threads WHERE id = '{taken_in}'"
        ),
    );
    assert_eq!(marks, ["0,true"], "the mark is cleared, the deadline kept");
    // A claim takes every answer in.
    let (lease, _, _) = rt.block_on(b.claim(&late, attempt())).expect("claim");
    let marks = super::testing::texts(
        &schema.url,
        &format!("SELECT answers::text FROM pipec_threads WHERE id = '{late}'"),
    );
    assert_eq!(marks, ["0"], "a claim takes the answers in");
    drop(lease);
}
