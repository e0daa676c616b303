//! Writes that may wait for the attempt's next commit: the rows of work that is done
//! again at no cost when it is lost (an item of an `each` node whose executor has no
//! effect to journal: a pure body, a read-only or idempotent call, a reader). They are
//! held in memory and go out with the next commit of the attempt, whatever it is for,
//! or on their own once [`MAX_WRITES`] sets of them wait or the oldest has waited
//! [`MAX_WAIT`]; so a fan-out of many such items costs a few commits, not one each (its
//! results share a transaction and its fsync: group commit above the store, which works
//! the same on redb, whose multi-process files cannot commit without syncing, and on
//! PostgreSQL).
//!
//! What a crash loses of them is only redone: the items run again on resume (as is what a
//! failed commit took with it). Their events are streamed when they are committed, so
//! nothing a sink was told is lost.
//! Writes whose loss would repeat an effect (a journaled call's rows, an approval, a
//! gate) never wait: every write-ahead rule holds as before.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use pipec_store::Write;

/// How many sets of writes (one an item) wait at most before they are committed.
pub(crate) const MAX_WRITES: usize = 64;

/// How long the oldest waiting set waits at most before they are committed.
pub(crate) const MAX_WAIT: Duration = Duration::from_millis(50);

/// The writes that wait, with when the oldest began to.
#[derive(Default)]
pub(crate) struct Deferred {
    inner: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    writes: Vec<Write>,
    sets: usize,
    since: Option<Instant>,
    /// A flush is scheduled for when the oldest set has waited its time.
    timer: bool,
}

/// What adding a set of writes asks of the caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// Commit what waits now.
    Flush,
    /// Schedule a flush after this long (no flush is scheduled yet).
    FlushAfter(Duration),
    /// Nothing: a flush is coming.
    Wait,
}

impl Deferred {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a set of writes; says whether they are to be committed now.
    pub(crate) fn add(&self, writes: Vec<Write>) -> Then {
        let mut w = self.lock();
        w.writes.extend(writes);
        w.sets += 1;
        let since = *w.since.get_or_insert_with(Instant::now);
        if w.sets >= MAX_WRITES || since.elapsed() >= MAX_WAIT {
            return Then::Flush;
        }
        if w.timer {
            return Then::Wait;
        }
        w.timer = true;
        Then::FlushAfter(MAX_WAIT.saturating_sub(since.elapsed()))
    }

    /// Takes everything that waits (to commit it before the writes it goes out with).
    pub(crate) fn take(&self) -> Vec<Write> {
        let mut w = self.lock();
        w.sets = 0;
        w.since = None;
        std::mem::take(&mut w.writes)
    }

    /// The scheduled flush ran (or is no longer needed).
    pub(crate) fn timer_done(&self) {
        self.lock().timer = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_store::Event;

    fn set(n: u32) -> Vec<Write> {
        vec![Write::Event(Event::NodeSkipped {
            node: format!("n{n}"),
        })]
    }

    #[test]
    fn the_first_set_schedules_a_flush_and_the_last_of_a_batch_asks_for_one() {
        let d = Deferred::default();
        assert!(matches!(d.add(set(0)), Then::FlushAfter(t) if t <= MAX_WAIT));
        for n in 1..MAX_WRITES as u32 - 1 {
            assert_eq!(d.add(set(n)), Then::Wait, "{n}");
        }
        assert_eq!(d.add(set(99)), Then::Flush);
        let taken = d.take();
        assert_eq!(taken.len(), MAX_WRITES);
        assert!(d.take().is_empty());
        // The timer still runs: the next set waits for it.
        assert_eq!(d.add(set(100)), Then::Wait);
        d.timer_done();
        assert!(matches!(d.add(set(101)), Then::FlushAfter(_)));
    }

    #[test]
    fn a_set_that_waited_its_time_asks_for_a_flush() {
        let d = Deferred::default();
        let _ = d.add(set(0));
        std::thread::sleep(MAX_WAIT + Duration::from_millis(5));
        assert_eq!(d.add(set(1)), Then::Flush);
    }
}
