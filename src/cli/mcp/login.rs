//! `pipec mcp login SERVER`: the OAuth authorization a run cannot do by itself, done once
//! by a person. pipec connects as a run would; when the server asks for OAuth, the
//! authorization page opens in the browser (or its address is printed), and the
//! authorization server's redirect comes back to a listener on the loopback interface
//! (RFC 8252). The tokens go to the user's credentials store, where runs find and refresh
//! them. `pipec mcp logout SERVER` forgets them.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::Reach;
use super::ask::{config, fail};
use crate::cli::common;
use crate::cli::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::mcp::{
    Authorization, Consent, Identity, MemoryTokens, Session, TokenStore, TransportConfig,
};
use crate::plan::OAuth;
use crate::runtime::credentials;

/// How long the person has to approve in the browser.
const APPROVAL_WAIT: Duration = Duration::from_secs(300);
/// How long a connection to the redirect listener has to send its request.
const REQUEST_WAIT: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub(super) struct LoginArgs {
    #[command(flatten)]
    reach: Reach,
    /// Print the authorization page's address instead of opening a browser (to open it
    /// on another machine, forwarding the port)
    #[arg(long)]
    no_browser: bool,
    /// The loopback port the authorization server sends the browser back to (default: a
    /// free one); for a client registered with a fixed redirect URI
    #[arg(long)]
    port: Option<u16>,
}

#[derive(clap::Args)]
pub(super) struct LogoutArgs {
    #[command(flatten)]
    reach: Reach,
}

/// The server's URL, for a server reached over HTTP.
fn http_url(transport: &TransportConfig, what: &str) -> Result<String, u8> {
    match transport {
        TransportConfig::Http { url, .. } => Ok(url.clone()),
        TransportConfig::Stdio { .. } => {
            crate::cli::err(&format!(
                "error: `pipec mcp {what}` is for servers reached over HTTP (`url`)\n  help: a server started with `command` takes its credentials through its `env`"
            ));
            Err(EXIT_USAGE)
        }
    }
}

pub(super) fn login(a: LoginArgs) -> u8 {
    let mut config = match config(&a.reach, "mcp login") {
        Ok(config) => config,
        Err(code) => return code,
    };
    let url = match http_url(&config.transport, "login") {
        Ok(url) => url,
        Err(code) => return code,
    };
    let runtime = match common::runtime_or_exit() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let server = config.name.clone();
    if let Some(declared) = &config.authorization
        && matches!(declared.identity, Identity::Machine { .. })
    {
        crate::cli::err(&format!(
            "error: the server `{server}` authorizes with the client-credentials grant: runs get their tokens themselves, and nobody logs in\n  help: `pipec mcp list {server}` tries it"
        ));
        return EXIT_USAGE;
    }
    if let TransportConfig::Http { headers, .. } = &config.transport
        && headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
    {
        crate::cli::err(&format!(
            "error: the server `{server}` sends an `Authorization` header of its own, so runs would not use tokens stored by a login\n  help: remove the header and declare `oauth {{}}` on the server to authorize with OAuth"
        ));
        return EXIT_USAGE;
    }
    let keeper = match credentials::keeper() {
        Ok(keeper) => keeper,
        Err(message) => {
            crate::cli::err(&format!("error: {message}"));
            return EXIT_USAGE;
        }
    };
    let store = keeper.store();
    // A credentials file pipec cannot use fails now, not after the person approved.
    if let Err(message) = store.load(&url) {
        crate::cli::err(&format!("error: {message}"));
        return EXIT_FINDINGS;
    }
    runtime.block_on(async move {
        let consent = match Loopback::bind(a.port, !a.no_browser).await {
            Ok(consent) => consent,
            Err(message) => {
                crate::cli::err(&format!("error: {message}"));
                return EXIT_USAGE;
            }
        };
        // The new tokens are kept aside until the server has taken them: a login that
        // fails leaves the stored ones as they were.
        let fresh = Arc::new(MemoryTokens::default());
        let (identity, scopes) = match config.authorization.take() {
            Some(declared) => (declared.identity, declared.scopes),
            None => (
                credentials::identity(&OAuth::default(), &|_| String::new()),
                Vec::new(),
            ),
        };
        config.authorization = Some(Authorization {
            identity,
            consent: Some(Arc::new(consent)),
            tokens: fresh.clone(),
            scopes,
        });
        let checked = async {
            let session = Session::connect(config).await?;
            let listed = if session.offers().tools {
                session.list_tools().await.map(|_| ())
            } else {
                Ok(())
            };
            session.close().await;
            listed
        };
        if let Err(e) = checked.await {
            fail(&e);
            return EXIT_FINDINGS;
        }
        let Ok(Some(tokens)) = fresh.load(&url) else {
            crate::cli::out(&format!(
                "the server `{server}` did not ask for authorization: nothing to store\n"
            ));
            return EXIT_OK;
        };
        if let Err(message) = store.save(&url, &tokens) {
            crate::cli::err(&format!("error: {message}"));
            return EXIT_FINDINGS;
        }
        crate::cli::out(&format!(
            "logged in to the server `{server}`: its tokens are stored {}, and runs use and refresh them\n",
            keeper.describe()
        ));
        EXIT_OK
    })
}

