//! A program that is an MCP server of its own resources, built on pipec's provider API:
//! a fixed resource, a template whose content a handler makes from the URI's values, a
//! URI built for that template with correct percent-encoding, and a change announced to
//! subscribers. It serves over stdio, so an MCP client starts it:
//!
//! ```sh
//! cargo build --example provider
//! npx @modelcontextprotocol/inspector target/debug/examples/provider
//! ```

use std::sync::Arc;
use std::time::Duration;

use pipec::mcp::server::{
    Body, ListedResource, ListedTemplate, Provider, ReadContent, ReadFailure, ServerIdentity,
    serve_stdio,
};
use pipec::serve::matcher::Template;
use pipec::serve::registry::{ReadHandler, Registry, fixed, template_matcher};
use pipec::serve::uri_build::build_uri;

fn main() -> Result<(), String> {
    let registry = Arc::new(Registry::new(ServerIdentity {
        name: "weather-notes".into(),
        version: "1.0".into(),
        title: Some("Weather notes".into()),
        instructions: Some("Read weather://notes/{city} for a city's notes.".into()),
    }));

    registry.add_resource(
        ListedResource {
            uri: "weather://about".into(),
            name: "about".into(),
            mime_type: Some("text/plain".into()),
            ..ListedResource::default()
        },
        fixed(vec![ReadContent {
            uri: "weather://about".into(),
            mime_type: Some("text/plain".into()),
            body: Body::Text("Notes about the weather, per city.\n".into()),
        }]),
    );

    // The template's matcher comes from pipec's: values are decoded once and checked.
    let template =
        Arc::new(Template::parse("weather://notes/{city}").map_err(|e| e.message.clone())?);
    let matcher = template_matcher(template.clone());
    let notes: ReadHandler = Arc::new(|request| {
        Box::pin(async move {
            let city = request.vars.get("city").cloned().unwrap_or_default();
            if city.eq_ignore_ascii_case("atlantis") {
                // An explicit error, never an empty success.
                return Err(ReadFailure::NotFound(format!("no notes for {city}")));
            }
            Ok(vec![ReadContent {
                uri: request.uri,
                mime_type: Some("application/json".into()),
                body: Body::Text(serde_json::json!({ "city": city, "note": "mild" }).to_string()),
            }])
        })
    });
    registry.add_template(
        ListedTemplate {
            uri_template: template.text().to_string(),
            name: "notes".into(),
            mime_type: Some("application/json".into()),
            ..ListedTemplate::default()
        },
        matcher,
        notes,
        None,
    );

    // A URI for the template, encoded as RFC 6570 says ("São Paulo" → "S%C3%A3o%20Paulo").
    let uri =
        build_uri("weather://notes/{city}", &[("city", "São Paulo")]).map_err(|e| e.to_string())?;
    eprintln!("provider: try reading {uri}");

    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async move {
        // Announce a change to subscribers of the notes of São Paulo every minute.
        let announcer = registry.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(60)).await;
                announcer.notify_updated(&uri);
            }
        });
        let provider: Arc<dyn Provider> = registry;
        serve_stdio(provider).await
    })
}
