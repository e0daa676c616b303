//! What one server offers, taken in one short session: its tools, its resources and
//! resource templates, what it declared it offers and the protocol version it
//! negotiated (`pipec tools pull`, `pipec check --online`). The session is closed on
//! every path, so nothing started here outlives the listing. A server may echo what it
//! was started with (a token in a tool's description): every text of the listings goes
//! through the session's redaction.

use crate::secrets::scrub_strings;
use pipec_mcp::{
    McpError, Offers, Redaction, ResourceInfo, ServerConfig, Session, TemplateInfo, ToolInfo,
};

/// JSON-RPC's "method not found": a server without tools or resources may answer a
/// listing with it, which means it offers none.
const METHOD_NOT_FOUND: i64 = -32601;

/// A server's listings.
#[derive(Clone, Debug)]
pub struct ServerListing {
    /// The protocol version the session negotiated (`2025-11-25`), when the server said.
    pub protocol_version: Option<String>,
    /// What the server declared it offers (its capabilities).
    pub offers: Offers,
    pub tools: Vec<ToolInfo>,
    pub templates: Vec<TemplateInfo>,
    /// Its fixed resources (`resources/list`).
    pub resources: Vec<ResourceInfo>,
}

/// Starts the server, lists its tools and resources, and closes the session.
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
        for r in &mut self.resources {
            text(&mut r.uri);
            text(&mut r.name);
            r.title
                .iter_mut()
                .chain(r.description.iter_mut())
                .chain(r.mime.iter_mut())
                .for_each(text);
            value(&mut r.raw);
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
    let offers = session.offers();
    // A run lists a server's tools whatever it declared, so the listing does too; but a
    // server that did not declare tools owes no listing, and its failure means none.
    let tools = match none_when_not_offered(session.list_tools().await) {
        Err(e) if !offers.tools && answered(&e) => Ok(Vec::new()),
        other => other,
    }?;
    // Resources are asked for only of a server that declared them: one that did not may
    // answer anything (lax servers answer `{}` to a method they do not know).
    let (templates, resources) = if offers.resources {
        (
            none_when_not_offered(session.list_resource_templates().await)?,
            none_when_not_offered(session.list_resources().await)?,
        )
    } else {
        (Vec::new(), Vec::new())
    };
    Ok(ServerListing {
        protocol_version: session.protocol_version(),
        offers,
        tools,
        templates,
        resources,
    })
}

fn none_when_not_offered<T>(listed: Result<Vec<T>, McpError>) -> Result<Vec<T>, McpError> {
    match listed {
        Err(e) if e.code() == Some(METHOD_NOT_FOUND) => Ok(Vec::new()),
        other => other,
    }
}

/// Whether the server answered the request (with an error, or with something that is no
/// listing), as opposed to a transport that failed.
fn answered(e: &McpError) -> bool {
    matches!(e, McpError::Server { .. } | McpError::Protocol { .. })
}
