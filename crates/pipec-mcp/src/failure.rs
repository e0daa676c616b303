//! rmcp's errors as pipec's: which kind of [`McpError`] a failed handshake or request
//! is. The kind comes from rmcp's typed errors and from what the transport left in the
//! request's slot, never from rmcp's wording — but for HTTP status lines, which rmcp
//! only gives as text (`HTTP 404 Not Found: <body>`) in the pinned version.

use std::error::Error;

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use super::McpError;
use super::http_client::Refusal;
use super::request_slot::Found;
use super::types::Redact;

/// How much of an HTTP error body an error keeps, in bytes.
const BODY_BYTES: usize = 1000;

/// How rmcp words an answer over HTTP that is not a JSON-RPC message (the type it names
/// is rmcp's own, so pipec says it in its words).
const UNPARSED_ANSWER: &str = "could not parse JSON response as ServerJsonRpcMessage: ";

/// What a failure needs to be told: the server, its URL over HTTP, the explanation of a
/// refused handshake, the redaction, its stderr tail (empty over HTTP).
pub(super) struct Context<'a> {
    pub server: &'a str,
    pub url: Option<String>,
    pub refusal: Option<&'a Refusal>,
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
    pub(crate) fn request(&self, error: ServiceError, found: Option<Found>) -> McpError {
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
            ServiceError::TransportSend(e) => match self.http(e.error.as_ref()) {
                Some(Reached::Answered(error)) => error,
                Some(Reached::Not(_)) | None => self.closed(),
            },
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
            // pipec sets no timeouts of rmcp's (every request has its own) and reads no
            // subscriptions through it, so what is left is rmcp's own trouble.
            _ => self.protocol("the MCP client failed to carry the request"),
        }
    }

    /// The failure of the handshake. Every kind of rmcp's is put in pipec's words: its
    /// own show its types' debug forms.
    pub(crate) fn start(&self, error: ClientInitializeError) -> McpError {
        let start = |message: String| McpError::Start {
            server: self.server(),
            message: self.redact.whole(&message),
            stderr: self.stderr.clone(),
            url: None,
            help: None,
        };
        match error {
            ClientInitializeError::TransportError { error, .. } => {
                match self.http(error.error.as_ref()) {
                    Some(Reached::Answered(McpError::Closed { .. })) | None => start(format!(
                        "the connection failed during the handshake: {}",
                        root_cause(error.error.as_ref())
                    )),
                    Some(Reached::Answered(answered)) => answered,
                    Some(Reached::Not(unreachable)) => unreachable,
                }
            }
            ClientInitializeError::LegacyFallbackFailed { fallback, .. } => self.start(*fallback),
            ClientInitializeError::ConnectionClosed(_) => {
                start("the server went away during the handshake".to_string())
            }
            ClientInitializeError::JsonRpcError(data) => start(format!(
                "the server refused the handshake with error {}: {}",
                data.code.0, data.message
            )),
            ClientInitializeError::ExpectedInitResponse(_)
            | ClientInitializeError::ExpectedInitResult(_) => start(
                "the server answered the handshake with something that is not an answer to `initialize`"
                    .to_string(),
            ),
            ClientInitializeError::ConflictInitResponseId(..)
            | ClientInitializeError::UncorrelatedErrorResponse { .. } => start(
                "the server answered the handshake under another request's id".to_string(),
            ),
            ClientInitializeError::NoCompatibleProtocolVersion {
                client_supported,
                server_supported,
            } => {
                let versions = |v: &[rmcp::model::ProtocolVersion]| {
                    v.iter()
                        .map(|v| v.as_str().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                start(format!(
                    "the server speaks MCP {}, and pipec {}",
                    versions(&server_supported),
                    versions(&client_supported)
                ))
            }
            _ => start("the handshake failed".to_string()),
        }
    }

    /// An HTTP failure among `error`'s causes, as pipec's kind.
    fn http(&self, error: &(dyn Error + Send + Sync + 'static)) -> Option<Reached> {
        let mut cause: Option<&(dyn Error + 'static)> = Some(error);
        while let Some(e) = cause {
            if let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                return Some(self.http_error(http));
            }
            cause = e.source();
        }
        None
    }

    fn http_error(&self, error: &StreamableHttpError<reqwest::Error>) -> Reached {
        let status = |status: u16, body: &str, challenge: Option<&str>| {
            Reached::Answered(McpError::Http {
                server: self.server(),
                url: self.url.clone().unwrap_or_default(),
                status,
                body: self.redact.whole(&shorten(body)),
                challenge: challenge.map(|c| self.redact.whole(&shorten(c))),
            })
        };
        // The explanation the transport asked for, when rmcp dropped the body.
        let explanation = || self.refusal.and_then(Refusal::take).unwrap_or_default();
        match error {
            StreamableHttpError::HttpStatus(e) => status(e.status, "", None),
            StreamableHttpError::AuthRequired(e) => {
                status(401, &explanation(), Some(&e.www_authenticate_header))
            }
            StreamableHttpError::InsufficientScope(e) => {
                status(403, &explanation(), Some(&e.www_authenticate_header))
            }
            StreamableHttpError::UnexpectedServerResponse(text) => match status_line(text) {
                Some((code, body)) => status(code, body, None),
                None => match text.strip_prefix(UNPARSED_ANSWER) {
                    Some(rest) => Reached::Answered(
                        self.protocol(format!("its answer is not a JSON-RPC message: {rest}")),
                    ),
                    None => Reached::Answered(self.protocol(text.to_string())),
                },
            },
            StreamableHttpError::Client(e) if e.is_status() => {
                status(e.status().map(|s| s.as_u16()).unwrap_or(0), "", None)
            }
            StreamableHttpError::Client(e) if e.is_connect() || e.is_timeout() => {
                Reached::Not(self.unreachable(e))
            }
            StreamableHttpError::UnexpectedContentType(Some(kind)) => {
                Reached::Answered(self.protocol(format!(
                    "it answered with `{kind}`, which is neither JSON nor an event stream"
                )))
            }
            StreamableHttpError::UnexpectedContentType(None) => Reached::Answered(self.protocol(
                "it answered without a content type, so neither JSON nor an event stream",
            )),
            StreamableHttpError::Deserialize(e) => Reached::Answered(
                self.protocol(format!("its answer is not a JSON-RPC message: {e}")),
            ),
            StreamableHttpError::MissingSessionIdInResponse => Reached::Answered(
                self.protocol("it started no session (its answer has no `Mcp-Session-Id`)"),
            ),
            StreamableHttpError::ReinitializationFailed(data) => {
                Reached::Answered(self.protocol(format!(
                    "it refused to start the session again with error {}: {}",
                    data.code.0, data.message
                )))
            }
            // Nothing was sent: the token could not be had (a refresh that failed, the
            // credentials store).
            StreamableHttpError::Auth(e) => Reached::Answered(super::auth::failure(
                self.server,
                self.url.as_deref().unwrap_or_default(),
                self.redact,
                e,
            )),
            _ => Reached::Answered(self.closed()),
        }
    }

    /// A server pipec could not connect to: where, and why in the words of the
    /// system.
    fn unreachable(&self, error: &reqwest::Error) -> McpError {
        let url = self.url.clone().unwrap_or_default();
        let (message, help) = if error.is_timeout() {
            (
                "no connection within the connect timeout".to_string(),
                "check that the address is right and that nothing (a firewall, a proxy) drops the connection",
            )
        } else {
            match io_kind(error) {
                Some(std::io::ErrorKind::ConnectionRefused) => (
                    "nothing listens there (connection refused)".to_string(),
                    "start the server, or correct its `url`",
                ),
                _ => (
                    root_cause(error),
                    "check the server's `url`, and that the server runs there",
                ),
            }
        };
        McpError::Start {
            server: self.server(),
            message: self.redact.whole(&message),
            stderr: String::new(),
            url: Some(url),
            help: Some(help.to_string()),
        }
    }
}

/// The status and `WWW-Authenticate` challenge of a handshake the server refused (HTTP
/// 401 or 403), as the server sent them: what authorizing starts from.
pub(crate) fn refused_handshake(error: &ClientInitializeError) -> Option<(u16, Option<String>)> {
    let transport = match error {
        ClientInitializeError::TransportError { error, .. } => error.error.as_ref(),
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => {
            return refused_handshake(fallback);
        }
        _ => return None,
    };
    let mut cause: Option<&(dyn Error + 'static)> = Some(transport);
    while let Some(e) = cause {
        if let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match http {
                StreamableHttpError::AuthRequired(e) => {
                    Some((401, Some(e.www_authenticate_header.clone())))
                }
                StreamableHttpError::InsufficientScope(e) => {
                    Some((403, Some(e.www_authenticate_header.clone())))
                }
                StreamableHttpError::HttpStatus(e) if e.status == 401 => Some((401, None)),
                _ => None,
            };
        }
        cause = e.source();
    }
    None
}

/// Whether an HTTP failure happened before the server answered.
enum Reached {
    /// The server answered (an error status, something not MCP, a closed stream).
    Answered(McpError),
    /// No connection was made.
    Not(McpError),
}

/// The kind of the operating system's error under `error`, if there is one.
fn io_kind(error: &(dyn Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut cause: Option<&(dyn Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        cause = e.source();
    }
    None
}

/// The innermost cause of an error: what the system or the peer said, without the
/// layers of libraries that passed it on (whose words name their own types).
fn root_cause(error: &(dyn Error + 'static)) -> String {
    let mut innermost = error;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    innermost.to_string()
}

/// `HTTP 404 Not Found: <body>` as rmcp words a status it has no type for.
fn status_line(text: &str) -> Option<(u16, &str)> {
    let rest = text.strip_prefix("HTTP ")?;
    let code = rest.get(..3)?.parse::<u16>().ok()?;
    let body = rest.split_once(": ").map(|(_, body)| body).unwrap_or("");
    Some((code, body))
}

fn shorten(text: &str) -> String {
    pipec_base::source::shorten(text.trim(), BODY_BYTES)
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
        assert_eq!(shorten(&"x".repeat(5000)).chars().count(), BODY_BYTES + 1);
        assert_eq!(shorten(" short "), "short");
    }
}
