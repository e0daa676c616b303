//! Starting a child on Linux without copying pipec's address space.
//!
//! `fork` copies the parent's page tables and write-protects its memory, so the parent
//! pays a page fault for every page it writes afterwards; `posix_spawn` avoids both by
//! running the child on the parent's memory until `exec` (`CLONE_VM | CLONE_VFORK`), but
//! offers no way to set the parent-death signal or to register with the reaper. This
//! module does what `posix_spawn` does, plus those calls: the child shares pipec's memory
//! (the calling thread is suspended until the child has called `exec` or exited), resets
//! the signal handlers it inherited (and SIGPIPE, which Rust ignores), puts itself in its
//! own process group, asks for SIGKILL when its parent thread ends (and gives up if pipec
//! died before that was armed), registers its group with the reaper, wires
//! stdin/stdout/stderr to pipes, changes into its directory and calls `execve` the way
//! `execvp` would (each `PATH` candidate in turn; a file without a `#!` line through
//! `/bin/sh`). A failure before the program runs comes back as the error of `spawn`.
//!
//! Waiting is through a pidfd, so it needs Linux 5.3; [`available`] says whether this
//! path can be used, and `fork.rs` is used where not.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use super::child::{Child, Process};
use super::pidfd::PidfdChild;
use super::reaper;
use super::signals;
use super::stdio::Pipes;
use super::watch::Watching;
use super::{Command, SpawnError, Spawned, lookup};

/// The child's stack while it runs on pipec's memory: it only makes a few system calls.
const CHILD_STACK: usize = 64 * 1024;

/// Whether this way of spawning works here (a kernel with pidfds), unless
/// `PIPEC_SPAWN=fork` asks for the portable path.
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if std::env::var_os("PIPEC_SPAWN").is_some_and(|v| v == "fork") {
            return false;
        }
        super::pidfd::open(std::process::id() as libc::pid_t).is_ok()
    })
}

/// What the child needs, prepared by the parent: pointers into memory that stays alive
/// and unchanged until the child has called `exec` (the parent thread is suspended).
struct ChildArgs {
    /// The paths to try in turn (null-terminated): one for a program named by a path,
    /// one per `PATH` directory for a bare name.
    paths: *const *const libc::c_char,
    /// A bare name is searched, as `execvp` does: a missing or denied candidate moves on.
    search: bool,
    argv: *const *const libc::c_char,
    /// `/bin/sh`, a candidate, then the arguments: for a file without a `#!` line, run by
    /// the shell as `execvp` does. The child writes the candidate into slot 1.
    sh_argv: *mut *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    /// The child's ends of the three pipes, none of them 0, 1 or 2.
    stdio: [libc::c_int; 3],
    /// The signal mask to restore before `exec` (the parent's, before it blocked all).
    mask: libc::sigset_t,
    /// The parent's pid, to detect that it died before the death signal was armed.
    parent: libc::pid_t,
    /// The reaper's pipe (above 2), or -1 to start unwatched.
    reaper: libc::c_int,
    /// Where the child leaves `errno` if it fails before the program runs.
    error: *mut libc::c_int,
    /// Set by the child once the reaper has its group.
    registered: *mut libc::c_int,
    /// Set by the child if the reaper could not be told (it is gone).
    unwatched: *mut libc::c_int,
}

