//! Why a request to a server failed. The runtime decides from the kind what to do (an
//! error the server *answered* may mean an expired link, worth a heal; a dead transport
//! never is), so each kind is its own variant, never a message to match.

use std::time::Duration;

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
pub enum McpError {
    /// The server could not be started or reached: a spawn failure, a refused connection,
    /// a failed handshake.
    Start {
        server: String,
        message: String,
        stderr: String,
        /// The server's URL when it could not be reached over HTTP (as shown: no user,
        /// password, query or fragment).
        url: Option<String>,
        /// What to do about it, when pipec can tell.
        help: Option<String>,
    },
    /// Starting took longer than its `startup_timeout`.
    StartTimeout {
        server: String,
        after: Duration,
        stderr: String,
    },
    /// The server went away (it exited, the connection closed) with requests in flight.
    Closed { server: String, stderr: String },
    /// A request took longer than its timeout.
    Timeout {
        server: String,
        request: String,
        after: Duration,
    },
    /// The server wrote lines that are not JSON-RPC messages.
    Garbage {
        server: String,
        lines: u64,
        sample: String,
    },
    /// An answer over its size limit was read past, never held whole; the request it
    /// answered fails. `size` is the whole message's size when it was counted to its end.
    TooLarge {
        server: String,
        limit: usize,
        size: Option<u64>,
    },
    /// An HTTP server answered with an error status.
    Http {
        server: String,
        /// The server's URL, as shown (no user, password, query or fragment).
        url: String,
        status: u16,
        /// The start of the body: the server's explanation, redacted.
        body: String,
        /// The `WWW-Authenticate` challenge of a 401 or 403, redacted.
        challenge: Option<String>,
    },
    /// The server answered the request with a JSON-RPC error.
    Server {
        server: String,
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// The server asked for input mid-request (MCP's `input_required`) that the session's
    /// policy does not answer here (sampling, or a form left to a person where the
    /// caller cannot ask one).
    InputRequired { server: String },
    /// Anything else the server sent that does not fit the protocol.
    Protocol { server: String, message: String },
    /// What stands in for the server (a recorded tape) holds no answer to the request;
    /// `message` says which request and what it holds instead.
    NoAnswer { server: String, message: String },
    /// The server no longer tells about a task a call became (it restarted without it,
    /// or the task outlived its time to live): what became of the call is unknown.
    TaskLost {
        server: String,
        task: String,
        message: String,
    },
    /// The server asks for OAuth authorization that pipec could not get: nobody to
    /// approve, the authorization server refused, or the server kept refusing the tokens.
    Authorization {
        server: String,
        message: String,
        help: Option<String>,
    },
}

impl McpError {
    /// The server this is about.
    pub fn server(&self) -> &str {
        match self {
            McpError::Start { server, .. }
            | McpError::StartTimeout { server, .. }
            | McpError::Closed { server, .. }
            | McpError::Timeout { server, .. }
            | McpError::Garbage { server, .. }
            | McpError::TooLarge { server, .. }
            | McpError::Http { server, .. }
            | McpError::Server { server, .. }
            | McpError::InputRequired { server }
            | McpError::Protocol { server, .. }
            | McpError::NoAnswer { server, .. }
            | McpError::TaskLost { server, .. }
            | McpError::Authorization { server, .. } => server,
        }
    }

    /// Whether the server itself answered with an error (as opposed to a transport that
    /// failed, a timeout, a message too large).
    pub fn answered_by_server(&self) -> bool {
        matches!(self, McpError::Server { .. })
    }

    /// What to do about it, when pipec can tell: for a refused login, the credentials
    /// to check; for a server that cannot be reached, its address.
    pub fn help(&self) -> Option<String> {
        match self {
            McpError::Start { help, .. } | McpError::Authorization { help, .. } => help.clone(),
            McpError::Http {
                server,
                status: 401,
                challenge,
                ..
            } if challenge.as_deref().is_some_and(asks_for_a_token) => Some(format!(
                "the server wants a token: if it authorizes with OAuth, run `pipec mcp login {server}` once; else give it one in the `headers` of the server `{server}`"
            )),
            McpError::Http {
                server,
                status: 401,
                ..
            } => Some(format!(
                "the server did not accept the credentials pipec sent: check the `headers` of the server `{server}` and the secrets they name"
            )),
            McpError::Http {
                server,
                status: 403,
                ..
            } => Some(format!(
                "the server knows the credentials pipec sent but does not let them do this: check what the token in the `headers` of the server `{server}` is allowed (its scopes)"
            )),
            _ => None,
        }
    }

    /// Whether the server refused the credentials it was sent (HTTP 401 or 403): a
    /// setup problem that trying again does not fix.
    pub fn refused_credentials(&self) -> bool {
        matches!(
            self,
            McpError::Http {
                status: 401 | 403,
                ..
            } | McpError::Authorization { .. }
        )
    }

