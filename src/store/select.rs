//! Which store a location names: a `postgres://` (or `postgresql://`) URL is a
//! PostgreSQL database, anything else the path of a redb file (the default). Every
//! command opens its store through [`open`].

use std::sync::Arc;

use super::{PgOpen, PostgresStore, RedbStore, Store, StoreError, is_postgres_url, redact};

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
        let open = match mode {
            OpenMode::Create => PgOpen::Create,
            OpenMode::Existing | OpenMode::Read => PgOpen::Existing,
        };
        return Ok(Arc::new(PostgresStore::connect(location, open)?));
    }
    Ok(match mode {
        OpenMode::Create => Arc::new(RedbStore::open(location)?),
        OpenMode::Existing => Arc::new(RedbStore::open_existing(location)?),
        OpenMode::Read => Arc::new(RedbStore::open_read_only(location)?),
    })
}
