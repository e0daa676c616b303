//! MCP over a byte stream of newline-delimited JSON (a server's stdin and stdout), as
//! rmcp's `Transport`. Unlike rmcp's own stream transport it never leaves a request
//! waiting because of a line it dropped: an answer over its limit is read past and its
//! request fails with a verdict in its slot; a line that is not JSON-RPC is counted
//! (and spoils the session, see `garbage.rs`); a malformed answer fails its request.
//! The `result` of a request that carries a slot goes to the slot as raw JSON and rmcp
//! gets a stand-in, so the session converts what the server sent, not what rmcp's
//! types kept of it.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, CustomResult, ErrorCode, ErrorData, GetExtensions,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

use super::garbage::GarbageLines;
use super::line_reader::{Line, LineReader, TooLongLine};
use super::message_id::MessageId;
use super::request_slot::{Found, RequestSlot, SlotMarker};

/// How much is read from the stream at a time.
const READ_CHUNK: usize = 64 * 1024;

/// A request sent and not yet answered.
struct Pending {
    id: RequestId,
    slot: Option<Arc<RequestSlot>>,
}

pub(super) struct LineTransport<R, W> {
    reader: R,
    writer: Arc<Mutex<Option<W>>>,
    lines: LineReader,
    chunk: Box<[u8]>,
    ready: VecDeque<Line>,
    pending: HashMap<MessageId, Pending>,
    garbage: Arc<GarbageLines>,
    largest_buffer: Arc<AtomicUsize>,
    ended: bool,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// `max_message_bytes` bounds every line; `largest_buffer` is kept up to date with
    /// the most memory one line has held.
    pub(crate) fn new(
        reader: R,
        writer: W,
        max_message_bytes: usize,
        garbage: Arc<GarbageLines>,
        largest_buffer: Arc<AtomicUsize>,
    ) -> LineTransport<R, W> {
        LineTransport {
            reader,
            writer: Arc::new(Mutex::new(Some(writer))),
            lines: LineReader::new(max_message_bytes),
            chunk: vec![0u8; READ_CHUNK].into_boxed_slice(),
            ready: VecDeque::new(),
            pending: HashMap::new(),
            garbage,
            largest_buffer,
            ended: false,
        }
    }

    /// What one finished line means to rmcp, if anything.
    fn deliver(&mut self, line: Line) -> Option<ServerJsonRpcMessage> {
        match line {
            Line::Whole(bytes) => self.deliver_line(&bytes),
            Line::TooLong(too_long) => self.deliver_too_long(too_long),
        }
    }

    fn deliver_line(&mut self, bytes: &[u8]) -> Option<ServerJsonRpcMessage> {
        let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(bytes) else {
            self.garbage.record(bytes);
            return None;
        };
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            self.garbage.record(bytes);
            return None;
        }
        let is_answer = !message.contains_key("method")
            && (message.contains_key("result") || message.contains_key("error"));
        let id = message.get("id").and_then(MessageId::from_value);
        let pending = match &id {
            // The answer to a request given up on (it timed out, its task was dropped):
            // rmcp would drop it too, so it is not even parsed.
            Some(id) if is_answer => Some(self.pending.remove(id)?),
            // An error without an id (the server could not read the request) still
            // goes to rmcp, which takes it for the handshake's answer.
            _ => None,
        };
        if let Some(pending) = &pending
            && let Some(slot) = &pending.slot
            && slot.is_shared()
            && let Some(result) = message.get("result")
        {
            slot.set(Found::Result(result.clone()));
        } else if let Some(pending) = &pending
            && let Some(slot) = &pending.slot
            && let Some(result) = message.remove("result")
        {
            slot.set(Found::Result(result));
            return Some(ServerJsonRpcMessage::response(
                ServerResult::CustomResult(CustomResult(Value::Null)),
                pending.id.clone(),
            ));
        }
        match serde_json::from_value::<ServerJsonRpcMessage>(Value::Object(message)) {
            Ok(message) => Some(message),
            Err(e) => {
                let pending = pending?;
                let problem = format!("its answer is not a JSON-RPC message: {e}");
                if let Some(slot) = &pending.slot {
                    slot.set(Found::Malformed(problem.clone()));
                }
                Some(failed(pending.id, problem))
            }
        }
    }

    fn deliver_too_long(&mut self, line: TooLongLine) -> Option<ServerJsonRpcMessage> {
        if line.not_an_object {
            self.garbage
                .record(b"(a line that is not JSON, too long to keep)");
            return None;
        }
        if line.has_method {
            // A request or notification of the server's that pipec would not have
            // read whole anyway: nothing waits for it.
            return None;
        }
        let pending = line.id.and_then(|id| self.pending.remove(&id))?;
        if let Some(slot) = &pending.slot {
            slot.set(Found::TooLarge {
                limit: line.limit,
                size: Some(line.size),
            });
        }
        Some(failed(
            pending.id,
            format!(
                "the answer of {} bytes is over the limit of {} bytes",
                line.size, line.limit
            ),
        ))
    }
}

