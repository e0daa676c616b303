//! Serving a provider over streamable HTTP at `/mcp`: every request must carry the bearer
//! token (unless serving without one was asked for, on loopback only), its `Host` must be
//! one of the allowed names (against DNS rebinding) and its `Origin`, when a browser sends
//! one, one of the allowed origins; then rmcp's streamable HTTP service answers it, in
//! both protocol eras.
//!
//! What a client can hold is bounded. Connections are capped; a connection that has not
//! yet shown the token is the first to go when the cap is reached, and one whose request
//! headers do not arrive in time is closed, so clients without the token cannot crowd
//! out those with it. A request refused for its token is answered and its connection
//! closed. Legacy sessions are capped too, and a session ends when its client ends it
//! (`DELETE`) or has held no connection to it for a while.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};

use super::card;
use super::handler::Served;
use super::provider::Provider;

type Body = BoxBody<Bytes, Infallible>;

/// The header that names a legacy session.
const SESSION_HEADER: &str = "mcp-session-id";

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

/// How much an HTTP server lets its clients hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, counted from when
    /// it opened or finished its last request: an idle connection is closed then too.
    pub header_timeout: Duration,
    /// Legacy sessions at once (the 2026-07-28 era has none).
    pub max_sessions: usize,
    /// How long a legacy session outlives the last connection its client held to it.
    pub session_timeout: Duration,
}

impl HttpLimits {
    pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_MAX_SESSIONS: usize = 128;
    pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            header_timeout: Self::DEFAULT_HEADER_TIMEOUT,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            session_timeout: Self::DEFAULT_SESSION_TIMEOUT,
        }
    }
}

/// A server listening; `run` serves until the process ends.
pub struct HttpServer {
    listener: TcpListener,
    front: Arc<Front>,
    pub addr: SocketAddr,
}

struct Front {
    mcp: StreamableHttpService<Served, LocalSessionManager>,
    provider: Arc<dyn Provider>,
    /// The `Host`s requests may name (rmcp checks them for `/mcp`; the front for the
    /// server card).
    hosts: Vec<String>,
    sessions: Arc<LocalSessionManager>,
    token: Option<String>,
    origins: Vec<String>,
    limits: HttpLimits,
    max_body: usize,
    /// One `initialize` at a time, so the session cap is never passed by two at once.
    opening: tokio::sync::Mutex<()>,
    /// Connections that have not yet shown the token, oldest first: the ones closed to
    /// make room when the connection cap is reached.
    unproven: Mutex<BTreeMap<u64, Arc<Connection>>>,
    /// For each legacy session, how many connections its client holds to it.
    lives: Mutex<HashMap<String, Life>>,
}

/// One TCP connection.
struct Connection {
    id: u64,
    /// It carried a request that passed the token check.
    proven: AtomicBool,
    /// Told when the connection must close to make room.
    evict: Notify,
    /// The legacy sessions its requests named.
    sessions: Mutex<HashSet<String>>,
}

/// A legacy session's hold on the server: the connections its client has open to it,
/// and a count of the changes to that number (so a timer set when it reached zero can
/// tell whether the client came back meanwhile).
#[derive(Default)]
struct Life {
    connections: usize,
    changes: u64,
}

/// Binds `addr` and prepares to serve `provider` there.
pub async fn bind_http(
    provider: Arc<dyn Provider>,
    addr: &str,
    access: HttpAccess,
    limits: HttpLimits,
) -> Result<HttpServer, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot tell the address listened on: {e}"))?;
    let hosts = pipec_base::authority::served_hosts(&bound.ip().to_string(), &access.allowed_hosts);
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts.clone());
    let max_body = config.max_request_body_bytes;
    let mut manager = LocalSessionManager::default();
    // A session ends when its client lets go of it (`Front::release`), not after a
    // quiet while: a client waiting on a subscription for hours is quiet and present.
    manager.session_config.keep_alive = None;
    let sessions = Arc::new(manager);
    let served = provider.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(Served::new(served.clone())),
        sessions.clone(),
        config,
    );
    Ok(HttpServer {
        listener,
        front: Arc::new(Front {
            mcp,
            provider,
            hosts,
            sessions,
            token: access.token,
            origins: access
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            limits,
            max_body,
            opening: tokio::sync::Mutex::new(()),
            unproven: Mutex::new(BTreeMap::new()),
            lives: Mutex::new(HashMap::new()),
        }),
        addr: bound,
    })
}

