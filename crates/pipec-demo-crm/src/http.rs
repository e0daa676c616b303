//! MCP over streamable HTTP at `/mcp`, with fault injection, the header log and an
//! optional bearer token: hyper serves each connection, every request is logged, one
//! without the token is refused as OAuth's resource servers refuse it (RFC 6750), a POST
//! is judged by `intercept` and either answered here or handed, unchanged, to rmcp's
//! streamable HTTP service.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::channel::Channel;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::crm::Crm;
use super::faults::Transport;
use super::intercept::{Verdict, intercept};
use super::server::CrmServer;

type Body = BoxBody<Bytes, io::Error>;

/// Where the server listens and what it writes about its requests.
pub(crate) struct HttpOptions {
    pub(crate) addr: String,
    pub(crate) port_file: Option<PathBuf>,
    pub(crate) header_log: Option<PathBuf>,
    /// The token every request must carry (`CRM_BEARER_TOKEN`).
    pub(crate) bearer_token: Option<String>,
}

struct Front {
    crm: Arc<Crm>,
    mcp: StreamableHttpService<CrmServer, LocalSessionManager>,
    header_log: Option<PathBuf>,
    bearer_token: Option<String>,
}

/// Listens, says where, and serves until the process is stopped.
pub(crate) async fn serve(crm: Arc<Crm>, options: HttpOptions) -> Result<(), String> {
    let listener = TcpListener::bind(&options.addr)
        .await
        .map_err(|e| format!("could not listen on {}: {e}", options.addr))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("could not tell the address listened on: {e}"))?;
    let mut config = StreamableHttpServerConfig::default();
    config = if bound.ip().is_unspecified() {
        // Listening on every interface: clients name it by whatever address they reach.
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts([
            "localhost".to_string(),
            "127.0.0.1".into(),
            "::1".into(),
            bound.ip().to_string(),
        ])
    };
    let handlers = crm.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(CrmServer::new(handlers.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    announce(bound, options.port_file.as_deref())?;
    let front = Arc::new(Front {
        crm,
        mcp,
        header_log: options.header_log,
        bearer_token: options.bearer_token,
    });
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, say: wait rather than spin.
                eprintln!("pipec-demo-crm: accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are written whole: no write waits for the client's delayed
        // acknowledgement of the one before (Nagle's algorithm).
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Prints the bound address (`127.0.0.1:PORT`) on stdout and, when asked, writes it to
/// `CRM_PORT_FILE`, whole or not at all (written aside, then renamed), so a test that
/// waits for the file never reads half an address.
fn announce(bound: SocketAddr, port_file: Option<&Path>) -> Result<(), String> {
    if let Some(path) = port_file {
        let mut aside = path.as_os_str().to_owned();
        aside.push(format!(".{}.tmp", std::process::id()));
        let aside = PathBuf::from(aside);
        std::fs::write(&aside, format!("{bound}\n"))
            .and_then(|()| std::fs::rename(&aside, path))
            .map_err(|e| format!("could not write CRM_PORT_FILE {}: {e}", path.display()))?;
    }
    println!("{bound}");
    eprintln!("pipec-demo-crm: serving MCP at http://{bound}/mcp");
    Ok(())
}

impl Front {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        self.log_headers(&request);
        if request.uri().path() != "/mcp" {
            return text(
                StatusCode::NOT_FOUND,
                format!(
                    "nothing at {}: this server speaks MCP at /mcp",
                    request.uri().path()
                ),
            );
        }
        if let Some(refused) = self.refuse_unauthorized(&request) {
            return refused;
        }
        if request.method() != Method::POST {
            return from_rmcp(self.mcp.handle(request).await);
        }
        let (parts, body) = request.into_parts();
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                return text(
                    StatusCode::BAD_REQUEST,
                    format!("could not read the body: {e}"),
                );
            }
        };
        match intercept(&self.crm, &bytes, Transport::Http) {
            Verdict::Forward => {
                let request = Request::from_parts(parts, Full::new(bytes));
                from_rmcp(self.mcp.handle(request).await)
            }
            Verdict::Answer(answer) => json(answer),
            Verdict::Hang => std::future::pending().await,
            Verdict::Exit => {
                eprintln!("pipec-demo-crm: exiting, as CRM_FAULT_FILE asks");
                std::process::exit(1);
            }
            Verdict::Status(code) => text(
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                format!("injected HTTP status {code}"),
            ),
            Verdict::Cut(answer) => cut(answer),
        }
    }

    /// A request without the bearer token the server was started with: 401, with the
    /// challenge in `WWW-Authenticate` and the reason in the body, as RFC 6750 has it.
    fn refuse_unauthorized(&self, request: &Request<Incoming>) -> Option<Response<Body>> {
        let token = self.bearer_token.as_deref()?;
        let sent = request
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let (error, description) = match sent.as_deref().and_then(|v| v.strip_prefix("Bearer ")) {
            Some(given) if given == token => return None,
            Some(_) => (
                "invalid_token",
                "the token is not the one this CRM was started with (CRM_BEARER_TOKEN)",
            ),
            None => (
                "invalid_request",
                "this CRM needs an Authorization header with its bearer token",
            ),
        };
        let body = serde_json::json!({"error": error, "error_description": description});
        let mut response = respond(
            StatusCode::UNAUTHORIZED,
            "application/json",
            body.to_string(),
        );
        let challenge = format!("Bearer realm=\"pipec-demo-crm\", error=\"{error}\"");
        if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(hyper::header::WWW_AUTHENTICATE, value);
        }
        Some(response)
    }

    /// One line per request in `CRM_HEADER_LOG`, in the format the Python peer writes:
    /// `HTTP POST /mcp authorization='Bearer t' mcp-protocol-version='2025-11-25'
    /// mcp-session-id=set` (`None` for a header not sent).
    fn log_headers(&self, request: &Request<Incoming>) {
        let Some(path) = &self.header_log else {
            return;
        };
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
        };
        let session = if request.headers().contains_key("mcp-session-id") {
            "set"
        } else {
            "None"
        };
        let line = format!(
            "HTTP {} {} authorization={} mcp-protocol-version={} mcp-session-id={session}\n",
            request.method(),
            request.uri().path(),
            python_repr(header("authorization").as_deref()),
            python_repr(header("mcp-protocol-version").as_deref()),
        );
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "pipec-demo-crm: could not append to CRM_HEADER_LOG {}: {e}",
                path.display()
            );
        }
    }
}

