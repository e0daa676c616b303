//! What the scheduler and its tasks share (`AttemptContext`), and the one way they write:
//! [`AttemptContext::commit`] scrubs secrets from every write, stamps the events, commits them
//! in one fenced store transaction, and only then streams the committed events.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use crate::deferred::{Deferred, Then};
use crate::error::RuntimeError;
use crate::hosts::HostFn;
use crate::llm::Model;
use crate::progress::Progress;
use crate::resources::Resources;
use crate::secrets::Scrubber;
use crate::validate::Validators;
use pipec_plan::Plan;
use pipec_store::{Event, Lease, RecordedEvent, ResourceRef, Store, StoredError, Write};

/// A sink for `--events`: every event, after it is committed, as the store numbered it.
pub type EventSink = Arc<dyn Fn(&RecordedEvent) + Send + Sync>;

/// What tasks share with the scheduler.
pub(crate) struct AttemptContext {
    pub plan: Arc<Plan>,
    pub store: Arc<dyn Store>,
    pub lease: Lease,
    pub thread_id: String,
    pub attempt_no: u32,
    pub project_root: PathBuf,
    pub hosts: HashMap<String, HostFn>,
    pub models: HashMap<String, Arc<dyn Model>>,
    pub validators: Arc<Validators>,
    pub scrubber: Scrubber,
    pub events: Option<EventSink>,
    /// The attempt's trace, when spans are made.
    pub trace: Option<Arc<crate::trace::AttemptTrace>>,
    pub progress: Option<Arc<dyn Progress>>,
    /// The run's permits: how many tries may run at once (`--concurrency`).
    pub permits: Arc<Semaphore>,
    pub concurrency: usize,
    /// The events committed, on their way to `events` in order.
    pub stream: Ordered,
    /// MCP servers, the fetch cache and heals.
    pub resources: Arc<Resources>,
    /// Nodes whose effects end the process once they ran (a test's fault).
    pub kill_after: Vec<String>,
    /// The recorded thread a replay answers every call from.
    pub replay: Option<Arc<crate::replay::Recorded>>,
    /// How far ahead of the real clock gate deadlines are judged (a test's skipped time).
    pub clock_ahead_ms: u64,
    /// Writes of redoable work waiting for the next commit ([`crate::deferred`]).
    pub deferred: Deferred,
    /// Held (shared) by each flush of [`AttemptContext::deferred`] while it commits, and
    /// alone by the attempt's last commit.
    pub flushes: tokio::sync::RwLock<()>,
    /// The links some node reads, by producing node, the kinds read ([`Plan::links_read`]):
    /// a `call` node keeps no other link in its manifest.
    pub links_read: BTreeMap<String, std::collections::BTreeSet<String>>,
}

impl AttemptContext {
    /// Commits writes (scrubbed of secrets), then streams their events.
    pub(crate) async fn commit(&self, writes: Vec<Write>) -> Result<(), RuntimeError> {
        self.commit_as(writes, Last::No).await
    }

    /// The attempt's last commit ([`Store::commit_last`]): the thread is free once it
    /// returns, and nothing more is committed under the lease.
    pub(crate) async fn commit_last(&self, writes: Vec<Write>) -> Result<(), RuntimeError> {
        self.commit_as(writes, Last::Yes).await
    }

