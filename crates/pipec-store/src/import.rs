//! Whole threads moved from one store to another (`pipec store copy`): what an export
//! holds, the plans it refers to, and the checks every store's `import` makes before it
//! writes a row.
//!
//! An export is what `Store::load` and `Store::events` give: the thread record, its node,
//! item, journal, gate, attempt and heal rows (manifests live in the node and item rows),
//! and every event with its number and time. An import writes exactly that, in one
//! transaction, with the holder cleared: a lease belongs to a process of the source, and
//! the target's first claim bumps the epoch as usual.

use std::collections::BTreeSet;

use super::*;

/// A whole thread as one store holds it.
#[derive(Clone, Debug)]
pub struct Export {
    pub state: ThreadState,
    pub events: Vec<RecordedEvent>,
}

impl Export {
    /// The thread record (an export always has one).
    pub fn rec(&self) -> Option<&ThreadRec> {
        self.state.thread.as_ref()
    }

    /// The plans the thread names: the one it runs, each attempt's, and both sides of
    /// every plan upgrade.
    pub fn plans(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        if let Some(t) = self.rec() {
            out.insert(t.plan_hash.clone());
        }
        for a in &self.state.attempts {
            out.insert(a.plan_hash.clone());
        }
        for e in &self.events {
            if let Event::PlanUpgraded { from, to } = &e.event {
                out.insert(from.clone());
                out.insert(to.clone());
            }
        }
        out.remove("");
        out
    }

    /// What every store's `import` checks before it writes a row, checked without
    /// writing.
    pub fn check(&self) -> Result<(), StoreError> {
        check(&self.state, &self.events).map(|_| ())
    }
}

/// How often an export reads a thread again when a lease-free write (an answer, a
/// cancel) changed it between its reads.
const EXPORT_TRIES: usize = 5;

/// Reads a whole thread (`thread` may be a unique prefix). The record is read before and
/// after the rows and events; a thread that changed meanwhile is read again, so the rows
/// and the events of an export belong together.
pub async fn export(store: &dyn Store, thread: &str) -> Result<Export, StoreError> {
    let mut last = None;
    for _ in 0..EXPORT_TRIES {
        let state = store.load(thread).await?;
        let Some(rec) = state.thread.clone() else {
            return Err(StoreError::Corrupt {
                what: format!("thread {thread} has rows but no record"),
            });
        };
        let events = store.events(&rec.id, 0).await?;
        let again = store.load(&rec.id).await?.thread;
        if again.as_ref() == Some(&rec) {
            return Ok(Export { state, events });
        }
        last = Some(rec.id);
    }
    Err(StoreError::Locked {
        thread: last.unwrap_or_else(|| thread.to_string()),
        holder: None,
    })
}

/// An export as a store writes it: its id as a number, the record with no holder, and
/// each event as its row.
pub(crate) struct Checked {
    pub id: u128,
    pub rec: ThreadRec,
    pub events: Vec<(u64, EventRow)>,
}

/// Refuses an export that no store could have written (no record, events of another
/// thread or out of order); nothing is written before this passes.
pub(crate) fn check(state: &ThreadState, events: &[RecordedEvent]) -> Result<Checked, StoreError> {
    let Some(rec) = state.thread.clone() else {
        return Err(StoreError::Corrupt {
            what: "an imported thread has no thread record".into(),
        });
    };
    let id = ids::decode(&rec.id)
        .ok_or_else(|| StoreError::Io(format!("`{}` is not a thread id", rec.id)))?;
    let mut rec = rec;
    rec.holder = None;
    let mut rows = Vec::with_capacity(events.len());
    let mut previous: Option<u64> = None;
    for e in events {
        if e.thread != rec.id {
            return Err(StoreError::Corrupt {
                what: format!(
                    "event {} imported with thread {} belongs to thread {}",
                    e.seq, rec.id, e.thread
                ),
            });
        }
        if previous.is_some_and(|p| e.seq <= p) {
            return Err(StoreError::Corrupt {
                what: format!(
                    "the events imported with thread {} are not in order (event {} after {})",
                    rec.id,
                    e.seq,
                    previous.unwrap_or_default()
                ),
            });
        }
        previous = Some(e.seq);
        rows.push((
            e.seq,
            EventRow {
                ts: e.ts,
                event: e.event.clone(),
            },
        ));
    }
    Ok(Checked {
        id,
        rec,
        events: rows,
    })
}

/// The refusal of an import whose thread the target has.
pub(crate) fn exists(thread: &str, store: String) -> StoreError {
    StoreError::Exists {
        thread: thread.to_string(),
        store,
    }
}
