//! What one server offers, taken in one short session: its tools, its resource
//! templates and the protocol version it negotiated (`pipec tools pull`, `pipec check
//! --online`). The session is closed on every path, so nothing started here outlives
//! the listing. A server may echo what it was started with (a token in a tool's
//! description): every text of the listings goes through the session's redaction.

use crate::mcp::{McpError, Redaction, ServerConfig, Session, TemplateInfo, ToolInfo};
use crate::runtime::secrets::scrub_strings;

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
    let redact = config.redact.clone();
    let session = Session::connect(config).await?;
    let listing = listings(&session).await;
    session.close().await;
    let mut listing = listing?;
    listing.redact(&*redact);
    Ok(listing)
}

impl ServerListing {
    /// Every text of the listings through `redact`.
    fn redact(&mut self, redact: &dyn Redaction) {
        let text = |s: &mut String| *s = redact.whole(s);
        let value = |v: &mut serde_json::Value| scrub_strings(v, &|s| redact.whole(s));
        for t in &mut self.tools {
            text(&mut t.name);
            t.title
                .iter_mut()
                .chain(t.description.iter_mut())
                .for_each(text);
            value(&mut t.input_schema);
            t.output_schema.iter_mut().for_each(value);
            value(&mut t.raw);
        }
        for t in &mut self.templates {
            text(&mut t.uri_template);
            text(&mut t.name);
            t.title
                .iter_mut()
                .chain(t.description.iter_mut())
                .chain(t.mime.iter_mut())
                .for_each(text);
            value(&mut t.raw);
        }
    }
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
