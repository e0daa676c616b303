//! Workers: a process that takes runnable threads from a store (queued ones, answered
//! or due gates, threads whose holder died) and runs each to its next pause or end, a
//! few at once, then waits for more.
//!
//! A thread runs exactly as `pipec resume` runs it: the plan it was started with (kept
//! in the store by hash), its recorded inputs, configuration and model overrides, in
//! its project root, through `Runner::resume_with`. So a worker is the resume path in a
//! loop, and claims are the store's: two workers offered the same thread cannot both
//! hold it.
//!
//! A worker that serves plans of its own (`--pipelines DIR`) never runs a plan from the
//! store: a thread runs under the worker's plan of its pipeline, in the worker's project,
//! as `pipec resume --plan FILE` would run it. A thread stored with another plan of that
//! pipeline takes the worker's where the plan-change rules allow it (`plan_upgraded`);
//! one they refuse fails with the refusal, nothing of it run (`Runner::resume_taken`).
//!
//! Stopping: [`Worker::stop_signal`] stops claiming and gives every attempt the stop
//! (`RunOptions::stop`): the steps in flight finish and commit, and each thread goes
//! back to the queue with nothing started (`thread_released`), so no lease is left held
//! and nothing is repeated by the worker that takes it next.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::error::RuntimeError;
use super::options::{RunOptions, StopSignal};
use super::outcome::Outcome;
use super::runner::Runner;
use super::runner::give_back;
use pipec_diagnostic as codes;
use pipec_plan::Plan;
use pipec_store::{AttemptRec, News, RunnableQuery, RunnableThread, Store, Taken, Why, ids};

/// Where a worker's lines go (one per claim and per finish).
pub type WorkerLog = Arc<dyn Fn(&str) + Send + Sync>;

/// How a worker works.
#[derive(Clone)]
pub struct WorkerOptions {
    /// How many threads run at once.
    pub concurrency: usize,
    /// How many nodes of one thread run at once.
    pub node_concurrency: usize,
    /// Only threads of these pipelines (every pipeline when `None`); with `plans`, the
    /// pipelines of those plans.
    pub pipelines: Option<Vec<String>>,
    /// The plans this worker runs, one per pipeline, instead of the ones stored with the
    /// threads (which it then never reads): a thread stored with another plan of the
    /// pipeline takes this one as the plan-change rules allow, and fails with their
    /// refusal otherwise, nothing of it run.
    pub plans: Option<Vec<ServedPlan>>,
    /// The project root threads run in, instead of the one each recorded.
    pub project_root: Option<PathBuf>,
    /// The longest wait between two looks at the store (the fallback when nothing tells
    /// the worker of new work).
    pub poll: Duration,
    /// How long a thread that could not be run (its plan unreadable, a configuration
    /// value missing here) is left alone before it is tried again.
    pub retry_after: Duration,
    /// Lines about claims and finishes (none when `None`).
    pub log: Option<WorkerLog>,
    /// Errors (a thread that could not be run, the store failing).
    pub errors: Option<WorkerLog>,
    /// Where the attempts' spans go ([`crate::trace`]); none are made without it.
    pub spans: Option<crate::trace::SpanSink>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 1,
            node_concurrency: 8,
            pipelines: None,
            plans: None,
            project_root: None,
            poll: pipec_store::DEFAULT_POLL,
            retry_after: Duration::from_secs(30),
            log: None,
            errors: None,
            spans: None,
        }
    }
}

/// A plan a worker serves, and the file it was compiled from (what a person names with
/// `pipec resume --plan`).
#[derive(Clone)]
pub struct ServedPlan {
    pub plan: Plan,
    pub source: String,
}

/// What a worker did, when it stops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Attempts it ran, by how they ended (`completed`, `paused`, `failed`, `blocked`,
    /// `released`, `error`).
    pub ended: std::collections::BTreeMap<String, u64>,
}

