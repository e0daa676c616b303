//! A started child and its process group: waiting for the child, killing the group, and
//! ending it — on every path, the normal end as much as a drop (a node's timeout, a
//! cancelled attempt), the group is killed and waited for before the reaper stops
//! watching it.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use super::group;
use super::watch::Watch;

/// A running child, the leader of its own process group.
pub struct Child {
    pid: i32,
    pub(crate) process: Process,
    /// The reaper's watch over the group; `None` where there is no reaper (other systems).
    watch: Option<Watch>,
    ended: bool,
}

/// How the child was started, which decides how it is waited for.
pub(crate) enum Process {
    /// By `spawn.rs`: waited for through its pidfd.
    #[cfg(target_os = "linux")]
    Pidfd(super::pidfd::PidfdChild),
    /// By `fork.rs`: waited for by tokio.
    Tokio(tokio::process::Child),
}

impl Child {
    pub(crate) fn new(pid: i32, process: Process, watch: Option<Watch>) -> Child {
        Child {
            pid,
            process,
            watch,
            ended: false,
        }
    }

    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// The child's process group: its own, led by it.
    pub fn group(&self) -> u32 {
        self.pid as u32
    }

    /// The reaper the child's group was registered with (`None` where pipec has no
    /// reaper: systems other than Linux).
    pub fn reaper(&self) -> Option<super::ReaperId> {
        self.watch.as_ref().and_then(|w| w.reaper)
    }

    /// Waits for the child itself to exit and reaps it; what it left in its group runs on
    /// until [`Child::end`].
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.process {
            #[cfg(target_os = "linux")]
            Process::Pidfd(c) => c.wait().await,
            Process::Tokio(c) => c.wait().await,
        }
    }

    /// Sends SIGKILL to the child's whole group now.
    pub fn kill(&self) {
        group::kill(self.pid);
    }

    /// Ends the child's group: kills whatever is left in it, waits until none of it is
    /// alive (within [`GONE_LIMIT`]), then has the reaper forget it. After this the
    /// group has no process that can run. Call it after [`Child::wait`]; called before,
    /// it kills the child too.
    pub async fn end(mut self) {
        group::kill_until_gone(self.pid, GONE_LIMIT).await;
        self.ended = true;
        drop(self.watch.take());
    }
}

/// How long [`Child::end`] keeps killing a group before it lets go of it (a process that
/// outlives SIGKILL this long is stuck in the kernel and runs no user code again).
pub const GONE_LIMIT: Duration = group::GONE_LIMIT;

impl Drop for Child {
    fn drop(&mut self) {
        if !self.ended {
            // Dropped before its end (a timeout, a cancelled attempt): the group is killed
            // now, and waited for off this thread before the reaper forgets it. The leader
            // is reaped by its `Process` as that drops.
            group::end_in_background(self.pid, self.watch.take());
        }
    }
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.pid)
            .field("watched", &self.watch.is_some())
            .finish()
    }
}
