//! Serving a provider over stdio: MCP on stdin and stdout, nothing else on stdout, until
//! the client closes stdin.

use std::sync::Arc;

use rmcp::ServiceExt;

use super::handler::Served;
use super::provider::Provider;

/// Serves `provider` on this process's stdin and stdout until the client goes away.
pub async fn serve_stdio(provider: Arc<dyn Provider>) -> Result<(), String> {
    match Served::new(provider)
        .serve(rmcp::transport::io::stdio())
        .await
    {
        Ok(running) => {
            let _ = running.waiting().await;
            Ok(())
        }
        // A client that connects and leaves before its handshake is not an error.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(format!("the MCP session did not start: {e}")),
    }
}
