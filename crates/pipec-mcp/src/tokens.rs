//! Where a server's OAuth tokens live between sessions and processes: a [`TokenStore`]
//! keyed by the server's URL, holding what rmcp's authorization keeps (the client ID, the
//! token response with its refresh token, the granted scopes, the issuer) as an opaque
//! JSON text. Never the run store: tokens are the user's, not the run's, and a run's
//! store, events and logs never see them.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};

/// The largest credentials file read: far more than any number of servers' tokens.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Numbers the new files of one process.
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Tokens by server URL. A value is opaque: what the session saved, given back as it was.
pub trait TokenStore: Send + Sync {
    fn load(&self, server_url: &str) -> Result<Option<String>, String>;
    fn save(&self, server_url: &str, credentials: &str) -> Result<(), String>;
    fn clear(&self, server_url: &str) -> Result<(), String>;
    /// Held while the token of `server_url` is refreshed, so that two processes sharing
    /// the store do not both spend the same refresh token; `None` where the store is one
    /// process's. It may block: it is taken off the async runtime's threads.
    fn refresh_lock(&self, server_url: &str) -> Result<Option<Box<dyn Send>>, String> {
        let _ = server_url;
        Ok(None)
    }
}

/// Tokens kept in memory, for one process.
#[derive(Default)]
pub struct MemoryTokens {
    tokens: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for MemoryTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The servers, never their tokens.
        let servers: Vec<String> = self.with(|t| t.keys().cloned().collect());
        f.debug_struct("MemoryTokens")
            .field("servers", &servers)
            .finish()
    }
}

impl MemoryTokens {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, String>) -> T) -> T {
        match self.tokens.lock() {
            Ok(mut tokens) => f(&mut tokens),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }
}

impl TokenStore for MemoryTokens {
    fn load(&self, server_url: &str) -> Result<Option<String>, String> {
        Ok(self.with(|t| t.get(server_url).cloned()))
    }

    fn save(&self, server_url: &str, credentials: &str) -> Result<(), String> {
        self.with(|t| t.insert(server_url.to_string(), credentials.to_string()));
        Ok(())
    }

    fn clear(&self, server_url: &str) -> Result<(), String> {
        self.with(|t| t.remove(server_url));
        Ok(())
    }
}

/// Tokens in one JSON file (`{"<server url>": <credentials>, ...}`) that only its owner
/// may read or write (created 0600, in a folder created 0700). A change is written to a
/// new file of its own (never one that was there, never through a symbolic link) and
/// renamed over the old, under a lock on `<file>.lock`, so a reader never sees half a
/// file and two processes never lose each other's servers. A refresh holds a lock of
/// its server's (`<file>.refresh-<hash of the URL>`).
#[derive(Clone, Debug)]
pub struct FileTokens {
    path: PathBuf,
}

impl FileTokens {
    pub fn new(path: impl Into<PathBuf>) -> FileTokens {
        FileTokens { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        self.path.with_file_name(name)
    }

    fn fail(&self, what: &str, error: impl std::fmt::Display) -> String {
        format!("cannot {what} {}: {error}", self.path.display())
    }

    /// The lock file `suffix`, created private, locked exclusively.
    fn lock(&self, suffix: &str) -> Result<File, String> {
        if let Some(folder) = self.path.parent()
            && !folder.as_os_str().is_empty()
        {
            create_private_dir(folder).map_err(|e| self.fail("create the folder of", e))?;
        }
        let file = private_options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.sibling(suffix))
            .map_err(|e| self.fail("lock", e))?;
        file.lock().map_err(|e| self.fail("lock", e))?;
        Ok(file)
    }

    fn read(&self) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(e) => return Err(self.fail("read", e)),
        };
        let mut text = String::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| self.fail("read", e))?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "{} is larger than a credentials file can be ({} MB); move it away and log in again",
                self.path.display(),
                MAX_FILE_BYTES >> 20
            ));
        }
        match serde_json::from_str(&text) {
            Ok(serde_json::Value::Object(all)) => Ok(all),
            // The values are not shown: they are tokens.
            _ => Err(format!(
                "{} is not a pipec credentials file (a JSON object of servers); move it away and log in again",
                self.path.display()
            )),
        }
    }

    fn change(
        &self,
        f: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
    ) -> Result<(), String> {
        let _lock = self.lock(".lock")?;
        let mut all = self.read()?;
        f(&mut all);
        let text = serde_json::to_string_pretty(&all).map_err(|e| self.fail("write", e))?;
        // A name no file has: created here (O_EXCL: never a file or a link that was
        // there), written, renamed into place.
        let new = self.sibling(&format!(
            ".new-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let written = private_options()
            .write(true)
            .create_new(true)
            .open(&new)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&new, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&new);
        }
        written.map_err(|e| self.fail("write", e))
    }
}

