//! Workers on a Postgres store: queued threads, the runnable ones, and LISTEN/NOTIFY.
//!
//! Every write that gives workers something to do sends a notification on the channel
//! `pipec_work` inside its own transaction, so it is delivered when (and only if) the
//! write commits: a thread queued, gates answered, a cancel, a lease released. A waiting
//! worker holds one connection that LISTENs on the channel; each notification bumps a
//! counter it compares with the one it saw at its last look at the queue, so one sent
//! between the look and the wait is not missed. A lease that expired sends nothing: the
//! worker's poll finds it.
//!
//! The payload is the store's schema, with `queued ` before it for a submit. The listener
//! counts the two kinds apart ([`News`]): a worker woken only by submits takes from the
//! queue and skips the look at answered, due and orphaned threads, which is most of what
//! a look costs the database when runs arrive one by one.
//!
//! `runnable` reads candidates with `FOR UPDATE SKIP LOCKED` in a transaction that ends
//! at once: a thread whose row another process is claiming or writing this very moment
//! is left out rather than waited for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio::sync::Notify;

use super::sql::{exec, rows};
use super::{Db, pg};
use crate::envelope::decode;
use crate::queue::why_runnable;
use crate::*;

/// The channel workers listen on.
pub(crate) const CHANNEL: &str = "pipec_work";

/// Tells the workers there may be work, when the transaction `c` is in commits.
/// The payload names the store's schema: stores in other schemas of the database hear
/// the channel too, and ignore it.
pub(super) async fn notify<C: GenericClient>(c: &C) -> Result<(), StoreError> {
    exec(c, NOTIFY, &[]).await?;
    Ok(())
}

const NOTIFY: &str = "SELECT pg_notify('pipec_work', current_schema())";

/// [`notify`] as a statement to send with others.
pub(super) fn notify_stmt() -> super::rows::Stmt {
    super::rows::Stmt::new(NOTIFY, Vec::new())
}

/// The notification of a submit: a thread queued, which a take finds.
const NOTIFY_QUEUED: &str = "SELECT pg_notify('pipec_work', 'queued ' || current_schema())";

