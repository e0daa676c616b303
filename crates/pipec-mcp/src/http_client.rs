//! The HTTP client under rmcp's streamable HTTP transport: rmcp's own reqwest client,
//! wrapped so that a request with a size limit is read under that limit. rmcp bounds
//! bodies and SSE events while reading, by limits it passes with every POST; the wrapper
//! lowers them to the request's own (found in the slot its message carries) and notes in
//! the slot when the answer went over. The answer's `result` goes to the slot as raw JSON
//! (rmcp gets a stand-in), as over stdio.
//!
//! rmcp drops the body of a 401 or 403 that carries a `WWW-Authenticate` challenge, and
//! that body is where a server explains the refusal. When the handshake meets one, the
//! wrapper sends the same request once more and keeps the start of that answer's body:
//! a refused request changed nothing on the server, and the handshake's requests change
//! nothing anyway. Other requests are never sent twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, CustomResult, ErrorCode, ErrorData, GetExtensions,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::Sse;

use super::message_id::MessageId;
use super::request_slot::{Found, RequestSlot, SlotMarker};

/// What an SSE event adds to its data (`event: message`, `data: `, `id: ...`, line
/// ends): a limited request's event may be this much longer than its message.
const SSE_FRAMING: usize = 1024;

/// How much of a refusal's body is kept.
const EXPLANATION_BYTES: usize = 4 * 1024;

#[derive(Clone)]
pub(super) struct SlotAwareClient {
    inner: reqwest::Client,
    refusal: Arc<Refusal>,
}

/// The server's explanation of the last 401 or 403 the handshake met: the start of the
/// body, as text.
#[derive(Debug, Default)]
pub(super) struct Refusal {
    body: Mutex<Option<String>>,
}

impl Refusal {
    /// The explanation, once.
    pub(crate) fn take(&self) -> Option<String> {
        match self.body.lock() {
            Ok(mut body) => body.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        }
    }

    fn set(&self, text: String) {
        match self.body.lock() {
            Ok(mut body) => *body = Some(text),
            Err(poisoned) => *poisoned.into_inner() = Some(text),
        }
    }
}

impl SlotAwareClient {
    pub(crate) fn new(inner: reqwest::Client) -> SlotAwareClient {
        SlotAwareClient {
            inner,
            refusal: Arc::default(),
        }
    }

    /// Where the explanation of a refused handshake is left.
    pub(crate) fn refusal(&self) -> Arc<Refusal> {
        self.refusal.clone()
    }

    /// Sends `message` again, as it was sent, and keeps the start of the body of the
    /// refusal it meets.
    async fn explain_refusal(
        &self,
        uri: &str,
        message: &ClientJsonRpcMessage,
        session_id: Option<&str>,
        auth_header: Option<&str>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        let mut request = self
            .inner
            .post(uri)
            .header(http::header::ACCEPT, "text/event-stream, application/json")
            .json(message);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(session) = session_id {
            request = request.header("mcp-session-id", session);
        }
        let Ok(mut response) = request.send().await else {
            return;
        };
        if !matches!(response.status().as_u16(), 401 | 403) {
            return;
        }
        let mut body = Vec::new();
        while body.len() < EXPLANATION_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(EXPLANATION_BYTES);
        let text = String::from_utf8_lossy(&body).trim().to_string();
        if !text.is_empty() {
            self.refusal.set(text);
        }
    }
}

/// Whether a message is one of the handshake's requests, which change nothing on the
/// server and so may be sent twice.
fn is_handshake(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Request(request) if matches!(
            request.request,
            ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_)
        )
    )
}

/// The request a message is, with its slot.
fn slotted(message: &ClientJsonRpcMessage) -> Option<(RequestId, Arc<RequestSlot>)> {
    match message {
        ClientJsonRpcMessage::Request(request) => request
            .request
            .extensions()
            .get::<SlotMarker>()
            .map(|m| (request.id.clone(), m.0.clone())),
        _ => None,
    }
}

/// Whether an SSE error is rmcp's "event over its size" (its error type is private;
/// the text is that of the pinned version, and a test holds it to it).
fn is_event_too_large(error: &SseError) -> bool {
    error.to_string().contains("exceeded the maximum size")
}

