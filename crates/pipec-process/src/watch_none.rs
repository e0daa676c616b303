//! Where pipec has no reaper (systems other than Linux): children start unwatched, and the
//! identity of a reaper is never asked for.

use std::io;

/// Who a process's reaper is (see the Linux version); never produced here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReaperId {
    pub pid: u32,
    pub start_time: u64,
}

impl std::fmt::Display for ReaperId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "reaper pid {} (start time {})",
            self.pid, self.start_time
        )
    }
}

/// Never constructed: there is no reaper to hold.
pub(crate) struct Watching(());

impl Watching {
    pub fn fd(&self) -> libc::c_int {
        -1
    }

    pub fn watched(&self, _group: i32) -> Watch {
        Watch { reaper: None }
    }
}

/// Nothing to unwatch.
#[derive(Debug)]
pub(crate) struct Watch {
    pub reaper: Option<ReaperId>,
}

pub(crate) fn current() -> io::Result<ReaperId> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "pipec has a reaper on Linux only",
    ))
}