/// A worker on a store.
pub struct Worker {
    store: Arc<dyn Store>,
    opts: WorkerOptions,
    stop: StopSignal,
    runners: Runners,
}

/// The runners a worker built, by the plan, project root and source of the threads they
/// run: a plan is stored once by its hash and never changes, so its parse and its
/// schemas' validators are made once, not for every attempt.
#[derive(Clone, Default)]
struct Runners(Arc<std::sync::Mutex<HashMap<RunnerKey, Arc<Runner>>>>);

/// A plan's hash, a project root, a source path.
type RunnerKey = (String, PathBuf, String);

/// How many runners a worker keeps (all are dropped when one more is needed).
const RUNNERS_KEPT: usize = 64;

impl Worker {
    pub fn new(store: Arc<dyn Store>, mut opts: WorkerOptions) -> Worker {
        if let Some(plans) = &opts.plans {
            opts.pipelines = Some(plans.iter().map(|p| p.plan.name.clone()).collect());
        }
        Worker {
            store,
            opts,
            stop: StopSignal::default(),
            runners: Runners::default(),
        }
    }

    /// The worker's stop: no thread is claimed after it, and running attempts release
    /// their threads at their next step; `run` then returns.
    pub fn stop_signal(&self) -> StopSignal {
        self.stop.clone()
    }

    fn log(&self, line: &str) {
        if let Some(log) = &self.opts.log {
            log(line);
        }
    }

    fn error(&self, line: &str) {
        if let Some(log) = &self.opts.errors {
            log(line);
        }
    }

    /// Takes and runs threads until the stop signal; then waits for the attempts in
    /// flight to finish or release their threads.
    pub async fn run(&self) -> WorkerReport {
        let mut report = WorkerReport::default();
        let mut running: JoinSet<(String, Result<Outcome, RuntimeError>, Duration)> =
            JoinSet::new();
        let mut busy: HashSet<String> = HashSet::new();
        let mut left_alone: HashMap<String, Instant> = HashMap::new();
        let concurrency = self.opts.concurrency.max(1);
        let mut rng = Rng::seeded();
        let mut gather = Gather::new(concurrency);
        let mut heard = Heard::new(self.opts.poll);
        loop {
            if self.stop.is_stopped() {
                break;
            }
            let mut room = concurrency.saturating_sub(running.len());
            gather.room(room, Instant::now());
            if room > 0 && !gather.waits(running.len(), Instant::now()) {
                let now = Instant::now();
                left_alone.retain(|_, until| *until > now);
                let except: Vec<String> = busy.iter().chain(left_alone.keys()).cloned().collect();
                // Queued threads come claimed, in one transaction, where the store can.
                let before = self.store.news();
                let mut look = heard.look_needed(before, now);
                if heard.take_needed(before, now) {
                    let query = RunnableQuery {
                        now_ms: ids::now_ms(),
                        pipelines: self.opts.pipelines.clone(),
                        limit: room,
                        except: except.clone(),
                    };
                    let taking = self.store.take(query, attempt_template()).await;
                    gather.took(match &taking {
                        Ok(Some(taken)) => Some(taken.len() == room),
                        _ => None,
                    });
                    match taking {
                        Ok(Some(taken)) => {
                            // Room left: the queue was empty, until news of a submit.
                            heard.took(before.filter(|_| taken.len() < room), now);
                            look &= taken.len() < room;
                            room -= taken.len();
                            for t in taken {
                                busy.insert(t.lease.thread.clone());
                                self.spawn(&mut running, Work::Taken(t));
                            }
                        }
                        Ok(None) => heard.took(None, now),
                        Err(e) => {
                            heard.took(None, now);
                            self.error(&format!("error: cannot take from the queue: {e}"));
                        }
                    }
                }
                if look && room > 0 {
                    let before = self.store.news();
                    // More than there is room for: workers that look at once are offered
                    // the same oldest threads, and each takes its own random few of them,
                    // so they rarely reach for the same one (only one of them could have
                    // it).
                    let query = RunnableQuery {
                        now_ms: ids::now_ms(),
                        pipelines: self.opts.pipelines.clone(),
                        limit: room * SPREAD,
                        except,
                    };
                    match self.store.runnable(query).await {
                        // The store passed over the threads in `except`.
                        Ok(found) => {
                            // Threads left over are news to the next look.
                            let all = found.len() <= room;
                            heard.looked(before.filter(|_| all), now);
                            for t in pick(found, room, &mut rng) {
                                busy.insert(t.id.clone());
                                self.spawn(&mut running, Work::Offered(t));
                            }
                        }
                        Err(e) => {
                            heard.looked(None, now);
                            self.error(&format!("error: cannot read the queue: {e}"));
                        }
                    }
                }
            }
            let room = concurrency.saturating_sub(running.len());
            gather.room(room, Instant::now());
            let gathering = gather.waits(running.len(), Instant::now());
            tokio::select! {
                Some(joined) = running.join_next(), if !running.is_empty() => {
                    self.finished(joined, &mut busy, &mut left_alone, &mut report);
                }
                _ = tokio::time::sleep_until(gather.until().into()), if gathering => {}
                _ = self.store.wait_for_work(self.opts.poll), if room > 0 && !gathering => {
                    // Every worker hears a notification at once. Each waits a random
                    // moment before it looks, so that the first has locked what it took
                    // when the others look (a look passes over locked threads), and they
                    // do not all reach for the one thread that came.
                    let us = rng.below(WAKE_SPREAD_US) as u64;
                    tokio::time::sleep(Duration::from_micros(us)).await;
                }
                _ = self.stop.stopped() => {}
            }
        }
        while let Some(joined) = running.join_next().await {
            self.finished(joined, &mut busy, &mut left_alone, &mut report);
        }
        report
    }

