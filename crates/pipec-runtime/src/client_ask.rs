//! What a gate waits for from the client that runs the pipeline, when a person does not
//! answer it: a turn of the client's model (`provider = "client"`, the request as MCP
//! sampling's `sampling/createMessage` params), or the client's roots (`ask = "roots"`,
//! MCP `roots/list`). The gate's row keeps it (`GateRec.ask`), so whoever answers
//! (`pipec serve` asking its client, a person with `pipec answer`) knows what is asked.

use serde_json::{Value, json};

use pipec_store::GateRec;

/// The key of a gate row's `ask` that holds a sampling request.
const SAMPLE: &str = "sample";
/// The key of a gate row's `ask` that marks a question for the client's roots.
const ROOTS: &str = "roots";

/// What a gate asks the client that runs the pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientAsk {
    /// A reply of its model to this request (`sampling/createMessage` params); the
    /// answer is a sampling result.
    Model(Value),
    /// Its roots; the answer is `{roots: [{uri, name}]}`.
    Roots,
}

impl ClientAsk {
    /// What a gate row (`GateRec.ask`) of a gate that waits for the client holds.
    pub fn of(rec: &GateRec) -> Option<ClientAsk> {
        let ask = rec.ask.as_ref()?;
        if let Some(request) = ask.get(SAMPLE) {
            return Some(ClientAsk::Model(request.clone()));
        }
        ask.get(ROOTS).map(|_| ClientAsk::Roots)
    }

    /// The row's `ask` for this question.
    pub(crate) fn row(&self) -> Value {
        match self {
            ClientAsk::Model(request) => json!({ SAMPLE: request }),
            ClientAsk::Roots => json!({ ROOTS: {} }),
        }
    }

    /// The request of a model's turn, if this is one.
    pub fn request(&self) -> Option<&Value> {
        match self {
            ClientAsk::Model(request) => Some(request),
            ClientAsk::Roots => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_store::GateState;

    fn row(ask: Option<Value>) -> GateRec {
        GateRec {
            node: "n".into(),
            state: GateState::Pending,
            message: String::new(),
            schema: json!({}),
            pending_ms: 0,
            deadline_ms: None,
            answer: None,
            answered_ms: 0,
            answered_by: None,
            ask,
        }
    }

    #[test]
    fn a_row_reads_back_what_was_asked_and_a_servers_question_is_none() {
        for asked in [
            ClientAsk::Model(json!({ "maxTokens": 5 })),
            ClientAsk::Roots,
        ] {
            assert_eq!(ClientAsk::of(&row(Some(asked.row()))), Some(asked));
        }
        assert_eq!(ClientAsk::of(&row(None)), None);
        // A server's question during a tool call keeps its call there instead.
        let question = row(Some(json!({ "call": "c1", "asked": [] })));
        assert_eq!(ClientAsk::of(&question), None);
    }
}