/// An error answer for a request whose real answer could not be used.
fn failed(id: RequestId, message: String) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None),
        Some(id),
    )
}

impl<R, W> Transport<RoleClient> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Registered before the bytes go out, so the answer always finds its request.
        match &item {
            ClientJsonRpcMessage::Request(request) => {
                let slot = request
                    .request
                    .extensions()
                    .get::<SlotMarker>()
                    .map(|m| m.0.clone());
                self.pending.insert(
                    MessageId::from(&request.id),
                    Pending {
                        id: request.id.clone(),
                        slot,
                    },
                );
            }
            ClientJsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.pending.remove(&MessageId::from(id));
                }
            }
            _ => {}
        }
        let bytes = serde_json::to_vec(&item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        let writer = self.writer.clone();
        async move {
            let bytes = bytes.map_err(io::Error::other)?;
            let mut writer = writer.lock().await;
            let Some(w) = writer.as_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "the server's input is closed",
                ));
            };
            w.write_all(&bytes).await?;
            w.flush().await
        }
    }

    // Cancel-safe, as rmcp's loop needs: the only await is a read, and what it read is
    // taken into `self` before anything else can happen.
    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            while let Some(line) = self.ready.pop_front() {
                if let Some(message) = self.deliver(line) {
                    return Some(message);
                }
            }
            if self.ended {
                return None;
            }
            let n = match self.reader.read(&mut self.chunk).await {
                Ok(0) | Err(_) => {
                    self.ended = true;
                    continue;
                }
                Ok(n) => n,
            };
            let pending = &self.pending;
            let limit_of = |id: &MessageId| pending.get(id).and_then(|p| p.slot.as_ref()?.limit());
            self.lines
                .feed(&self.chunk[..n], &limit_of, &mut self.ready);
            self.largest_buffer
                .fetch_max(self.lines.largest_buffer() + READ_CHUNK, Ordering::Relaxed);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the writer closes the server's stdin: its signal to exit.
        let writer = self.writer.lock().await.take();
        if let Some(mut w) = writer {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcMessage};

    type Halves = (
        LineTransport<tokio::io::DuplexStream, tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
        tokio::io::DuplexStream,
    );

    /// A transport wired to in-memory pipes: what the test writes to `server_out` is
    /// what the server said; what the transport sent arrives at `server_in`.
    fn transport(limit: usize) -> (Halves, Arc<GarbageLines>, Arc<AtomicUsize>) {
        let (server_out, client_in) = tokio::io::duplex(1 << 16);
        let (client_out, server_in) = tokio::io::duplex(1 << 16);
        let garbage = Arc::new(GarbageLines::default());
        let largest = Arc::new(AtomicUsize::new(0));
        let t = LineTransport::new(
            client_in,
            client_out,
            limit,
            garbage.clone(),
            largest.clone(),
        );
        ((t, server_out, server_in), garbage, largest)
    }

    fn call(id: i64, slot: Option<Arc<RequestSlot>>) -> ClientJsonRpcMessage {
        let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("get_deal"),
        ));
        if let Some(slot) = slot {
            request.extensions_mut().insert(SlotMarker(slot));
        }
        ClientJsonRpcMessage::request(request, RequestId::Number(id))
    }

    #[tokio::test]
    async fn an_answer_over_its_request_limit_fails_that_request_and_the_next_one_works() {
        let ((mut t, mut server_out, _server_in), _, largest) = transport(64 << 20);
        let slot = RequestSlot::new(Some(200_000));
        t.send(call(1, Some(slot.clone()))).await.expect("send");
        t.send(call(2, Some(RequestSlot::new(None))))
            .await
            .expect("send");
        let writer = tokio::spawn(async move {
            server_out
                .write_all(
                    br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#,
                )
                .await?;
            let chunk = vec![b'a'; 1 << 20];
            for _ in 0..20 {
                server_out.write_all(&chunk).await?;
            }
            server_out.write_all(b"\"}]}}\n").await?;
            server_out
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[]}}\n")
                .await?;
            Ok::<_, io::Error>(server_out)
        });
        let first = t.receive().await.expect("an answer");
        assert!(matches!(first, JsonRpcMessage::Error(e) if e.id == Some(RequestId::Number(1))));
        match slot.take() {
            Some(Found::TooLarge { limit, size }) => {
                assert_eq!(limit, 200_000);
                assert!(size.is_some_and(|s| s > 20 << 20));
            }
            other => panic!("{other:?}"),
        }
        let second = t.receive().await.expect("an answer");
        assert!(matches!(second, JsonRpcMessage::Response(r) if r.id == RequestId::Number(2)));
        let peak = largest.load(Ordering::Relaxed);
        assert!(peak < 600_000, "the transport held {peak} bytes at once");
        let _ = writer.await;
    }

    #[tokio::test]
    async fn a_line_that_is_not_json_is_counted_and_nothing_is_delivered_for_it() {
        let ((mut t, mut server_out, _server_in), garbage, _) = transport(1 << 20);
        t.send(call(1, None)).await.expect("send");
        server_out
            .write_all(
                b"Loading plugins...\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n",
            )
            .await
            .expect("write");
        let message = t.receive().await.expect("an answer");
        assert!(matches!(message, JsonRpcMessage::Response(_)));
        assert_eq!(garbage.seen(), Some((1, "Loading plugins...".into())));
    }

    #[tokio::test]
    async fn a_slotted_answer_goes_to_its_slot_whole() {
        let ((mut t, mut server_out, _server_in), _, _) = transport(1 << 20);
        let slot = RequestSlot::new(None);
        t.send(call(5, Some(slot.clone()))).await.expect("send");
        server_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"resource_link\"}],\"extra\":1}}\n")
            .await
            .expect("write");
        let message = t.receive().await.expect("an answer");
        assert!(matches!(message, JsonRpcMessage::Response(r) if r.id == RequestId::Number(5)));
        assert_eq!(
            slot.take(),
            Some(Found::Result(
                serde_json::json!({"content":[{"type":"resource_link"}],"extra":1})
            ))
        );
    }

    #[tokio::test]
    async fn the_answer_to_a_cancelled_request_is_dropped() {
        let ((mut t, mut server_out, _server_in), _, _) = transport(1 << 20);
        t.send(call(1, None)).await.expect("send");
        t.send(call(2, None)).await.expect("send");
        let cancelled =
            ClientNotification::CancelledNotification(rmcp::model::CancelledNotification::new(
                rmcp::model::CancelledNotificationParam::new(Some(RequestId::Number(1)), None),
            ));
        t.send(ClientJsonRpcMessage::notification(cancelled))
            .await
            .expect("send");
        server_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n")
            .await
            .expect("write");
        let message = t.receive().await.expect("an answer");
        assert!(matches!(message, JsonRpcMessage::Response(r) if r.id == RequestId::Number(2)));
    }

    #[tokio::test]
    async fn an_oversized_notification_is_dropped_and_the_next_answer_arrives() {
        let ((mut t, mut server_out, _server_in), garbage, _) = transport(100);
        t.send(call(3, None)).await.expect("send");
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"data\":\"{}\"}}}}\n",
            "z".repeat(500)
        );
        server_out.write_all(long.as_bytes()).await.expect("write");
        server_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n")
            .await
            .expect("write");
        let message = t.receive().await.expect("an answer");
        assert!(matches!(message, JsonRpcMessage::Response(r) if r.id == RequestId::Number(3)));
        assert_eq!(garbage.seen(), None);
    }

    #[tokio::test]
    async fn the_end_of_the_stream_ends_the_transport_and_close_ends_the_servers_input() {
        let ((mut t, server_out, mut server_in), _, _) = transport(1 << 20);
        drop(server_out);
        assert!(t.receive().await.is_none());
        t.close().await.expect("close");
        let mut rest = Vec::new();
        server_in.read_to_end(&mut rest).await.expect("read");
        assert!(rest.is_empty());
        assert!(t.send(call(1, None)).await.is_err());
    }
}
