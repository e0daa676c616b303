//! pipec's side of the reaper: starting it on first need, the list of live groups it
//! watches, unwatching a group once it is gone, and replacing a reaper that died.
//!
//! A spawn holds a shared lock on the current reaper from before the child is started
//! until pipec has added the child's group to its list; replacing the reaper takes the
//! lock exclusively and gives the new one every listed group in its table, so no group
//! registered with the old reaper is missed by the new one. A thread of its own waits for
//! the reaper to exit (reaping it, as its parent) and replaces it at once; a spawn that
//! finds the reaper gone first (its registration write fails) replaces it too.
//!
//! The write end is close-on-exec, so a child holds it only until `exec`; a program
//! embedding pipec that forks without `exec` keeps it, and with it the reaper waiting,
//! until that copy of the program exits.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Mutex, Once, RwLock, RwLockReadGuard};

use super::reaper;

/// The most process groups pipec keeps watched at once; a spawn beyond it is refused.
pub(crate) const LIVE_LIMIT: usize = 16 * 1024;

/// Who a process's reaper is: its pid, and its start time (in clock ticks after boot, from
/// `/proc/<pid>/stat`; 0 where unknown) so that a later process reusing the pid is not
/// taken for it. A run records it in the journal's `started` row of an effect, with
/// pipec's own pid, for [`super::wait_gone`] on resume.
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

struct Reaper {
    id: ReaperId,
    /// pipec's write end of the reaper's pipe (close-on-exec, above descriptor 2).
    write: OwnedFd,
}

impl Reaper {
    /// Whether its pipe still has a reader: a writer polls as an error once the reader
    /// is gone, which happens only when the reaper exits.
    fn is_alive(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.write.as_raw_fd(),
            events: 0,
            revents: 0,
        };
        // SAFETY: poll(2) on one local pollfd, without waiting.
        let r = unsafe { libc::poll(&mut poll, 1, 0) };
        !(r > 0 && poll.revents & (libc::POLLERR | libc::POLLNVAL) != 0)
    }
}

struct Registry {
    reaper: RwLock<Option<Reaper>>,
    /// Each live group and how often it was registered (see `reaper.rs` for why a group
    /// may be registered twice).
    groups: Mutex<BTreeMap<i32, u32>>,
}

static REGISTRY: Registry = Registry {
    reaper: RwLock::new(None),
    groups: Mutex::new(BTreeMap::new()),
};

/// A live reaper, held (shared) while a child is started: the reaper cannot be replaced
/// until the child's group is in pipec's list.
pub(crate) struct Watching {
    guard: RwLockReadGuard<'static, Option<Reaper>>,
}

impl Watching {
    /// The descriptor a child registers its group on.
    pub(crate) fn fd(&self) -> libc::c_int {
        self.guard.as_ref().map_or(-1, |r| r.write.as_raw_fd())
    }

    pub(crate) fn id(&self) -> Option<ReaperId> {
        self.guard.as_ref().map(|r| r.id)
    }

    /// The child registered `group` with the reaper: pipec lists it until the returned
    /// [`Watch`] is dropped, which must happen only once the group is gone.
    pub(crate) fn watched(&self, group: i32) -> Watch {
        let mut groups = REGISTRY.groups.lock().unwrap_or_else(|e| e.into_inner());
        *groups.entry(group).or_insert(0) += 1;
        Watch {
            group,
            reaper: self.guard.as_ref().map(|r| r.id),
        }
    }
}

/// A group the reaper watches. Dropping it tells the reaper the group is gone.
#[derive(Debug)]
pub(crate) struct Watch {
    group: i32,
    /// The reaper the group was registered with; should that one die, its replacement
    /// watches the group.
    pub reaper: Option<ReaperId>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let guard = REGISTRY.reaper.read().unwrap_or_else(|e| e.into_inner());
        {
            let mut groups = REGISTRY.groups.lock().unwrap_or_else(|e| e.into_inner());
            match groups.get_mut(&self.group) {
                Some(count) if *count > 1 => *count -= 1,
                Some(_) => {
                    groups.remove(&self.group);
                }
                None => return,
            }
        }
        // A dead reaper watches nothing; its replacement got the list above.
        if let Some(r) = guard.as_ref() {
            reaper::write_record(r.write.as_raw_fd(), reaper::UNWATCH, self.group);
        }
    }
}