    fn spawn(
        &self,
        running: &mut JoinSet<(String, Result<Outcome, RuntimeError>, Duration)>,
        work: Work,
    ) {
        let store = self.store.clone();
        let opts = self.opts.clone();
        let stop = self.stop.clone();
        let runners = self.runners.clone();
        running.spawn(async move {
            let start = Instant::now();
            let (id, result) = match work {
                Work::Offered(t) => {
                    let result = run_thread(store, &opts, &runners, stop, &t).await;
                    (t.id, result)
                }
                Work::Taken(t) => {
                    let id = t.lease.thread.clone();
                    (id, run_taken(store, &opts, &runners, stop, t).await)
                }
            };
            (id, result, start.elapsed())
        });
    }

    fn finished(
        &self,
        joined: Result<(String, Result<Outcome, RuntimeError>, Duration), tokio::task::JoinError>,
        busy: &mut HashSet<String>,
        left_alone: &mut HashMap<String, Instant>,
        report: &mut WorkerReport,
    ) {
        let (thread, result, took) = match joined {
            Ok(j) => j,
            Err(e) => {
                self.error(&format!("error: a thread's task stopped unexpectedly: {e}"));
                *report.ended.entry("error".into()).or_default() += 1;
                return;
            }
        };
        busy.remove(&thread);
        let ms = took.as_millis();
        match result {
            Ok(outcome) => {
                let how = match &outcome {
                    Outcome::Completed { .. } => "completed",
                    Outcome::Paused { .. } => "paused",
                    Outcome::Failed { .. } => "failed",
                    Outcome::Blocked { .. } => "blocked",
                    Outcome::Released { .. } => "released",
                };
                self.log(&format!("{how} {thread} ({ms} ms)"));
                *report.ended.entry(how.into()).or_default() += 1;
            }
            Err(e) if e.is(&codes::THREAD_LOCKED) || e.is(&codes::THREAD_ENDED) => {
                // Another worker took it first, or finished it.
                self.log(&format!("skipped {thread}: {}", e.message));
            }
            Err(e) => {
                self.error(&format!(
                    "error[{}]: thread {thread}: {}{}",
                    e.code,
                    e.message,
                    e.help
                        .as_ref()
                        .map(|h| format!("\n  help: {h}"))
                        .unwrap_or_default()
                ));
                *report.ended.entry("error".into()).or_default() += 1;
                left_alone.insert(thread, Instant::now() + self.opts.retry_after);
            }
        }
    }
}

