//! What workers ask of a store: which threads one could take now, and a way to wait for
//! more. A thread is *runnable* when a worker can move it on without a person:
//!
//! - it is `queued` (`pipec run --submit`, or released by a worker that stopped);
//! - it is `paused` and a gate of it was answered since (its node has not consumed the
//!   answer yet), or a gate's deadline has passed (its `on_timeout` applies);
//! - it is `running` and no live process holds it (its holder died, or its lease
//!   expired), also when a cancel was asked of it meanwhile: the attempt that takes it
//!   records the cancellation.
//!
//! `blocked` and `failed` threads wait for a person's decision (`pipec resume`), and
//! never appear.

use std::time::Duration;

use serde::Serialize;

use super::{
    GateRec, GateState, Lease, NodeRec, NodeState, RecordedEvent, Status, ThreadId, ThreadRec,
    ThreadState,
};

/// Why a thread is runnable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// Queued for a worker.
    Queued,
    /// Paused, and a gate was answered since.
    Answered,
    /// Paused, and a gate's deadline has passed.
    Due,
    /// Running, with no live holder.
    Orphaned,
}

impl Why {
    pub fn as_str(self) -> &'static str {
        match self {
            Why::Queued => "queued",
            Why::Answered => "answered",
            Why::Due => "due",
            Why::Orphaned => "orphaned",
        }
    }
}

/// A thread a worker could take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunnableThread {
    pub id: ThreadId,
    pub pipeline: String,
    pub why: Why,
}

/// A thread a worker took with its claim (`Store::take`): why it was runnable, the
/// lease, everything stored about it as the claim left it, the events the claim wrote.
pub struct Taken {
    pub why: Why,
    pub lease: Lease,
    pub state: ThreadState,
    pub events: Vec<RecordedEvent>,
}

/// Which runnable threads to list (`Store::runnable`).
#[derive(Clone, Debug, Default)]
pub struct RunnableQuery {
    /// The time deadlines are compared with.
    pub now_ms: u64,
    /// Only threads of these pipelines (all when `None`).
    pub pipelines: Option<Vec<String>>,
    /// At most this many (0: 50).
    pub limit: usize,
    /// Threads to pass over (the ones the worker runs already, or leaves alone for a
    /// while).
    pub except: Vec<ThreadId>,
}

impl RunnableQuery {
    pub(crate) fn wants(&self, id: &str, pipeline: &str) -> bool {
        self.pipelines
            .as_ref()
            .is_none_or(|p| p.iter().any(|x| x == pipeline))
            && !self.except.iter().any(|x| x == id)
    }

    pub(crate) fn max(&self) -> usize {
        if self.limit == 0 { 50 } else { self.limit }
    }
}

/// The statuses a runnable thread may have, in the order they are offered: queued work
/// first, then answered and due gates, then threads whose holder died.
pub(crate) const CANDIDATE_STATUSES: [Status; 3] =
    [Status::Queued, Status::Paused, Status::Running];

/// Why a thread is runnable, from its record, its gates and the node rows of those gates;
/// `held` says whether a live process holds it.
pub fn why_runnable<'a>(
    rec: &ThreadRec,
    gates: impl IntoIterator<Item = (&'a GateRec, Option<&'a NodeRec>)>,
    now_ms: u64,
    held: bool,
) -> Option<Why> {
    // A cancel asked of a thread nobody holds any more is a worker's to carry out (its
    // attempt records the cancellation); one asked of a held thread is the holder's.
    if rec.cancel_requested && rec.status != Status::Running {
        return None;
    }
    match rec.status {
        Status::Queued if !held => Some(Why::Queued),
        Status::Running if !held => Some(Why::Orphaned),
        Status::Paused if !held => {
            let answered = gates.into_iter().any(|(g, node)| {
                g.state == GateState::Answered && node.is_none_or(|n| n.state != NodeState::Done)
            });
            if answered {
                Some(Why::Answered)
            } else if rec.due_ms.is_some_and(|d| d <= now_ms) {
                Some(Why::Due)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// How long a worker waits between looks at the store when nothing tells it of work.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// What a store's notifications have said since it began to listen, counted by kind. A
/// worker compares the counts with those it read before its last take and its last look,
/// and asks the store again only what may have changed; its poll covers what is never
/// notified (a lease that expired, a gate deadline that passed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct News {
    /// Threads queued (`run --submit`), and takes of this store that left queued
    /// threads behind: a take finds them.
    pub queued: u64,
    /// Everything else that may be work: answers, releases, cancels, and a listening
    /// connection that was lost (what it missed is unknown). A take and a look find it.
    pub other: u64,
}