/// A header value as Python's `repr` writes a string (`'v'`), or `None`.
fn python_repr(value: Option<&str>) -> String {
    match value {
        None => "None".into(),
        Some(text) => {
            let mut out = String::from("'");
            for c in text.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
                    c => out.push(c),
                }
            }
            out.push('\'');
            out
        }
    }
}

fn from_rmcp(response: Response<BoxBody<Bytes, Infallible>>) -> Response<Body> {
    response.map(|body| body.map_err(|never| match never {}).boxed())
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", body)
}

fn json(body: String) -> Response<Body> {
    respond(StatusCode::OK, "application/json", body)
}

/// An answer whose headers promise the whole body but whose connection drops after half
/// of it.
fn cut(answer: String) -> Response<Body> {
    let bytes = Bytes::from(answer.into_bytes());
    let length = bytes.len();
    let half = bytes.slice(..length / 2);
    let (mut sender, body) = Channel::<Bytes, io::Error>::new(1);
    tokio::spawn(async move {
        let _ = sender.send_data(half).await;
        // Time for hyper to write the half before the error ends the connection.
        tokio::time::sleep(Duration::from_millis(20)).await;
        sender.abort(io::Error::other(
            "connection dropped, as CRM_FAULT_FILE asks",
        ));
    });
    let mut response = Response::new(body.boxed());
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
        .headers_mut()
        .insert(CONTENT_LENGTH, hyper::header::HeaderValue::from(length));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_written_as_python_writes_them() {
        assert_eq!(python_repr(None), "None");
        assert_eq!(python_repr(Some("Bearer t")), "'Bearer t'");
        assert_eq!(python_repr(Some("it's")), r"'it\'s'");
    }
}