impl HttpServer {
    /// Serves connections until the process ends.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(self.front.limits.max_connections.max(1)));
        let ids = AtomicU64::new(0);
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("pipec serve: accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // An answer is written whole, often in two writes (the message, then the
            // end of a chunked body): with Nagle's algorithm the second would wait for
            // the client's delayed acknowledgement, about 40 ms on Linux.
            let _ = stream.set_nodelay(true);
            let slot = match slots.clone().try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    // Full: the oldest connection that has not shown the token makes
                    // room. When every one has, the newcomer is told to come back.
                    let Some(oldest) = self.front.pop_unproven() else {
                        tokio::spawn(refuse_busy(stream, self.front.limits.header_timeout));
                        continue;
                    };
                    oldest.evict.notify_one();
                    match slots.clone().acquire_owned().await {
                        Ok(slot) => slot,
                        Err(_) => continue,
                    }
                }
            };
            let connection = Arc::new(Connection {
                id: ids.fetch_add(1, Ordering::SeqCst),
                proven: AtomicBool::new(false),
                evict: Notify::new(),
                sessions: Mutex::new(HashSet::new()),
            });
            self.front
                .lock_unproven()
                .insert(connection.id, connection.clone());
            let front = self.front.clone();
            tokio::spawn(async move {
                let _slot = slot;
                front.serve(stream, connection).await;
            });
        }
    }
}