    /// Commits the writes of redoable work ([`crate::deferred`]): with the attempt's next
    /// commit, or now when enough of them wait or the oldest has waited long enough.
    pub(crate) async fn commit_deferred(
        self: &Arc<Self>,
        writes: Vec<Write>,
    ) -> Result<(), RuntimeError> {
        if writes.is_empty() {
            return Ok(());
        }
        match self.deferred.add(writes) {
            Then::Flush => {
                let _flushing = self.flushes.read().await;
                self.commit_as(Vec::new(), Last::No).await
            }
            Then::Wait => Ok(()),
            Then::FlushAfter(wait) => {
                // The attempt may end first: the flush then finds it gone (its last
                // commit took what waited) and the lease is not held for it.
                let attempt = Arc::downgrade(self);
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    if let Some(cx) = attempt.upgrade() {
                        let _flushing = cx.flushes.read().await;
                        cx.deferred.timer_done();
                        // A failure (the lease lost, the thread cancelled) is the next
                        // commit's to report: it meets it too.
                        let _ = cx.commit_as(Vec::new(), Last::No).await;
                    }
                });
                Ok(())
            }
        }
    }

    /// Commits what waits ([`crate::deferred`]), then `writes`, in one transaction. What
    /// waited is not tried again when the commit fails: like what a crash loses, it is
    /// redone on resume.
    async fn commit_as(&self, writes: Vec<Write>, last: Last) -> Result<(), RuntimeError> {
        // The last commit waits for flushes in flight: one that landed after it would be
        // fenced where the last commit frees the thread (PostgreSQL), losing its rows.
        let _alone = match last {
            Last::Yes => Some(self.flushes.write().await),
            Last::No => None,
        };
        let mut all = self.deferred.take();
        all.extend(writes);
        if all.is_empty() {
            return Ok(());
        }
        let in_flight = self.stream.begin(self.events.as_ref());
        let result = commit(&*self.store, &self.lease, &self.scrubber, all, last).await;
        if in_flight.end(result.as_deref().unwrap_or_default()) {
            self.catch_up().await;
        }
        result.map(|_| ())
    }

    /// Keeps a model turn's messages and reply for its trace span, scrubbed of secrets,
    /// when the trace asks for content (a no-op otherwise).
    pub(crate) fn trace_turn(
        &self,
        node: &str,
        item: u32,
        turn: u32,
        messages: &[crate::llm::Message],
        reply: &crate::llm::ModelReply,
    ) {
        if let Some(t) = &self.trace {
            t.turn_content(node, item, turn, messages, reply, &|s| {
                self.scrubber.scrub(s)
            });
        }
    }

    /// Whether the attempt's committed events go to a sink (`--events`, a served call).
    pub(crate) fn streams_events(&self) -> bool {
        self.events.is_some()
    }

    /// Streams events the store committed on the attempt's behalf before it began (the
    /// thread's creation, the claim's `attempt_started`, answers given with
    /// `resume --answer`).
    pub(crate) fn stream(&self, events: &[RecordedEvent]) {
        if self.stream.begin(self.events.as_ref()).end(events) {
            self.stream.flush(self.events.as_ref());
        }
    }
}

/// Hands committed events to the sink in `seq` order. Concurrent tasks commit at once
/// (their commits share a transaction) and learn of it in any order, so their events
/// wait here for the ones before them. A number that no commit of this attempt holds was
/// written by another process (`pipec answer`, `pipec cancel`): once no commit of this
/// attempt is in flight, such a gap is filled from the store, so the stream is the
/// thread's whole log while the attempt runs.
#[derive(Default)]
pub(crate) struct Ordered {
    inner: Mutex<OrderedState>,
}

#[derive(Default)]
struct OrderedState {
    /// The next number to deliver, once one is known.
    next: Option<u64>,
    waiting: BTreeMap<u64, RecordedEvent>,
    in_flight: usize,
}

/// A commit of the attempt on its way: its events are delivered when it ends, and if
/// its future is dropped before (a task stopped by a cancel), it still counts as ended,
/// so it never holds the stream back.
pub(crate) struct InFlight<'a> {
    ordered: &'a Ordered,
    sink: Option<&'a EventSink>,
    ended: bool,
}

impl InFlight<'_> {
    /// Delivers what can be; returns whether a gap waits to be filled from the store.
    fn end(mut self, events: &[RecordedEvent]) -> bool {
        self.ended = true;
        self.ordered.end(events, self.sink)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.ordered.end(&[], self.sink);
        }
    }
}

impl Ordered {
    fn begin<'a>(&'a self, sink: Option<&'a EventSink>) -> InFlight<'a> {
        self.lock().in_flight += 1;
        InFlight {
            ordered: self,
            sink,
            ended: false,
        }
    }

    fn end(&self, events: &[RecordedEvent], sink: Option<&EventSink>) -> bool {
        let mut st = self.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
        let Some(sink) = sink else {
            return false;
        };
        for e in events {
            if st.next.is_none_or(|n| e.seq >= n) {
                st.waiting.insert(e.seq, e.clone());
            }
        }
        while let Some((&seq, _)) = st.waiting.first_key_value() {
            if st.next.is_some_and(|n| seq > n) {
                break;
            }
            if let Some(e) = st.waiting.remove(&seq) {
                sink(&e);
            }
            st.next = Some(seq + 1);
        }
        // What still waits sits behind a number no commit in flight can hold.
        !st.waiting.is_empty() && st.in_flight == 0
    }

    /// Delivers everything that waits, in order, whatever is missing before it (the
    /// store could not be read to fill the gap).
    fn flush(&self, sink: Option<&EventSink>) {
        let mut st = self.lock();
        let Some(sink) = sink else {
            return;
        };
        while let Some((seq, e)) = st.waiting.pop_first() {
            sink(&e);
            st.next = Some(seq + 1);
        }
    }