pub(super) fn logout(a: LogoutArgs) -> u8 {
    let config = match config(&a.reach, "mcp logout") {
        Ok(config) => config,
        Err(code) => return code,
    };
    let url = match http_url(&config.transport, "logout") {
        Ok(url) => url,
        Err(code) => return code,
    };
    let store = credentials::store();
    let had = match store.load(&url) {
        Ok(found) => found.is_some(),
        Err(message) => {
            crate::cli::err(&format!("error: {message}"));
            return EXIT_FINDINGS;
        }
    };
    if had && let Err(message) = store.clear(&url) {
        crate::cli::err(&format!("error: {message}"));
        return EXIT_FINDINGS;
    }
    let server = config.name;
    if had {
        crate::cli::out(&format!(
            "logged out of the server `{server}`: its tokens are forgotten\n"
        ));
    } else {
        crate::cli::out(&format!(
            "no tokens were stored for the server `{server}`\n"
        ));
    }
    EXIT_OK
}

/// Consent given in the browser: the authorization page is opened (or its address
/// printed), and the redirect that follows the person's approval is caught on
/// 127.0.0.1.
struct Loopback {
    listener: TcpListener,
    port: u16,
    browser: bool,
}

impl Loopback {
    async fn bind(port: Option<u16>, browser: bool) -> Result<Loopback, String> {
        let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
            .await
            .map_err(|e| match port {
                Some(port) => format!(
                    "cannot listen on 127.0.0.1:{port} for the authorization's redirect: {e}"
                ),
                None => format!("cannot listen on 127.0.0.1 for the authorization's redirect: {e}"),
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?
            .port();
        Ok(Loopback {
            listener,
            port,
            browser,
        })
    }

    /// The callback of this authorization: the first request to `/callback` whose
    /// `state` is `state`. Each connection is served by a task of its own, under a time
    /// limit for its request, so that a connection that says nothing (a browser's
    /// preconnect, a stray local client) holds nothing up; a callback of another state is
    /// told so and waited past. A callback with an `error` (the person refused) ends the
    /// login with it.
    async fn callback(&self, state: &str) -> Result<String, String> {
        let (found, mut heard) = tokio::sync::mpsc::channel::<Result<String, String>>(4);
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => return Err(format!("the redirect listener failed: {e}")),
                },
                Some(callback) = heard.recv() => return callback,
            };
            let found = found.clone();
            let state = state.to_string();
            let port = self.port;
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let found = found.clone();
                    let state = state.clone();
                    async move {
                        let (status, text) = answer(request.uri(), &state, port, &found).await;
                        let mut response = Response::new(Full::new(Bytes::from(text)));
                        *response.status_mut() = status;
                        Ok::<_, Infallible>(response)
                    }
                });
                let serving = hyper::server::conn::http1::Builder::new()
                    .keep_alive(false)
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(REQUEST_WAIT)
                    .serve_connection(TokioIo::new(stream), service);
                let _ = tokio::time::timeout(REQUEST_WAIT * 2, serving).await;
            });
        }
    }
}

/// What the listener answers a request, and the callback it passes on (a URL pipec hands
/// to rmcp, which checks the code's `state` and `iss` again).
async fn answer(
    uri: &hyper::Uri,
    state: &str,
    port: u16,
    found: &tokio::sync::mpsc::Sender<Result<String, String>>,
) -> (StatusCode, &'static str) {
    if uri.path() != "/callback" {
        return (StatusCode::NOT_FOUND, "not found");
    }
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let get = |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    if get("state") != Some(state) {
        return (
            StatusCode::BAD_REQUEST,
            "this is not the authorization pipec is waiting for",
        );
    }
    if let Some(error) = get("error") {
        let said = get("error_description").unwrap_or(error);
        let _ = found
            .send(Err(format!(
                "the authorization server refused: {}",
                pipec_base::source::shorten(said, 300)
            )))
            .await;
        return (
            StatusCode::OK,
            "The authorization was refused; pipec stopped. You can close this page.",
        );
    }
    if get("code").is_none() {
        return (StatusCode::BAD_REQUEST, "no authorization code");
    }
    let path = uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let _ = found
        .send(Ok(format!("http://127.0.0.1:{port}{path}")))
        .await;
    (
        StatusCode::OK,
        "pipec has the authorization: you can close this page.",
    )
}

impl Consent for Loopback {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn approve<'a>(
        &'a self,
        authorization_url: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<String, String>> + Send + 'a>> {
        Box::pin(async move {
            crate::cli::err(&format!(
                "To let pipec act for you at the server, approve in the browser:\n\n  {authorization_url}\n"
            ));
            if self.browser && open::that_detached(authorization_url).is_err() {
                crate::cli::err("(no browser could be opened: open the address above by hand)");
            }
            let state = url::Url::parse(authorization_url)
                .ok()
                .and_then(|u| {
                    u.query_pairs()
                        .find(|(k, _)| k == "state")
                        .map(|(_, v)| v.into_owned())
                })
                .ok_or("the authorization address has no `state`")?;
            match tokio::time::timeout(APPROVAL_WAIT, self.callback(&state)).await {
                Ok(found) => found,
                Err(_) => Err(format!(
                    "no approval came back within {} minutes",
                    APPROVAL_WAIT.as_secs() / 60
                )),
            }
        })
    }
}