/// What a notification with `payload` tells the store of `schema` (the one it is in;
/// `None` until the listener knows it, when every notification counts): nothing (another
/// schema's), a thread queued, or other work.
fn kind(schema: Option<&str>, payload: &str) -> Option<Kind> {
    let Some(schema) = schema else {
        return Some(Kind::Other);
    };
    if payload == schema {
        Some(Kind::Other)
    } else if payload.strip_prefix("queued ") == Some(schema) {
        Some(Kind::Queued)
    } else {
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Queued,
    Other,
}

/// The listening side: one connection per store, started by the first look at the
/// queue.
pub(crate) struct Queue {
    /// The URL the listening connection opens (never shown: it may hold a password).
    url: String,
    generation: AtomicU64,
    seen: AtomicU64,
    /// Of `generation`, the submits, and the rest.
    queued: AtomicU64,
    other: AtomicU64,
    wake: Notify,
    listening: AtomicBool,
    /// The listening connection's client, kept while it listens (the connection ends
    /// when its client is dropped).
    client: std::sync::Mutex<Option<tokio_postgres::Client>>,
}

impl Queue {
    pub(crate) fn new(url: &str) -> Queue {
        Queue {
            url: url.to_string(),
            generation: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            other: AtomicU64::new(0),
            wake: Notify::new(),
            listening: AtomicBool::new(false),
            client: std::sync::Mutex::new(None),
        }
    }

    fn woken(&self, kind: Kind) {
        // The generation first: a worker that reads the news between the two finds
        // none and skips its look, and its wait ends at once, so it reads them again.
        // The other way round, a look could begin after the news counted this one but
        // note the generation before it, and every wait after it would end at once with
        // nothing new to read.
        self.generation.fetch_add(1, Ordering::SeqCst);
        match kind {
            Kind::Queued => &self.queued,
            Kind::Other => &self.other,
        }
        .fetch_add(1, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// A take of this store left queued threads behind: news of them, as of a submit,
    /// for the worker to take again (not a notification: nothing wakes).
    fn more(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// The notifications heard so far, by kind, once the listening connection listens.
    pub(crate) fn news(&self) -> Option<News> {
        let listens = self
            .client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        listens.then(|| News {
            queued: self.queued.load(Ordering::SeqCst),
            other: self.other.load(Ordering::SeqCst),
        })
    }
}

/// Opens the listening connection unless one is open; returns once it listens.
async fn listen(db: &Arc<Db>) -> Result<(), StoreError> {
    let q = &db.queue;
    if q.listening.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let started = async {
        let config: tokio_postgres::Config = q
            .url
            .parse()
            .map_err(|e: tokio_postgres::Error| StoreError::Io(e.to_string()))?;
        let (client, mut connection) = config.connect(super::config::tls()?).await.map_err(pg)?;
        let queue = db.clone();
        let (schema_tx, schema_rx) = tokio::sync::oneshot::channel::<String>();
        tokio::spawn(async move {
            let mut schema_rx = Some(schema_rx);
            let mut schema: Option<String> = None;
            loop {
                let message = futures::future::poll_fn(|cx| connection.poll_message(cx)).await;
                if schema.is_none()
                    && let Some(rx) = schema_rx.as_mut()
                    && let Ok(s) = rx.try_recv()
                {
                    schema = Some(s);
                    schema_rx = None;
                }
                match message {
                    Some(Ok(tokio_postgres::AsyncMessage::Notification(n))) => {
                        if let Some(kind) = kind(schema.as_deref(), n.payload()) {
                            queue.queue.woken(kind)
                        }
                    }
                    Some(Ok(_)) => {}
                    // The connection is gone: the next look opens another.
                    Some(Err(_)) | None => break,
                }
            }
            queue
                .queue
                .client
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            queue.queue.listening.store(false, Ordering::SeqCst);
            // Whatever was sent meanwhile is unknown: look again.
            queue.queue.woken(Kind::Other);
        });
        let schema: String = client
            .query_one("SELECT current_schema()", &[])
            .await
            .map_err(pg)?
            .get(0);
        let _ = schema_tx.send(schema);
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(pg)?;
        Ok::<_, StoreError>(client)
    }
    .await;
    match started {
        Ok(client) => {
            *q.client.lock().unwrap_or_else(|e| e.into_inner()) = Some(client);
            Ok(())
        }
        Err(e) => {
            q.listening.store(false, Ordering::SeqCst);
            Err(e)
        }
    }
}

pub(super) async fn submit(db: &Db, rec: ThreadRec) -> Result<Vec<RecordedEvent>, StoreError> {
    if crate::ids::decode(&rec.id).is_none() {
        return Err(StoreError::Io(format!("`{}` is not a thread id", rec.id)));
    }
    let mut rec = rec;
    rec.status = Status::Queued;
    rec.holder = None;
    rec.attempts = 0;
    let id = rec.id.clone();
    // One transaction in one round trip: the row (refused when the id is taken), the
    // event, the notification.
    let super::rows::Planned { parts, events } =
        super::rows::plan(&id, None, &[Write::Event(Event::ThreadQueued {})])?;
    let mut stmts = vec![super::rows::new_thread(&rec)?];
    // An event alone: no rename.
    stmts.extend(super::rows::Planned::statements(parts).unwrap_or_default());
    let written = stmts.len();
    stmts.push(super::rows::Stmt::new(NOTIFY_QUEUED, Vec::new()));
    let client = db.client().await?;
    match super::txn::at_once(&client, stmts).await {
        Ok(answers) => Ok(super::rows::recorded(
            &id,
            events,
            &answers[1..written],
            None,
        )),
        Err(e) => {
            match super::sql::row(&client, "SELECT 1 FROM pipec_threads WHERE id = $1", &[&id])
                .await
            {
                Ok(Some(_)) => Err(StoreError::Io(format!("thread {id} already exists"))),
                _ => Err(e),
            }
        }
    }
}

/// What a look at the queue (`take`, `runnable`) does first: it listens, so that a
/// notification sent during the look is news to the next wait, and notes the
/// notifications seen so far. A worker that cannot listen still polls.
async fn before_a_look(db: &Arc<Db>) {
    let _ = listen(db).await;
    db.queue
        .seen
        .store(db.queue.generation.load(Ordering::SeqCst), Ordering::SeqCst);
}

/// A thread [`take`] claimed: its claim's rows and the run id of its attempt.
pub(super) type TakenRows = (super::writes::ClaimedRows, String);

/// Takes up to `query`'s limit of queued threads in one transaction of two round trips:
/// the oldest queued rows with no live lease, locked, then each one's claim with the
/// `COMMIT`. A row another process is writing or taking at that moment is passed over
/// (`SKIP LOCKED`); one whose claim committed while the look read it is checked again
/// by the server against `queued` as it now stands, and passed over too.
pub(super) async fn take(
    db: &Arc<Db>,
    query: RunnableQuery,
    attempt: AttemptRec,
) -> Result<Vec<TakenRows>, StoreError> {
    before_a_look(db).await;
    let client = db.client().await?;
    macro_rules! queued {
        () => {
            "FROM pipec_threads t
             WHERE t.status = 'queued' AND NOT t.cancel_requested
               AND ($1::text[] IS NULL OR t.pipeline = ANY($1))
               AND NOT (t.id = ANY($2))
               AND NOT EXISTS (SELECT 1 FROM pipec_leases l WHERE l.thread = t.id AND l.expires_at > now())"
        };
    }
    let args = || -> Vec<Box<dyn tokio_postgres::types::ToSql + Send + Sync>> {
        vec![
            Box::new(query.pipelines.clone()),
            Box::new(query.except.clone()),
            Box::new(query.max() as i64),
        ]
    };
    // The threads taken, and how many are queued, locked or not, up to one more: when
    // the take leaves some (past its limit, or locked by a look or a claim of another
    // process), the worker is told to take again ([`Queue::more`]).
    let (tx, found) = super::txn::Tx::begin(
        client,
        vec![
            super::rows::Stmt::new(
                concat!(
                    "SELECT t.rec ",
                    queued!(),
                    " ORDER BY t.id LIMIT $3 FOR UPDATE OF t SKIP LOCKED"
                ),
                args(),
            ),
            super::rows::Stmt::new(
                concat!(
                    "SELECT count(*) FROM (SELECT 1 ",
                    queued!(),
                    " LIMIT $3::bigint + 1) AS q"
                ),
                args(),
            ),
        ],
    )
    .await?;
    let mut found = found.into_iter();
    let rows = found.next().unwrap_or_default();
    let queued: i64 = found
        .next()
        .and_then(|r| r.first().map(|r| r.get(0)))
        .unwrap_or(0);
    if queued > rows.len() as i64 {
        db.queue.more();
    }
    let mut stmts = Vec::new();
    let mut claims = Vec::new();
    for r in rows {
        // A record that cannot be read is left for `runnable`, whose claim reports it.
        let Ok(rec) = decode::<ThreadRec>(r.get::<_, &[u8]>(0), &|| "a queued thread".into())
        else {
            continue;
        };
        let mut attempt = attempt.clone();
        attempt.run_id = crate::ids::new_thread_id();
        attempt.plan_hash = rec.plan_hash.clone();
        let run_id = attempt.run_id.clone();
        let id = rec.id.clone();
        let (claim, sent, events, epoch, number) =
            match super::writes::claim_stmts(db, rec, attempt, Vec::new()) {
                Ok(c) => c,
                Err(e) => {
                    tx.rollback().await;
                    return Err(e);
                }
            };
        let start = stmts.len();
        stmts.extend(claim);
        claims.push((id, start..stmts.len(), sent, events, epoch, number, run_id));
    }
    if claims.is_empty() {
        tx.rollback().await;
        return Ok(Vec::new());
    }
    let answers = tx.commit(stmts).await?;
    claims
        .into_iter()
        .map(|(id, range, sent, events, epoch, number, run_id)| {
            let (events, state) = super::writes::claimed(&id, sent, events, &answers[range])?;
            Ok(((id, epoch, number, state, events), run_id))
        })
        .collect()
}

pub(super) async fn runnable(
    db: &Arc<Db>,
    query: RunnableQuery,
) -> Result<Vec<RunnableThread>, StoreError> {
    before_a_look(db).await;
    let client = db.client().await?;
    let pipelines: Option<Vec<String>> = query.pipelines.clone();
    let limit = query.max() as i64;
    let mut out = Vec::new();
    // Two statements sent together, each its own transaction: a thread a claim has
    // locked right now is skipped, not waited for.
    let mut found = super::rows::pipeline(
        &client,
        &[
            // Queued, then orphaned (no live lease; a cancel asked of one is carried out
            // by the worker that takes it), oldest first.
            super::rows::Stmt::new(
                "SELECT t.id, t.pipeline, t.status FROM pipec_threads t
                 WHERE (t.status = 'queued' AND NOT t.cancel_requested OR t.status = 'running')
                   AND ($1::text[] IS NULL OR t.pipeline = ANY($1))
                   AND NOT (t.id = ANY($3))
                   AND NOT EXISTS (SELECT 1 FROM pipec_leases l WHERE l.thread = t.id AND l.expires_at > now())
                 ORDER BY (t.status = 'running'), t.id
                 LIMIT $2
                 FOR UPDATE OF t SKIP LOCKED",
                vec![
                    Box::new(pipelines.clone()),
                    Box::new(limit),
                    Box::new(query.except.clone()),
                ],
            ),
            // Paused threads with no live lease that may go on: answered since a holder
            // last took them, or past a deadline. Their gates say whether they can.
            super::rows::Stmt::new(
                "SELECT t.id, t.rec, t.answers FROM pipec_threads t
                 WHERE t.status = 'paused' AND NOT t.cancel_requested
                   AND (t.answers > 0 OR t.due_ms <= $3)
                   AND ($1::text[] IS NULL OR t.pipeline = ANY($1))
                   AND NOT (t.id = ANY($2))
                   AND NOT EXISTS (SELECT 1 FROM pipec_leases l WHERE l.thread = t.id AND l.expires_at > now())
                 ORDER BY t.id
                 FOR UPDATE OF t SKIP LOCKED",
                vec![
                    Box::new(pipelines),
                    Box::new(query.except.clone()),
                    Box::new(query.now_ms as i64),
                ],
            ),
        ],
    )
    .await?
    .into_iter();
    let (found, paused) = (
        found.next().unwrap_or_default(),
        found.next().unwrap_or_default(),
    );
    let mut orphaned = Vec::new();
    for r in found {
        let t = RunnableThread {
            id: r.get(0),
            pipeline: r.get(1),
            why: if r.get::<_, &str>(2) == "queued" {
                Why::Queued
            } else {
                Why::Orphaned
            },
        };
        if t.why == Why::Queued {
            out.push(t);
        } else {
            orphaned.push(t);
        }
    }
    for r in paused {
        if out.len() >= query.max() {
            break;
        }
        let id: String = r.get(0);
        let rec: ThreadRec = decode(r.get::<_, &[u8]>(1), &|| format!("thread {id}"))?;
        let gates = rows(
            &client,
            "SELECT g.rec, n.rec FROM pipec_gates g
             LEFT JOIN pipec_nodes n ON n.thread = g.thread AND n.name = g.name
             WHERE g.thread = $1",
            &[&id],
        )
        .await?;
        let mut decoded = Vec::new();
        for g in &gates {
            let gate: GateRec = decode(g.get::<_, &[u8]>(0), &|| format!("thread {id}, a gate"))?;
            let node: Option<NodeRec> = match g.get::<_, Option<&[u8]>>(1) {
                Some(b) => Some(decode(b, &|| format!("thread {id}, a node"))?),
                None => None,
            };
            decoded.push((gate, node));
        }
        let why = why_runnable(
            &rec,
            decoded.iter().map(|(g, n)| (g, n.as_ref())),
            query.now_ms,
            false,
        );
        match why {
            Some(why) => out.push(RunnableThread {
                id: rec.id,
                pipeline: rec.pipeline,
                why,
            }),
            // Its answers were taken in by the attempt they came during: they make it
            // work no more, unless another came since this look read the row (or a
            // claim took them in). Its deadline column is the record's again.
            None => {
                let answers: i64 = r.get(2);
                if answers > 0 {
                    exec(
                        &client,
                        "UPDATE pipec_threads SET answers = 0, due_ms = $3
                         WHERE id = $1 AND answers = $2 AND status = 'paused'",
                        &[&id, &answers, &rec.due_ms.map(|d| d as i64)],
                    )
                    .await?;
                }
            }
        }
    }
    out.extend(orphaned);
    out.truncate(query.max());
    Ok(out)
}

pub(super) async fn wait_for_work(db: Arc<Db>, timeout: Duration) -> Result<(), StoreError> {
    let q = &db.queue;
    let woken = q.wake.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    if q.generation.load(Ordering::SeqCst) != q.seen.load(Ordering::SeqCst) {
        return Ok(());
    }
    let _ = tokio::time::timeout(timeout, woken).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::super::testing;
    use crate::contract::{attempt, gate, rt, thread_rec, with_status};
    use crate::*;

    /// A look at the threads of every pipeline, `limit` at most.
    fn look(limit: usize) -> RunnableQuery {
        RunnableQuery {
            now_ms: ids::now_ms(),
            pipelines: None,
            limit,
            except: Vec::new(),
        }
    }

    /// A gate answered by another store (another pool, as another process has) while a
    /// worker waits with a 5 s poll: the wait ends within 100 ms, so it was the
    /// notification, not the poll.
    #[test]
    fn a_thread_that_ends_wakes_no_worker_and_one_given_back_does() {
        let Some(server) =
            testing::server("a_thread_that_ends_wakes_no_worker_and_one_given_back_does")
        else {
            return;
        };
        let schema = testing::TestSchema::new(&server, "ends");
        let (worker, runner) = (schema.store(), schema.store());
        let runtime = rt();
        let query = || look(0);
        // The look listens; what it saw is not news to the next wait.
        runtime.block_on(worker.runnable(query())).expect("look");
        let (lease, _) = runtime
            .block_on(runner.create_thread(thread_rec(), attempt()))
            .expect("create");
        let rec = with_status(&runner, &runtime, &lease.thread, Status::Completed);
        runtime
            .block_on(runner.commit(&lease, vec![rec]))
            .expect("complete");
        drop(lease);
        let start = Instant::now();
        runtime
            .block_on(worker.wait_for_work(Duration::from_millis(600)))
            .expect("wait");
        assert!(
            start.elapsed() >= Duration::from_millis(500),
            "a completed thread's release woke the worker after {:?}",
            start.elapsed()
        );
        // A thread whose holder let go while it was running is work: that release wakes.
        let (lease, _) = runtime
            .block_on(runner.create_thread(thread_rec(), attempt()))
            .expect("create");
        drop(lease);
        let start = Instant::now();
        runtime
            .block_on(worker.wait_for_work(Duration::from_secs(5)))
            .expect("wait");
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "an orphaned thread's release is heard at once, not after the poll"
        );
        assert_eq!(
            runtime
                .block_on(worker.runnable(query()))
                .expect("look")
                .len(),
            1
        );
    }

    #[test]
    fn an_answer_wakes_a_waiting_worker_through_notify() {
        let Some(server) = testing::server("an_answer_wakes_a_waiting_worker_through_notify")
        else {
            return;
        };
        let schema = testing::TestSchema::new(&server, "notify");
        let (worker, answerer) = (schema.store(), schema.store());
        let runtime = rt();
        let (lease, _) = runtime
            .block_on(answerer.create_thread(thread_rec(), attempt()))
            .expect("create");
        let id = lease.thread.clone();
        let rec = with_status(&answerer, &runtime, &id, Status::Paused);
        runtime
            .block_on(answerer.commit(&lease, vec![rec, Write::Gate("g".into(), gate("g"))]))
            .expect("pause");
        drop(lease);
        let mut worst = Duration::ZERO;
        let query = || look(0);
        // Wait for the release of the lease to be heard, then look: nothing to do.
        runtime
            .block_on(worker.wait_for_work(Duration::from_millis(300)))
            .expect("wait");
        assert!(
            runtime
                .block_on(worker.runnable(query()))
                .expect("runnable")
                .is_empty()
        );
        let answered = std::thread::spawn({
            let answerer = answerer.clone();
            let id = id.clone();
            move || {
                std::thread::sleep(Duration::from_millis(300));
                let at = Instant::now();
                rt().block_on(answerer.answer(&id, vec![("g".into(), json!(true))], "cli"))
                    .expect("answer");
                at
            }
        });
        runtime
            .block_on(worker.wait_for_work(Duration::from_secs(5)))
            .expect("wait");
        let woke = Instant::now();
        let at = answered.join().expect("answer thread");
        worst = worst.max(woke.saturating_duration_since(at));
        assert!(
            worst < Duration::from_millis(100),
            "woken {worst:?} after the answer committed"
        );
        let found = runtime
            .block_on(worker.runnable(query()))
            .expect("runnable");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].why, Why::Answered);
        eprintln!("woken {worst:?} after the answer");
    }

    #[test]
    fn a_notification_is_a_submit_other_work_or_another_schemas() {
        use super::{Kind, kind};
        assert_eq!(kind(Some("s1"), "s1"), Some(Kind::Other));
        assert_eq!(kind(Some("s1"), "queued s1"), Some(Kind::Queued));
        assert_eq!(kind(Some("s1"), "s2"), None);
        assert_eq!(kind(Some("s1"), "queued s2"), None);
        assert_eq!(kind(Some("queued s1"), "queued s1"), Some(Kind::Other));
        // Before the listener knows its schema, everything may be work.
        assert_eq!(kind(None, "queued s2"), Some(Kind::Other));
    }

    /// What a worker reads to skip a look: a submit from another process counts as a
    /// thread queued, an answer as other work, and nothing is counted before the store
    /// listens.
    #[test]
    fn the_news_count_submits_apart_from_other_work() {
        let Some(server) = testing::server("the_news_count_submits_apart_from_other_work") else {
            return;
        };
        let schema = testing::TestSchema::new(&server, "news");
        let (worker, other) = (schema.store(), schema.store());
        let runtime = rt();
        assert_eq!(worker.news(), None, "no news before the store listens");
        let query = || look(8);
        runtime.block_on(worker.runnable(query())).expect("look");
        let start = worker.news().expect("listening");
        // Waits until the news moved from `from`, as the worker's wait does.
        let next = |from: News| {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                runtime
                    .block_on(worker.wait_for_work(Duration::from_millis(50)))
                    .expect("wait");
                let now = worker.news().expect("listening");
                if now != from || Instant::now() > deadline {
                    return now;
                }
            }
        };
        let mut queued = thread_rec();
        queued.status = Status::Queued;
        runtime.block_on(other.submit(queued)).expect("submit");
        let after_submit = next(start);
        assert_eq!(after_submit.queued, start.queued + 1);
        assert_eq!(
            after_submit.other, start.other,
            "a submit is not other news"
        );

        // The look notes what was heard, so the wait below waits for the pause.
        runtime.block_on(worker.runnable(query())).expect("look");
        let (lease, _) = runtime
            .block_on(other.create_thread(thread_rec(), attempt()))
            .expect("create");
        let rec = with_status(&other, &runtime, &lease.thread, Status::Paused);
        let thread = lease.thread.clone();
        runtime
            .block_on(other.commit_last(&lease, vec![rec, Write::Gate("g".into(), gate("g"))]))
            .expect("pause");
        drop(lease);
        // The pause's release (other news, if any) is heard before the answer.
        runtime.block_on(worker.runnable(query())).expect("look");
        runtime
            .block_on(worker.wait_for_work(Duration::from_millis(300)))
            .expect("wait");
        let paused = worker.news().expect("listening");
        assert_eq!(paused.queued, after_submit.queued, "a pause is no submit");
        runtime
            .block_on(other.answer(&thread, vec![("g".into(), json!(true))], "cli"))
            .expect("answer");
        let after_answer = next(paused);
        assert_eq!(after_answer.other, paused.other + 1);
        assert_eq!(after_answer.queued, paused.queued);
    }

    /// The end of an attempt that leaves a thread waiting for a person wakes no worker;
    /// one whose gate was answered while the attempt held it does (the answer found the
    /// thread held, so its own notification found no work), and so does a thread given
    /// back mid-run.
    #[test]
    fn a_release_is_news_only_when_it_leaves_work() {
        let Some(server) = testing::server("a_release_is_news_only_when_it_leaves_work") else {
            return;
        };
        let schema = testing::TestSchema::new(&server, "released");
        let (worker, other) = (schema.store(), schema.store());
        let runtime = rt();
        let query = || look(8);
        runtime.block_on(worker.runnable(query())).expect("look");
        // The news once everything sent so far was heard (the writes' notifications are
        // sent when they commit; a quiet moment says none is still on its way). The
        // listening connection counts them whether or not anyone waits.
        let settled = || {
            let mut last = worker.news().expect("listening");
            loop {
                std::thread::sleep(Duration::from_millis(300));
                let now = worker.news().expect("listening");
                if now == last {
                    return now;
                }
                last = now;
            }
        };
        let pause = |lease: &Lease| {
            let rec = with_status(&other, &runtime, &lease.thread, Status::Paused);
            runtime
                .block_on(other.commit(lease, vec![rec, Write::Gate("g".into(), gate("g"))]))
                .expect("pause");
        };

        // Paused, nobody answered: its release is no news.
        let (lease, _) = runtime
            .block_on(other.create_thread(thread_rec(), attempt()))
            .expect("create");
        pause(&lease);
        let before = settled();
        drop(lease);
        let after = settled();
        assert_eq!(
            after, before,
            "a release that leaves a thread waiting wakes no one"
        );
        // Its last commit and the release together are no news either.
        let (lease, _) = runtime
            .block_on(other.create_thread(thread_rec(), attempt()))
            .expect("create");
        let before = settled();
        let rec = with_status(&other, &runtime, &lease.thread, Status::Paused);
        runtime
            .block_on(other.commit_last(&lease, vec![rec, Write::Gate("g".into(), gate("g"))]))
            .expect("pause");
        drop(lease);
        assert_eq!(settled(), before, "a last commit that pauses wakes no one");

        // Answered while held: the answer and the release are both news, and the thread
        // is work once released.
        let (lease, _) = runtime
            .block_on(other.create_thread(thread_rec(), attempt()))
            .expect("create");
        pause(&lease);
        let thread = lease.thread.clone();
        let before = settled();
        runtime
            .block_on(other.answer(&thread, vec![("g".into(), json!(true))], "cli"))
            .expect("answer");
        let answered = settled();
        assert_eq!(answered.other, before.other + 1);
        drop(lease);
        let released = settled();
        assert_eq!(
            released.other,
            answered.other + 1,
            "the release leaves work"
        );
        assert_eq!(released.queued, before.queued);
        let found = runtime.block_on(worker.runnable(query())).expect("look");
        assert_eq!(
            found.iter().map(|t| (&t.id, t.why)).collect::<Vec<_>>(),
            vec![(&thread, Why::Answered)]
        );

        // Given back mid-run: news.
        let (lease, _) = runtime
            .block_on(other.create_thread(thread_rec(), attempt()))
            .expect("create");
        let before = settled();
        drop(lease);
        assert_eq!(
            settled().other,
            before.other + 1,
            "a thread left mid-run is work"
        );
    }

    /// A take that leaves queued threads behind (past its limit here; locked by another
    /// process's look or claim alike) is news to take again; one that empties the queue
    /// is not.
    #[test]
    fn a_take_that_leaves_queued_threads_is_news_to_take_again() {
        let Some(server) =
            testing::server("a_take_that_leaves_queued_threads_is_news_to_take_again")
        else {
            return;
        };
        let schema = testing::TestSchema::new(&server, "more");
        let store = schema.store();
        let runtime = rt();
        for _ in 0..3 {
            let mut rec = thread_rec();
            rec.status = Status::Queued;
            runtime.block_on(store.submit(rec)).expect("submit");
        }
        let query = look;
        let take = |limit| {
            runtime
                .block_on(store.take(query(limit), attempt()))
                .expect("take")
                .expect("postgres takes")
        };
        let first = take(2);
        assert_eq!(first.len(), 2);
        let after_first = store.news().expect("listening");
        let last = take(2);
        assert_eq!(last.len(), 1);
        let after_last = store.news().expect("listening");
        assert_eq!(
            after_last.queued, after_first.queued,
            "the take that emptied the queue is no news"
        );
        assert!(take(2).is_empty());
        assert_eq!(store.news().expect("listening").queued, after_last.queued);
        // The first take left one behind: it counted as news before the second.
        let other = testing::TestSchema::new(&server, "more2");
        let fresh = other.store();
        for _ in 0..2 {
            let mut rec = thread_rec();
            rec.status = Status::Queued;
            runtime.block_on(fresh.submit(rec)).expect("submit");
        }
        runtime.block_on(fresh.runnable(query(0))).expect("listen");
        let before = fresh.news().expect("listening");
        let one = runtime
            .block_on(fresh.take(query(1), attempt()))
            .expect("take")
            .expect("postgres takes");
        assert_eq!(one.len(), 1);
        assert_eq!(fresh.news().expect("listening").queued, before.queued + 1);
    }
}
