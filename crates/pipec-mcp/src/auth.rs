//! OAuth 2.1 for servers over HTTP, as the MCP specification has it. rmcp's
//! `AuthorizationManager` speaks the protocol: protected-resource metadata (RFC 9728)
//! from the server's challenge or its well-known paths, authorization-server metadata
//! (RFC 8414 and OpenID discovery) with its `iss` checks, client registration (a client
//! registered beforehand, a client ID metadata document, dynamic registration), PKCE, the
//! token endpoint's client authentication, resource indicators and refresh tokens.
//!
//! pipec says who the client is ([`Identity`]), how a person approves ([`Consent`]),
//! where tokens live ([`TokenStore`](super::TokenStore)), and when to authorize: when the
//! server refuses with a challenge — a 401 at the handshake or on any request, or a 403
//! `insufficient_scope` asking for more (step-up) — at most [`MAX_AUTHORIZATIONS`] times
//! in a session, and one authorization at a time however many requests were refused.
//! A token near its expiry is refreshed before it is sent, and a refused one once more
//! after the refusal, by rmcp's `AuthClient`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use futures::future::BoxFuture;
use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, ClientCredentialsConfig,
    OAuthClientConfig, OAuthState,
};

use super::http_client::SlotAwareClient;
use super::tokens::{ServerTokens, TokenStore};
use super::{McpError, Redact};

/// How many times a session may authorize: a server that keeps refusing what it was just
/// given is not asked again and again.
pub const MAX_AUTHORIZATIONS: usize = 3;

/// How pipec authorizes with a server that asks for OAuth.
#[derive(Clone)]
pub struct Authorization {
    pub identity: Identity,
    /// How a person approves; `None` where nobody can (a worker, a run in the
    /// background): a server that needs a person then fails with what to run.
    pub consent: Option<Arc<dyn Consent>>,
    /// Where tokens are kept between sessions.
    pub tokens: Arc<dyn TokenStore>,
    /// The scopes to ask for first; else those the server's challenge or its metadata
    /// names.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("identity", &self.identity)
            .field("consent", &self.consent.is_some())
            .finish_non_exhaustive()
    }
}

/// Who pipec is to the authorization server.
#[derive(Clone, PartialEq, Eq)]
pub enum Identity {
    /// A client the authorization server gets to know on the way: by the client ID
    /// metadata document at `metadata_url` when the server accepts those, else by
    /// dynamic registration under `name`.
    Public {
        name: String,
        metadata_url: Option<String>,
    },
    /// A client registered with the authorization server beforehand (with a secret when
    /// it is a confidential client).
    Registered { id: String, secret: Option<String> },
    /// The client-credentials grant (the MCP extension): the client acts as itself, with
    /// no person to approve, as an unattended worker does.
    Machine { id: String, secret: String },
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Public { name, metadata_url } => f
                .debug_struct("Public")
                .field("name", name)
                .field("metadata_url", metadata_url)
                .finish(),
            Identity::Registered { id, .. } => f
                .debug_struct("Registered")
                .field("id", id)
                .finish_non_exhaustive(),
            Identity::Machine { id, .. } => f
                .debug_struct("Machine")
                .field("id", id)
                .finish_non_exhaustive(),
        }
    }
}

/// How a person approves an authorization: the redirect URI the authorization server is
/// told, and a way to have the person open the authorization URL and to catch where the
/// server then sends the browser.
pub trait Consent: Send + Sync {
    fn redirect_uri(&self) -> String;
    /// The URL the authorization server redirected to after the person approved at
    /// `authorization_url` (its query holds the code, the state and perhaps `iss`).
    fn approve<'a>(&'a self, authorization_url: &'a str) -> BoxFuture<'a, Result<String, String>>;
}

/// How long an authorization server that approves without a person may take to answer.
const UNATTENDED_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Consent for authorization servers that approve without a person: the authorization URL
/// is fetched, and the redirect it answers with is where the browser would have gone. For
/// test servers and the conformance suite; a real server shows a login page instead, and
/// this fails.
#[derive(Clone, Debug)]
pub struct Unattended {
    pub redirect_uri: String,
}

impl Consent for Unattended {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn approve<'a>(&'a self, authorization_url: &'a str) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(UNATTENDED_WAIT)
                .build()
                .map_err(|e| format!("cannot create an HTTP client: {e}"))?;
            let response = client
                .get(authorization_url)
                .send()
                .await
                .map_err(|e| format!("the authorization endpoint could not be reached: {e}"))?;
            response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| {
                    format!(
                        "the authorization endpoint answered HTTP {} without a redirect: it wants a person (run `pipec mcp login`)",
                        response.status().as_u16()
                    )
                })
        })
    }
}

/// The server a session authorizes with, and how.
struct Target {
    server: String,
    url: String,
    authorization: Authorization,
    redact: Redact,
}