/// Answers a connection past the cap, when no connection can make room, and closes it.
async fn refuse_busy(mut stream: TcpStream, within: Duration) {
    let body =
        "this server has as many connections as it takes (--max-connections); try again shortly";
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(within, async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

impl Front {
    /// The server card, to anyone who reaches an allowed host: it is public (CORS open,
    /// no token), read-only and holds no secret.
    fn card(&self, request: &Request<Incoming>) -> Response<Body> {
        let host = request
            .headers()
            .get(hyper::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !pipec_base::authority::host_allowed(host, &self.hosts) {
            return closing(text(
                StatusCode::FORBIDDEN,
                format!(
                    "the host `{host}` is not served here: start pipec serve with --allowed-host {host} to allow it"
                ),
            ));
        }
        let mut response = match *request.method() {
            Method::GET | Method::HEAD => {
                // Behind a proxy that ends TLS, the proxy says so.
                let scheme = match request
                    .headers()
                    .get("x-forwarded-proto")
                    .and_then(|v| v.to_str().ok())
                {
                    Some("https") => "https",
                    _ => "http",
                };
                let card = card::card(self.provider.as_ref(), scheme, host, self.token.is_some());
                let wants_card = request
                    .headers()
                    .get_all(hyper::header::ACCEPT)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .any(|v| v.contains(card::MEDIA_TYPE));
                let body = if request.method() == Method::HEAD {
                    Bytes::new()
                } else {
                    Bytes::from(card.to_string())
                };
                let mut r = Response::new(Full::new(body).boxed());
                let kind = if wants_card {
                    card::MEDIA_TYPE
                } else {
                    "application/json"
                };
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
                r.headers_mut().insert(
                    hyper::header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=300"),
                );
                r
            }
            Method::OPTIONS => {
                let mut r = Response::new(Empty::new().boxed());
                *r.status_mut() = StatusCode::NO_CONTENT;
                r
            }
            _ => {
                let mut r = text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "the server card is read with GET".into(),
                );
                r.headers_mut().insert(
                    hyper::header::ALLOW,
                    HeaderValue::from_static("GET, HEAD, OPTIONS"),
                );
                r
            }
        };
        let headers = response.headers_mut();
        headers.insert(
            hyper::header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        headers.insert(
            hyper::header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET"),
        );
        headers.insert(
            hyper::header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Content-Type"),
        );
        response
    }

    fn lock_unproven(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Connection>>> {
        self.unproven.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_lives(&self) -> std::sync::MutexGuard<'_, HashMap<String, Life>> {
        self.lives.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pop_unproven(&self) -> Option<Arc<Connection>> {
        self.lock_unproven().pop_first().map(|(_, c)| c)
    }

    /// Serves one connection until it closes, times out, or is told to make room.
    async fn serve(self: Arc<Self>, stream: TcpStream, connection: Arc<Connection>) {
        let (front, conn) = (self.clone(), connection.clone());
        let service = hyper::service::service_fn(move |request| {
            let (front, conn) = (front.clone(), conn.clone());
            async move { Ok::<_, Infallible>(front.handle(request, &conn).await) }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_timeout);
        let served = builder.serve_connection(TokioIo::new(stream), service);
        tokio::select! {
            _ = served => {}
            () = connection.evict.notified() => {}
        }
        self.lock_unproven().remove(&connection.id);
        self.release(&connection);
    }

    /// Notes that `connection` carries requests of `session`.
    fn hold(&self, connection: &Connection, session: &str) {
        let new = connection
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(session.to_string());
        if new {
            let mut lives = self.lock_lives();
            let life = lives.entry(session.to_string()).or_default();
            life.connections += 1;
            life.changes += 1;
        }
    }

    /// A connection closed: each session it carried that no other connection holds
    /// ends after the session timeout, unless its client comes back first. Ending it
    /// drops its subscriptions.
    fn release(self: &Arc<Self>, connection: &Connection) {
        let held: Vec<String> = connection
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        let mut lives = self.lock_lives();
        for session in held {
            let Some(life) = lives.get_mut(&session) else {
                continue;
            };
            life.connections = life.connections.saturating_sub(1);
            life.changes += 1;
            if life.connections > 0 {
                continue;
            }
            let (front, changes) = (self.clone(), life.changes);
            tokio::spawn(async move {
                tokio::time::sleep(front.limits.session_timeout).await;
                let gone = {
                    let mut lives = front.lock_lives();
                    let unchanged = lives.get(&session).is_some_and(|l| l.changes == changes);
                    if unchanged {
                        lives.remove(&session);
                    }
                    unchanged
                };
                if gone {
                    let _ = front.sessions.close_session(&session.clone().into()).await;
                }
            });
        }
    }

    async fn handle(&self, request: Request<Incoming>, connection: &Connection) -> Response<Body> {
        if card::PATHS.contains(&request.uri().path()) {
            return self.card(&request);
        }
        if request.uri().path() != "/mcp" {
            return closing(text(
                StatusCode::NOT_FOUND,
                format!("nothing at {}: MCP is served at /mcp", request.uri().path()),
            ));
        }
        if let Some(origin) = request
            .headers()
            .get(hyper::header::ORIGIN)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            && !origin_allowed(&origin, &self.origins)
        {
            return closing(text(
                StatusCode::FORBIDDEN,
                format!(
                    "the origin {origin} may not call this server: start pipec serve with --allowed-origin {origin} to allow it"
                ),
            ));
        }
        if let Some(token) = &self.token {
            let given = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if !given
                .is_some_and(|g| pipec_base::authority::same_secret(g.as_bytes(), token.as_bytes()))
            {
                let mut r = text(
                    StatusCode::UNAUTHORIZED,
                    "this server needs `Authorization: Bearer TOKEN` (the token `pipec serve` printed)".into(),
                );
                r.headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                // Its connection is not kept for a next attempt: a client without the
                // token holds nothing here.
                return closing(r);
            }
        }
        if !connection.proven.swap(true, Ordering::SeqCst) {
            self.lock_unproven().remove(&connection.id);
        }
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match (request.method(), session) {
            (&Method::DELETE, Some(session)) => self.end_session(request, &session).await,
            (_, Some(session)) => {
                // Only a session that is there is held: ids a client makes up are
                // answered 404 by rmcp and leave nothing behind.
                if self
                    .sessions
                    .has_session(&session.clone().into())
                    .await
                    .unwrap_or(false)
                {
                    self.hold(connection, &session);
                }
                self.mcp.handle(request).await
            }
            (&Method::POST, None) => self.sessionless_post(request, connection).await,
            (_, None) => self.mcp.handle(request).await,
        }
    }

    /// `DELETE` of a session: 204 once it is ended, 404 when there is no such session
    /// (it ended already, or never was).
    async fn end_session(&self, request: Request<Incoming>, session: &str) -> Response<Body> {
        let id = session.to_string().into();
        if !self.sessions.has_session(&id).await.unwrap_or(false) {
            return text(
                StatusCode::NOT_FOUND,
                format!("no session {session}: it ended already, or never was"),
            );
        }
        let answer = self.mcp.handle(request).await;
        if answer.status() != StatusCode::ACCEPTED {
            return answer;
        }
        self.lock_lives().remove(session);
        // The session is gone when rmcp answers, so the client is told it is done
        // rather than that it was accepted for later.
        let mut done = Response::new(Empty::new().boxed());
        *done.status_mut() = StatusCode::NO_CONTENT;
        done
    }

    /// A `POST` that names no session: an `initialize` (which opens one, within the
    /// session cap) or a request of the stateless 2026-07-28 era.
    async fn sessionless_post(
        &self,
        request: Request<Incoming>,
        connection: &Connection,
    ) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let bytes = match Limited::new(body, self.max_body).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request body is larger than {} bytes, or broke off",
                        self.max_body
                    ),
                );
            }
        };
        let message: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
        let initialize = message
            .as_ref()
            .is_some_and(|m| m.get("method").and_then(|v| v.as_str()) == Some("initialize"));
        let request = Request::from_parts(parts, Full::new(bytes));
        if !initialize {
            return self.mcp.handle(request).await;
        }
        let _one_at_a_time = self.opening.lock().await;
        let open = self.sessions.sessions.read().await.len();
        if open >= self.limits.max_sessions {
            let id = message
                .as_ref()
                .and_then(|m| m.get("id").cloned())
                .unwrap_or(serde_json::Value::Null);
            return too_many_sessions(id, self.limits.max_sessions);
        }
        let answer = self.mcp.handle(request).await;
        if let Some(session) = answer
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            self.hold(connection, session);
        }
        answer
    }
}

/// An `initialize` refused because the session cap is reached: HTTP 503 with the
/// JSON-RPC error of the request, which MCP clients read from the body.
fn too_many_sessions(id: serde_json::Value, limit: usize) -> Response<Body> {
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": super::handler::LIMIT_REACHED,
            "message": format!("too many sessions: this server holds {limit}, the most it may (--max-sessions); try again once others have ended"),
            "data": { "limit": limit, "scope": "sessions" }
        }
    });
    let mut response = Response::new(Full::new(Bytes::from(error.to_string())).boxed());
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

/// `response`, with its connection closed once it is written.
fn closing(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
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
}