impl StreamableHttpClient for SlotAwareClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        mut limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let slotted = slotted(&message);
        // The request's own limit, if it has one; a verdict names the limit that applied.
        let limit = slotted
            .as_ref()
            .and_then(|(_, slot)| slot.limit())
            .map(|limit| limit.min(limits.max_json_response_size));
        let applied = limit.unwrap_or(limits.max_json_response_size);
        if let Some(limit) = limit {
            limits.max_json_response_size = limit;
            limits.max_sse_event_size = limits
                .max_sse_event_size
                .min(limit.saturating_add(SSE_FRAMING));
        }
        // Kept only when it may be needed: to ask again why a handshake was refused.
        let again = is_handshake(&message).then(|| {
            (
                uri.clone(),
                message.clone(),
                session_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
            )
        });
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        let refused = matches!(
            response,
            Err(StreamableHttpError::AuthRequired(_) | StreamableHttpError::InsufficientScope(_))
        );
        if refused && let Some((uri, message, session_id, auth_header, custom_headers)) = again {
            self.explain_refusal(
                &uri,
                &message,
                session_id.as_deref(),
                auth_header.as_deref(),
                &custom_headers,
            )
            .await;
        }
        let Some((id, slot)) = slotted else {
            return response;
        };
        match response {
            Err(StreamableHttpError::ResponseBodyTooLarge { max_size }) => {
                slot.set(Found::TooLarge {
                    limit: applied,
                    size: None,
                });
                Err(StreamableHttpError::ResponseBodyTooLarge { max_size })
            }
            Ok(StreamableHttpPostResponse::Json(message, session)) => Ok(
                StreamableHttpPostResponse::Json(take_result(message, &id, &slot), session),
            ),
            Ok(StreamableHttpPostResponse::Sse(events, session)) => {
                Ok(StreamableHttpPostResponse::Sse(
                    watch_events(events, id, slot, limit, applied),
                    session,
                ))
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// A JSON answer already parsed by rmcp: its result goes to the slot.
fn take_result(
    message: ServerJsonRpcMessage,
    id: &RequestId,
    slot: &RequestSlot,
) -> ServerJsonRpcMessage {
    match message {
        ServerJsonRpcMessage::Response(mut response)
            if MessageId::from(&response.id) == MessageId::from(id) =>
        {
            match serde_json::to_value(&response.result) {
                Ok(result) => {
                    slot.set(Found::Result(result));
                    if !slot.is_shared() {
                        response.result = ServerResult::CustomResult(CustomResult(Value::Null));
                    }
                }
                Err(e) => slot.set(Found::Malformed(e.to_string())),
            }
            ServerJsonRpcMessage::Response(response)
        }
        other => other,
    }
}

/// The events of a POST's SSE answer: the request's answer goes to its slot (or, over
/// its own limit, is replaced by an error answer); everything else passes untouched. An
/// event cut off by rmcp for its size leaves the verdict, naming the `applied` limit.
fn watch_events(
    events: BoxStream<'static, Result<Sse, SseError>>,
    id: RequestId,
    slot: Arc<RequestSlot>,
    limit: Option<usize>,
    applied: usize,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let ours = MessageId::from(&id);
    events
        .map(move |event| match event {
            Ok(mut event) => {
                if let Some(data) = event.data.take() {
                    event.data = Some(watch_data(data, &ours, &id, &slot, limit));
                }
                Ok(event)
            }
            Err(error) => {
                if is_event_too_large(&error) {
                    slot.set(Found::TooLarge {
                        limit: applied,
                        size: None,
                    });
                }
                Err(error)
            }
        })
        .boxed()
}

fn watch_data(
    data: String,
    ours: &MessageId,
    id: &RequestId,
    slot: &RequestSlot,
    limit: Option<usize>,
) -> String {
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(&data) else {
        return data;
    };
    let is_ours = !message.contains_key("method")
        && message.get("id").and_then(MessageId::from_value).as_ref() == Some(ours);
    if !is_ours {
        return data;
    }
    let stand_in = if let Some(limit) = limit
        && data.len() > limit
    {
        slot.set(Found::TooLarge {
            limit,
            size: Some(data.len() as u64),
        });
        ServerJsonRpcMessage::error(
            ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!(
                    "the answer of {} bytes is over the limit of {limit} bytes",
                    data.len()
                ),
                None,
            ),
            Some(id.clone()),
        )
    } else if slot.is_shared() {
        if let Some(result) = message.get("result") {
            slot.set(Found::Result(result.clone()));
        }
        return data;
    } else if let Some(result) = message.remove("result") {
        slot.set(Found::Result(result));
        ServerJsonRpcMessage::response(
            ServerResult::CustomResult(CustomResult(Value::Null)),
            id.clone(),
        )
    } else {
        return data;
    };
    serde_json::to_string(&stand_in).unwrap_or(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_an_event_goes_to_the_slot() {
        let slot = RequestSlot::new(None);
        let id = RequestId::Number(4);
        let data = r#"{"jsonrpc":"2.0","id":4,"result":{"contents":[{"uri":"u","text":"t"}]}}"#;
        let out = watch_data(data.into(), &MessageId::Number(4), &id, &slot, None);
        assert_eq!(
            slot.take(),
            Some(Found::Result(
                serde_json::json!({"contents":[{"uri":"u","text":"t"}]})
            ))
        );
        let stand_in: ServerJsonRpcMessage = serde_json::from_str(&out).expect("a message");
        assert!(matches!(stand_in, ServerJsonRpcMessage::Response(r) if r.id == id));
    }

    #[test]
    fn an_answer_over_the_limit_becomes_an_error_and_a_verdict() {
        let slot = RequestSlot::new(Some(20));
        let id = RequestId::Number(4);
        let data = r#"{"jsonrpc":"2.0","id":4,"result":{"contents":[]}}"#;
        let out = watch_data(data.into(), &MessageId::Number(4), &id, &slot, Some(20));
        assert_eq!(
            slot.take(),
            Some(Found::TooLarge {
                limit: 20,
                size: Some(data.len() as u64)
            })
        );
        assert!(out.contains("\"error\""));
    }

    #[test]
    fn other_messages_pass_untouched() {
        let slot = RequestSlot::new(Some(5));
        let id = RequestId::Number(4);
        for data in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            "not json",
        ] {
            let out = watch_data(data.into(), &MessageId::Number(4), &id, &slot, Some(5));
            assert_eq!(out, data);
        }
        assert_eq!(slot.take(), None);
    }
}
