//! Serving a provider over streamable HTTP at `/mcp`: every request must carry the bearer
//! token (unless serving without one was asked for, on loopback only), its `Host` must be
//! one of the allowed names (against DNS rebinding) and its `Origin`, when a browser sends
//! one, one of the allowed origins; then rmcp's streamable HTTP service answers it, in
//! both protocol eras.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use super::handler::Served;
use super::provider::Provider;

type Body = BoxBody<Bytes, Infallible>;

/// Who may reach an HTTP server.
#[derive(Clone, Debug, Default)]
pub struct HttpAccess {
    /// The bearer token every request must carry; `None` serves without one.
    pub token: Option<String>,
    /// Host names (or `host:port`) requests may name besides the loopback names and
    /// the bound address.
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) allowed to call; requests without an
    /// `Origin` header pass.
    pub allowed_origins: Vec<String>,
}

/// A server listening; `run` serves until the process ends.
pub struct HttpServer {
    listener: TcpListener,
    front: Arc<Front>,
    pub addr: SocketAddr,
}

struct Front {
    mcp: StreamableHttpService<Served, LocalSessionManager>,
    token: Option<String>,
    origins: Vec<String>,
}

/// Binds `addr` and prepares to serve `provider` there.
pub async fn bind_http(
    provider: Arc<dyn Provider>,
    addr: &str,
    access: HttpAccess,
) -> Result<HttpServer, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot tell the address listened on: {e}"))?;
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".into(),
        "::1".into(),
        "[::1]".into(),
        bound.ip().to_string(),
    ];
    hosts.extend(access.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts);
    let mcp = StreamableHttpService::new(
        move || Ok(Served::new(provider.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Ok(HttpServer {
        listener,
        front: Arc::new(Front {
            mcp,
            token: access.token,
            origins: access
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
        }),
        addr: bound,
    })
}

impl HttpServer {
    /// Serves connections until the process ends.
    pub async fn run(self) {
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("pipec serve: accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let front = self.front.clone();
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
}

impl Front {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != "/mcp" {
            return text(
                StatusCode::NOT_FOUND,
                format!("nothing at {}: MCP is served at /mcp", request.uri().path()),
            );
        }
        if let Some(origin) = request
            .headers()
            .get(hyper::header::ORIGIN)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            && !origin_allowed(&origin, &self.origins)
        {
            return text(
                StatusCode::FORBIDDEN,
                format!(
                    "the origin {origin} may not call this server: start pipec serve with --allowed-origin {origin} to allow it"
                ),
            );
        }
        if let Some(token) = &self.token {
            let given = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if !given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
                let mut r = text(
                    StatusCode::UNAUTHORIZED,
                    "this server needs `Authorization: Bearer TOKEN` (the token `pipec serve` printed)".into(),
                );
                r.headers_mut().insert(
                    WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer"),
                );
                return r;
            }
        }
        self.mcp.handle(request).await
    }
}

/// Whether a browser page of `origin` may call: one given with `--allowed-origin`, or a
/// page of this machine (a loopback host).
fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim_end_matches('/').to_ascii_lowercase();
    if allowed.contains(&origin) {
        return true;
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    if scheme != "http" && scheme != "https" {
        return false;
    }
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().map(|h| format!("[{h}]"))
    } else {
        rest.split(':').next().map(str::to_string)
    };
    matches!(host.as_deref(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

/// Compares in time that does not depend on where the two differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_pages_and_allowed_origins_may_call() {
        let allowed = vec!["https://app.example.com".to_string()];
        assert!(origin_allowed("http://localhost:3000", &allowed));
        assert!(origin_allowed("http://127.0.0.1", &allowed));
        assert!(origin_allowed("http://[::1]:8080", &allowed));
        assert!(origin_allowed("https://APP.example.com/", &allowed));
        assert!(!origin_allowed("https://evil.example.com", &allowed));
        assert!(!origin_allowed("http://localhost.evil.com", &allowed));
        assert!(!origin_allowed("null", &allowed));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
