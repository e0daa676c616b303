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

use super::McpError;
use super::http_client::SlotAwareClient;
use super::tokens::{ServerTokens, TokenStore};

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
}

impl Target {
    /// A manager for the server with the tokens stored for it, its client configured for
    /// refreshing them.
    async fn stored(&self) -> Result<AuthorizationManager, McpError> {
        let mut manager = self.fresh().await?;
        let found = manager
            .initialize_from_store()
            .await
            .map_err(|e| self.fail(e))?;
        if found && let Identity::Registered { id, secret } = &self.authorization.identity {
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
        McpError::Authorization {
            server: self.server.clone(),
            message: error.to_string(),
            help: None,
        }
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
        http: SlotAwareClient,
    ) -> Result<(Authorizer, AuthClient<SlotAwareClient>), McpError> {
        let target = Target {
            server: server.to_string(),
            url: url.to_string(),
            authorization,
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
                    "the server still refuses after {MAX_AUTHORIZATIONS} authorizations in this session"
                ),
                help: Some(
                    "check the scopes the account may have, and what the server asks for in its WWW-Authenticate challenge".to_string(),
                ),
            });
        }
        let manager = self.target.fresh().await?;
        let mut state = OAuthState::Unauthorized(manager);
        let identity = &self.target.authorization.identity;
        if let Identity::Machine { id, secret } = identity {
            let config = ClientCredentialsConfig::ClientSecret {
                client_id: id.clone(),
                client_secret: secret.clone(),
                scopes: self.first_scopes(challenge),
                resource: Some(self.target.url.clone()),
            };
            state
                .authenticate_client_credentials(config)
                .await
                .map_err(|e| self.target.fail(e))?;
        } else {
            let Some(consent) = &self.target.authorization.consent else {
                return Err(McpError::Authorization {
                    server: self.target.server.clone(),
                    message: "the server asks for a person's authorization (OAuth), and none is stored for it".to_string(),
                    help: Some(format!(
                        "run `pipec mcp login {}` once; runs then use and refresh the stored tokens",
                        self.target.server
                    )),
                });
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
            let first = self.first_scopes(None);
            if !first.is_empty() && self.requested().is_empty() {
                request = request.with_scopes(self.first_scopes(challenge));
            }
            if let Some(challenge) = challenge {
                request = request.with_challenge(challenge);
                // Asking for more keeps what was asked for and granted before, or the
                // new token would lose what the old one could do.
                let wanted = challenge_scopes(challenge);
                if !wanted.is_empty() {
                    let mut scopes = self.requested();
                    scopes.extend(self.manager.lock().await.get_current_scopes().await);
                    if !scopes.is_empty() {
                        scopes.extend(wanted);
                        let mut seen = std::collections::HashSet::new();
                        scopes.retain(|s| seen.insert(s.clone()));
                        request = request.with_scopes(scopes);
                    }
                }
            }
            state
                .start_authorization(request)
                .await
                .map_err(|e| self.target.fail(e))?;
            let url = state
                .get_authorization_url()
                .await
                .map_err(|e| self.target.fail(e))?;
            self.remember_scopes(&url);
            let callback =
                consent
                    .approve(&url)
                    .await
                    .map_err(|message| McpError::Authorization {
                        server: self.target.server.clone(),
                        message,
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
}

impl Authorizer {
    /// The declared scopes, with those `challenge` asks for.
    fn first_scopes(&self, challenge: Option<&str>) -> Vec<String> {
        let mut scopes = self.target.authorization.scopes.clone();
        scopes.extend(challenge.map(challenge_scopes).unwrap_or_default());
        let mut seen = std::collections::HashSet::new();
        scopes.retain(|s| seen.insert(s.clone()));
        scopes
    }

    fn requested(&self) -> Vec<String> {
        match self.requested.lock() {
            Ok(scopes) => scopes.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Keeps the scopes the authorization URL asks for.
    fn remember_scopes(&self, authorization_url: &str) {
        let Ok(url) = url::Url::parse(authorization_url) else {
            return;
        };
        let scopes: Vec<String> = url
            .query_pairs()
            .filter(|(key, _)| key == "scope")
            .flat_map(|(_, value)| {
                value
                    .split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        match self.requested.lock() {
            Ok(mut requested) => *requested = scopes,
            Err(poisoned) => *poisoned.into_inner() = scopes,
        }
    }
}

/// The scopes a challenge asks for (`scope="a b"`).
fn challenge_scopes(challenge: &str) -> Vec<String> {
    let Ok(base) = url::Url::parse("http://localhost/") else {
        return Vec::new();
    };
    rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base)
        .scope
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether a refusal is one that authorizing may cure: a 401 with or without a
/// challenge, or a 403 whose challenge says `insufficient_scope`.
pub(crate) fn curable(status: u16, challenge: Option<&str>) -> bool {
    match status {
        401 => true,
        403 => challenge.is_some_and(|c| {
            url::Url::parse("http://localhost/")
                .map(|base| {
                    rmcp::transport::auth::WWWAuthenticateParams::parse(c, &base)
                        .is_insufficient_scope()
                })
                .unwrap_or(false)
        }),
        _ => false,
    }
}
