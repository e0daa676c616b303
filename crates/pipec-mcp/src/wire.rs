//! What a call went out as — the JSON-RPC id of its last request, the protocol version
//! and the transport — for the span that reports the call. A caller that wants to know
//! runs the call inside [`observed`]; the session notes each request it sends there.
//! Nothing is noted outside such a scope, and nothing of it is ever sent.

use std::cell::RefCell;
use std::future::Future;

/// How a call went over the wire, as far as one was sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    /// The id of the last request the call sent (a call answered `input_required`, or
    /// sent again after authorizing, sends more than one).
    pub request_id: Option<String>,
    /// The protocol version the session speaks.
    pub protocol_version: Option<String>,
    /// `pipe` for a server on stdio, `tcp` for one over HTTP (OpenTelemetry's
    /// `network.transport` values).
    pub transport: Option<&'static str>,
}

tokio::task_local! {
    static OBSERVED: RefCell<Wire>;
}

/// Runs `call` and gives, beside its output, how its requests went.
pub async fn observed<F: Future>(call: F) -> (F::Output, Wire) {
    OBSERVED
        .scope(RefCell::new(Wire::default()), async move {
            let output = call.await;
            let wire = OBSERVED.with(|w| w.borrow().clone());
            (output, wire)
        })
        .await
}

/// Notes a request sent, when the caller observes.
pub(crate) fn note(request_id: String, protocol_version: &str, transport: &'static str) {
    let _ = OBSERVED.try_with(|w| {
        let mut w = w.borrow_mut();
        w.request_id = Some(request_id);
        w.protocol_version = (!protocol_version.is_empty()).then(|| protocol_version.to_string());
        w.transport = Some(transport);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_note_is_seen_inside_the_scope_and_nowhere_else() {
        note("7".into(), "2025-11-25", "pipe");
        let ((), wire) = observed(async { note("8".into(), "2026-07-28", "tcp") }).await;
        assert_eq!(
            wire,
            Wire {
                request_id: Some("8".into()),
                protocol_version: Some("2026-07-28".into()),
                transport: Some("tcp"),
            }
        );
        let ((), none) = observed(async {}).await;
        assert_eq!(none, Wire::default());
    }
}
