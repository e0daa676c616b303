//! What one request in flight expects of its answer and what the transport found: the
//! size limit to read it under, and — left there by the transport that read it — the
//! answer's raw JSON, or why there is none (over the limit, malformed). The slot rides
//! with the request through rmcp to the transport in the request's extensions (which
//! are never sent), so a transport knows a request's limit before its answer arrives,
//! and the session reads the verdict once rmcp hands the request back.

use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request's slot, shared by the session and the transport.
#[derive(Debug, Default)]
pub(super) struct RequestSlot {
    limit: Option<usize>,
    /// Whether rmcp gets the answer too, not a stand-in (see [`RequestSlot::shared`]).
    shared: bool,
    found: Mutex<Option<Found>>,
}

/// What the transport found for the request.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Found {
    /// The answer's `result`, kept as sent; rmcp was handed a stand-in, unless the slot
    /// is shared.
    Result(Value),
    /// The answer was over `limit` and read past; `size` when it was counted to its end.
    TooLarge { limit: usize, size: Option<u64> },
    /// The answer was not a JSON-RPC message pipec could read.
    Malformed(String),
}

impl RequestSlot {
    /// A slot that takes the answer's result, read under `limit` (else the session's).
    pub(crate) fn new(limit: Option<usize>) -> Arc<RequestSlot> {
        Arc::new(RequestSlot {
            limit,
            shared: false,
            found: Mutex::new(None),
        })
    }

    /// A slot that takes the answer's result while rmcp gets it as well: for a tool
    /// listing, which rmcp's HTTP transport reads to learn the tools' `x-mcp-header`
    /// parameters (mirrored as `Mcp-Param-*` headers on calls) and to drop the tools whose
    /// annotations are invalid.
    pub(crate) fn shared() -> Arc<RequestSlot> {
        Arc::new(RequestSlot {
            limit: None,
            shared: true,
            found: Mutex::new(None),
        })
    }

    /// An empty slot that expects what this one does: for sending the request again.
    pub(crate) fn again(&self) -> Arc<RequestSlot> {
        Arc::new(RequestSlot {
            limit: self.limit,
            shared: self.shared,
            found: Mutex::new(None),
        })
    }

    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }

    pub(crate) fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// Records what the transport found; the first verdict stands.
    pub(crate) fn set(&self, found: Found) {
        let mut slot = match self.found.lock() {
            Ok(slot) => slot,
            Err(poisoned) => poisoned.into_inner(),
        };
        if slot.is_none() {
            *slot = Some(found);
        }
    }

    pub(crate) fn take(&self) -> Option<Found> {
        match self.found.lock() {
            Ok(mut slot) => slot.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }
}

/// The slot as it is carried in a request's extensions.
#[derive(Clone, Debug)]
pub(super) struct SlotMarker(pub Arc<RequestSlot>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_verdict_stands_and_is_taken_once() {
        let slot = RequestSlot::new(Some(10));
        assert_eq!(slot.limit(), Some(10));
        slot.set(Found::TooLarge {
            limit: 10,
            size: Some(11),
        });
        slot.set(Found::Result(Value::Null));
        assert_eq!(
            slot.take(),
            Some(Found::TooLarge {
                limit: 10,
                size: Some(11)
            })
        );
        assert_eq!(slot.take(), None);
    }
}
