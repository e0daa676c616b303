//! Containing redb's panics. redb reports some damage to a file by panicking (in debug
//! builds every "unreachable" state does; in release builds an index out of range can),
//! so every call into redb runs inside [`Health::run`]: a panic becomes `R0410` naming
//! the file, and the store is marked broken, so that every later call fails the same way
//! instead of touching redb's half-updated state again (its handle is then never dropped,
//! as dropping it would run redb's shutdown on that state).
//!
//! `catch_unwind` does not stop the panic hook, which prints the panic and a backtrace
//! before unwinding begins. [`quiet_contained_panics`] installs a hook that stays silent
//! for a panic raised inside a contained call on the same thread and hands every other
//! panic to the hook it replaced, so a panic anywhere else still prints as before. The
//! command line installs it first thing; a program that embeds pipec may call it too.

use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::StoreError;

thread_local! {
    /// How many contained calls are running on this thread (they may nest).
    static CONTAINED: Cell<u32> = const { Cell::new(0) };
}

/// Makes the panic hook silent for panics that a store call contains; every other panic
/// goes to the hook that was installed before. Installing it twice has no effect.
pub fn quiet_contained_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CONTAINED.with(Cell::get) == 0 {
                previous(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into the first line of its message.
pub(super) fn contained<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    CONTAINED.with(|c| c.set(c.get() + 1));
    let result = std::panic::catch_unwind(AssertUnwindSafe(f));
    CONTAINED.with(|c| c.set(c.get().saturating_sub(1)));
    result.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        message.lines().next().unwrap_or_default().to_string()
    })
}

/// The error of a store whose file made redb panic.
pub(super) fn damaged(path: &Path, doing: &str, message: &str) -> StoreError {
    StoreError::Corrupt {
        what: format!(
            "{} is damaged: redb stopped while {doing} ({message})",
            path.display()
        ),
    }
}

/// Whether an open store is still usable; shared by its handle, its store thread and its
/// reads.
#[derive(Debug)]
pub(super) struct Health {
    path: PathBuf,
    broken: AtomicBool,
}

impl Health {
    pub(super) fn new(path: &Path) -> Health {
        Health {
            path: path.to_path_buf(),
            broken: AtomicBool::new(false),
        }
    }

    pub(super) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// What every call of a broken store answers.
    pub(super) fn broken_error(&self) -> StoreError {
        StoreError::Corrupt {
            what: format!(
                "{} is damaged: an earlier read or write of it failed inside redb",
                self.path.display()
            ),
        }
    }

    /// The error, naming this store's file.
    pub(super) fn locate(&self, e: StoreError) -> StoreError {
        locate(e, &self.path)
    }

    /// Runs a call into redb: its error, or `R0410` if it panicked (which breaks the
    /// store for good), and errors of decoding made to name the file.
    pub(super) fn run<T>(
        &self,
        doing: &str,
        f: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if self.is_broken() {
            return Err(self.broken_error());
        }
        match contained(f) {
            Ok(result) => result.map_err(|e| locate(e, &self.path)),
            Err(message) => {
                self.broken.store(true, Ordering::Release);
                Err(damaged(&self.path, doing, &message))
            }
        }
    }
}

/// Makes an error name the store file it concerns.
pub(super) fn locate(e: StoreError, path: &Path) -> StoreError {
    let file = path.display().to_string();
    match e {
        StoreError::Corrupt { what } if !what.contains(&file) => StoreError::Corrupt {
            what: format!("{file}: {what}"),
        },
        StoreError::Io(what) if !what.contains(&file) => StoreError::Io(format!("{file}: {what}")),
        StoreError::NotFound { thread, store } if store.is_empty() => StoreError::NotFound {
            thread,
            store: file,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contained_panic_breaks_the_store_and_later_calls_fail_alike() {
        quiet_contained_panics();
        let health = Health::new(Path::new("/tmp/x.redb"));
        let err = health
            .run("reading", || -> Result<(), StoreError> {
                panic!("entered unreachable code: page type 0")
            })
            .expect_err("contained");
        let text = err.to_string();
        assert!(
            text.contains("/tmp/x.redb") && text.contains("entered unreachable code"),
            "{text}"
        );
        assert!(health.is_broken());
        let later = health.run("reading", || Ok(1)).expect_err("broken");
        assert!(later.to_string().contains("/tmp/x.redb"), "{later}");
        assert_eq!(CONTAINED.with(Cell::get), 0, "the depth is restored");
    }

    #[test]
    fn errors_name_the_file_once() {
        let path = Path::new("/s/runs.redb");
        let e = locate(
            StoreError::Corrupt {
                what: "thread X: bad".into(),
            },
            path,
        );
        assert_eq!(
            e.to_string(),
            "the store cannot be read: /s/runs.redb: thread X: bad"
        );
        let again = locate(e.clone(), path);
        assert_eq!(again, e);
    }
}
