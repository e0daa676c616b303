//! Tokens in the OS keyring: the Secret Service on Linux (GNOME Keyring, KWallet, ...
//! over D-Bus), the Keychain on macOS. One entry per server, service `pipec`, account
//! the server's URL, its secret the same opaque JSON text a credentials file keeps. A
//! refresh takes the same per-server lock file a credentials file's would, so two
//! processes never both spend one refresh token.
//!
//! The keyring crate blocks on an executor of its own, which may not run on a thread of
//! an async runtime: every call goes to a thread of its own, waited for a bounded time.
//! A server with no entry is looked up in the credentials file too (tokens stored there
//! before), and a logout clears both.

use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use super::tokens::{FileTokens, TokenStore};

/// The keyring's service name for pipec's entries.
const SERVICE: &str = "pipec";

/// Tokens in the OS keyring; the lock files of refreshes, and tokens kept before the
/// keyring was used, in `credentials_file`.
#[derive(Clone, Debug)]
pub struct KeyringTokens {
    locks: FileTokens,
}

/// How long a look-up may take before the keyring counts as absent (a Secret Service
/// that is started on demand, or locked behind a prompt nobody sees, may never answer).
const PROBE_WAIT: Duration = Duration::from_secs(2);
/// How long a read, write or removal may take.
const OP_WAIT: Duration = Duration::from_secs(10);

/// `f` on a thread of its own (none of an async runtime's), waited for at most `wait`:
/// a keyring that hangs leaves its thread behind, not the caller.
fn apart<T: Send + 'static>(
    wait: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("pipec-keyring".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| format!("cannot start the keyring's thread: {e}"))?;
    rx.recv_timeout(wait).map_err(|e| match e {
        RecvTimeoutError::Timeout => format!(
            "the OS keyring did not answer within {} s (set PIPEC_TOKEN_STORE=file to keep tokens in the credentials file)",
            wait.as_secs()
        ),
        RecvTimeoutError::Disconnected => "the keyring's thread stopped".to_string(),
    })
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
        apart(PROBE_WAIT, || {
            matches!(
                entry("pipec:probe").map(|e| e.get_password()),
                Ok(Ok(_) | Err(keyring::Error::NoEntry))
            )
        })
        .unwrap_or(false)
    }
}

impl TokenStore for KeyringTokens {
    /// The keyring's entry, else what a credentials file beside it holds (tokens stored
    /// before the keyring was there, or by a process that had none).
    fn load(&self, server_url: &str) -> Result<Option<String>, String> {
        let url = server_url.to_string();
        let found = apart(OP_WAIT, move || match entry(&url)?.get_password() {
            Ok(text) => Ok(Some(text)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(format!("cannot read the keyring: {e}")),
        })??;
        match found {
            Some(text) => Ok(Some(text)),
            None => self.locks.load(server_url),
        }
    }

    fn save(&self, server_url: &str, credentials: &str) -> Result<(), String> {
        let (url, credentials) = (server_url.to_string(), credentials.to_string());
        apart(OP_WAIT, move || {
            entry(&url)?
                .set_password(&credentials)
                .map_err(|e| format!("cannot write to the keyring: {e}"))
        })?
    }

    /// Both places: a logout leaves no tokens behind.
    fn clear(&self, server_url: &str) -> Result<(), String> {
        let url = server_url.to_string();
        apart(OP_WAIT, move || match entry(&url)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(format!("cannot write to the keyring: {e}")),
        })??;
        match self.locks.load(server_url)? {
            Some(_) => self.locks.clear(server_url),
            None => Ok(()),
        }
    }

    fn refresh_lock(&self, server_url: &str) -> Result<Option<Box<dyn Send>>, String> {
        self.locks.refresh_lock(server_url)
    }
}
