//! The HTTP client under rmcp's streamable HTTP transport: rmcp's own reqwest client,
//! wrapped so that a request with a size limit is read under that limit. rmcp bounds
//! bodies and SSE events while reading, by limits it passes with every POST; the wrapper
//! lowers them to the request's own (found in the slot its message carries) and notes in
//! the slot when the answer went over. The answer's `result` goes to the slot as raw JSON
//! (rmcp gets a stand-in), as over stdio.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{
    ClientJsonRpcMessage, CustomResult, ErrorCode, ErrorData, GetExtensions, RequestId,
    ServerJsonRpcMessage, ServerResult,
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

#[derive(Clone)]
pub(super) struct SlotAwareClient {
    inner: reqwest::Client,
}

impl SlotAwareClient {
    pub fn new(inner: reqwest::Client) -> SlotAwareClient {
        SlotAwareClient { inner }
    }
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
            Ok(StreamableHttpPostResponse::Json(message, session)) if slot.takes_result() => Ok(
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
                    response.result = ServerResult::CustomResult(CustomResult(Value::Null));
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
    } else if slot.takes_result()
        && let Some(result) = message.remove("result")
    {
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
