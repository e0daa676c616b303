//! A child's stdin, stdout and stderr: three close-on-exec pipes whose child ends sit above
//! descriptor 2, and whose parent ends are registered with the tokio reactor.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use tokio::net::unix::pipe;

/// The child's ends (stdin's read end, stdout's and stderr's write ends) and pipec's.
pub(crate) struct Pipes {
    pub child: [OwnedFd; 3],
    pub parent: ParentEnds,
}

/// pipec's ends: stdin's write end, stdout's and stderr's read ends.
pub(crate) struct ParentEnds {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

impl Pipes {
    pub(crate) fn new() -> io::Result<Pipes> {
        let (in_r, in_w) = std::io::pipe()?;
        let (out_r, out_w) = std::io::pipe()?;
        let (err_r, err_w) = std::io::pipe()?;
        Ok(Pipes {
            child: [
                above_stdio(OwnedFd::from(in_r))?,
                above_stdio(OwnedFd::from(out_w))?,
                above_stdio(OwnedFd::from(err_w))?,
            ],
            parent: ParentEnds {
                stdin: OwnedFd::from(in_w),
                stdout: OwnedFd::from(out_r),
                stderr: OwnedFd::from(err_r),
            },
        })
    }
}

impl ParentEnds {
    /// The ends registered with the reactor (the child's ends must be closed by then, or
    /// stdout never reaches end-of-file).
    pub(crate) fn into_async(self) -> io::Result<(pipe::Sender, pipe::Receiver, pipe::Receiver)> {
        Ok((
            pipe::Sender::from_owned_fd(self.stdin)?,
            pipe::Receiver::from_owned_fd(self.stdout)?,
            pipe::Receiver::from_owned_fd(self.stderr)?,
        ))
    }
}

/// The same descriptor at a number above 2, so that moving a child's three ends onto 0, 1
/// and 2 cannot overwrite one of them (pipec may have been started with a standard stream
/// closed, and then a pipe it makes lands there).
pub(crate) fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        Ok(fd)
    } else {
        // `try_clone` duplicates to the lowest free descriptor from 3, close-on-exec.
        fd.try_clone()
    }
}
