//! Where a user's OAuth tokens live, for runs and for `pipec mcp login`, outside every
//! run store: the OS keyring where the session has one, else one file
//! (`PIPEC_CREDENTIALS`, else `credentials.json` in the `pipec` folder of the user's
//! configuration folder: `$XDG_CONFIG_HOME`, else `~/.config`), readable by its owner
//! alone. Runs read and refresh tokens there; a plan, the store, events and logs
//! never hold them.

use std::path::PathBuf;
use std::sync::Arc;

use pipec_mcp::{Authorization, FileTokens, Identity, MemoryTokens, TokenStore};
use pipec_plan::{ConfigValue, OAuth, OAuthGrant, Server};

/// The variable that names the credentials file.
pub const CREDENTIALS_VAR: &str = "PIPEC_CREDENTIALS";

fn set(var: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(var).filter(|v| !v.is_empty())
}

/// pipec's folder in the user's configuration folder (`$XDG_CONFIG_HOME/pipec`, else
/// `~/.config/pipec`), when the user has one.
pub fn config_folder() -> Option<PathBuf> {
    let config = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("pipec"))
}

/// The credentials file, when there is a place for it.
pub fn path() -> Option<PathBuf> {
    if let Some(path) = set(CREDENTIALS_VAR) {
        return Some(PathBuf::from(path));
    }
    Some(config_folder()?.join("credentials.json"))
}

/// Chooses where tokens are kept: `keyring` or `file` (the default: the keyring where
/// there is one, else the file).
pub const TOKEN_STORE_VAR: &str = "PIPEC_TOKEN_STORE";

/// Where the user's tokens are kept.
#[derive(Clone, Debug, PartialEq)]
pub enum Keeper {
    /// The OS keyring (the Secret Service, the Keychain).
    Keyring,
    /// The credentials file.
    File(PathBuf),
    /// This process only: the user has no home folder to keep a file in.
    Memory,
}

/// Where the user's tokens are kept: the credentials file when `PIPEC_CREDENTIALS`
/// names one or `PIPEC_TOKEN_STORE=file`; the OS keyring when `PIPEC_TOKEN_STORE=keyring`
/// (an error when this session has none); else the OS keyring when this session has one
/// (looked at once a process), else the credentials file. Any other value of
/// `PIPEC_TOKEN_STORE` is an error.
pub fn keeper() -> Result<Keeper, String> {
    let chosen = std::env::var(TOKEN_STORE_VAR).unwrap_or_default();
    let named = std::env::var_os(CREDENTIALS_VAR).is_some_and(|v| !v.is_empty());
    let file = || match path() {
        Some(path) => Keeper::File(path),
        None => Keeper::Memory,
    };
    match chosen.as_str() {
        "file" => Ok(file()),
        "keyring" if keyring_available() => Ok(Keeper::Keyring),
        "keyring" => Err(format!(
            "{TOKEN_STORE_VAR}=keyring, and this session has no OS keyring pipec can use (no Secret Service on the session bus, or this build has none)\n  help: unlock or start the keyring, or set {TOKEN_STORE_VAR}=file"
        )),
        "" if !named && keyring_available() => Ok(Keeper::Keyring),
        "" => Ok(file()),
        other => Err(format!(
            "{TOKEN_STORE_VAR} is `{}`, which is neither `keyring` nor `file`\n  help: set it to `keyring` or `file`, or unset it to use the keyring where there is one",
            other.escape_debug()
        )),
    }
}

#[cfg(all(feature = "keyring", any(target_os = "linux", target_os = "macos")))]
fn keyring_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(pipec_mcp::KeyringTokens::available)
}

#[cfg(not(all(feature = "keyring", any(target_os = "linux", target_os = "macos"))))]
fn keyring_available() -> bool {
    false
}

