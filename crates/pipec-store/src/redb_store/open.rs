//! Opening a store file: creating it, opening an existing one to write or to read only,
//! recording and checking its format, and turning redb's open errors into store errors.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use redb::{
    Builder, ConcurrencyMode, Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
    ReadableTable, TableHandle,
};

use super::contain::Health;
use super::store_thread::{Job, store_thread};
use super::tables::*;
use super::{Handle, Inner, RedbStore, io};
use crate::StoreError;

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

/// Every table a store of this format has.
const TABLE_NAMES: [&str; 11] = [
    "meta",
    "plans",
    "threads",
    "by_status",
    "nodes",
    "items",
    "calls",
    "gates",
    "attempts",
    "events",
    "fences",
];

/// How many more times a read-only open that found the file unfinished makes the
/// change and looks again (25 ms apart).
const READ_ONLY_TRIES: u32 = 40;

fn multi_writer() -> Builder {
    let mut builder = Builder::new();
    builder.set_concurrency_mode(ConcurrencyMode::MultiWriter);
    builder.set_cache_size(64 * 1024 * 1024);
    builder
}

/// Refuses a path where there is no store (nothing is created there).
pub(super) fn require_store_file(path: &Path) -> Result<(), StoreError> {
    let missing = || StoreError::Missing {
        store: path.display().to_string(),
    };
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(missing()),
        Ok(m) if m.len() == 0 => Err(StoreError::Corrupt {
            what: format!("{} is empty, not a pipec store", path.display()),
        }),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(missing()),
        Err(e) => Err(StoreError::Io(format!(
            "cannot read {}: {e}",
            path.display()
        ))),
    }
}

/// How a read-only open went.
enum ReadOnlyOpen {
    Ready(ReadOnlyDatabase),
    /// The last process that wrote the file died in the middle, and no process that has
    /// it open will repair it; redb reads it only after a repair, which writes.
    Unclean,
    /// Written by a pipec that recorded an older format (or none), so tables may be
    /// missing; `store migrate` (or any writing command) upgrades it.
    OlderFormat(u32),
}

fn try_read_only(path: &Path, health: &Health) -> Result<ReadOnlyOpen, StoreError> {
    health.run("opening", || match multi_writer().open_read_only(path) {
        Ok(db) => {
            let txn = db.begin_read().map_err(io)?;
            let found = read_format(&txn)?;
            if found > STORE_FORMAT {
                return Err(StoreError::NewerFormat {
                    found,
                    supported: STORE_FORMAT,
                });
            }
            let names: Vec<String> = txn
                .list_tables()
                .map_err(io)?
                .map(|t| t.name().to_string())
                .collect();
            let complete = TABLE_NAMES.iter().all(|n| names.iter().any(|m| m == n));
            drop(txn);
            if found < STORE_FORMAT || !complete {
                return Ok(ReadOnlyOpen::OlderFormat(found));
            }
            Ok(ReadOnlyOpen::Ready(db))
        }
        Err(redb::DatabaseError::RepairAborted) => Ok(ReadOnlyOpen::Unclean),
        Err(e) => Err(db_error(path, e)),
    })
}