/// What a worker starts: a thread it was offered (to claim), or one it took claimed.
enum Work {
    Offered(RunnableThread),
    Taken(Taken),
}

/// What every attempt a worker takes has in common; the store gives each its number,
/// run id and plan.
fn attempt_template() -> AttemptRec {
    AttemptRec {
        number: 0,
        run_id: String::new(),
        pid: std::process::id(),
        host: super::runner::host_name(),
        started_ms: ids::now_ms(),
        ended_ms: 0,
        end: None,
        plan_hash: String::new(),
        pipec: env!("CARGO_PKG_VERSION").into(),
    }
}

/// Runs a thread the worker took to its next pause or end, as `pipec resume` would,
/// with the plan the store keeps for it. One this worker cannot run (its plan
/// unreadable) is given back as it was.
async fn run_taken(
    store: Arc<dyn Store>,
    opts: &WorkerOptions,
    runners: &Runners,
    stop: StopSignal,
    taken: Taken,
) -> Result<Outcome, RuntimeError> {
    let Some(rec) = taken.state.thread.clone() else {
        return Err(pipec_store::StoreError::Locked {
            thread: taken.lease.thread.clone(),
            holder: None,
        }
        .into());
    };
    took(opts, &rec, taken.why, rec.attempts);
    let root = opts
        .project_root
        .clone()
        .unwrap_or_else(|| PathBuf::from(&rec.project_root));
    let runner = match runners.get(&store, opts, &rec, root).await {
        Ok(runner) => runner,
        Err(e) => {
            give_back(&*store, taken.lease, taken.state, taken.why).await?;
            return Err(e);
        }
    };
    runner.resume_taken(taken, run_options(opts, stop)).await
}

/// The line a worker logs when it takes a thread for its attempt `attempt`.
fn took(opts: &WorkerOptions, rec: &pipec_store::ThreadRec, why: Why, attempt: u32) {
    if let Some(log) = &opts.log {
        log(&format!(
            "took {} ({}, {}, attempt {attempt})",
            rec.id,
            rec.pipeline,
            why_text(why),
        ));
    }
}

/// How a worker runs an attempt.
fn run_options(opts: &WorkerOptions, stop: StopSignal) -> RunOptions {
    RunOptions {
        concurrency: Some(opts.node_concurrency),
        stop: Some(stop),
        ..Default::default()
    }
}