impl TokenStore for FileTokens {
    fn load(&self, server_url: &str) -> Result<Option<String>, String> {
        Ok(self.read()?.get(server_url).map(|v| v.to_string()))
    }

    fn save(&self, server_url: &str, credentials: &str) -> Result<(), String> {
        let value: serde_json::Value =
            serde_json::from_str(credentials).map_err(|e| self.fail("write", e))?;
        self.change(|all| {
            all.insert(server_url.to_string(), value);
        })
    }

    fn clear(&self, server_url: &str) -> Result<(), String> {
        self.change(|all| {
            all.remove(server_url);
        })
    }

    fn refresh_lock(&self, server_url: &str) -> Result<Option<Box<dyn Send>>, String> {
        let key = pipec_base::digest::sha256_hex(server_url, 8);
        Ok(Some(Box::new(self.lock(&format!(".refresh-{key}"))?)))
    }
}

fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

fn create_private_dir(folder: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(folder)
}

/// One server's tokens in a [`TokenStore`], as rmcp's credential store.
pub(crate) struct ServerTokens {
    pub(crate) store: Arc<dyn TokenStore>,
    pub(crate) server_url: String,
}

fn store_error(message: String) -> AuthError {
    AuthError::CredentialStoreError(message)
}

#[async_trait::async_trait]
impl CredentialStore for ServerTokens {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(text) = self.store.load(&self.server_url).map_err(store_error)? else {
            return Ok(None);
        };
        // Credentials that no longer read (an older format) are as good as none: the
        // server's challenge leads to a new authorization.
        Ok(serde_json::from_str(&text).ok())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials)
            .map_err(|e| store_error(format!("cannot encode the credentials: {e}")))?;
        self.store
            .save(&self.server_url, &text)
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store.clear(&self.server_url).map_err(store_error)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        // Another process may hold the lock for as long as its refresh takes: waited for
        // on a blocking thread, never on one of the runtime's.
        let store = self.store.clone();
        let server_url = self.server_url.clone();
        let locked = tokio::task::spawn_blocking(move || store.refresh_lock(&server_url))
            .await
            .map_err(|e| store_error(format!("the refresh lock was not taken: {e}")))?;
        Ok(locked
            .map_err(store_error)?
            .map(CredentialRefreshGuard::new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_store_keeps_each_server_and_only_its_owner_reads_it() {
        let dir = std::env::temp_dir().join(format!("pipec-tokens-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = FileTokens::new(dir.join("pipec/credentials.json"));
        let load = |url: &str| store.load(url).expect("the file reads");
        assert_eq!(load("https://a.example/mcp"), None);
        store
            .save("https://a.example/mcp", r#"{"t":"a"}"#)
            .expect("saved");
        store
            .save("https://b.example/mcp", r#"{"t":"b"}"#)
            .expect("saved");
        assert_eq!(
            load("https://a.example/mcp").as_deref(),
            Some(r#"{"t":"a"}"#)
        );
        store.clear("https://a.example/mcp").expect("cleared");
        assert_eq!(load("https://a.example/mcp"), None);
        assert!(load("https://b.example/mcp").is_some());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |path: &Path| {
                std::fs::metadata(path)
                    .expect("it exists")
                    .permissions()
                    .mode()
                    & 0o777
            };
            assert_eq!(mode(store.path()), 0o600);
            assert_eq!(mode(&dir.join("pipec")), 0o700);
        }
        std::fs::write(store.path(), "[1]").expect("written");
        let refused = store
            .load("https://b.example/mcp")
            .expect_err("not a credentials file");
        assert!(
            refused.contains("not a pipec credentials file"),
            "{refused}"
        );
        assert!(!refused.contains("[1]"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