    /// The next number the stream has not delivered.
    pub(crate) fn next(&self) -> u64 {
        self.lock().next.unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OrderedState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AttemptContext {
    /// Fills a gap in the stream from the store: events another process wrote, or that
    /// a stopped task's commit made before it was stopped.
    pub(crate) async fn catch_up(&self) {
        let since = self.stream.next();
        match self.store.events(&self.thread_id, since).await {
            Ok(events) => {
                if self.stream.begin(self.events.as_ref()).end(&events) {
                    self.stream.flush(self.events.as_ref());
                }
            }
            Err(_) => self.stream.flush(self.events.as_ref()),
        }
    }
}

/// Whether a commit is the last one under its lease (the attempt ends with it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Last {
    No,
    Yes,
}

/// Commits writes under `lease`, scrubbed of secrets; returns the committed events as
/// the store numbered and stamped them (the live `thread_completed` with its outputs).
pub(crate) async fn commit(
    store: &dyn Store,
    lease: &Lease,
    scrubber: &Scrubber,
    mut writes: Vec<Write>,
    last: Last,
) -> Result<Vec<RecordedEvent>, RuntimeError> {
    if writes.is_empty() {
        return Ok(Vec::new());
    }
    // The live `thread_completed` event carries the outputs; the stored one does not,
    // since they are the node rows' values (`pipec show` computes them again).
    let mut outputs = None;
    for w in &mut writes {
        scrub_write(scrubber, w);
        if let Write::Event(Event::ThreadCompleted { outputs: o }) = w {
            outputs = o.take();
        }
    }
    let mut committed = match last {
        Last::No => store.commit(lease, writes).await?,
        Last::Yes => store.commit_last(lease, writes).await?,
    };
    for e in &mut committed {
        if let Event::ThreadCompleted { outputs: o } = &mut e.event {
            *o = outputs.take();
        }
    }
    Ok(committed)
}

fn scrub_write(s: &Scrubber, w: &mut Write) {
    if s.is_empty() {
        return;
    }
    let scrub_err = |e: &mut Option<StoredError>| {
        if let Some(e) = e {
            scrub_error(s, e);
        }
    };
    match w {
        Write::Node(_, n) => {
            if let Some(v) = &mut n.value {
                s.scrub_value(v);
            }
            scrub_err(&mut n.error);
            n.manifest.iter_mut().for_each(|r| scrub_ref(s, r));
        }
        Write::Item(_, _, _, i) => {
            if let Some(v) = &mut i.value {
                s.scrub_value(v);
            }
            scrub_err(&mut i.error);
            i.manifest.iter_mut().for_each(|r| scrub_ref(s, r));
        }
        Write::Call(_, c) => {
            if let Some(a) = &mut c.args {
                s.scrub_value(a);
            }
            if let Some(r) = &mut c.result {
                s.scrub_value(r);
            }
            if let Some(e) = &mut c.error {
                *e = s.scrub(e);
            }
        }
        Write::Heal(_, h) => {
            h.cause = s.scrub(&h.cause);
            h.from_uri = s.scrub(&h.from_uri);
            scrub_ref(s, &mut h.to);
        }
        Write::Gate(_, g) => {
            g.message = s.scrub(&g.message);
            // A server's question brings its form and state: a server may echo what
            // it was sent.
            s.scrub_value(&mut g.schema);
            for v in g.answer.iter_mut().chain(g.ask.iter_mut()) {
                s.scrub_value(v);
            }
        }
        Write::Thread(t) => {
            if let Some(o) = &mut t.outputs {
                s.scrub_value(o);
            }
            scrub_err(&mut t.error);
        }
        Write::Event(e) => {
            for text in e.strings_mut() {
                *text = s.scrub(text);
            }
            if let Some(v) = e.value_mut() {
                s.scrub_value(v);
            }
        }
        Write::Attempt(_) | Write::RemoveGate(_) | Write::Rename { .. } => {}
    }
}

/// Scrubs a reference. Its URI, name and MIME type are what a server sent, and a link
/// whose tool was given a secret may carry it (`mcp://crm/deals/<token>/...`); the
/// captured variables are taken from the URI.
fn scrub_ref(s: &Scrubber, r: &mut ResourceRef) {
    r.uri = s.scrub(&r.uri);
    r.name = s.scrub(&r.name);
    if let Some(m) = &mut r.mime {
        *m = s.scrub(m);
    }
    for v in r.captures.values_mut() {
        *v = s.scrub(v);
    }
    if let Some(c) = &mut r.producing_call {
        s.scrub_value(&mut c.args);
    }
    if let Some(e) = &mut r.embedded {
        for text in e.text.iter_mut().chain(e.blob.iter_mut()) {
            *text = s.scrub(text);
        }
    }
}

/// Scrubs an error's texts.
pub(crate) fn scrub_error(s: &Scrubber, e: &mut StoredError) {
    e.message = s.scrub(&e.message);
    if let Some(h) = &mut e.help {
        *h = s.scrub(h);
    }
}
