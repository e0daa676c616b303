//! What one start or resume may be told: answers given ahead, decisions on unfinished
//! calls, and how a changed plan applies to finished nodes. `preflight.rs` checks every
//! name in them against the plan and the thread before anything is written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tokio::sync::Notify;

/// Asks running attempts to stop: nothing new starts, the steps in flight finish and
/// commit, and the thread goes back to the queue (`Outcome::Released`). Clones share
/// one signal.
#[derive(Clone, Default)]
pub struct StopSignal(Arc<StopInner>);

#[derive(Default)]
struct StopInner {
    stopped: AtomicBool,
    notify: Notify,
}

impl StopSignal {
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::SeqCst)
    }

    /// Returns once `stop` was called.
    pub async fn stopped(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
}

/// A person's decision on an unfinished call (`pipec resume --retry-unfinished`/`--resolve`).
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Make the call again.
    Retry,
    /// It happened, with this result.
    Performed(Value),
}

/// Choices for one start or resume.
#[derive(Clone, Default)]
pub struct RunOptions {
    pub concurrency: Option<usize>,
    /// A chosen id for a new thread (`run --thread ID`); an id that exists is refused.
    pub thread_id: Option<String>,
    /// Answers given up front (`run --answer`).
    pub pre_answers: Vec<(String, Value)>,
    /// Decisions on unfinished calls, by call key (`node:g0:i0:s1:c0`) or `all`.
    pub decisions: Vec<(String, Decision)>,
    /// After a plan change: nodes whose stored results stay valid (`--keep`).
    pub keep: Vec<String>,
    /// Nodes to compute again, with everything downstream (`--rerun-from`).
    pub rerun_from: Vec<String>,
    /// Nodes renamed by a plan change, old name to new (`--rename`).
    pub renames: Vec<(String, String)>,
    /// A worker's stop: once given, the attempt releases the thread at its next step.
    pub stop: Option<StopSignal>,
}

impl RunOptions {
    /// The name `--rename` gives the node stored as `old`.
    pub(crate) fn renamed_to(&self, old: &str) -> Option<&str> {
        self.renames
            .iter()
            .find(|(o, _)| o == old)
            .map(|(_, n)| n.as_str())
    }

    /// The stored name of the node the plan now calls `new`.
    pub(crate) fn renamed_from(&self, new: &str) -> Option<&str> {
        self.renames
            .iter()
            .find(|(_, n)| n == new)
            .map(|(o, _)| o.as_str())
    }

    /// The names a call goes by: its stored key, and the key it has once a `--rename`
    /// moved its node.
    pub(crate) fn call_names(&self, key: &pipec_store::CallKey) -> (String, Option<String>) {
        let renamed = self.renamed_to(&key.node).map(|new| {
            pipec_store::CallKey {
                node: new.to_string(),
                ..key.clone()
            }
            .display()
        });
        (key.display(), renamed)
    }

    /// Whether a decision was given for the call stored under `key`, by either name.
    pub(crate) fn decision_for(&self, key: &pipec_store::CallKey) -> Option<&Decision> {
        let (stored, renamed) = self.call_names(key);
        self.decisions
            .iter()
            .find(|(k, _)| k == "all" || *k == stored || Some(k) == renamed.as_ref())
            .map(|(_, d)| d)
    }

    /// Whether the options ask to change finished work.
    pub(crate) fn changes_results(&self) -> bool {
        !self.rerun_from.is_empty()
            || !self.keep.is_empty()
            || !self.renames.is_empty()
            || !self.decisions.is_empty()
    }
}
