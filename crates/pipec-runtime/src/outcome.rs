//! How a run ended (for now): completed with its outputs, paused at gates, failed,
//! blocked on a person's decision, or released to the queue by a worker that stopped.

use serde_json::Value;

use pipec_store::StoredError;

/// How a run ended (for now).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Completed {
        thread: String,
        /// Written out (`serde::Serialize`) they are the outputs' JSON object;
        /// [`crate::Outputs::to_value`] is that object as a tree.
        outputs: crate::Outputs,
    },
    /// Waiting for answers at these gates.
    Paused {
        thread: String,
        gates: Vec<PendingGate>,
    },
    Failed {
        thread: String,
        error: StoredError,
    },
    /// Needs a person's decision (an unfinished effect, a diverging journal).
    Blocked {
        thread: String,
        reasons: Vec<StoredError>,
    },
    /// Given back to the queue, with nothing in flight, because the attempt was asked to
    /// stop (`RunOptions::stop`): another worker goes on from here.
    Released {
        thread: String,
    },
}

impl Outcome {
    pub fn thread(&self) -> &str {
        match self {
            Outcome::Completed { thread, .. }
            | Outcome::Paused { thread, .. }
            | Outcome::Failed { thread, .. }
            | Outcome::Blocked { thread, .. }
            | Outcome::Released { thread } => thread,
        }
    }
}

/// A gate that waits for its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingGate {
    pub name: String,
    pub message: String,
    /// The JSON Schema an answer must fit (with the definitions it uses).
    pub schema: Value,
    pub deadline_ms: Option<u64>,
    /// What the gate asks the client that runs the pipeline, when a person does not
    /// answer it: a turn of its model, or its roots.
    pub client: Option<crate::ClientAsk>,
}

impl PendingGate {
    /// The gate `name` whose row is `rec`, as stored.
    pub fn of(name: &str, rec: &pipec_store::GateRec) -> PendingGate {
        PendingGate {
            name: name.to_string(),
            message: rec.message.clone(),
            schema: rec.schema.clone(),
            deadline_ms: rec.deadline_ms,
            client: crate::ClientAsk::of(rec),
        }
    }
}