/// Runs one thread to its next pause or end, as `pipec resume` would, with the plan the
/// store keeps for it.
async fn run_thread(
    store: Arc<dyn Store>,
    opts: &WorkerOptions,
    runners: &Runners,
    stop: StopSignal,
    t: &RunnableThread,
) -> Result<Outcome, RuntimeError> {
    // Offered a moment ago; another worker may have moved it on since, or be taking it
    // now. The record says whether it still waits for a worker (a paused one's gates
    // too); a race the look could not see is for the claim to settle.
    let Some(rec) = store.untaken_thread_rec(&t.id).await? else {
        // Another worker is taking it, holds it, or it is gone.
        return Err(pipec_store::StoreError::Locked {
            thread: t.id.clone(),
            holder: None,
        }
        .into());
    };
    let paused = if rec.status == pipec_store::Status::Paused {
        Some(store.load(&t.id).await?)
    } else {
        None
    };
    let gates = paused
        .iter()
        .flat_map(|s| s.gates.values().map(|g| (g, s.nodes.get(&g.node))));
    let Some(why) = pipec_store::why_runnable(&rec, gates, ids::now_ms(), false) else {
        // Another worker took it, or moved it on, since it was offered.
        return Err(pipec_store::StoreError::Locked {
            thread: rec.id.clone(),
            holder: rec.holder.clone(),
        }
        .into());
    };
    took(opts, &rec, why, rec.attempts + 1);
    let root = opts
        .project_root
        .clone()
        .unwrap_or_else(|| PathBuf::from(&rec.project_root));
    let runner = runners.get(&store, opts, &rec, root).await?;
    let result = runner
        .resume_with(&rec.id, Vec::new(), run_options(opts, stop.clone()))
        .await;
    match result {
        // The worker's own plan, which the thread's state refuses: claimed, so that the
        // refusal is recorded on the thread (decided again on what the claim found).
        Err(e)
            if (rec.plan_hash != runner.plan().hash
                && (e.is(&codes::FOREIGN_PLAN) || e.is(&codes::PLAN_CHANGED)))
                || (opts.plans.is_some() && e.is(&codes::OPTION_INVALID)) =>
        {
            runner
                .resume_claimed(&rec, why, run_options(opts, stop))
                .await
        }
        other => other,
    }
}

impl Runners {
    /// The runner for `rec`: the worker's own plan of its pipeline when it serves plans,
    /// else the thread's stored plan, with its root and source; built when not kept yet.
    async fn get(
        &self,
        store: &Arc<dyn Store>,
        opts: &WorkerOptions,
        rec: &pipec_store::ThreadRec,
        root: PathBuf,
    ) -> Result<Arc<Runner>, RuntimeError> {
        let served = match &opts.plans {
            Some(plans) => match plans.iter().find(|p| p.plan.name == rec.pipeline) {
                Some(p) => Some(p),
                None => {
                    return Err(RuntimeError::new(
                        &codes::FOREIGN_PLAN,
                        format!(
                            "thread {} runs the pipeline `{}`, which this worker does not serve",
                            rec.id, rec.pipeline
                        ),
                    ));
                }
            },
            None => None,
        };
        let key = match served {
            Some(p) => (p.plan.hash.clone(), root, p.source.clone()),
            None => (rec.plan_hash.clone(), root, rec.source.clone()),
        };
        if let Some(r) = self.lock().get(&key) {
            return Ok(r.clone());
        }
        let plan = match served {
            Some(p) => p.plan.clone(),
            None => super::stored_plan(&**store, rec).await?,
        };
        let mut runner = Runner::with_store(plan, store.clone())
            .project_root(key.1.clone())
            .source(&key.2)
            .concurrency(opts.node_concurrency);
        if served.is_some() {
            // The worker's folder decides what runs, and its environment where it goes.
            runner = runner.own_configuration();
        }
        if let Some(sink) = &opts.spans {
            runner = runner.spans(sink.clone());
        }
        let runner = Arc::new(runner);
        let mut kept = self.lock();
        if kept.len() >= RUNNERS_KEPT {
            kept.clear();
        }
        kept.insert(key, runner.clone());
        Ok(runner)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, PathBuf, String), Arc<Runner>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// When a worker takes again while the queue holds more than it could take: a take
/// costs a transaction of two round trips however many threads it takes, so a worker
/// whose last take was full (more were waiting) and that still runs threads lets the
/// room of a few gather first, for a moment at most. A worker whose last take found
/// less than it had room for takes as soon as there is room.
struct Gather {
    /// The room worth a take of its own.
    enough: usize,
    /// Whether the last take was full.
    backlog: bool,
    /// The room the worker has, and since when it has had room it has not taken.
    room: usize,
    since: Option<Instant>,
}

/// The longest a worker lets room gather.
const GATHER: Duration = Duration::from_millis(2);

impl Gather {
    fn new(concurrency: usize) -> Gather {
        Gather {
            enough: concurrency.div_ceil(2),
            backlog: false,
            room: 0,
            since: None,
        }
    }

