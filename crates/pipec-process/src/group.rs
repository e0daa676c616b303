//! Ending a child's process group: SIGKILL to the whole group, repeated until no process of
//! it is live (zombies aside, see `proc_stat`), within a bound; then the reaper stops
//! watching it. A group is only ever unwatched after this, so a live pipec never leaves a
//! group behind that the reaper does not know.

use std::time::{Duration, Instant};

use super::watch::Watch;

/// How long pipec keeps killing a group before it lets go of it. A process that outlives
/// SIGKILL this long is stuck in the kernel with the signal pending: it never runs user
/// code again, so forgetting it cannot let an effect through.
pub(crate) const GONE_LIMIT: Duration = Duration::from_secs(2);

/// Sends SIGKILL to every process of group `group`; whether the group had any process.
pub(crate) fn kill(group: i32) -> bool {
    if group <= 0 {
        return false;
    }
    // SAFETY: kill(2) with a negative pid signals a process group; no memory effects.
    let r = unsafe { libc::kill(-group, libc::SIGKILL) };
    // `last_os_error` only reads errno: safe in the reaper after `fork` too.
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Kills `group` until none of its processes is live, or `limit` has passed; whether it is
/// gone. The usual case (the leader reaped, nothing left) costs one system call.
pub(crate) async fn kill_until_gone(group: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        if !kill(group) || !has_live_members(group) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// [`kill_until_gone`] for a thread outside the runtime.
pub(crate) fn kill_until_gone_blocking(group: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        if !kill(group) || !has_live_members(group) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Kills `group` now and, off this thread, until it is gone; then drops `watch` (the
/// reaper stops watching the group). For a child dropped before its end: a timeout or a
/// cancelled attempt drops the future that ran it.
pub(crate) fn end_in_background(group: i32, watch: Option<Watch>) {
    if !kill(group) {
        drop(watch);
        return;
    }
    // Should the waiting never finish (the runtime shuts down first, or no thread can be
    // had), the watch is kept rather than dropped: the reaper then kills the group when
    // pipec ends, the safe way to fail.
    let watch = std::mem::ManuallyDrop::new(watch);
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            kill_until_gone(group, GONE_LIMIT).await;
            drop(std::mem::ManuallyDrop::into_inner(watch));
        });
        return;
    }
    let _ = std::thread::Builder::new()
        .name("pipec-group-end".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            kill_until_gone_blocking(group, GONE_LIMIT);
            drop(std::mem::ManuallyDrop::into_inner(watch));
        });
}

/// Whether a process of `group` can still run (zombies cannot).
#[cfg(target_os = "linux")]
fn has_live_members(group: i32) -> bool {
    super::proc_stat::group_has_live_members(group)
}

/// Without `/proc`, as `kill(-group, 0)` sees it (zombies included).
#[cfg(not(target_os = "linux"))]
fn has_live_members(group: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; no memory effects.
    let r = unsafe { libc::kill(-group, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Ends this process as `kill -9` would: at once, no destructor, no flush, no handler.
/// Its children that pipec started go with it (their reaper kills their groups).
pub fn kill_self() -> ! {
    // SAFETY: kill(2) with this process's own id; SIGKILL cannot be caught.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // SIGKILL to oneself is delivered before kill(2) returns; nothing runs past it.
    loop {
        std::thread::park();
    }
}
