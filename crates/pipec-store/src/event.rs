//! Events: what happened to a thread, one row each, numbered by the store inside the
//! commit that writes them. The live stream (`--events jsonl`, `Runner::events`) and the
//! stored log (`pipec show --events`) are the same values: a [`RecordedEvent`] serialised
//! the same way, so a consumer that crashed can catch up from a sequence number.
//!
//! New fields and types may be added within `v: 1`; readers ignore what they do not
//! know. Old rows keep reading: every field added after the first release is optional.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the event format, in every event as `v`.
pub const EVENT_VERSION: u32 = 1;

/// What happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    ThreadCreated {
        attempt: u32,
    },
    AttemptStarted {
        attempt: u32,
    },
    NodeStarted {
        node: String,
        /// `each` nodes: how many items the list has.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        items: Option<u32>,
    },
    NodeFinished {
        node: String,
        /// How long the node ran in this attempt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    NodeSkipped {
        node: String,
    },
    NodeFailed {
        node: String,
        code: String,
        message: String,
    },
    /// `--rerun-from`: the node runs again as a new generation.
    NodeRerun {
        node: String,
        generation: u32,
    },
    /// An item of a `drop_failed_items` node that failed and was left out of the list.
    ItemDropped {
        node: String,
        item: u32,
        code: String,
        message: String,
    },
    RetryScheduled {
        node: String,
        item: u32,
        #[serde(rename = "try")]
        try_number: u32,
        at_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        error: String,
    },
    CallStarted {
        node: String,
        call: String,
        args_hash: String,
    },
    CallUnknown {
        node: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
        message: String,
    },
    CallResolved {
        call: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<crate::CallDecision>,
    },
    ModelTurn {
        node: String,
        item: u32,
        turn: u32,
        model: String,
        /// Input tokens, the cached ones among them.
        tokens_in: u64,
        tokens_out: u64,
        /// Of `tokens_in`, those read from the provider's prompt cache.
        #[serde(default, skip_serializing_if = "is_zero")]
        tokens_cached: u64,
        /// How long the model took to answer.
        #[serde(default)]
        ms: u64,
        /// What the turn cost in US dollars, at the model's prices; absent when they are
        /// not known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// A model request that failed (the endpoint refused it or did not answer).
    ModelFailed {
        node: String,
        item: u32,
        turn: u32,
        model: String,
        code: String,
        message: String,
    },
    /// A resource read by a node: from its server, or from the attempt's fetch cache.
    ResourceRead {
        node: String,
        item: u32,
        server: String,
        uri: String,
        bytes: u64,
        cached: bool,
        /// How long the read took (0 for one the attempt's cache served).
        #[serde(default, skip_serializing_if = "is_zero")]
        ms: u64,
    },
    /// A dead link re-derived by calling its producer again.
    LinkHealed {
        node: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        tool: String,
        from_uri: String,
        to_uri: String,
        call: String,
    },
    GatePending {
        gate: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        deadline_ms: Option<u64>,
    },
    GateAnswered {
        gate: String,
        by: String,
    },
    GateTimedOut {
        gate: String,
        /// `on_timeout` when its answer was applied; absent when the gate failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        applied: Option<String>,
    },
    PlanUpgraded {
        from: String,
        to: String,
    },
    ThreadPaused {
        gates: Vec<String>,
    },
    ThreadBlocked {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<String>,
    },
    /// The live event carries the outputs; the stored one does not (they are computed
    /// from the node rows when read).
    ThreadCompleted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outputs: Option<Value>,
    },
    ThreadFailed {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    CancelRequested {},
    ThreadCancelled {},
    /// Created for the workers (`pipec run --submit`): no process holds it yet.
    ThreadQueued {},
    /// A worker that was stopping gave the thread back to the queue, with no step in
    /// flight.
    ThreadReleased {},
}