    /// The room the worker has now.
    fn room(&mut self, room: usize, now: Instant) {
        self.room = room;
        if room == 0 {
            self.since = None;
        } else if self.since.is_none() {
            self.since = Some(now);
        }
    }

    /// A take was made: `Some(full)` when the store took (whether it filled the room),
    /// `None` when it does not take or failed.
    fn took(&mut self, full: Option<bool>) {
        self.backlog = full.unwrap_or(false);
        self.since = None;
    }

    /// Whether to wait before taking, with `running` threads running.
    fn waits(&self, running: usize, now: Instant) -> bool {
        let Some(since) = self.since else {
            return false;
        };
        self.backlog && running > 0 && self.room < self.enough && now < since + GATHER
    }

    /// When the wait ends.
    fn until(&self) -> Instant {
        self.since.map_or_else(Instant::now, |s| s + GATHER)
    }
}

/// What the store had told a worker ([`News`]) before its last take and its last look
/// that left nothing behind, and when they were, so that it asks again only what may
/// have changed since: a take after news of any kind, a look after news other than a
/// submit, and each once the poll interval has passed (what is never notified: a lease
/// that expired, a deadline that passed). Without news (a store that does not hear
/// notifications, or a take that filled the room) it asks at every turn.
struct Heard {
    poll: Duration,
    take: Option<(News, Instant)>,
    look: Option<(News, Instant)>,
}

impl Heard {
    fn new(poll: Duration) -> Heard {
        Heard {
            poll,
            take: None,
            look: None,
        }
    }

    fn take_needed(&self, now: Option<News>, at: Instant) -> bool {
        match (self.take, now) {
            (Some((then, when)), Some(now)) => now != then || at >= when + self.poll,
            _ => true,
        }
    }

    fn look_needed(&self, now: Option<News>, at: Instant) -> bool {
        match (self.look, now) {
            (Some((then, when)), Some(now)) => now.other != then.other || at >= when + self.poll,
            _ => true,
        }
    }

    /// A take was made that left the queue empty, with the news read before it; `None`
    /// when the take filled the room, failed, or there was no news to read.
    fn took(&mut self, before: Option<News>, at: Instant) {
        self.take = before.map(|n| (n, at));
    }

