//! What the scheduler and its tasks share (`Shared`), and the one way they write:
//! [`Shared::commit`] scrubs secrets from every write, stamps the events, commits them
//! in one fenced store transaction, and only then streams the committed events.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::llm::Model;
use crate::plan::Plan;
use crate::runtime::error::RuntimeError;
use crate::runtime::hosts::HostFn;
use crate::runtime::progress::Progress;
use crate::runtime::runner::EventSink;
use crate::runtime::secrets::Scrubber;
use crate::runtime::validate::Validators;
use crate::store::{Event, Lease, RecordedEvent, Store, StoredError, Write};

/// What tasks share with the scheduler.
pub(crate) struct Shared {
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
    pub progress: Option<Arc<dyn Progress>>,
    pub permits: Semaphore,
}

/// The write of an event (the store numbers it and gives it its time when it commits).
pub(crate) fn event_write(event: Event) -> Write {
    Write::Event(event)
}

impl Shared {
    /// Commits writes (scrubbed of secrets), then streams their events.
    pub(crate) async fn commit(&self, writes: Vec<Write>) -> Result<(), RuntimeError> {
        commit(
            &*self.store,
            &self.lease,
            &self.scrubber,
            self.events.as_ref(),
            writes,
        )
        .await
    }

    /// Streams events the store committed on the attempt's behalf (the thread's
    /// creation, the claim's `attempt_started`, answers given with `resume --answer`).
    pub(crate) fn stream(&self, events: &[RecordedEvent]) {
        if let Some(sink) = &self.events {
            for e in events {
                sink(e);
            }
        }
    }
}

/// Commits writes under `lease`, scrubbed of secrets; then hands the committed events,
/// as the store numbered and stamped them, to `sink`.
pub(crate) async fn commit(
    store: &dyn Store,
    lease: &Lease,
    scrubber: &Scrubber,
    sink: Option<&EventSink>,
    mut writes: Vec<Write>,
) -> Result<(), RuntimeError> {
    if writes.is_empty() {
        return Ok(());
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
    let mut committed = store.commit(lease, writes).await?;
    if let Some(sink) = sink {
        for e in &mut committed {
            if let Event::ThreadCompleted { outputs: o } = &mut e.event {
                *o = outputs.clone();
            }
            sink(e);
        }
    }
    Ok(())
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
        }
        Write::Item(_, _, _, i) => {
            if let Some(v) = &mut i.value {
                s.scrub_value(v);
            }
            scrub_err(&mut i.error);
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
        Write::Gate(_, g) => {
            g.message = s.scrub(&g.message);
            if let Some(a) = &mut g.answer {
                s.scrub_value(a);
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
        Write::Attempt(_) => {}
    }
}

/// Scrubs an error's texts.
pub(crate) fn scrub_error(s: &Scrubber, e: &mut StoredError) {
    e.message = s.scrub(&e.message);
    if let Some(h) = &mut e.help {
        *h = s.scrub(h);
    }
}
