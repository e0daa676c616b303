//! Where a user's OAuth tokens live, for runs and for `pipec mcp login`: one file outside
//! every run store (`PIPEC_CREDENTIALS`, else `credentials.json` in the `pipec` folder of
//! the user's configuration folder: `$XDG_CONFIG_HOME`, else `~/.config`), readable by its
//! owner alone. Runs read and refresh tokens there; a plan, the store, events and logs
//! never hold them.

use std::path::PathBuf;
use std::sync::Arc;

use pipec_mcp::{FileTokens, Identity, MemoryTokens, TokenStore};
use pipec_plan::{ConfigValue, OAuth, OAuthGrant};

/// The variable that names the credentials file.
pub const CREDENTIALS_VAR: &str = "PIPEC_CREDENTIALS";

/// The credentials file, when there is a place for it.
pub fn path() -> Option<PathBuf> {
    let set = |var: &str| std::env::var_os(var).filter(|v| !v.is_empty());
    if let Some(path) = set(CREDENTIALS_VAR) {
        return Some(PathBuf::from(path));
    }
    let config = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(config.join("pipec").join("credentials.json"))
}

/// The user's credentials store; in memory (for this process only) when the user has no
/// home folder to keep it in.
pub fn store() -> Arc<dyn TokenStore> {
    match path() {
        Some(path) => Arc::new(FileTokens::new(path)),
        None => Arc::new(MemoryTokens::default()),
    }
}

/// Where tokens of the client-credentials grant live: in this process only. The client's
/// secret is what lasts; a token is had again for the asking, and a worker's tokens do
/// not belong in a person's credentials file.
pub fn machine_store() -> Arc<dyn TokenStore> {
    static STORE: std::sync::OnceLock<Arc<MemoryTokens>> = std::sync::OnceLock::new();
    STORE.get_or_init(Arc::default).clone()
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