/// Starts `cmd`, registered with the reaper of `watching`.
pub(crate) fn spawn(cmd: &Command<'_>, watching: Option<Watching>) -> Result<Spawned, SpawnError> {
    let start = SpawnError::Start;
    let Some(argv0) = cmd.argv.first() else {
        return Err(start(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty command",
        )));
    };
    let vars = cmd.variables();
    let path_var = vars
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let search = lookup::is_bare_name(argv0);
    let paths_c = lookup::candidates(argv0, cmd.cwd, path_var.as_deref())
        .map_err(start)?
        .iter()
        .map(|p| cstring(p.as_os_str()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(start)?;
    let argv_c = cmd
        .argv
        .iter()
        .map(|a| cstring(OsStr::new(a)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(start)?;
    let envp_c = vars
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<io::Result<Vec<_>>>()
        .map_err(start)?;
    let cwd_c = cstring(cmd.cwd.as_os_str()).map_err(start)?;
    let argv_p = pointers(&argv_c);
    let envp_p = pointers(&envp_c);
    let paths_p = pointers(&paths_c);
    let mut sh_argv: Vec<*const libc::c_char> = [SH.as_ptr(), std::ptr::null()]
        .into_iter()
        .chain(argv_c.iter().skip(1).map(|c| c.as_ptr()))
        .chain([std::ptr::null()])
        .collect();

    // Close-on-exec pipes; the child's ends are moved to 0, 1 and 2 (which clears the
    // flag there) and the originals close at `exec`.
    let pipes = Pipes::new().map_err(start)?;

    let mut error: libc::c_int = 0;
    let mut registered: libc::c_int = 0;
    let mut unwatched: libc::c_int = 0;
    let mut stack = vec![0u8; CHILD_STACK];
    let pid = {
        // Every signal blocked, glibc's internal ones too: nothing of pipec's may run on
        // the child's stack before the child has reset the handlers.
        let old = signals::block_all().map_err(start)?;
        let args = ChildArgs {
            paths: paths_p.as_ptr(),
            search,
            argv: argv_p.as_ptr(),
            sh_argv: sh_argv.as_mut_ptr(),
            envp: envp_p.as_ptr(),
            cwd: cwd_c.as_ptr(),
            stdio: [
                pipes.child[0].as_raw_fd(),
                pipes.child[1].as_raw_fd(),
                pipes.child[2].as_raw_fd(),
            ],
            mask: old,
            parent: std::process::id() as libc::pid_t,
            reaper: watching.as_ref().map_or(-1, Watching::fd),
            error: &raw mut error,
            registered: &raw mut registered,
            unwatched: &raw mut unwatched,
        };
        // The stack grows down from its 16-byte aligned top.
        let top = (stack.as_mut_ptr() as usize + CHILD_STACK) & !15;
        // SAFETY: with CLONE_VFORK this thread is suspended until the child has called
        // `execve` or `_exit`, so `args`, the strings and arrays it points to, and the
        // stack stay alive and untouched while the child uses them; with all signals
        // blocked, no handler of pipec's runs on the child's stack before the child has
        // reset them. The child runs only `child_main`, which makes system calls.
        let pid = unsafe {
            libc::clone(
                child_main,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&args as *const ChildArgs).cast_mut().cast(),
            )
        };
        let clone_error = io::Error::last_os_error();
        signals::restore(&old);
        if pid < 0 {
            return Err(start(clone_error));
        }
        pid
    };
    drop(stack);
    // The child wrote these through pointers the compiler cannot see.
    // SAFETY: all three are live locals.
    let (error, registered, unwatched) = unsafe {
        (
            std::ptr::read_volatile(&error),
            std::ptr::read_volatile(&registered),
            std::ptr::read_volatile(&unwatched),
        )
    };
    let watch = match &watching {
        Some(w) if registered != 0 => Some(w.watched(pid)),
        _ => None,
    };
    // The shared hold on the reaper ends before a `Watch` may be dropped (which takes it
    // again).
    drop(watching);
    let mut leader = PidfdChild::new(pid);
    if error != 0 {
        // It exited without running the program; reap it now. It started nothing, so its
        // group is gone with it and the reaper may forget it.
        leader.reap_blocking();
        drop(watch);
        let error = io::Error::from_raw_os_error(error);
        return Err(if unwatched != 0 {
            SpawnError::Unwatched(error)
        } else {
            SpawnError::Start(error)
        });
    }
    // From here on, a failure drops `child`, which kills the group and reaps the leader.
    let mut child = Child::new(pid, Process::Pidfd(leader), watch);
    if let Process::Pidfd(leader) = &mut child.process {
        leader.open().map_err(start)?;
    }
    let Pipes {
        child: ends,
        parent,
    } = pipes;
    drop(ends);
    let (stdin, stdout, stderr) = parent.into_async().map_err(start)?;
    Ok(Spawned {
        child,
        stdin,
        stdout,
        stderr,
    })
}

/// The child, on pipec's memory and the parent's thread-local storage (the parent thread
/// is suspended). Only system calls; nothing allocates or takes a lock.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildArgs` the suspended parent keeps alive; every call below
    // is a system call wrapper that is async-signal-safe.
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let fail = |a: &ChildArgs| -> ! {
            *a.error = *libc::__errno_location();
            if *a.error == 0 {
                *a.error = libc::ECHILD;
            }
            libc::_exit(127)
        };
        // Handlers of pipec's would run on this stack with pipec's memory: back to the
        // defaults before anything can be delivered.
        signals::reset_handlers();
        if libc::setpgid(0, 0) != 0 {
            fail(a);
        }
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            fail(a);
        }
        // The parent died before the signal was armed: do not start the effect.
        if libc::getppid() != a.parent {
            libc::_exit(127);
        }
        // The group is registered before anything can run in it. Until the record is
        // written, the group holds only this process, which the death signal covers.
        if a.reaper >= 0 {
            let pid = libc::syscall(libc::SYS_getpid) as libc::pid_t;
            if !reaper::write_record(a.reaper, reaper::WATCH, pid) {
                *a.unwatched = 1;
                if *libc::__errno_location() == 0 {
                    *libc::__errno_location() = libc::EPIPE;
                }
                fail(a);
            }
            *a.registered = 1;
        }
        for (fd, target) in a.stdio.iter().zip([0, 1, 2]) {
            if libc::dup2(*fd, target) < 0 {
                fail(a);
            }
        }
        if libc::chdir(a.cwd) != 0 {
            fail(a);
        }
        if signals::sigprocmask_raw((&raw const a.mask).cast(), std::ptr::null_mut()) != 0 {
            fail(a);
        }
        // As `execvp`: each candidate in turn; a file the kernel cannot execute goes to
        // the shell; a missing or denied candidate moves on when searching.
        let mut denied = false;
        let mut next = a.paths;
        while !(*next).is_null() {
            let path = *next;
            libc::execve(path, a.argv, a.envp);
            let mut errno = *libc::__errno_location();
            if errno == libc::ENOEXEC {
                *a.sh_argv.add(1) = path;
                libc::execve(SH.as_ptr(), a.sh_argv.cast_const(), a.envp);
                errno = *libc::__errno_location();
            }
            match errno {
                libc::EACCES if a.search => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT
                    if a.search => {}
                _ => fail(a),
            }
            next = next.add(1);
        }
        *libc::__errno_location() = if denied { libc::EACCES } else { libc::ENOENT };
        fail(a)
    }
}

/// The shell `execvp` hands a file without a `#!` line to.
const SH: &std::ffi::CStr = c"/bin/sh";

/// The strings' pointers, null-terminated, as `execve` takes them.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} contains a NUL byte", s.to_string_lossy()),
        )
    })
}
