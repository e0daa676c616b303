//! Thread locks: one lock file per thread beside the store, held with an OS lock
//! (`flock`) for as long as a process works on the thread. The kernel releases it when
//! the process dies, even by `kill -9`, so a dead holder never blocks a resume.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A held thread lock; dropping it releases the lock.
#[derive(Debug)]
pub struct ThreadLock {
    _file: File,
    pub path: PathBuf,
}

pub fn locks_dir(store: &Path) -> PathBuf {
    let mut name = store
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".locks");
    store.with_file_name(name)
}

fn lock_path(store: &Path, thread: &str) -> PathBuf {
    locks_dir(store).join(format!("{thread}.lock"))
}

/// Takes a thread's lock, trying for up to `wait` (a lister's brief probe must not look
/// like a holder). `Ok(None)` means another live process holds it.
pub fn try_lock(store: &Path, thread: &str, wait: Duration) -> std::io::Result<Option<ThreadLock>> {
    let dir = locks_dir(store);
    std::fs::create_dir_all(&dir)?;
    let path = lock_path(store, thread);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    let start = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(ThreadLock { _file: file, path })),
            Err(TryLockError::WouldBlock) => {
                if start.elapsed() >= wait {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// Whether a live process holds the thread's lock (a non-blocking probe).
pub fn is_locked(store: &Path, thread: &str) -> bool {
    let path = lock_path(store, thread);
    // Opened to read: a probe must work on a read-only copy of a store, too.
    let Ok(file) = OpenOptions::new().read(true).open(&path) else {
        return false;
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(_) => true,
    }
}

/// Removes a terminal thread's lock file (only `prune` does this).
pub fn remove(store: &Path, thread: &str) {
    let _ = std::fs::remove_file(lock_path(store, thread));
}
