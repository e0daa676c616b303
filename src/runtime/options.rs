//! What one start or resume may be told: answers given ahead, decisions on unfinished
//! calls, and how a changed plan applies to finished nodes. `preflight.rs` checks every
//! name in them against the plan and the thread before anything is written.

use serde_json::Value;

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
}

impl RunOptions {
    /// Whether the options ask to change finished work.
    pub(crate) fn changes_results(&self) -> bool {
        !self.rerun_from.is_empty()
            || !self.keep.is_empty()
            || !self.renames.is_empty()
            || !self.decisions.is_empty()
    }
}