impl Target {
    /// A manager for the server with the tokens stored for it, its client configured for
    /// refreshing them.
    ///
    /// Configuring the client asks the authorization server for its metadata. When that
    /// fails (the server is down for a moment), the stored token is still sent while it
    /// lasts: a refusal then leads to a new authorization, which says what went wrong.
    async fn stored(&self) -> Result<AuthorizationManager, McpError> {
        let mut manager = self.fresh().await?;
        let found = match manager.initialize_from_store().await {
            Ok(found) => found,
            Err(e @ AuthError::CredentialStoreError(_)) => return Err(self.fail(e)),
            Err(_) => return self.fresh().await,
        };
        let (id, secret) = match &self.authorization.identity {
            Identity::Registered { id, secret } => (id, secret.as_ref()),
            Identity::Machine { id, secret } => (id, Some(secret)),
            Identity::Public { .. } => return Ok(manager),
        };
        if found {
            let mut config = OAuthClientConfig::new(id, self.redirect_uri());
            if let Some(secret) = secret {
                config = config.with_client_secret(secret);
            }
            manager.configure_client(config).map_err(|e| self.fail(e))?;
        }
        Ok(manager)
    }

    async fn fresh(&self) -> Result<AuthorizationManager, McpError> {
        let mut manager = AuthorizationManager::new(self.url.as_str())
            .await
            .map_err(|e| self.fail(e))?;
        manager.set_credential_store(ServerTokens {
            store: self.authorization.tokens.clone(),
            server_url: self.url.clone(),
        });
        Ok(manager)
    }

    fn redirect_uri(&self) -> String {
        self.authorization
            .consent
            .as_ref()
            .map(|c| c.redirect_uri())
            .unwrap_or_else(|| "http://127.0.0.1/callback".to_string())
    }

    fn fail(&self, error: AuthError) -> McpError {
        failure(&self.server, &self.url, &self.redact, &error)
    }
}

/// An authorization that failed, as pipec's error: when the authorization server could
/// not be reached (or failed for a moment), the server could not be started, which a run
/// tries again; otherwise the authorization was refused. The text is the server's at
/// times: it is redacted and shortened.
pub(crate) fn failure(server: &str, url: &str, redact: &Redact, error: &AuthError) -> McpError {
    let message = redact.whole(&pipec_base::source::shorten(&error.to_string(), 1000));
    match error {
        AuthError::HttpError(_)
        | AuthError::DiscoveryRequestFailed { .. }
        | AuthError::TokenRefreshFailed(_) => McpError::Start {
            server: server.to_string(),
            message,
            stderr: String::new(),
            url: Some(redact.whole(&super::http::shown_url(url))),
            help: Some(
                "its authorization server could not be reached or failed for a moment: try again, or check that it runs".to_string(),
            ),
        },
        _ => McpError::Authorization {
            server: server.to_string(),
            message,
            help: None,
        },
    }
}

/// A session's authorization with its server: the manager its HTTP client takes tokens
/// from, replaced by a new one each time pipec authorizes.
pub(crate) struct Authorizer {
    target: Target,
    manager: Arc<tokio::sync::Mutex<AuthorizationManager>>,
    /// One authorization at a time.
    authorizing: tokio::sync::Mutex<()>,
    /// How many authorizations this session has made: a request refused before the
    /// latest one is sent again without a new one.
    generation: AtomicU64,
    rounds: AtomicUsize,
    /// The scopes the last authorization asked for: a step-up asks for them again, with
    /// what the server now wants.
    requested: std::sync::Mutex<Vec<String>>,
}

impl Authorizer {
    /// The HTTP client that adds the stored token (refreshed when it is near its expiry)
    /// to every request, and the authorizer that replaces it.
    pub(crate) async fn start(
        server: &str,
        url: &str,
        authorization: Authorization,
        redact: Redact,
        http: SlotAwareClient,
    ) -> Result<(Authorizer, AuthClient<SlotAwareClient>), McpError> {
        let target = Target {
            server: server.to_string(),
            url: url.to_string(),
            authorization,
            redact,
        };
        let client = AuthClient::new(http, target.stored().await?);
        let authorizer = Authorizer {
            target,
            manager: client.auth_manager.clone(),
            authorizing: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            rounds: AtomicUsize::new(0),
            requested: std::sync::Mutex::default(),
        };
        Ok((authorizer, client))
    }