    /// A look was made that offered every thread it found, with the news read before it.
    fn looked(&mut self, before: Option<News>, at: Instant) {
        self.look = before.map(|n| (n, at));
    }
}

/// Up to how long a woken worker waits before it looks (microseconds).
const WAKE_SPREAD_US: usize = 8_000;

/// How many threads a worker is offered for each it has room for.
const SPREAD: usize = 4;

/// `n` of `offered`, at random, in the order offered (oldest first).
fn pick(offered: Vec<RunnableThread>, n: usize, rng: &mut Rng) -> Vec<RunnableThread> {
    if offered.len() <= n {
        return offered;
    }
    let mut chosen = vec![false; offered.len()];
    let mut left = n;
    while left > 0 {
        let i = rng.below(offered.len());
        if !chosen[i] {
            chosen[i] = true;
            left -= 1;
        }
    }
    offered
        .into_iter()
        .zip(chosen)
        .filter_map(|(t, c)| c.then_some(t))
        .collect()
}

/// A small generator, seeded per process and moment (xorshift).
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng((now ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

fn why_text(why: Why) -> &'static str {
    match why {
        Why::Queued => "queued",
        Why::Answered => "a gate was answered",
        Why::Due => "a gate's deadline passed",
        Why::Orphaned => "its holder is gone",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(n: usize) -> Vec<RunnableThread> {
        (0..n)
            .map(|i| RunnableThread {
                id: format!("{i:03}"),
                pipeline: "p".into(),
                why: Why::Queued,
            })
            .collect()
    }

    #[test]
    fn a_worker_asks_again_only_what_news_or_its_poll_may_have_changed() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let news = |queued, other| Some(News { queued, other });
        let mut h = Heard::new(Duration::from_secs(1));
        // Nothing asked yet: both.
        assert!(h.take_needed(news(0, 0), t0) && h.look_needed(news(0, 0), t0));
        h.took(news(0, 0), t0);
        h.looked(news(0, 0), t0);
        // No news: neither, until the poll interval passes.
        assert!(!h.take_needed(news(0, 0), ms(10)) && !h.look_needed(news(0, 0), ms(10)));
        assert!(h.take_needed(news(0, 0), ms(1000)) && h.look_needed(news(0, 0), ms(1000)));
        // A submit: a take, not a look.
        assert!(h.take_needed(news(1, 0), ms(10)));
        assert!(!h.look_needed(news(1, 0), ms(10)));
        // Other news (an answer, a release, a lost connection): both.
        assert!(h.take_needed(news(0, 1), ms(10)) && h.look_needed(news(0, 1), ms(10)));
        // A store without news, or a take that filled the room: at every turn.
        assert!(h.take_needed(None, ms(10)) && h.look_needed(None, ms(10)));
        h.took(None, ms(10));
        assert!(h.take_needed(news(0, 0), ms(11)));
        // A look that left threads over is not done either.
        h.looked(None, ms(10));
        assert!(h.look_needed(news(0, 0), ms(11)));
    }

    #[test]
    fn room_gathers_for_a_take_only_while_the_queue_had_more_and_only_for_a_moment() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut g = Gather::new(8);
        // The first take: nothing known of the queue, room is taken at once.
        g.room(8, t0);
        assert!(!g.waits(0, t0));
        g.took(Some(true));
        // Full: more wait. One slot frees up while seven run: wait for more room...
        g.room(1, ms(1));
        assert!(g.waits(7, ms(1)));
        assert_eq!(g.until(), ms(1) + GATHER);
        // ...but not past the moment, and not once there is room for half.
        assert!(!g.waits(7, ms(1) + GATHER));
        g.room(4, ms(2));
        assert!(!g.waits(4, ms(2)));
        // Nothing running: no reason to wait.
        g.room(1, ms(2));
        assert!(!g.waits(0, ms(2)));
        // A take that found less than there was room for: the queue is empty, so a
        // thread that comes is taken as soon as there is room.
        g.took(Some(false));
        g.room(1, ms(3));
        assert!(!g.waits(7, ms(3)));
        // A store that takes nothing (redb) never waits.
        g.took(None);
        g.room(1, ms(4));
        assert!(!g.waits(7, ms(4)));
    }

    #[test]
    fn a_pick_takes_that_many_distinct_threads_oldest_first() {
        let mut rng = Rng(7);
        let picked = pick(offered(32), 8, &mut rng);
        let ids: Vec<&str> = picked.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), 8);
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted, ids, "distinct, in the order offered");
        // Fewer offered than there is room for: all of them.
        assert_eq!(pick(offered(3), 8, &mut rng).len(), 3);
    }

    #[test]
    fn workers_that_look_at_once_mostly_pick_different_threads() {
        // Four workers, each with room for 8, offered the same 32 oldest threads: taking
        // the first 8 each would have all four reach for the same 8.
        let picks: Vec<std::collections::HashSet<String>> = (1..=4u64)
            .map(|seed| {
                let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                pick(offered(32), 8, &mut rng)
                    .into_iter()
                    .map(|t| t.id)
                    .collect()
            })
            .collect();
        let mut shared = 0;
        for a in 0..picks.len() {
            for b in a + 1..picks.len() {
                shared += picks[a].intersection(&picks[b]).count();
            }
        }
        // Six pairs; the first 8 each would share 48. At random about 2 a pair.
        assert!(
            shared < 30,
            "{shared} threads shared between pairs of workers"
        );
    }
}
