//! The answer to `server/discover` that is no evidence of a modern server, made a
//! refusal so that rmcp falls back to `initialize` on the same connection, as the
//! official SDKs do. rmcp falls back only when the probe is answered with a JSON-RPC
//! error; a lax server answers a method it does not know with an empty result (`{}`),
//! and some answer with a discover result that offers none of pipec's versions, both of
//! which rmcp takes for a failed start.

use std::borrow::Cow;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::Transport;

use super::message_id::MessageId;

/// A transport that watches the one `server/discover` request of a handshake.
pub(super) struct DiscoverProbe<T> {
    inner: T,
    /// The versions pipec proposes in `server/discover`.
    spoken: Vec<ProtocolVersion>,
    /// The id of the probe sent and not yet answered.
    probe: Option<MessageId>,
}

impl<T> DiscoverProbe<T> {
    pub(crate) fn new(inner: T, spoken: Vec<ProtocolVersion>) -> DiscoverProbe<T> {
        DiscoverProbe {
            inner,
            spoken,
            probe: None,
        }
    }

    /// The message rmcp is given for `message`: the answer to the probe that does not
    /// show a server pipec can speak the discover era with becomes "method not found".
    fn judge(&mut self, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        let Some(probe) = &self.probe else {
            return message;
        };
        let (id, result) = match &message {
            ServerJsonRpcMessage::Response(response) if MessageId::from(&response.id) == *probe => {
                (response.id.clone(), &response.result)
            }
            ServerJsonRpcMessage::Error(error)
                if error.id.as_ref().map(MessageId::from).as_ref() == Some(probe) =>
            {
                self.probe = None;
                return message;
            }
            _ => return message,
        };
        self.probe = None;
        let modern = match result {
            ServerResult::DiscoverResult(found) => found
                .supported_versions
                .iter()
                .any(|v| self.spoken.contains(v)),
            _ => false,
        };
        if modern {
            return message;
        }
        refusal(id)
    }
}

/// What rmcp takes for a legacy server's answer to the probe.
fn refusal(id: RequestId) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            Cow::Borrowed("the answer to server/discover shows no protocol version pipec speaks"),
            None,
        ),
        Some(id),
    )
}

impl<T> Transport<RoleClient> for DiscoverProbe<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.probe = Some(MessageId::from(&request.id));
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let message = self.inner.receive().await?;
        Some(self.judge(message))
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{DiscoverRequest, DiscoverRequestParams, EmptyResult};

    fn probe() -> DiscoverProbe<()> {
        let mut p = DiscoverProbe::new((), vec![ProtocolVersion::V_2026_07_28]);
        let request = ClientJsonRpcMessage::request(
            ClientRequest::DiscoverRequest(DiscoverRequest::new(DiscoverRequestParams {})),
            RequestId::Number(1),
        );
        if let ClientJsonRpcMessage::Request(r) = &request {
            p.probe = Some(MessageId::from(&r.id));
        }
        p
    }

    fn answer(result: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": result}))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn is_refusal(message: &ServerJsonRpcMessage) -> bool {
        matches!(message, ServerJsonRpcMessage::Error(e) if e.error.code == ErrorCode::METHOD_NOT_FOUND)
    }

    #[test]
    fn an_empty_answer_or_one_without_a_version_pipec_speaks_is_a_refusal() {
        let mut p = probe();
        assert!(is_refusal(&p.judge(answer(serde_json::json!({})))));
        // Only the probe's answer is judged, once.
        let later = p.judge(ServerJsonRpcMessage::response(
            ServerResult::EmptyResult(EmptyResult {}),
            RequestId::Number(1),
        ));
        assert!(!is_refusal(&later));

        let mut p = probe();
        let old = answer(serde_json::json!({
            "supportedVersions": ["2025-11-25"], "capabilities": {},
            "ttlMs": 0, "cacheScope": "private", "resultType": "complete"
        }));
        assert!(is_refusal(&p.judge(old)));
    }

    #[test]
    fn a_discover_result_with_pipecs_version_passes() {
        let mut p = probe();
        let modern = answer(serde_json::json!({
            "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "ttlMs": 0, "cacheScope": "private", "resultType": "complete"
        }));
        assert!(matches!(
            p.judge(modern),
            ServerJsonRpcMessage::Response(r) if matches!(r.result, ServerResult::DiscoverResult(_))
        ));
    }
}