impl Keeper {
    /// The store itself.
    pub fn store(&self) -> Arc<dyn TokenStore> {
        match self {
            #[cfg(all(feature = "keyring", any(target_os = "linux", target_os = "macos")))]
            Keeper::Keyring => {
                Arc::new(pipec_mcp::KeyringTokens::new(path().unwrap_or_else(|| {
                    std::env::temp_dir().join("pipec-credentials.json")
                })))
            }
            #[cfg(not(all(feature = "keyring", any(target_os = "linux", target_os = "macos"))))]
            Keeper::Keyring => Arc::new(MemoryTokens::default()),
            Keeper::File(path) => Arc::new(FileTokens::new(path)),
            Keeper::Memory => Arc::new(MemoryTokens::default()),
        }
    }

    /// Where, for people: `in the OS keyring`, `in /home/ada/.config/pipec/credentials.json`.
    pub fn describe(&self) -> String {
        match self {
            Keeper::Keyring => "in the OS keyring".to_string(),
            Keeper::File(path) => format!("in {}", path.display()),
            Keeper::Memory => "in this process only (there is no home folder)".to_string(),
        }
    }
}

/// The user's credentials store ([`keeper`]); when `PIPEC_TOKEN_STORE` is wrong, a
/// store that says so at every use.
pub fn store() -> Arc<dyn TokenStore> {
    match keeper() {
        Ok(keeper) => keeper.store(),
        Err(message) => Arc::new(Unusable(message)),
    }
}

/// A store that cannot be used, and says why.
struct Unusable(String);

impl TokenStore for Unusable {
    fn load(&self, _: &str) -> Result<Option<String>, String> {
        Err(self.0.clone())
    }
    fn save(&self, _: &str, _: &str) -> Result<(), String> {
        Err(self.0.clone())
    }
    fn clear(&self, _: &str) -> Result<(), String> {
        Err(self.0.clone())
    }
}

/// Where tokens of the client-credentials grant of `client_id` live: in this process
/// only, one store per client (two pipelines of one process may reach one server as two
/// clients). The client's secret is what lasts; a token is had again for the asking, and
/// a worker's tokens do not belong in a person's credentials file.
pub fn machine_store(client_id: &str) -> Arc<dyn TokenStore> {
    static STORES: std::sync::Mutex<Vec<(String, Arc<MemoryTokens>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, store)) = stores.iter().find(|(id, _)| id == client_id) {
        return store.clone();
    }
    let store = Arc::new(MemoryTokens::default());
    stores.push((client_id.to_string(), store.clone()));
    store
}

/// How a run authorizes with the server `s` at `url`: as its `oauth` says, or, for a
/// server with no `Authorization` header of its own, with the tokens `pipec mcp login`
/// stored for it in the `user` store (made only for a server over HTTP). Nobody approves during a run: a server that needs a person
/// fails with what to run.
pub(crate) fn authorization(
    s: &Server,
    url: &str,
    value: &dyn Fn(&ConfigValue) -> String,
    user: impl FnOnce() -> Arc<dyn TokenStore>,
) -> Option<Authorization> {
    // Only a server reached over HTTP looks at the user's store (which may ask the OS
    // keyring).
    s.url.as_ref()?;
    let user = user();
    let (identity, tokens) = match &s.oauth {
        Some(oauth) if oauth.grant == OAuthGrant::ClientCredentials => {
            let id = oauth.client_id.as_ref().map(value).unwrap_or_default();
            (identity(oauth, value), machine_store(&id))
        }
        Some(oauth) => (identity(oauth, value), user),
        None => {
            let own_header = s
                .headers
                .keys()
                .any(|h| h.eq_ignore_ascii_case("authorization"));
            if own_header || !matches!(user.load(url), Ok(Some(_))) {
                return None;
            }
            (identity(&OAuth::default(), value), user)
        }
    };
    Some(Authorization {
        identity,
        consent: None,
        tokens,
        scopes: s
            .oauth
            .as_ref()
            .map(|o| o.scopes.clone())
            .unwrap_or_default(),
    })
}