impl RedbStore {
    /// Opens the store at `path`, creating it (and its folder) when there is none; what
    /// `pipec run` does.
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Io(format!("cannot create {}: {e}", dir.display())))?;
        }
        remove_abandoned_creations(&path);
        if path.exists() {
            require_store_file(&path)?;
        } else {
            create_in_place(&path)?;
        }
        open_writable(path)
    }

    /// Opens an existing store to read and write. A path with no store is refused
    /// (`StoreError::Missing`) and nothing is created there.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        require_store_file(&path)?;
        open_writable(path)
    }

    /// Opens an existing store to read only: the file does not change (its bytes and
    /// its modification time), a read-only file or mount works, and processes that write
    /// it meanwhile go on (their commits become visible to later reads). The writes of
    /// the `Store` trait are refused with `StoreError::ReadOnly`.
    ///
    /// Two states of a file can be read only after a change that writes: a file whose
    /// last writer died mid-way (redb repairs it), and a file of an older format (its
    /// tables are created). The store makes that change first when it can write the
    /// file, as any writing command would, and refuses with `R0410` when it cannot.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        require_store_file(&path)?;
        let health = Arc::new(Health::new(&path));
        let db = match try_read_only(&path, &health)? {
            ReadOnlyOpen::Ready(db) => db,
            first => {
                let why = match first {
                    ReadOnlyOpen::OlderFormat(v) => {
                        format!("has store format {v}, and this pipec reads format {STORE_FORMAT}")
                    }
                    _ => {
                        "was left unfinished by a process that stopped while writing it".to_string()
                    }
                };
                // Any writing open makes the change (a repair, the tables of this format).
                // Another process may be opening the file for writing at the same moment
                // (a worker starting after one died mid-write), and until it is done the
                // file still reads as unfinished: the open is tried again for a moment.
                let mut tries = 0;
                loop {
                    drop(
                        open_writable(path.clone()).map_err(|e| StoreError::Corrupt {
                            what: format!(
                                "{} {why}; reading it needs a change that needs write access ({e})",
                                path.display()
                            ),
                        })?,
                    );
                    match try_read_only(&path, &health)? {
                        ReadOnlyOpen::Ready(db) => break db,
                        _ if tries < READ_ONLY_TRIES => {
                            tries += 1;
                            std::thread::sleep(std::time::Duration::from_millis(25));
                        }
                        _ => {
                            return Err(StoreError::Corrupt {
                                what: format!(
                                    "{} {why}, and opening it did not fix that",
                                    path.display()
                                ),
                            });
                        }
                    }
                }
            }
        };
        Ok(RedbStore {
            inner: Arc::new(Inner {
                path,
                health,
                wake_seen: Mutex::default(),
                handle: Some(Handle::ReadOnly { db: Arc::new(db) }),
            }),
        })
    }

    /// The store format recorded in the file (0: none).
    pub fn format_of(path: &Path) -> Result<u32, StoreError> {
        require_store_file(path)?;
        let health = Health::new(path);
        match try_read_only(path, &health)? {
            ReadOnlyOpen::Ready(_) => Ok(STORE_FORMAT),
            ReadOnlyOpen::OlderFormat(v) => Ok(v),
            ReadOnlyOpen::Unclean => health.run("opening", || {
                let db = multi_writer().open(path).map_err(|e| db_error(path, e))?;
                let txn = db.begin_read().map_err(io)?;
                read_format(&txn)
            }),
        }
    }
}

/// Makes a new, empty store at `path` in one step: it is written whole under a name of
/// its own beside `path`, and only then linked to `path`, so a process killed while
/// creating it leaves no half-made file where the store belongs (the next `run` would
/// refuse it as damaged). When another process linked its store first, that one is kept.
fn create_in_place(path: &Path) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".to_string());
    let fresh = dir.join(format!(".{name}.creating-{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let made = (|| {
        let health = Health::new(&fresh);
        let db = health.run("creating", || {
            multi_writer()
                .create(&fresh)
                .map_err(|e| db_error(&fresh, e))
        })?;
        health.run("creating", || init(&db))?;
        drop(db);
        std::fs::File::open(&fresh)
            .and_then(|f| f.sync_all())
            .map_err(|e| StoreError::Io(format!("cannot write {}: {e}", fresh.display())))?;
        match std::fs::hard_link(&fresh, path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(StoreError::Io(format!(
                    "cannot create {}: {e}",
                    path.display()
                )));
            }
        }
        // The link is durable once the folder is.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&fresh);
    made
}

/// Removes the names left by processes that died while creating the store at `path`
/// (a half-made file, or a second name of the finished one).
fn remove_abandoned_creations(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = format!(".{}.creating-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() as i32 && !process_exists(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn process_exists(pid: i32) -> bool {
    // Signal 0 checks that the process exists without sending anything.
    #[allow(unsafe_code)]
    // SAFETY: kill with signal 0 has no effect on the target; it only reports whether
    // the pid names a process this one could signal.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Opens an existing file to write, with its store thread; brings an older format's
/// tables up to date.
fn open_writable(path: PathBuf) -> Result<RedbStore, StoreError> {
    let health = Arc::new(Health::new(&path));
    let db = health.run("opening", || {
        multi_writer().open(&path).map_err(|e| db_error(&path, e))
    })?;
    let db = Arc::new(db);
    if let Err(e) = health.run("opening", || init(&db)) {
        if health.is_broken() {
            // See `Drop for Inner`.
            std::mem::forget(db);
        }
        return Err(e);
    }
    let (tx, rx) = mpsc::channel::<Job>();
    let (thread_db, thread_health) = (db.clone(), health.clone());
    let thread = std::thread::Builder::new()
        .name("pipec-store".into())
        .spawn(move || store_thread(thread_db, thread_health, rx))
        .map_err(io)?;
    Ok(RedbStore {
        inner: Arc::new(Inner {
            path,
            health,
            wake_seen: Mutex::default(),
            handle: Some(Handle::Writable {
                db,
                jobs: Mutex::new(tx),
                store_thread: Some(thread),
            }),
        }),
    })
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
        txn.open_table(HEALS).map_err(io)?;
    }
    txn.commit().map_err(io)
}
