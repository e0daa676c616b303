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
use crate::runtime::credentials;

/// How long the person has to approve in the browser.
const APPROVAL_WAIT: Duration = Duration::from_secs(300);

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
    let store = credentials::store();
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
                Identity::Public {
                    name: "pipec".to_string(),
                    metadata_url: None,
                },
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
        let place = credentials::path()
            .map(|p| format!(" in {}", p.display()))
            .unwrap_or_default();
        crate::cli::out(&format!(
            "logged in to the server `{server}`: its tokens are stored{place}, and runs use and refresh them\n"
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
    let had = matches!(store.load(&url), Ok(Some(_)));
    if let Err(message) = store.clear(&url) {
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

    /// The path and query of the first request to `/callback`.
    async fn callback(&self) -> Result<String, String> {
        loop {
            let (stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| format!("the redirect listener failed: {e}"))?;
            let caught = Arc::new(std::sync::Mutex::new(None::<String>));
            let seen = caught.clone();
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let seen = seen.clone();
                async move {
                    let uri = request.uri();
                    let (status, text) = if uri.path() == "/callback" {
                        if let Ok(mut seen) = seen.lock() {
                            *seen = uri.path_and_query().map(|p| p.to_string());
                        }
                        (
                            StatusCode::OK,
                            "pipec has the authorization: you can close this page.",
                        )
                    } else {
                        (StatusCode::NOT_FOUND, "not found")
                    };
                    let mut response = Response::new(Full::new(Bytes::from(text)));
                    *response.status_mut() = status;
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            let found = caught.lock().ok().and_then(|mut c| c.take());
            if let Some(path) = found {
                return Ok(format!("http://127.0.0.1:{}{path}", self.port));
            }
        }
    }
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
            match tokio::time::timeout(APPROVAL_WAIT, self.callback()).await {
                Ok(found) => found,
                Err(_) => Err(format!(
                    "no approval came back within {} minutes",
                    APPROVAL_WAIT.as_secs() / 60
                )),
            }
        })
    }
}
