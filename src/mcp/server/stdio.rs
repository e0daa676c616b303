//! Serving a provider over stdio: MCP on stdin and stdout, nothing else on stdout, until
//! the client closes stdin.

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, EmptyResult, GetMeta, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;

use super::handler::{Served, ping_answered_by_transport};
use super::provider::Provider;

/// Serves `provider` on this process's stdin and stdout until the client goes away.
pub async fn serve_stdio(provider: Arc<dyn Provider>) -> Result<(), String> {
    let transport = Pinging(AsyncRwTransport::new_server(
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

/// A transport that answers the `ping`s rmcp's dispatch would refuse
/// ([`ping_answered_by_transport`]) and passes everything else on.
struct Pinging<T>(T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for Pinging<T> {
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
                    .is_some_and(|v| ping_answered_by_transport(v.as_str()))
            {
                let pong = ServerJsonRpcMessage::response(
                    ServerResult::EmptyResult(EmptyResult {}),
                    request.id.clone(),
                );
                // A pong that cannot be written means the client is gone, which the
                // next receive tells.
                let _ = self.0.send(pong).await;
                continue;
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}
