//! rmcp's errors as pipec's: which kind of [`McpError`] a failed handshake or request
//! is. The kind comes from rmcp's typed errors and from what the transport left in the
//! request's slot, never from rmcp's wording — but for HTTP status lines, which rmcp
//! only gives as text (`HTTP 404 Not Found: <body>`) in the pinned version.

use std::error::Error;

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::McpError;
use super::request_slot::Found;
use super::types::Redact;

/// How much of an HTTP error body an error keeps.
const BODY_CHARS: usize = 1000;

/// What a failure needs to be told: the server, the redaction, its stderr tail (empty
/// over HTTP).
pub(super) struct Context<'a> {
    pub server: &'a str,
    pub redact: &'a Redact,
    pub stderr: String,
}

impl Context<'_> {
    fn server(&self) -> String {
        self.server.to_string()
    }

    fn closed(&self) -> McpError {
        McpError::Closed {
            server: self.server(),
            stderr: self.stderr.clone(),
        }
    }

    fn protocol(&self, message: impl Into<String>) -> McpError {
        McpError::Protocol {
            server: self.server(),
            message: self.redact.whole(&message.into()),
        }
    }

    /// The failure of a request, given what the transport found for it.
    pub fn request(&self, error: ServiceError, found: Option<Found>) -> McpError {
        match found {
            Some(Found::TooLarge { limit, size }) => {
                return McpError::TooLarge {
                    server: self.server(),
                    limit,
                    size,
                };
            }
            Some(Found::Malformed(problem)) => return self.protocol(problem),
            Some(Found::Result(_)) | None => {}
        }
        match error {
            ServiceError::McpError(data) => McpError::Server {
                server: self.server(),
                code: i64::from(data.code.0),
                message: self.redact.whole(&data.message),
                data: data.data,
            },
            ServiceError::TransportClosed => self.closed(),
            ServiceError::TransportSend(e) => {
                self.http(e.error.as_ref()).unwrap_or_else(|| self.closed())
            }
            ServiceError::InputRequiredRoundsExceeded { .. } => McpError::InputRequired {
                server: self.server(),
            },
            ServiceError::Cancelled { reason } => self.protocol(format!(
                "the server cancelled the request{}",
                reason.map(|r| format!(": {r}")).unwrap_or_default()
            )),
            ServiceError::UnexpectedResponse => {
                self.protocol("the answer does not fit the request")
            }
            other => self.protocol(other.to_string()),
        }
    }

    /// The failure of the handshake.
    pub fn start(&self, error: ClientInitializeError) -> McpError {
        let start = |message: String| McpError::Start {
            server: self.server(),
            message: self.redact.whole(&message),
            stderr: self.stderr.clone(),
        };
        match error {
            ClientInitializeError::TransportError { error, context } => {
                match self.http(error.error.as_ref()) {
                    Some(McpError::Closed { .. }) | None => {
                        start(format!("{context}: {}", chain(error.error.as_ref())))
                    }
                    Some(http) => http,
                }
            }
            ClientInitializeError::LegacyFallbackFailed { fallback, .. } => self.start(*fallback),
            ClientInitializeError::ConnectionClosed(during) => start(format!(
                "the server went away during the handshake ({during})"
            )),
            ClientInitializeError::JsonRpcError(data) => start(format!(
                "the server refused the handshake with error {}: {}",
                data.code.0, data.message
            )),
            other => start(format!("the handshake failed: {other}")),
        }
    }

    /// An HTTP failure among `error`'s causes, as pipec's kind.
    fn http(&self, error: &(dyn Error + Send + Sync + 'static)) -> Option<McpError> {
        let mut cause: Option<&(dyn Error + 'static)> = Some(error);
        while let Some(e) = cause {
            if let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                return Some(self.http_error(http));
            }
            cause = e.source();
        }
        None
    }

    fn http_error(&self, error: &StreamableHttpError<reqwest::Error>) -> McpError {
        let status = |status: u16, body: &str| McpError::Http {
            server: self.server(),
            status,
            body: self.redact.whole(&shorten(body)),
        };
        match error {
            StreamableHttpError::HttpStatus(e) => status(e.status, ""),
            StreamableHttpError::AuthRequired(e) => status(401, &e.www_authenticate_header),
            StreamableHttpError::InsufficientScope(e) => status(403, &e.www_authenticate_header),
            StreamableHttpError::UnexpectedServerResponse(text) => match status_line(text) {
                Some((code, body)) => status(code, body),
                None => self.protocol(text.to_string()),
            },
            StreamableHttpError::Client(e) if e.is_status() => {
                status(e.status().map(|s| s.as_u16()).unwrap_or(0), "")
            }
            StreamableHttpError::Client(_)
            | StreamableHttpError::Io(_)
            | StreamableHttpError::UnexpectedEndOfStream
            | StreamableHttpError::TransportChannelClosed
            | StreamableHttpError::SessionExpired
            | StreamableHttpError::SessionRecoveryTimeout => self.closed(),
            other => self.protocol(other.to_string()),
        }
    }
}

/// `HTTP 404 Not Found: <body>` as rmcp words a status it has no type for.
fn status_line(text: &str) -> Option<(u16, &str)> {
    let rest = text.strip_prefix("HTTP ")?;
    let code = rest.get(..3)?.parse::<u16>().ok()?;
    let body = rest.split_once(": ").map(|(_, body)| body).unwrap_or("");
    Some((code, body))
}

fn shorten(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(BODY_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// An error and its causes, in one line.
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_as_rmcp_words_them() {
        assert_eq!(
            status_line("HTTP 404 Not Found: no such path"),
            Some((404, "no such path"))
        );
        assert_eq!(status_line("HTTP 400 Bad Request: "), Some((400, "")));
        assert_eq!(status_line("expect json"), None);
    }

    #[test]
    fn a_long_body_is_shortened() {
        assert_eq!(shorten(&"x".repeat(5000)).chars().count(), BODY_CHARS + 1);
        assert_eq!(shorten(" short "), "short");
    }
}
