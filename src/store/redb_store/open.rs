//! Opening a store file: creating it, recording and checking its format, and turning
//! redb's open errors into store errors.

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};

use redb::{Builder, ConcurrencyMode, Database, ReadTransaction, ReadableDatabase, ReadableTable};

use super::store_thread::{Job, store_thread};
use super::tables::*;
use super::{Inner, RedbStore, io};
use crate::store::StoreError;

pub(super) fn db_error(path: &Path, e: redb::DatabaseError) -> StoreError {
    match e {
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(what)) => StoreError::Corrupt {
            what: format!("{} is corrupt: {what}", path.display()),
        },
        redb::DatabaseError::Storage(redb::StorageError::Io(e))
            if e.kind() == std::io::ErrorKind::InvalidData
                || e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            StoreError::Corrupt {
                what: format!(
                    "{} is not a pipec store or is truncated: {e}",
                    path.display()
                ),
            }
        }
        redb::DatabaseError::UpgradeRequired(v) => StoreError::Corrupt {
            what: format!(
                "{} was written by an older redb (file format {v})",
                path.display()
            ),
        },
        other => StoreError::Corrupt {
            what: format!("{}: {other}", path.display()),
        },
    }
}

impl RedbStore {
    /// Opens (or creates) the store at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        if path.exists() {
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if len == 0 {
                return Err(StoreError::Corrupt {
                    what: format!("{} is empty, not a pipec store", path.display()),
                });
            }
        }
        let mut builder = Builder::new();
        builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
        builder.set_cache_size(64 * 1024 * 1024);
        // redb reports some damaged files by panicking deep inside; contain that.
        let opened =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.create(&path)));
        let db = match opened {
            Ok(Ok(db)) => db,
            Ok(Err(e)) => return Err(db_error(&path, e)),
            Err(_) => {
                return Err(StoreError::Corrupt {
                    what: format!("{} is not a pipec store or is damaged", path.display()),
                });
            }
        };
        let db = Arc::new(db);
        init(&db)?;
        let (tx, rx) = mpsc::channel::<Job>();
        let thread_db = db.clone();
        std::thread::Builder::new()
            .name("pipec-store".into())
            .spawn(move || store_thread(thread_db, rx))
            .map_err(io)?;
        Ok(RedbStore {
            inner: Arc::new(Inner {
                db,
                path,
                jobs: Mutex::new(tx),
            }),
        })
    }

    /// The store format recorded in the file.
    pub fn format_of(path: &Path) -> Result<u32, StoreError> {
        let mut builder = Builder::new();
        builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
        let db = builder.open(path).map_err(|e| db_error(path, e))?;
        let txn = db.begin_read().map_err(io)?;
        read_format(&txn)
    }
}

pub(super) fn read_format(txn: &ReadTransaction) -> Result<u32, StoreError> {
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(io(e)),
    };
    let v = meta.get("store_format").map_err(io)?;
    Ok(v.and_then(|g| {
        std::str::from_utf8(g.value())
            .ok()
            .and_then(|s| s.parse().ok())
    })
    .unwrap_or(0))
}

/// Creates the tables and records the format; refuses a newer format.
pub(super) fn init(db: &Database) -> Result<(), StoreError> {
    {
        let txn = db.begin_read().map_err(io)?;
        let found = read_format(&txn)?;
        if found > STORE_FORMAT {
            return Err(StoreError::NewerFormat {
                found,
                supported: STORE_FORMAT,
            });
        }
        if found == STORE_FORMAT {
            return Ok(());
        }
    }
    let txn = db.begin_write().map_err(io)?;
    {
        let mut meta = txn.open_table(META).map_err(io)?;
        let existing = meta.get("store_format").map_err(io)?.and_then(|g| {
            std::str::from_utf8(g.value())
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
        });
        match existing {
            Some(v) if v > STORE_FORMAT => {
                return Err(StoreError::NewerFormat {
                    found: v,
                    supported: STORE_FORMAT,
                });
            }
            Some(_) => {}
            None => {
                meta.insert("store_format", STORE_FORMAT.to_string().as_bytes())
                    .map_err(io)?;
                meta.insert(
                    "created_by",
                    format!("pipec {}", env!("CARGO_PKG_VERSION")).as_bytes(),
                )
                .map_err(io)?;
                meta.insert("redb", b"4.6 multi-writer".as_slice())
                    .map_err(io)?;
            }
        }
        txn.open_table(PLANS).map_err(io)?;
        txn.open_table(THREADS).map_err(io)?;
        txn.open_table(BY_STATUS).map_err(io)?;
        txn.open_table(NODES).map_err(io)?;
        txn.open_table(ITEMS).map_err(io)?;
        txn.open_table(CALLS).map_err(io)?;
        txn.open_table(GATES).map_err(io)?;
        txn.open_table(ATTEMPTS).map_err(io)?;
        txn.open_table(EVENTS).map_err(io)?;
        txn.open_table(FENCES).map_err(io)?;
    }
    txn.commit().map_err(io)
}
