//! The inspector's HTTP server: who may call (token, `Host`, `Origin`), how much a client
//! may hold (connections, headers' time, body size), and the routes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use pipec_runtime::trace::SpanSink;
use pipec_store::Store;

use super::{api, assets};

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// The largest request body read (an answer is at most this).
const MAX_BODY: usize = 1 << 20;
/// Connections open at once.
const MAX_CONNECTIONS: usize = 64;
/// How long a connection may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Who may use the inspector, and what its actions are traced to.
#[derive(Clone, Default)]
pub struct UiOptions {
    /// The bearer token every API request must carry; `None` serves without one.
    pub token: Option<String>,
    /// Host names (or `host:port`) requests may name besides the loopback names and the
    /// bound address.
    pub allowed_hosts: Vec<String>,
    /// Where the spans of the runs the page resumes go, when traces are on.
    pub spans: Option<SpanSink>,
}

/// A bound inspector, ready to serve.
pub struct Ui {
    listener: TcpListener,
    app: Arc<App>,
}

/// What every request reaches.
pub(crate) struct App {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) options: UiOptions,
    hosts: Vec<String>,
}

/// Binds `addr` to serve `store`.
pub async fn bind(store: Arc<dyn Store>, addr: &str, options: UiOptions) -> Result<Ui, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot tell the address listened on: {e}"))?;
    let hosts =
        pipec_base::authority::served_hosts(&bound.ip().to_string(), &options.allowed_hosts);
    Ok(Ui {
        listener,
        app: Arc::new(App {
            store,
            options,
            hosts,
        }),
    })
}

impl Ui {
    /// The address it listens on.
    pub fn addr(&self) -> Result<SocketAddr, String> {
        self.listener
            .local_addr()
            .map_err(|e| format!("cannot tell the address listened on: {e}"))
    }

    /// Serves until the process ends.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok((stream, _)) = self.listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Answers are written whole: no write waits for the client's delayed
            // acknowledgement of the one before (Nagle's algorithm).
            let _ = stream.set_nodelay(true);
            // At the cap, a newcomer waits for a connection to close.
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let app = self.app.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let app = app.clone();
                    async move { Ok::<_, Infallible>(app.handle(request).await) }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT);
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                drop(slot);
            });
        }
    }
}

impl App {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let host = request
            .headers()
            .get(hyper::header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if !pipec_base::authority::host_allowed(&host, &self.hosts) {
            return problem(
                StatusCode::FORBIDDEN,
                "host-not-allowed",
                &format!("the host `{host}` is not served here"),
                Some(&format!(
                    "start pipec ui with --allowed-host {host} to allow it"
                )),
            );
        }
        let path = request.uri().path().to_string();
        if request.method() == Method::GET
            && let Some((kind, text)) = assets::asset(&path)
        {
            return asset(kind, text);
        }
        let Some(route) = path.strip_prefix("/api/") else {
            return problem(
                StatusCode::NOT_FOUND,
                "not-found",
                &format!("nothing at {path}"),
                Some("the inspector's page is at /"),
            );
        };
        if let Some(token) = &self.options.token {
            let given = request
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if !given
                .is_some_and(|g| pipec_base::authority::same_secret(g.as_bytes(), token.as_bytes()))
            {
                return problem(
                    StatusCode::UNAUTHORIZED,
                    "token-needed",
                    "this inspector needs its token",
                    Some("open the URL pipec ui printed (its #token=... part)"),
                );
            }
        }
        // Actions come from the page itself: a browser's `Origin` must be this server's.
        if request.method() == Method::POST
            && let Some(origin) = request.headers().get(hyper::header::ORIGIN)
            && origin.to_str().ok() != Some(&format!("http://{host}"))
        {
            return problem(
                StatusCode::FORBIDDEN,
                "origin-not-allowed",
                "actions are taken from the inspector's own page",
                None,
            );
        }
        let query = request.uri().query().unwrap_or_default().to_string();
        let method = request.method().clone();
        let body = if method == Method::POST {
            match read_body(request).await {
                Ok(v) => v,
                Err(r) => return r,
            }
        } else {
            Value::Null
        };
        let segments: Vec<&str> = route.split('/').filter(|s| !s.is_empty()).collect();
        let answer = match (method, segments.as_slice()) {
            (Method::GET, ["threads"]) => api::threads(self, &query).await,
            (Method::GET, ["threads", id]) => api::thread(self, id).await,
            (Method::GET, ["threads", id, "events"]) => api::events(self, id, &query).await,
            (Method::POST, ["threads", id, "answer"]) => api::answer(self, id, &body).await,
            (Method::POST, ["threads", id, "cancel"]) => api::cancel(self, id).await,
            (Method::POST, ["threads", id, "resume"]) => api::resume(self, id, &body).await,
            (_, _) => Err(api::Problem::new(
                StatusCode::NOT_FOUND,
                "not-found",
                format!("no route {route}"),
            )),
        };
        match answer {
            Ok((status, value)) => json_response(status, &value),
            Err(p) => problem(p.status, &p.code, &p.message, p.help.as_deref()),
        }
    }
}

/// A request's body as JSON, at most [`MAX_BODY`] bytes.
async fn read_body(request: Request<Incoming>) -> Result<Value, Response<Body>> {
    let limited = Limited::new(request.into_body(), MAX_BODY);
    let bytes = match limited.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            return Err(problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body-too-large",
                &format!("the request body is over {MAX_BODY} bytes"),
                None,
            ));
        }
    };
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        problem(
            StatusCode::BAD_REQUEST,
            "body-not-json",
            &format!("the request body is not JSON: {e}"),
            None,
        )
    })
}

fn asset(kind: &'static str, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // The page runs its own script and styles, and talks to this server only.
    r.headers_mut().insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        ),
    );
    r
}

pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// An error as the page shows it: `{"error": {"code", "message", "help"}}`; the code is
/// the runtime's (`R0101`) for what the runtime refused, else what the request lacks
/// (`token-needed`, `host-not-allowed`, ...).
fn problem(status: StatusCode, code: &str, message: &str, help: Option<&str>) -> Response<Body> {
    json_response(
        status,
        &json!({ "error": { "code": code, "message": message, "help": help } }),
    )
}