fn unwatched(message: &str) -> io::Error {
    io::Error::other(message.to_string())
}

/// A live reaper to register a child with: the current one, started or replaced if
/// needed. With `expected`, only that reaper will do.
pub(crate) fn watching(expected: Option<&ReaperId>) -> io::Result<Watching> {
    for _ in 0..3 {
        let guard = REGISTRY.reaper.read().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = guard.as_ref()
            && r.is_alive()
        {
            if expected.is_some_and(|e| *e != r.id) {
                return Err(unwatched(
                    "the reaper was replaced after the call was journaled",
                ));
            }
            let live = REGISTRY
                .groups
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len();
            if live >= LIVE_LIMIT {
                return Err(unwatched(&format!(
                    "{live} process groups are running, the most pipec watches at once"
                )));
            }
            return Ok(Watching { guard });
        }
        drop(guard);
        replace()?;
        if expected.is_some() {
            return Err(unwatched(
                "the reaper died after the call was journaled; a new one was started",
            ));
        }
    }
    Err(unwatched("the reaper keeps dying"))
}

/// This process's reaper, started if there is none and replaced if it died.
pub(crate) fn current() -> io::Result<ReaperId> {
    let watching = watching(None)?;
    watching
        .id()
        .ok_or_else(|| unwatched("no reaper could be started"))
}

/// Starts a reaper if there is none alive: the first, or the replacement of one that
/// died (another thread may have replaced it already). A live reaper is never replaced:
/// without its write end it would read end-of-file and kill every group it watches.
pub(crate) fn replace() -> io::Result<()> {
    let mut state = REGISTRY.reaper.write().unwrap_or_else(|e| e.into_inner());
    if state.as_ref().is_some_and(Reaper::is_alive) {
        return Ok(());
    }
    // With the lock held exclusively no spawn is under way and no group is unwatched, so
    // the list is complete and stays so until the new reaper is in place.
    let live: Vec<(i32, u32)> = REGISTRY
        .groups
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(g, c)| (*g, *c))
        .collect();
    let (read, write) = pipe_above_stdio()?;
    let pid = reaper::fork(read, &live)?;
    let start_time = super::proc_stat::read(pid)
        .map(|s| s.start_time)
        .unwrap_or(0);
    // The old reaper's write end closes here; it is gone already.
    *state = Some(Reaper {
        id: ReaperId {
            pid: pid as u32,
            start_time,
        },
        write,
    });
    drop(state);
    start_monitor();
    Ok(())
}

/// A close-on-exec pipe whose ends are both above descriptor 2: a child moves its stdio
/// pipes onto 0, 1 and 2 before it registers (on the fork path), which must not replace
/// the reaper's pipe.
fn pipe_above_stdio() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = std::io::pipe()?;
    Ok((
        super::stdio::above_stdio(OwnedFd::from(r))?,
        super::stdio::above_stdio(OwnedFd::from(w))?,
    ))
}

/// Starts, once, the thread that waits for the reaper to exit and replaces it.
fn start_monitor() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let _ = std::thread::Builder::new()
            .name("pipec-reaper-watch".into())
            .stack_size(256 * 1024)
            .spawn(monitor);
    });
}

fn monitor() {
    // The reaper this thread reaped last: its pid may be reused by another child of
    // pipec's, which must not be waited for here.
    let mut reaped: Option<ReaperId> = None;
    loop {
        let current = REGISTRY
            .reaper
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|r| r.id);
        if let Some(id) = current
            && reaped != Some(id)
        {
            if wait_for_exit(id.pid) {
                reaped = Some(id);
            } else {
                // Not ours to wait for (a program embedding pipec reaps every child, or
                // ignores SIGCHLD): look now and then instead.
                std::thread::sleep(std::time::Duration::from_millis(500));
                let alive = REGISTRY
                    .reaper
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .is_some_and(Reaper::is_alive);
                if alive {
                    continue;
                }
            }
        }
        // Gone (or never started): a new one, or shortly another try.
        if replace().is_err() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Waits for the reaper `pid`, pipec's child, to exit and reaps it; false if it cannot be
/// waited for.
fn wait_for_exit(pid: u32) -> bool {
    let mut status = 0;
    loop {
        // SAFETY: waitpid(2) on pipec's own child, the reaper; it writes only `status`.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, 0) };
        // SAFETY: reads this thread's errno.
        if r < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        return r > 0;
    }
}
