//! Waiting for a child started by `spawn.rs` through its pidfd (Linux 5.3), and reaping it:
//! when waited for, or off the caller's thread once it exits if it was dropped before.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;

/// A child of pipec's, with its pidfd registered with the reactor.
pub(crate) struct PidfdChild {
    pid: libc::pid_t,
    pidfd: Option<AsyncFd<OwnedFd>>,
    reaped: bool,
}

impl PidfdChild {
    /// A child that has not been waited for yet and has no pidfd (yet).
    pub(crate) fn new(pid: libc::pid_t) -> PidfdChild {
        PidfdChild {
            pid,
            pidfd: None,
            reaped: false,
        }
    }

    /// Opens and registers the child's pidfd.
    pub(crate) fn open(&mut self) -> io::Result<()> {
        let fd = open(self.pid)?;
        // SAFETY: an `OwnedFd` owns its descriptor and always reports the same one; it
        // stays open until the `AsyncFd` drops it.
        self.pidfd =
            Some(unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?);
        Ok(())
    }

    /// Waits for the child to exit and reaps it.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_reap()? {
                return Ok(status);
            }
            let Some(fd) = &self.pidfd else {
                return Err(io::Error::other("the child has no pidfd"));
            };
            let mut ready = fd.readable().await?;
            ready.clear_ready();
        }
    }

    /// Reaps the child if it has exited.
    fn try_reap(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.reaped {
            return Err(io::Error::other("the child was already waited for"));
        }
        let reaped = waitpid(self.pid, libc::WNOHANG);
        // Reaped, or never to be: either way there is nothing left to wait for.
        self.reaped = !matches!(reaped, Ok(None));
        Ok(reaped?.map(ExitStatus::from_raw))
    }

    /// Waits for a child that is exiting or has exited (one that failed before `exec`).
    pub(crate) fn reap_blocking(&mut self) {
        let _ = waitpid(self.pid, 0);
        self.reaped = true;
    }
}

impl Drop for PidfdChild {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // SAFETY: kill(2) on the child's own process group; no memory effects.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
        }
        if let Ok(Some(_)) = self.try_reap() {
            return;
        }
        // Killed but not gone yet (the signal is delivered asynchronously): reap it when
        // its pidfd says it has exited, off this thread. Only the pid and the pidfd move
        // on, never a `PidfdChild`, so nothing here can run this again.
        self.reaped = true;
        let pid = self.pid;
        if let Some(fd) = self.pidfd.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                if fd.readable().await.is_ok() {
                    let _ = waitpid(pid, libc::WNOHANG);
                }
            });
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("pipec-reap".into())
            .stack_size(64 * 1024)
            .spawn(move || waitpid(pid, 0));
        if spawned.is_err() {
            // No thread to spare: wait here; a killed process is gone within moments.
            let _ = waitpid(pid, 0);
        }
    }
}

/// `waitpid` for one child, retried when interrupted: its raw wait status once reaped,
/// or `None` while it runs (with `WNOHANG`).
fn waitpid(pid: libc::pid_t, flags: libc::c_int) -> io::Result<Option<libc::c_int>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid on our own child's pid writes only `status`.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        match r {
            0 => return Ok(None),
            r if r == pid => return Ok(Some(status)),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// A pidfd for `pid`.
pub(crate) fn open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor or -1; a non-negative result is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly opened descriptor that nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as libc::c_int) })
}
