//! The portable way of starting a child, for kernels without pidfds (before 5.3), other
//! systems, and `PIPEC_SPAWN=fork`: tokio's process spawning (a `fork`, with tokio's
//! SIGCHLD handling for the wait), with the same promises as `spawn.rs` kept in a
//! `pre_exec` hook: the parent-death signal, given up if pipec died before it was armed,
//! glibc's reserved signals at their defaults, and the group registered with the reaper
//! before `exec`. Its cost is the copy of pipec's page tables that `fork` makes, and the
//! page faults pipec then pays on its own memory.

use std::io;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use super::child::{Child, Process};
use super::stdio::Pipes;
use super::watch::Watching;
use super::{Command, SpawnError, Spawned, lookup};

/// Starts `cmd`, registered with the reaper of `watching`.
pub(crate) fn spawn(cmd: &Command<'_>, watching: Option<Watching>) -> Result<Spawned, SpawnError> {
    let start = SpawnError::Start;
    let Some(argv0) = cmd.argv.first() else {
        return Err(start(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty command",
        )));
    };
    let Pipes {
        child: [child_in, child_out, child_err],
        parent,
    } = Pipes::new().map_err(start)?;
    let mut command = tokio::process::Command::new(lookup::program(argv0, cmd.cwd));
    command
        .arg0(argv0)
        .args(cmd.argv.iter().skip(1))
        .current_dir(cmd.cwd)
        .env_clear()
        .envs(cmd.variables())
        .stdin(Stdio::from(child_in))
        .stdout(Stdio::from(child_out))
        .stderr(Stdio::from(child_err))
        .kill_on_drop(true)
        .process_group(0);
    // The child reports its pid on this pipe once its group is registered, so that a
    // spawn that fails later (at `exec`) can unregister it: tokio gives no pid then.
    let report = match &watching {
        Some(_) => Some(report_pipe().map_err(start)?),
        None => None,
    };
    before_exec(
        &mut command,
        watching.as_ref().map_or(-1, Watching::fd),
        report
            .as_ref()
            .map_or(-1, |(_, w)| std::os::fd::AsRawFd::as_raw_fd(w)),
    );
    let spawned = command.spawn();
    // The command holds pipec's copies of the child's ends until it is dropped.
    drop(command);
    match spawned {
        Ok(tokio_child) => {
            let pid = tokio_child.id().map_or(0, |p| p as i32);
            // `exec` ran, so the `pre_exec` hook had registered the group.
            let watch = watching.as_ref().map(|w| w.watched(pid));
            drop(watching);
            drop(report);
            let child = Child::new(pid, Process::Tokio(tokio_child), watch);
            let (stdin, stdout, stderr) = parent.into_async().map_err(start)?;
            Ok(Spawned {
                child,
                stdin,
                stdout,
                stderr,
            })
        }
        Err(e) => {
            let registered = report.and_then(|(r, w)| {
                drop(w);
                read_pid(r)
            });
            // The child is gone (tokio waited for it): unwatch what it registered.
            let watch = match (&watching, registered) {
                (Some(w), Some(pid)) => Some(w.watched(pid)),
                _ => None,
            };
            drop(watching);
            drop(watch);
            Err(
                if registered.is_none() && e.raw_os_error() == Some(libc::EPIPE) {
                    SpawnError::Unwatched(e)
                } else {
                    SpawnError::Start(e)
                },
            )
        }
    }
}

/// The `pre_exec` hook. Linux delivers the death signal when the *thread* that started the
/// child ends, not the process: children are therefore started from long-lived threads
/// (the thread driving the attempt, or the runtime's workers), never from a blocking-pool
/// thread that may retire while its child runs.
#[cfg(target_os = "linux")]
fn before_exec(cmd: &mut tokio::process::Command, reaper: libc::c_int, report: libc::c_int) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: everything in the hook is a system call on locals (it allocates nothing):
    // async-signal-safe, as a child between `fork` and `exec` needs.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // pipec died before the signal was armed: do not start the effect.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            super::signals::default_reserved_signals();
            if reaper >= 0 {
                register(reaper, report)?;
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn before_exec(_: &mut tokio::process::Command, _: libc::c_int, _: libc::c_int) {}

/// Registers this child's group (its pid: `process_group(0)` ran before the hook) with the
/// reaper, then reports the pid to the parent. SIGPIPE is at its default here (the
/// standard library resets it before the hook): blocked for the write, so that a gone
/// reaper fails the spawn with EPIPE instead of killing the child unexplained.
#[cfg(target_os = "linux")]
fn register(reaper: libc::c_int, report: libc::c_int) -> io::Result<()> {
    // SAFETY: sigset_t is a plain bit set; the calls read and write these locals only.
    unsafe {
        let mut pipe_only: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe_only);
        libc::sigaddset(&mut pipe_only, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe_only, &mut old);
        let pid = libc::getpid();
        if !super::reaper::write_record(reaper, super::reaper::WATCH, pid) {
            return Err(io::Error::from_raw_os_error(libc::EPIPE));
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        let bytes = pid.to_ne_bytes();
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
    }
    Ok(())
}

/// A close-on-exec pipe above descriptor 2 (the child's stdio is moved onto 0 to 2 before
/// the hook runs).
fn report_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = std::io::pipe()?;
    Ok((
        super::stdio::above_stdio(OwnedFd::from(r))?,
        super::stdio::above_stdio(OwnedFd::from(w))?,
    ))
}

/// The pid a failed child reported, if it got as far as registering.
fn read_pid(r: OwnedFd) -> Option<i32> {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    let mut file = std::fs::File::from(r);
    file.read_exact(&mut bytes).ok()?;
    Some(i32::from_ne_bytes(bytes))
}
