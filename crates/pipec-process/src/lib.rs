//! Process control for the children pipec starts (`exec` commands, and servers it talks to
//! over stdio): starting them in a process group of their own with piped stdio and a
//! chosen environment, waiting for them, and making sure that nothing they start outlives
//! pipec — killed with its whole group when its work ends, and by the reaper when pipec
//! dies, `kill -9` included.
//!
//! - `spawn.rs` starts a child on Linux without copying pipec's memory; `fork.rs` is the
//!   portable way (`PIPEC_SPAWN=fork` selects it); both register the child's group with
//!   the reaper before `exec`, arm the parent-death signal and reset signals.
//! - `reaper.rs` is the reaper process, `watch.rs` pipec's side of it (starting and
//!   replacing it, the list of live groups), `wait_gone.rs` the check a resume makes.
//! - `child.rs` the started child, `group.rs` killing a group until it is gone,
//!   `pidfd.rs` waiting through a pidfd, `proc_stat.rs` reading `/proc`, `signals.rs` the
//!   signal set-up of a child, `stdio.rs` its pipes, `lookup.rs` finding its program,
//!   `command.rs` what to start, `find_program.rs` resolving the program a pipeline names.
//!
//! This module uses std, libc and tokio only.
#![warn(unreachable_pub)]

mod child;
mod command;
mod find_program;
#[cfg(unix)]
#[allow(unsafe_code)]
mod fork;
#[allow(unsafe_code)]
mod group;
mod lookup;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod pidfd;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod proc_stat;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod reaper;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod signals;
// Spawning on Linux: clone, signal and descriptor set-up in the child before `execve`;
// every block says why it is sound.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod spawn;
mod stdio;
mod wait_gone;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod watch;
// Other systems have no reaper: children start unwatched, as they did before it existed.
#[cfg(not(target_os = "linux"))]
#[path = "watch_none.rs"]
mod watch;

pub use child::{Child, GONE_LIMIT};
pub use command::{Command, Environment};
pub use find_program::find_program;
pub use group::kill_self;
pub use wait_gone::{StillRunning, wait_gone};
pub use watch::ReaperId;

use tokio::net::unix::pipe;

/// A started child and pipec's ends of its stdin, stdout and stderr.
#[derive(Debug)]
pub struct Spawned {
    pub child: Child,
    pub stdin: pipe::Sender,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
}

/// Why a child did not start.
#[derive(Debug)]
pub enum SpawnError {
    /// The program could not be started: not found, not executable, an argument with a
    /// NUL byte, no tokio runtime, out of resources.
    Start(std::io::Error),
    /// Nothing was started, because no reaper could take the child's group: it would
    /// have run without dying with pipec.
    Unwatched(std::io::Error),
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::Start(e) => write!(f, "{e}"),
            SpawnError::Unwatched(e) => write!(
                f,
                "not started: its process group could not be watched so that it dies with pipec ({e})"
            ),
        }
    }
}

impl std::error::Error for SpawnError {}

/// Starts `cmd` in a process group of its own, watched by this process's reaper (started
/// on first need), with stdin, stdout and stderr piped. Must be called inside a tokio
/// runtime (the pipes and the wait are registered with its reactor), from a thread that
/// lives as long as the child: Linux sends the parent-death signal when the spawning
/// thread ends.
pub fn spawn(cmd: &Command<'_>) -> Result<Spawned, SpawnError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(SpawnError::Start(std::io::Error::other(
            "children are started inside a tokio runtime",
        )));
    }
    match spawn_once(cmd) {
        // The reaper died; `spawn_once` replaced it. Nothing ran, so once more.
        Err(SpawnError::Unwatched(_)) if cmd.reaper.is_none() => spawn_once(cmd),
        r => r,
    }
}

#[cfg(target_os = "linux")]
fn spawn_once(cmd: &Command<'_>) -> Result<Spawned, SpawnError> {
    let watching = watch::watching(cmd.reaper).map_err(SpawnError::Unwatched)?;
    let spawned = if spawn::available() {
        spawn::spawn(cmd, Some(watching))
    } else {
        fork::spawn(cmd, Some(watching))
    };
    if let Err(SpawnError::Unwatched(_)) = &spawned {
        // The child could not register: the reaper is gone. Its replacement watches the
        // live groups before anything else starts.
        if let Err(e) = watch::replace() {
            return Err(SpawnError::Unwatched(e));
        }
    }
    spawned
}

#[cfg(not(target_os = "linux"))]
fn spawn_once(cmd: &Command<'_>) -> Result<Spawned, SpawnError> {
    fork::spawn(cmd, None)
}

/// This process's reaper, started if there is none yet and replaced if it died: the
/// identity a run records before it starts an effect, to check on resume with
/// [`wait_gone`] that what the effect started is gone.
pub fn current_reaper() -> std::io::Result<ReaperId> {
    watch::current()
}