    /// How many authorizations the session has made so far; give it back to
    /// [`Authorizer::authorize`] after a refusal.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Authorizes after the server refused a request sent at `generation` with
    /// `challenge` (its `WWW-Authenticate`). When another request already authorized since,
    /// nothing is done: the refused request is sent again with the new token.
    pub(crate) async fn authorize(
        &self,
        generation: u64,
        challenge: Option<&str>,
    ) -> Result<(), McpError> {
        let _one = self.authorizing.lock().await;
        if self.generation() != generation {
            return Ok(());
        }
        if self.rounds.fetch_add(1, Ordering::SeqCst) >= MAX_AUTHORIZATIONS {
            return Err(McpError::Authorization {
                server: self.target.server.clone(),
                message: format!(
                    "the server still refuses after {MAX_AUTHORIZATIONS} authorizations in a row"
                ),
                help: Some(
                    "check the scopes the account may have, and what the server asks for in its WWW-Authenticate challenge".to_string(),
                ),
            });
        }
        let asked = challenge.map(Challenge::parse).unwrap_or_default();
        // Asking for more keeps what was asked for and granted before, or the new token
        // would lose what the old one could do.
        let had = {
            let mut had = self.requested();
            had.extend(self.manager.lock().await.get_current_scopes().await);
            had
        };
        let wanted = union(
            [
                self.target.authorization.scopes.clone(),
                had.clone(),
                asked.scopes.clone(),
            ]
            .concat(),
        );
        let manager = self.target.fresh().await?;
        let mut state = OAuthState::Unauthorized(manager);
        let identity = &self.target.authorization.identity;
        if let Identity::Machine { id, secret } = identity {
            let config = ClientCredentialsConfig::ClientSecret {
                client_id: id.clone(),
                client_secret: secret.clone(),
                scopes: wanted.clone(),
                resource: Some(self.target.url.clone()),
            };
            state
                .authenticate_client_credentials(config)
                .await
                .map_err(|e| self.target.fail(e))?;
            self.set_requested(wanted);
        } else {
            let Some(consent) = &self.target.authorization.consent else {
                return Err(self.no_person(&asked));
            };
            let mut request =
                AuthorizationRequest::new(consent.redirect_uri()).with_client_name("pipec");
            match identity {
                Identity::Public {
                    metadata_url: Some(url),
                    ..
                } => request = request.with_client_metadata_url(url),
                Identity::Public { name, .. } => request = request.with_client_name(name),
                Identity::Registered { id, secret } => {
                    request = request.with_preregistered_client(id);
                    if let Some(secret) = secret {
                        request = request.with_client_secret(secret);
                    }
                }
                Identity::Machine { .. } => {}
            }
            // Without declared scopes, earlier ones or a scope in the challenge, rmcp
            // chooses (from the challenge, else the metadata's `scopes_supported`).
            if !self.target.authorization.scopes.is_empty()
                || (!had.is_empty() && !asked.scopes.is_empty())
            {
                request = request.with_scopes(wanted);
            }
            if let Some(challenge) = challenge {
                request = request.with_challenge(challenge);
            }
            state
                .start_authorization(request)
                .await
                .map_err(|e| self.target.fail(e))?;
            let url = state
                .get_authorization_url()
                .await
                .map_err(|e| self.target.fail(e))?;
            if let Err(why) = openable(&url) {
                return Err(McpError::Authorization {
                    server: self.target.server.clone(),
                    message: self.target.redact.whole(&format!(
                        "its authorization server's address is not one pipec opens: {why}"
                    )),
                    help: Some(
                        "an authorization endpoint is an https address (or http on this machine); check the server's OAuth metadata".to_string(),
                    ),
                });
            }
            self.set_requested(scopes_of(&url));
            let callback =
                consent
                    .approve(&url)
                    .await
                    .map_err(|message| McpError::Authorization {
                        server: self.target.server.clone(),
                        message: self.target.redact.whole(&message),
                        help: None,
                    })?;
            state
                .handle_callback_url(&callback)
                .await
                .map_err(|e| self.target.fail(e))?;
        }
        let Some(manager) = state.into_authorization_manager() else {
            return Err(self.target.fail(AuthError::InternalError(
                "the authorization did not finish".to_string(),
            )));
        };
        *self.manager.lock().await = manager;
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// A request went through: the refusals counted toward the limit are behind it.
    pub(crate) fn settled(&self) {
        self.rounds.store(0, Ordering::SeqCst);
    }

    /// Why a run cannot authorize: no person to approve.
    fn no_person(&self, asked: &Challenge) -> McpError {
        let server = &self.target.server;
        if asked.insufficient_scope {
            let scopes = if asked.scopes.is_empty() {
                "more scopes".to_string()
            } else {
                format!("the scopes {}", asked.scopes.join(" "))
            };
            return McpError::Authorization {
                server: server.clone(),
                message: format!("the server wants {scopes}, which the stored tokens do not have"),
                help: Some(format!(
                    "declare them (`oauth {{ scopes = [...] }}` on the server `{server}`) and run `pipec mcp login {server}` again"
                )),
            };
        }
        McpError::Authorization {
            server: server.clone(),
            message:
                "the server asks for a person's authorization (OAuth), and none is stored for it"
                    .to_string(),
            help: Some(format!(
                "run `pipec mcp login {server}` once; runs then use and refresh the stored tokens"
            )),
        }
    }

    fn requested(&self) -> Vec<String> {
        match self.requested.lock() {
            Ok(scopes) => scopes.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_requested(&self, scopes: Vec<String>) {
        match self.requested.lock() {
            Ok(mut requested) => *requested = scopes,
            Err(poisoned) => *poisoned.into_inner() = scopes,
        }
    }
}

/// Scopes without repeats, in their first order.
fn union(mut scopes: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
    scopes
}

/// The scopes an authorization URL asks for.
fn scopes_of(authorization_url: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(authorization_url) else {
        return Vec::new();
    };
    url.query_pairs()
        .filter(|(key, _)| key == "scope")
        .flat_map(|(_, value)| {
            value
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Whether pipec may open an authorization URL (in a browser, or fetch it): the URL
/// comes from the authorization server's metadata, which the MCP server names, so
/// anything but https (or http on a loopback host) is refused — a `file:`, `smb:` or
/// custom-handler URL would make the browser or the system do what the server wants.
fn openable(authorization_url: &str) -> Result<(), String> {
    let url = url::Url::parse(authorization_url).map_err(|e| format!("{e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(host)) => host.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        scheme => Err(format!(
            "a `{scheme}:` address{}",
            if scheme == "http" {
                " off this machine"
            } else {
                ""
            }
        )),
    }
}

/// What a `WWW-Authenticate` challenge says.
#[derive(Debug, Default, PartialEq)]
struct Challenge {
    scopes: Vec<String>,
    insufficient_scope: bool,
}

impl Challenge {
    fn parse(header: &str) -> Challenge {
        let Ok(base) = url::Url::parse("http://localhost/") else {
            return Challenge::default();
        };
        let params = rmcp::transport::auth::WWWAuthenticateParams::parse(header, &base);
        Challenge {
            insufficient_scope: params.is_insufficient_scope(),
            scopes: params
                .scope
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
        }
    }
}

/// Whether a refusal is one that authorizing may cure: a 401 with or without a
/// challenge, or a 403 whose challenge says `insufficient_scope`.
pub(crate) fn curable(status: u16, challenge: Option<&str>) -> bool {
    match status {
        401 => true,
        403 => challenge.is_some_and(|c| Challenge::parse(c).insufficient_scope),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_authorization_addresses_are_opened() {
        assert!(openable("https://auth.example.com/authorize?x=1").is_ok());
        assert!(openable("http://127.0.0.1:8080/authorize").is_ok());
        assert!(openable("http://localhost/authorize").is_ok());
        assert!(openable("http://[::1]:9/authorize").is_ok());
        for refused in [
            "http://auth.example.com/authorize",
            "smb://attacker/share",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "vscode://x/y",
            "not a url",
        ] {
            assert!(openable(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn an_unreachable_authorization_server_is_tried_again_and_a_refusal_is_not() {
        let redact: Redact = Arc::new(|text: &str| text.replace("s3cret", "[secret]"));
        let url = "https://user:pw@kb.example.com/mcp?key=k";
        let transient = failure(
            "kb",
            url,
            &redact,
            &AuthError::TokenRefreshFailed("connection reset".to_string()),
        );
        assert!(
            matches!(&transient, McpError::Start { url: Some(shown), .. } if shown == "https://kb.example.com/mcp"),
            "{transient:?}"
        );
        let refused = failure(
            "kb",
            url,
            &redact,
            &AuthError::RegistrationFailed(format!("HTTP 400: s3cret {}", "x".repeat(5000))),
        );
        match refused {
            McpError::Authorization { message, .. } => {
                assert!(!message.contains("s3cret"), "{message}");
                assert!(message.len() < 1100, "{}", message.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_challenge_says_its_scopes_and_whether_they_are_too_few() {
        let asked = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="mcp:read mcp:write", resource_metadata="https://x/.well-known/oauth-protected-resource""#,
        );
        assert!(asked.insufficient_scope);
        assert_eq!(asked.scopes, ["mcp:read", "mcp:write"]);
        assert!(curable(403, Some(r#"Bearer error="insufficient_scope""#)));
        assert!(!curable(403, Some(r#"Bearer error="invalid_token""#)));
        assert!(!curable(403, None));
        assert!(curable(401, None));
        assert!(!curable(500, None));
        assert_eq!(union(vec!["a".into(), "b".into(), "a".into()]), ["a", "b"]);
        assert_eq!(
            scopes_of("https://x/authorize?scope=a%20b&state=s"),
            ["a", "b"]
        );
    }
}
