//! Fetching a backend URL for a template read: `http` and `https` only, no redirect
//! followed (a `3xx` is an answer of its own), connect and total timeouts, and the body
//! read in chunks up to a cap whatever `Content-Length` says. Errors never carry the
//! backend's body.

use std::fmt;
use std::time::Duration;

use url::Url;

/// The defaults: connect within 5 s, finish within 30 s, at most 8 MiB.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_TOTAL_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_BYTES: u64 = 8 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct FetchOptions {
    pub connect_timeout: Duration,
    pub total_timeout: Duration,
    pub max_bytes: u64,
    /// Sent with every request (credentials among them: marked sensitive, never shown).
    pub headers: Vec<(String, String)>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            total_timeout: DEFAULT_TOTAL_TIMEOUT,
            max_bytes: DEFAULT_MAX_BYTES,
            headers: Vec::new(),
        }
    }
}

/// A backend's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    /// The `Content-Type` the backend sent, if any.
    pub mime_type: Option<String>,
}

/// Why a fetch gave nothing. The server maps `NotFound` to MCP's resource-not-found and
/// the rest to an internal error with this short message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchError {
    /// Not `http` or `https`, or a header that is not valid HTTP.
    Refused {
        message: String,
    },
    /// 404 or 410.
    NotFound,
    /// A redirect, not followed.
    Redirect {
        status: u16,
    },
    /// Any other status that is not a success.
    Status {
        status: u16,
    },
    TooLarge {
        max_bytes: u64,
    },
    Timeout,
    /// The connection failed or broke.
    Transport {
        message: String,
    },
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Refused { message } => {
                write!(f, "the backend request is refused: {message}")
            }
            FetchError::NotFound => f.write_str("the backend has no such resource"),
            FetchError::Redirect { status } => write!(
                f,
                "the backend answered a redirect ({status}), which is not followed"
            ),
            FetchError::Status { status } => write!(f, "the backend answered {status}"),
            FetchError::TooLarge { max_bytes } => {
                write!(f, "the backend's answer is larger than {max_bytes} bytes")
            }
            FetchError::Timeout => f.write_str("the backend did not answer in time"),
            FetchError::Transport { message } => {
                write!(f, "the backend cannot be reached: {message}")
            }
        }
    }
}

/// An HTTP client for backends, with its options; one serves many reads.
#[derive(Clone, Debug)]
pub struct BackendClient {
    client: reqwest::Client,
    options: FetchOptions,
}

fn install_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl BackendClient {
    pub fn new(options: FetchOptions) -> Result<BackendClient, FetchError> {
        install_crypto();
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &options.headers {
            let Ok(header) = reqwest::header::HeaderName::from_bytes(name.as_bytes()) else {
                return Err(FetchError::Refused {
                    message: format!("`{name}` is not a valid HTTP header name"),
                });
            };
            let Ok(mut value) = reqwest::header::HeaderValue::from_str(value) else {
                return Err(FetchError::Refused {
                    message: format!("the value of the header `{name}` is not valid in HTTP"),
                });
            };
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .timeout(options.total_timeout)
            // A redirect could lead anywhere, the backend's credentials with it.
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .build()
            .map_err(|e| FetchError::Transport {
                message: e.without_url().to_string(),
            })?;
        Ok(BackendClient { client, options })
    }

    /// GETs `url` and reads its body up to the cap.
    pub async fn fetch(&self, url: &Url) -> Result<Fetched, FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::Refused {
                message: "only `http` and `https` backends are fetched".into(),
            });
        }
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                FetchError::Timeout
            } else {
                FetchError::Transport {
                    message: e.without_url().to_string(),
                }
            }
        };
        let mut response = self
            .client
            .get(url.clone())
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        if status.is_redirection() {
            return Err(FetchError::Redirect {
                status: status.as_u16(),
            });
        }
        if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
            return Err(FetchError::NotFound);
        }
        if !status.is_success() {
            return Err(FetchError::Status {
                status: status.as_u16(),
            });
        }
        let max = self.options.max_bytes;
        if response.content_length().is_some_and(|n| n > max) {
            return Err(FetchError::TooLarge { max_bytes: max });
        }
        let mime_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if (bytes.len() + chunk.len()) as u64 > max {
                return Err(FetchError::TooLarge { max_bytes: max });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Fetched { bytes, mime_type })
    }
}
