//! What one server offers, taken in one short session: its tools, its resource
//! templates and the protocol version it negotiated (`pipec tools pull`, `pipec check
//! --online`). The session is closed on every path, so nothing started here outlives
//! the listing.

use crate::mcp::{McpError, ServerConfig, Session, TemplateInfo, ToolInfo};

/// JSON-RPC's "method not found": a server without tools or resources may answer a
/// listing with it, which means it offers none.
const METHOD_NOT_FOUND: i64 = -32601;

/// A server's listings.
#[derive(Clone, Debug)]
pub struct ServerListing {
    /// The protocol version the session negotiated (`2025-11-25`), when the server said.
    pub protocol_version: Option<String>,
    pub tools: Vec<ToolInfo>,
    pub templates: Vec<TemplateInfo>,
}

/// Starts the server, lists its tools and resource templates, and closes the session.
pub async fn take_listing(config: ServerConfig) -> Result<ServerListing, McpError> {
    let session = Session::connect(config).await?;
    let listing = listings(&session).await;
    session.close().await;
    listing
}

async fn listings(session: &Session) -> Result<ServerListing, McpError> {
    let tools = none_when_not_offered(session.list_tools().await)?;
    let templates = none_when_not_offered(session.list_resource_templates().await)?;
    Ok(ServerListing {
        protocol_version: session.protocol_version(),
        tools,
        templates,
    })
}

fn none_when_not_offered<T>(listed: Result<Vec<T>, McpError>) -> Result<Vec<T>, McpError> {
    match listed {
        Err(e) if e.code() == Some(METHOD_NOT_FOUND) => Ok(Vec::new()),
        other => other,
    }
}