    /// The JSON-RPC error code, when the server answered with one.
    pub fn code(&self) -> Option<i64> {
        match self {
            McpError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Whether a `WWW-Authenticate` challenge asks for a bearer token the request did not
/// have: with one that was refused, the server says `error=` (RFC 6750 §3).
fn asks_for_a_token(challenge: &str) -> bool {
    let challenge = challenge.trim_start().to_ascii_lowercase();
    challenge.starts_with("bearer") && !challenge.contains("error=")
}

impl std::fmt::Display for McpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |s: &str| {
            if s.trim().is_empty() {
                String::new()
            } else {
                format!("; its stderr ends with:\n{}", s.trim_end())
            }
        };
        match self {
            McpError::Start {
                server,
                message,
                stderr,
                url: Some(url),
                ..
            } => write!(
                f,
                "the server `{server}` could not be reached at {url}: {message}{}",
                tail(stderr)
            ),
            McpError::Start {
                server,
                message,
                stderr,
                url: None,
                ..
            } => write!(
                f,
                "the server `{server}` could not be started: {message}{}",
                tail(stderr)
            ),
            McpError::StartTimeout {
                server,
                after,
                stderr,
            } => write!(
                f,
                "the server `{server}` did not start within {}s{}",
                after.as_secs_f64(),
                tail(stderr)
            ),
            McpError::Closed { server, stderr } => {
                write!(f, "the server `{server}` went away{}", tail(stderr))
            }
            McpError::Timeout {
                server,
                request,
                after,
            } => write!(
                f,
                "the server `{server}` did not answer `{request}` within {}s",
                after.as_secs_f64()
            ),
            McpError::Garbage {
                server,
                lines,
                sample,
            } => write!(
                f,
                "the server `{server}` wrote {lines} line(s) that are not MCP messages, such as: {sample}"
            ),
            McpError::TooLarge {
                server,
                limit,
                size,
            } => match size {
                Some(size) => write!(
                    f,
                    "the server `{server}` sent a message of {size} bytes, over the limit of {limit}"
                ),
                None => write!(
                    f,
                    "the server `{server}` sent a message larger than {limit} bytes"
                ),
            },
            McpError::Http {
                server,
                url,
                status,
                body,
                challenge,
            } => {
                write!(f, "the server `{server}` answered HTTP {status}")?;
                if let Some(reason) = http::StatusCode::from_u16(*status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                {
                    write!(f, " {reason}")?;
                }
                if !url.is_empty() {
                    write!(f, " at {url}")?;
                }
                // rmcp keeps no body of a 5xx that is not a JSON-RPC error.
                if !body.trim().is_empty() {
                    write!(f, ": {}", body.trim())?;
                }
                if let Some(challenge) = challenge {
                    write!(f, " (WWW-Authenticate: {challenge})")?;
                }
                Ok(())
            }
            McpError::Server {
                server,
                code,
                message,
                ..
            } => write!(
                f,
                "the server `{server}` answered with error {code}: {message}"
            ),
            McpError::InputRequired { server } => write!(
                f,
                "the server `{server}` asked for input in the middle of a request that pipec does not answer here (a model's reply, or a form left to a person where none can be asked)"
            ),
            McpError::Protocol { server, message } => {
                write!(f, "the server `{server}` broke the protocol: {message}")
            }
            McpError::NoAnswer { server, message } => {
                write!(f, "nothing answers for the server `{server}`: {message}")
            }
            McpError::TaskLost {
                server,
                task,
                message,
            } => write!(
                f,
                "the server `{server}` no longer tells about the task {task} the call became ({message})"
            ),
            McpError::Authorization {
                server, message, ..
            } => write!(
                f,
                "the server `{server}` asks for authorization that pipec could not get: {message}"
            ),
        }
    }
}

impl std::error::Error for McpError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(challenge: &str) -> String {
        McpError::Http {
            server: "kb".to_string(),
            url: "https://kb.example/mcp".to_string(),
            status: 401,
            body: String::new(),
            challenge: Some(challenge.to_string()),
        }
        .help()
        .unwrap_or_default()
    }

    #[test]
    fn a_401_asking_for_a_token_suggests_logging_in_and_a_refused_token_the_headers() {
        let asked = refused(
            r#"Bearer resource_metadata="https://kb.example/.well-known/oauth-protected-resource""#,
        );
        assert!(asked.contains("run `pipec mcp login kb`"), "{asked}");
        let refused_token = refused(r#"Bearer realm="kb", error="invalid_token""#);
        assert!(
            refused_token.contains("did not accept the credentials"),
            "{refused_token}"
        );
        assert!(refused("Basic realm=\"kb\"").contains("did not accept the credentials"));
    }
}
