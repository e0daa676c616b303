//! A pipeline's tests (`test name { ... }` in its file), as `pipec check` proves them and
//! `pipec test` runs them. They are not part of the plan: a test changes neither the plan
//! nor its hash.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Expr;

/// One test of a pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestCase {
    pub name: String,
    /// The line of `test` in the pipeline's file (1-based), for reports.
    pub line: u32,
    /// The pipeline's inputs.
    pub inputs: BTreeMap<String, Value>,
    /// Gate answers, each given when the thread pauses at its gate.
    pub answers: BTreeMap<String, Value>,
    /// Gates nobody answers: when the thread pauses at one, the clock skips past its
    /// deadline and the thread is resumed, so its `on_timeout` answer applies.
    #[serde(default)]
    pub timeouts: Vec<String>,
    /// The replies every model of the pipeline gives (it calls no model endpoint).
    pub replies: Option<Replies>,
    /// A tape (an absolute path): the models without `replies` and the MCP servers
    /// answer from what it recorded, and `pipec test --record` writes it.
    #[serde(default)]
    pub tape: Option<String>,
    /// A file (an absolute path) holding the outputs the thread must end with, as JSON;
    /// `pipec test --update` writes it.
    #[serde(default)]
    pub snapshot: Option<String>,
    /// The environment `env()` and `secret()` read, and the servers started see.
    pub env: BTreeMap<String, String>,
    pub faults: Faults,
    /// Nodes whose unfinished effects (after a `kill_after`) the resume runs again, as
    /// `pipec resume --retry-unfinished` does.
    #[serde(default)]
    pub retry_unfinished: Vec<String>,
    /// Nodes whose unfinished effects happened, with these results, as `pipec resume
    /// --resolve` says.
    #[serde(default)]
    pub resolve: BTreeMap<String, Value>,
    /// The answers to the questions an `input_required` fault asks, by tool (`null`
    /// declines).
    #[serde(default)]
    pub questions: BTreeMap<String, Value>,
    /// The thread's status when the test ends: `completed` unless it says otherwise
    /// (`paused`, `failed`, `blocked`).
    pub status: String,
    /// What must hold when the thread stops.
    pub expect: Vec<Expectation>,
}

/// Scripted model replies: a file in the format of `scripted:` models, or the same
/// object written in the test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replies {
    /// An absolute path.
    File(String),
    Inline(Value),
}

/// Failures the test injects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Faults {
    /// Link kinds whose links die while the thread waits at a gate: their first read
    /// after the pause is answered as a resource that no longer exists, so the heal path
    /// runs.
    pub dead_links: Vec<String>,
    /// Nodes after whose effect the process running the test's thread is killed, as by
    /// `kill -9`: the effect has run, its result is not committed. The test resumes the
    /// thread in another process, as a person would after a crash.
    #[serde(default)]
    pub kill_after: Vec<String>,
    /// Tools whose first call reaches the server, which then goes away before it
    /// answers: the effect happened and the answer is lost.
    #[serde(default)]
    pub server_crash: Vec<String>,
    /// Tools whose first call the server never answers, until the request times out.
    #[serde(default)]
    pub server_hang: Vec<String>,
    /// Tools whose first call ends with a question for a person (`input_required`), as
    /// if the server asked one; the test answers it through `questions`.
    #[serde(default)]
    pub input_required: Vec<String>,
}

/// One assertion: a body expression over what the run left, and its text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    pub text: String,
    pub line: u32,
    pub expr: Expr,
}

/// The names an expectation reads, each a record built from the stopped thread.
pub const SCOPE: &[&str] = &[
    "output",
    "node",
    "state",
    "calls",
    "arguments",
    "events",
    "thread",
];

/// The kinds of events a thread records (the store's `Event::kind`), which `events`
/// counts.
pub const EVENT_KINDS: &[&str] = &[
    "thread_created",
    "attempt_started",
    "node_started",
    "node_finished",
    "node_skipped",
    "node_failed",
    "node_rerun",
    "item_dropped",
    "retry_scheduled",
    "call_started",
    "call_unknown",
    "call_resolved",
    "model_turn",
    "model_failed",
    "resource_read",
    "link_healed",
    "gate_pending",
    "gate_answered",
    "gate_timed_out",
    "plan_upgraded",
    "thread_paused",
    "thread_blocked",
    "thread_completed",
    "thread_failed",
    "cancel_requested",
    "thread_cancelled",
    "thread_queued",
    "thread_released",
];
