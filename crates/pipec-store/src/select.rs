//! Which store a location names: a `postgres://` (or `postgresql://`) URL is a
//! PostgreSQL database, anything else the path of a redb file (the default). Every
//! command opens its store through [`open`].

use std::sync::Arc;

#[cfg(feature = "postgres")]
use super::{PgOpen, PostgresStore};
use super::{RedbStore, Store, StoreError};

/// What a command needs of its store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the store when there is none (`pipec run`).
    Create,
    /// An existing store, to write (`answer`, `cancel`, `resume`, `prune`).
    Existing,
    /// An existing store, to read (`runs`, `show`). A redb file does not change; a
    /// database is only read.
    Read,
}

/// A store location as every message, hint and listing shows it: a path as it is, a
/// database URL without its password.
pub fn shown(location: &str) -> String {
    if is_postgres_url(location) {
        redact(location)
    } else {
        location.to_string()
    }
}

/// Opens the store at `location` (a path or a `postgres://` URL).
pub fn open(location: &str, mode: OpenMode) -> Result<Arc<dyn Store>, StoreError> {
    if is_postgres_url(location) {
        #[cfg(feature = "postgres")]
        {
            let open = match mode {
                OpenMode::Create => PgOpen::Create,
                OpenMode::Existing | OpenMode::Read => PgOpen::Existing,
            };
            return Ok(Arc::new(PostgresStore::connect(location, open)?));
        }
        #[cfg(not(feature = "postgres"))]
        return Err(StoreError::Io(format!(
            "{}: this build of pipec has no PostgreSQL stores (the `postgres` feature)",
            redact(location)
        )));
    }
    Ok(match mode {
        OpenMode::Create => Arc::new(RedbStore::open(location)?),
        OpenMode::Existing => Arc::new(RedbStore::open_existing(location)?),
        OpenMode::Read => Arc::new(RedbStore::open_read_only(location)?),
    })
}

/// Whether a store location names a PostgreSQL database.
pub fn is_postgres_url(location: &str) -> bool {
    let lower = location.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The URL with its password replaced by `***` (in the user part and in a `password=`
/// parameter), as every message, event and listing shows it.
pub fn redact(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        // Not a URL we can take apart: keep only the scheme.
        let scheme = url.split("://").next().unwrap_or("postgres");
        return format!("{scheme}://***");
    };
    // Nothing to hide: the URL as it was written, not as the parser writes it again.
    if password_of(url).is_none() {
        return url.to_string();
    }
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| {
            let v = if k.eq_ignore_ascii_case("password") {
                "***".to_string()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    if !pairs.is_empty() {
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// The password a URL carries, to scrub it from any text an error brings back.
pub fn password_of(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    if let Some(p) = parsed.password() {
        let decoded = percent_encoding::percent_decode_str(p).decode_utf8_lossy();
        if !decoded.is_empty() {
            return Some(decoded.into_owned());
        }
    }
    parsed
        .query_pairs()
        .find(|(k, _)| k.eq_ignore_ascii_case("password"))
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
}