impl Event {
    /// The event's `type`, as serialised. A test's `events` counts these by name: a new
    /// kind goes into `pipec_plan::testing::EVENT_KINDS` too (a test of `pipec-test`
    /// checks that every kind is there).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::ThreadCreated { .. } => "thread_created",
            Event::AttemptStarted { .. } => "attempt_started",
            Event::NodeStarted { .. } => "node_started",
            Event::NodeFinished { .. } => "node_finished",
            Event::NodeSkipped { .. } => "node_skipped",
            Event::NodeFailed { .. } => "node_failed",
            Event::NodeRerun { .. } => "node_rerun",
            Event::ItemDropped { .. } => "item_dropped",
            Event::RetryScheduled { .. } => "retry_scheduled",
            Event::CallStarted { .. } => "call_started",
            Event::CallUnknown { .. } => "call_unknown",
            Event::CallResolved { .. } => "call_resolved",
            Event::ModelTurn { .. } => "model_turn",
            Event::ModelFailed { .. } => "model_failed",
            Event::ResourceRead { .. } => "resource_read",
            Event::LinkHealed { .. } => "link_healed",
            Event::GatePending { .. } => "gate_pending",
            Event::GateAnswered { .. } => "gate_answered",
            Event::GateTimedOut { .. } => "gate_timed_out",
            Event::PlanUpgraded { .. } => "plan_upgraded",
            Event::ThreadPaused { .. } => "thread_paused",
            Event::ThreadBlocked { .. } => "thread_blocked",
            Event::ThreadCompleted { .. } => "thread_completed",
            Event::ThreadFailed { .. } => "thread_failed",
            Event::CancelRequested {} => "cancel_requested",
            Event::ThreadCancelled {} => "thread_cancelled",
            Event::ThreadQueued {} => "thread_queued",
            Event::ThreadReleased {} => "thread_released",
        }
    }

    /// Every string the event holds, for the secret scrubber.
    pub fn strings_mut(&mut self) -> Vec<&mut String> {
        match self {
            Event::NodeFailed { message, .. }
            | Event::ItemDropped { message, .. }
            | Event::CallUnknown { message, .. }
            | Event::ModelFailed { message, .. }
            | Event::GatePending { message, .. }
            | Event::ThreadFailed { message, .. } => vec![message],
            Event::RetryScheduled { error, .. } => vec![error],
            Event::ThreadBlocked { calls } => calls.iter_mut().collect(),
            // URIs are what servers sent: a link from a call given a secret carries it.
            Event::ResourceRead { uri, .. } => vec![uri],
            Event::LinkHealed {
                from_uri, to_uri, ..
            } => vec![from_uri, to_uri],
            _ => Vec::new(),
        }
    }

    /// The JSON value the event holds (the live `thread_completed`'s outputs).
    pub fn value_mut(&mut self) -> Option<&mut Value> {
        match self {
            Event::ThreadCompleted { outputs } => outputs.as_mut(),
            _ => None,
        }
    }
}

/// An event with its place in the thread's log: what the live stream sends and what
/// `pipec show --events` prints, in this field order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedEvent {
    pub v: u32,
    pub thread: String,
    pub seq: u64,
    /// Milliseconds since the Unix epoch, when the event was committed.
    pub ts: u64,
    #[serde(flatten)]
    pub event: Event,
}

/// An event as a row holds it: its key (thread, seq) is not repeated in the value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    #[serde(default)]
    pub ts: u64,
    #[serde(flatten)]
    pub event: Event,
}

impl EventRow {
    pub fn recorded(self, thread: &str, seq: u64) -> RecordedEvent {
        RecordedEvent {
            v: EVENT_VERSION,
            thread: thread.to_string(),
            seq,
            ts: self.ts,
            event: self.event,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialise_with_their_key_fields_first() {
        let e = RecordedEvent {
            v: 1,
            thread: "T".into(),
            seq: 4,
            ts: 7,
            event: Event::NodeFinished {
                node: "score".into(),
                ms: Some(15),
            },
        };
        assert_eq!(
            serde_json::to_string(&e).ok(),
            Some(
                r#"{"v":1,"thread":"T","seq":4,"ts":7,"type":"node_finished","node":"score","ms":15}"#
                    .to_string()
            )
        );
    }

    #[test]
    fn rows_of_older_stores_read() {
        // As the first releases stored them: a `ts`, the fields, `ms` possibly null.
        let row: Result<EventRow, _> = serde_json::from_value(
            json!({ "type": "node_finished", "node": "a", "ms": null, "ts": 3 }),
        );
        assert!(matches!(
            row,
            Ok(EventRow {
                ts: 3,
                event: Event::NodeFinished { ms: None, .. }
            })
        ));
        let row: Result<EventRow, _> =
            serde_json::from_value(json!({ "type": "thread_blocked", "ts": 1 }));
        assert!(matches!(
            row,
            Ok(EventRow {
                event: Event::ThreadBlocked { .. },
                ..
            })
        ));
        let row: Result<EventRow, _> =
            serde_json::from_value(json!({ "type": "cancel_requested", "ts": 1 }));
        assert!(row.is_ok(), "{row:?}");
        for e in [Event::CancelRequested {}, Event::ThreadCancelled {}] {
            let v = serde_json::to_value(&e).unwrap_or_default();
            assert_eq!(v["type"], json!(e.kind()));
        }
    }
}
