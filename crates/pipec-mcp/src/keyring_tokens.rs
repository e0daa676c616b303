//! Tokens in the OS keyring: the Secret Service on Linux (GNOME Keyring, KWallet, ...
//! over D-Bus), the Keychain on macOS. One entry per server, service `pipec`, account
//! the server's URL, its secret the same opaque JSON text a credentials file keeps. A
//! refresh takes the same per-server lock file a credentials file's would, so two
//! processes never both spend one refresh token.
//!
//! The keyring crate blocks on an executor of its own, which may not run on a thread of
//! an async runtime: every call goes to a thread of its own.

use std::path::PathBuf;

use super::tokens::{FileTokens, TokenStore};

/// The keyring's service name for pipec's entries.
const SERVICE: &str = "pipec";

/// Tokens in the OS keyring; the lock files of refreshes beside `credentials_file`.
#[derive(Clone, Debug)]
pub struct KeyringTokens {
    locks: FileTokens,
}

/// `f` on a thread of its own (none of an async runtime's).
fn apart<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| s.spawn(f).join())
        .map_err(|_| "the keyring's thread stopped".to_string())
}

fn entry(server_url: &str) -> Result<keyring::Entry, String> {
    keyring::Entry::new(SERVICE, server_url).map_err(|e| format!("the keyring: {e}"))
}

impl KeyringTokens {
    /// The keyring, with the lock files of refreshes beside `credentials_file` (the
    /// file tokens would be kept in without a keyring).
    pub fn new(credentials_file: impl Into<PathBuf>) -> KeyringTokens {
        KeyringTokens {
            locks: FileTokens::new(credentials_file),
        }
    }

    /// Whether this session has a keyring pipec can use: one that answers a look-up
    /// (with nothing found, or something).
    pub fn available() -> bool {
        // Without a session bus there is no Secret Service to ask (and asking would wait).
        #[cfg(target_os = "linux")]
        if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_none_or(|v| v.is_empty()) {
            return false;
        }
        apart(|| {
            matches!(
                entry("pipec:probe").map(|e| e.get_password()),
                Ok(Ok(_) | Err(keyring::Error::NoEntry))
            )
        })
        .unwrap_or(false)
    }
}

impl TokenStore for KeyringTokens {
    fn load(&self, server_url: &str) -> Result<Option<String>, String> {
        apart(|| match entry(server_url)?.get_password() {
            Ok(text) => Ok(Some(text)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(format!("cannot read the keyring: {e}")),
        })?
    }

    fn save(&self, server_url: &str, credentials: &str) -> Result<(), String> {
        apart(|| {
            entry(server_url)?
                .set_password(credentials)
                .map_err(|e| format!("cannot write to the keyring: {e}"))
        })?
    }

    fn clear(&self, server_url: &str) -> Result<(), String> {
        apart(|| match entry(server_url)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(format!("cannot write to the keyring: {e}")),
        })?
    }

    fn refresh_lock(&self, server_url: &str) -> Result<Option<Box<dyn Send>>, String> {
        self.locks.refresh_lock(server_url)
    }
}
