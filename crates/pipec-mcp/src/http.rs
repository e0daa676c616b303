//! Reaching a server over streamable HTTP: rmcp's transport over pipec's reqwest client
//! (rustls with the ring provider, as for model endpoints), the server's headers on every
//! request, and the session-wide size limit on every body and SSE event.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::McpError;
use super::http_client::SlotAwareClient;

/// What reaching a server over HTTP takes: the transport's settings and the client under
/// it, which a server with OAuth wraps in rmcp's `AuthClient`.
pub(super) struct Http {
    pub(super) config: StreamableHttpClientTransportConfig,
    pub(super) client: SlotAwareClient,
}

impl Http {
    pub(super) fn transport(&self) -> StreamableHttpClientTransport<SlotAwareClient> {
        StreamableHttpClientTransport::with_client(self.client.clone(), self.config.clone())
    }
}

/// How long connecting to the server may take; the request itself is bounded by the
/// session's timeouts.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How much of an error body rmcp keeps.
const ERROR_BODY_BYTES: usize = 4 * 1024;

/// Headers the transport sets itself: a server's configuration may not replace them.
fn is_reserved(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "accept"
            | "content-type"
            | "content-length"
            | "host"
            | "transfer-encoding"
            | "connection"
            | "last-event-id"
    ) || name.starts_with("mcp-")
}

fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The transport for `url` (the client under it keeps the server's explanation of a
/// refused handshake). Refuses (`Start`) a header that is not valid HTTP or that the transport
/// sets itself; values are never shown, since they may be secrets.
pub(super) fn transport(
    server: &str,
    url: &str,
    headers: &[(String, String)],
    max_message_bytes: usize,
) -> Result<Http, McpError> {
    let fail = |message: String| McpError::Start {
        server: server.to_string(),
        message,
        stderr: String::new(),
        url: None,
        help: None,
    };
    let mut custom = HashMap::with_capacity(headers.len());
    for (name, value) in headers {
        let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
            return Err(fail(format!("`{name}` is not a valid HTTP header name")));
        };
        if is_reserved(&header) {
            return Err(fail(format!(
                "the header `{name}` is set by the MCP transport itself; remove it from the server's headers"
            )));
        }
        let Ok(mut value) = HeaderValue::from_str(value) else {
            return Err(fail(format!(
                "the value of the header `{name}` is not valid in HTTP (a line break or a control character?)"
            )));
        };
        value.set_sensitive(true);
        custom.insert(header, value);
    }
    install_crypto();
    // No idle connections are kept: rmcp may hand a connection back before the end of its
    // SSE body, and reusing it then stalls on TCP's delayed ACK (about 40 ms a request).
    // No redirects are followed: one would carry the server's headers (its credentials)
    // to wherever it points.
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| fail(format!("cannot create an HTTP client: {e}")))?;
    // A response stream cut before its answer is retried a few times, not forever: the
    // request's own timeout is what bounds it, but a dead server should fail sooner.
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(2);
    retry.base_duration = Duration::from_millis(200);
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .max_json_response_size(max_message_bytes)
        .max_sse_event_size(max_message_bytes)
        .max_error_response_size(ERROR_BODY_BYTES);
    config.retry_config = Arc::new(retry);
    Ok(Http {
        config,
        client: SlotAwareClient::new(client),
    })
}

/// `url` as messages show it: scheme, host, port and path, without a user, a password,
/// a query or a fragment, any of which may hold a credential.
pub(super) fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        // Not a URL at all: nothing to take out, and reqwest refuses it anyway.
        Err(_) => url.split(['?', '#']).next().unwrap_or(url).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(headers: &[(&str, &str)]) -> String {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        match transport("crm", "http://127.0.0.1:9/mcp", &headers, 1 << 20) {
            Err(McpError::Start { message, .. }) => message,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[tokio::test]
    async fn reserved_and_invalid_headers_are_refused_without_showing_values() {
        assert!(
            refused(&[("Accept", "text/html")]).contains("`Accept` is set by the MCP transport")
        );
        assert!(refused(&[("Mcp-Session-Id", "x")]).contains("Mcp-Session-Id"));
        assert!(refused(&[("bad header", "x")]).contains("not a valid HTTP header name"));
        let message = refused(&[("Authorization", "Bearer s3cret\n")]);
        assert!(message.contains("Authorization"), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
    }

    #[test]
    fn a_shown_url_has_no_credentials_query_or_fragment() {
        assert_eq!(
            shown_url("https://user:pw@kb.example.com:8443/mcp?key=k#frag"),
            "https://kb.example.com:8443/mcp"
        );
        assert_eq!(
            shown_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
        assert_eq!(shown_url("not a url?key=k"), "not a url");
    }

    #[tokio::test]
    async fn authorization_and_other_headers_are_accepted() {
        let headers = vec![
            ("Authorization".to_string(), "Bearer t".to_string()),
            ("X-Tenant".to_string(), "acme".to_string()),
        ];
        assert!(transport("crm", "http://127.0.0.1:9/mcp", &headers, 1 << 20).is_ok());
    }
}