/// Who pipec is to a server's authorization server, from its `oauth` (secrets read through
/// `value`).
pub fn identity(oauth: &OAuth, value: &dyn Fn(&ConfigValue) -> String) -> Identity {
    let id = oauth.client_id.as_ref().map(value);
    let secret = oauth.client_secret.as_ref().map(value);
    match (oauth.grant, id) {
        (OAuthGrant::ClientCredentials, Some(id)) => Identity::Machine {
            id,
            secret: secret.unwrap_or_default(),
        },
        (_, Some(id)) => Identity::Registered { id, secret },
        (_, None) => Identity::Public {
            name: "pipec".to_string(),
            metadata_url: oauth.client_metadata_url.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const URL: &str = "https://tracker.example/mcp";

    fn server(oauth: Option<OAuth>, headers: &[&str]) -> Server {
        Server {
            name: "tracker".to_string(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: Some(URL.to_string().into()),
            headers: headers
                .iter()
                .map(|h| {
                    (
                        h.to_string(),
                        ConfigValue::Secret {
                            var: "T".to_string(),
                        },
                    )
                })
                .collect(),
            oauth,
            elicitation: Default::default(),
            sampling: None,
            resources: Vec::new(),
            startup_timeout_ms: None,
            timeout_ms: None,
            base_dir: String::new(),
        }
    }

    fn value(v: &ConfigValue) -> String {
        match v {
            ConfigValue::Literal { value } => value.clone(),
            ConfigValue::Env { var, .. } | ConfigValue::Secret { var } => format!("<{var}>"),
        }
    }

    fn logged_in() -> Arc<dyn TokenStore> {
        let user = Arc::new(MemoryTokens::default());
        let _ = user.save(URL, "{}");
        user
    }

    #[test]
    fn a_server_is_authorized_when_it_declares_oauth_or_a_person_logged_in_to_it() {
        let none: Arc<dyn TokenStore> = Arc::new(MemoryTokens::default());
        // Neither declared nor logged in: plain requests.
        assert!(authorization(&server(None, &[]), URL, &value, || none.clone()).is_none());
        // Logged in: the stored tokens, as a public client.
        let found =
            authorization(&server(None, &[]), URL, &value, logged_in).expect("the login's tokens");
        assert!(matches!(found.identity, Identity::Public { .. }));
        assert!(found.consent.is_none(), "a run never asks a person");
        // A server with its own Authorization header keeps to it.
        assert!(authorization(&server(None, &["authorization"]), URL, &value, logged_in).is_none());
        // Declared: even before any login.
        assert!(
            authorization(&server(Some(OAuth::default()), &[]), URL, &value, || none).is_some()
        );
    }

    #[test]
    fn a_declared_client_is_who_pipec_is_and_client_credentials_stay_in_the_process() {
        let registered = OAuth {
            client_id: Some(ConfigValue::Literal {
                value: "pipec-wiki".to_string(),
            }),
            client_secret: Some(ConfigValue::Secret {
                var: "WIKI_SECRET".to_string(),
            }),
            scopes: vec!["pages:read".to_string()],
            ..OAuth::default()
        };
        let user = logged_in();
        let found = authorization(&server(Some(registered.clone()), &[]), URL, &value, || {
            user.clone()
        })
        .expect("declared");
        assert_eq!(
            found.identity,
            Identity::Registered {
                id: "pipec-wiki".to_string(),
                secret: Some("<WIKI_SECRET>".to_string()),
            }
        );
        assert_eq!(found.scopes, ["pages:read"]);
        assert!(
            matches!(found.tokens.load(URL), Ok(Some(_))),
            "the user's store"
        );

        let machine = OAuth {
            grant: OAuthGrant::ClientCredentials,
            ..registered
        };
        let found =
            authorization(&server(Some(machine), &[]), URL, &value, || user).expect("declared");
        assert!(matches!(found.identity, Identity::Machine { .. }));
        assert!(
            matches!(found.tokens.load(URL), Ok(None)),
            "not the user's credentials file"
        );
        // A command server never authorizes.
        let mut command = server(Some(OAuth::default()), &[]);
        command.url = None;
        assert!(
            authorization(&command, URL, &value, || -> Arc<dyn TokenStore> {
                panic!("a command server's run never looks at the user's store")
            })
            .is_none()
        );
    }
}
