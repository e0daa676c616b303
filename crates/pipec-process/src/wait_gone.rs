//! Whether the process groups a pipec process left behind are gone, for a process that
//! takes over its work (a resume after a crash): the reaper recorded with the work is
//! waited for until it has finished killing them.

use std::time::{Duration, Instant};

use super::ReaperId;

/// The reaper is still running, neither with its owner nor exited, when the time was up:
/// what its owner started may still be running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StillRunning {
    pub reaper: ReaperId,
    pub waited: Duration,
}

impl std::fmt::Display for StillRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {} of a pipec that died is still killing what that pipec started, after {} ms",
            self.reaper,
            self.waited.as_millis()
        )
    }
}

impl std::error::Error for StillRunning {}

/// Waits until the children that the pipec with pid `owner_pid` started, watched by
/// `reaper`, can no longer run. Returns at once when
/// - no process with the reaper's pid and start time exists (it is gone, and it exits
///   only after the groups it watched are gone), or it has exited (a zombie), or
/// - the reaper's parent is still `owner_pid`: the owner is alive, and as it let go of
///   the work (a resume can take the thread only then) it ended every group it started
///   for it.
///
/// Otherwise the owner died and its reaper is still killing: this waits until the reaper
/// has exited, up to `timeout`.
pub async fn wait_gone(
    reaper: &ReaperId,
    owner_pid: u32,
    timeout: Duration,
) -> Result<(), StillRunning> {
    let started = Instant::now();
    loop {
        if is_done(reaper, owner_pid) {
            return Ok(());
        }
        let waited = started.elapsed();
        if waited >= timeout {
            return Err(StillRunning {
                reaper: *reaper,
                waited,
            });
        }
        tokio::time::sleep(Duration::from_millis(5).min(timeout - waited)).await;
    }
}

#[cfg(target_os = "linux")]
fn is_done(reaper: &ReaperId, owner_pid: u32) -> bool {
    let Ok(pid) = i32::try_from(reaper.pid) else {
        return true;
    };
    match super::proc_stat::read(pid) {
        None => true,
        Some(stat) if reaper.start_time != 0 && stat.start_time != reaper.start_time => true,
        Some(stat) if !stat.is_live() => true,
        Some(stat) => u32::try_from(stat.ppid).is_ok_and(|p| p == owner_pid),
    }
}

/// Without a reaper (other systems) there is nothing to wait for.
#[cfg(not(target_os = "linux"))]
fn is_done(_: &ReaperId, _: u32) -> bool {
    true
}
