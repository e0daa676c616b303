//! The kernel's word on which files changed (Linux inotify), so following subscribed
//! files costs what changes rather than what is subscribed: a folder is watched once for
//! every followed file in it, and each event names the entry it is about.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use tokio::io::unix::AsyncFd;

/// What happens to a folder or an entry of it that may change a followed file: its
/// content or metadata changed, it was made, removed or renamed, or the folder itself
/// went away.
const MASK: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

/// One event: the watch it came from and, for an entry of the folder, its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub watch: i32,
    pub name: Option<OsString>,
    /// The kernel dropped events: anything may have changed.
    pub overflow: bool,
    /// The folder itself is gone or moved, and its watch with it.
    pub gone: bool,
}

/// An inotify instance, read without blocking.
pub(crate) struct Inotify {
    file: File,
}

impl Inotify {
    pub(crate) fn new() -> io::Result<Inotify> {
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and is owned by nothing else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Inotify {
            file: File::from(owned),
        })
    }

    /// Watches the folder `dir`; watching one folder twice (by any path to it) gives
    /// the same watch.
    pub(crate) fn watch(&self, dir: &Path) -> io::Result<i32> {
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
        // SAFETY: the descriptor is ours and open; `path` is NUL-terminated and lives
        // across the call, which only reads it.
        let wd = unsafe { libc::inotify_add_watch(self.file.as_raw_fd(), path.as_ptr(), MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    pub(crate) fn unwatch(&self, watch: i32) {
        // SAFETY: the descriptor is ours and open; an unknown watch is an error the
        // kernel reports and nothing else.
        unsafe { libc::inotify_rm_watch(self.file.as_raw_fd(), watch) };
    }

    /// The events waiting, without blocking; empty when there are none.
    pub(crate) fn read(&self) -> io::Result<Vec<Event>> {
        let mut events = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match (&self.file).read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(events),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok(events);
            }
            parse(&buf[..n], &mut events);
        }
    }
}

/// `inotify` registered with tokio, to wait until events are there to read.
pub(crate) fn readiness(inotify: Arc<Inotify>) -> io::Result<AsyncFd<Arc<Inotify>>> {
    // SAFETY: the descriptor is the `Inotify`'s own, which the `Arc` keeps open for as
    // long as the registration lives; it is never closed or replaced meanwhile.
    unsafe { Ok(AsyncFd::register(inotify)?) }
}

impl AsRawFd for Inotify {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// The events of one read: each a fixed header (watch, mask, cookie, name length) and
/// a NUL-padded name.
fn parse(bytes: &[u8], events: &mut Vec<Event>) {
    const HEADER: usize = 16;
    let word = |at: usize| -> u32 {
        let mut four = [0u8; 4];
        four.copy_from_slice(&bytes[at..at + 4]);
        u32::from_ne_bytes(four)
    };
    let mut at = 0;
    while at + HEADER <= bytes.len() {
        let watch = word(at) as i32;
        let mask = word(at + 4);
        let len = word(at + 12) as usize;
        let end = (at + HEADER + len).min(bytes.len());
        let raw = &bytes[at + HEADER..end];
        let name = raw.split(|b| *b == 0).next().filter(|n| !n.is_empty());
        events.push(Event {
            watch,
            name: name.map(|n| OsStr::from_bytes(n).to_os_string()),
            overflow: mask & libc::IN_Q_OVERFLOW != 0,
            gone: mask & (libc::IN_IGNORED | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0,
        });
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_in_a_watched_folder_names_its_file() {
        let dir = std::env::temp_dir().join(format!("pipec-inotify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let inotify = Inotify::new().unwrap_or_else(|e| panic!("{e}"));
        let watch = inotify.watch(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inotify.read().unwrap_or_else(|e| panic!("{e}")), vec![]);
        std::fs::write(dir.join("a.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
        let events = inotify.read().unwrap_or_else(|e| panic!("{e}"));
        assert!(!events.is_empty());
        assert!(
            events
                .iter()
                .all(|e| e.watch == watch && e.name.as_deref() == Some(OsStr::new("a.txt"))),
            "{events:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        let events = inotify.read().unwrap_or_else(|e| panic!("{e}"));
        assert!(events.iter().any(|e| e.gone), "{events:?}");
    }

    #[test]
    fn a_file_is_not_a_folder_to_watch() {
        let inotify = Inotify::new().unwrap_or_else(|e| panic!("{e}"));
        assert!(inotify.watch(Path::new("/proc/self/status")).is_err());
    }
}
