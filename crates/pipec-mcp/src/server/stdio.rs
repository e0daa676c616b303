//! Serving a provider over stdio: MCP on stdin and stdout, nothing else on stdout, until
//! the client closes stdin. A `ping` of the 2026-07-28 era, which removed it, is refused
//! as streamable HTTP refuses it, even before the client's first request settles the
//! era (when rmcp would answer any `ping`).

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::ServiceExt;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, PingRequestMethod, ServerJsonRpcMessage,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;

use super::handler::Served;
use super::provider::Provider;

/// Serves `provider` on this process's stdin and stdout until the client goes away.
pub async fn serve_stdio(provider: Arc<dyn Provider>) -> Result<(), String> {
    let transport = EraPings(AsyncRwTransport::new_server(
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    match Served::new(provider).serve(transport).await {
        Ok(running) => {
            let _ = running.waiting().await;
            Ok(())
        }
        // A client that connects and leaves before its handshake is not an error.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(format!("the MCP session did not start: {e}")),
    }
}

/// Whether requests of this protocol version have no `ping`: the 2026-07-28 revision
/// removed it (the MCP conformance suite checks that a server refuses it).
fn ping_removed_in(version: &str) -> bool {
    // Versions are dates, and dates in this form compare as text.
    version >= "2026-07-28"
}

/// A transport that refuses the `ping`s of an era without one, with the error rmcp's
/// dispatch gives them once the era is settled, and passes everything else on.
struct EraPings<T>(T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for EraPings<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.0.receive().await?;
            if let ClientJsonRpcMessage::Request(request) = &message
                && matches!(request.request, ClientRequest::PingRequest(_))
                && request
                    .request
                    .get_meta()
                    .protocol_version()
                    .is_some_and(|v| ping_removed_in(v.as_str()))
            {
                let refusal = ServerJsonRpcMessage::error(
                    ErrorData::method_not_found::<PingRequestMethod>(),
                    Some(request.id.clone()),
                );
                // An answer that cannot be written means the client is gone, which the
                // next receive tells.
                let _ = self.0.send(refusal).await;
                continue;
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}
