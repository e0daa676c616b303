//! Starting an `exec` child on Linux without copying pipec's address space.
//!
//! `fork` copies the parent's page tables and write-protects its memory, so the parent
//! pays a page fault for every page it writes afterwards; `posix_spawn` avoids both by
//! running the child on the parent's memory until `exec` (`CLONE_VM | CLONE_VFORK`), but
//! offers no way to set the parent-death signal, which pipec wants so that an effect dies
//! with the process that journals it. This module does what `posix_spawn` does, plus
//! that one call: the child shares pipec's memory (the calling thread is suspended until
//! the child has called `exec` or exited), resets the signal handlers it inherited (and
//! SIGPIPE, which Rust ignores), puts itself in its own process group, asks for SIGKILL
//! when its parent thread ends, wires stdin/stdout/stderr to pipes, changes into the
//! project root and calls `execve` the way `execvp` would (each `PATH` candidate in
//! turn; a file without a `#!` line through `/bin/sh`). A failure before the program
//! runs comes back as the error of `spawn`.
//!
//! Waiting is through a pidfd, so it needs Linux 5.3; [`available`] says whether this
//! path can be used, and `exec` falls back to tokio's process spawning where not.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

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
        pidfd_open(std::process::id() as libc::pid_t).is_ok()
    })
}

/// A started child: its stdio pipes and a handle to wait for it.
pub(crate) struct Spawned {
    pub child: Child,
    pub stdin: pipe::Sender,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
}

/// A child process, killed with its process group and reaped if dropped before it was
/// waited for.
pub(crate) struct Child {
    pid: libc::pid_t,
    pidfd: Option<AsyncFd<OwnedFd>>,
    reaped: bool,
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
    /// Where the child leaves `errno` if it fails before the program runs.
    error: *mut libc::c_int,
}

/// Starts `program` (a path, or a name looked up on `PATH`) with `argv` (argv[0] first),
/// in `cwd`, with pipec's environment plus `env`.
pub(crate) fn spawn(
    program: &Path,
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
) -> io::Result<Spawned> {
    // The environment: pipec's, then `env` on top (a later entry wins).
    let mut vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    for (k, v) in env {
        vars.retain(|(name, _)| name != OsStr::new(k));
        vars.push((k.into(), v.into()));
    }
    let path_var = vars
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let search = !program.as_os_str().as_bytes().contains(&b'/');
    let paths_c = candidates(program, cwd, path_var.as_deref())?
        .iter()
        .map(|p| cstring(p.as_os_str()))
        .collect::<io::Result<Vec<_>>>()?;
    let argv_c = argv
        .iter()
        .map(|a| cstring(OsStr::new(a)))
        .collect::<io::Result<Vec<_>>>()?;
    let envp_c = vars
        .iter()
        .map(|(k, v)| {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            cstring(&kv)
        })
        .collect::<io::Result<Vec<_>>>()?;
    let cwd_c = cstring(cwd.as_os_str())?;
    let argv_p: Vec<*const libc::c_char> = argv_c
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let envp_p: Vec<*const libc::c_char> = envp_c
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let paths_p: Vec<*const libc::c_char> = paths_c
        .iter()
        .map(|c| c.as_ptr())
        .chain([std::ptr::null()])
        .collect();
    let mut sh_argv: Vec<*const libc::c_char> = [SH.as_ptr(), std::ptr::null()]
        .into_iter()
        .chain(argv_c.iter().skip(1).map(|c| c.as_ptr()))
        .chain([std::ptr::null()])
        .collect();

    // Close-on-exec pipes; the child's ends are moved to 0, 1 and 2 (which clears the
    // flag there) and the originals close at `exec`.
    let (in_r, in_w) = std::io::pipe()?;
    let (out_r, out_w) = std::io::pipe()?;
    let (err_r, err_w) = std::io::pipe()?;
    let child_ends = [
        above_stdio(OwnedFd::from(in_r))?,
        above_stdio(OwnedFd::from(out_w))?,
        above_stdio(OwnedFd::from(err_w))?,
    ];

    let mut error: libc::c_int = 0;
    let mut stack = vec![0u8; CHILD_STACK];
    let pid = {
        // Every signal blocked, glibc's internal ones too (its wrappers leave those out,
        // hence the raw call): nothing of pipec's may run on the child's stack before the
        // child has reset the handlers.
        // SAFETY: sigset_t is a plain bit set, valid when zeroed.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        let all = [u64::MAX; 1];
        // SAFETY: rt_sigprocmask reads the 8-byte kernel set `all` and writes the old set
        // into `old`, which is larger than that.
        if unsafe { sigprocmask_raw(all.as_ptr().cast(), &mut old) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let args = ChildArgs {
            paths: paths_p.as_ptr(),
            search,
            argv: argv_p.as_ptr(),
            sh_argv: sh_argv.as_mut_ptr(),
            envp: envp_p.as_ptr(),
            cwd: cwd_c.as_ptr(),
            stdio: [
                child_ends[0].as_raw_fd(),
                child_ends[1].as_raw_fd(),
                child_ends[2].as_raw_fd(),
            ],
            mask: old,
            parent: std::process::id() as libc::pid_t,
            error: &raw mut error,
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
        // SAFETY: restores the mask saved above.
        unsafe {
            sigprocmask_raw((&raw const old).cast(), std::ptr::null_mut());
        }
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    drop(child_ends);
    let mut child = Child {
        pid,
        pidfd: None,
        reaped: false,
    };
    // The child wrote it through a pointer the compiler cannot see.
    // SAFETY: `error` is a live local.
    let error = unsafe { std::ptr::read_volatile(&error) };
    if error != 0 {
        // It exited without running the program; reap it now.
        child.reap_blocking();
        return Err(io::Error::from_raw_os_error(error));
    }
    let pidfd = pidfd_open(pid)?;
    // SAFETY: an `OwnedFd` owns its descriptor and always reports the same one; it stays
    // open until the `AsyncFd` drops it.
    child.pidfd =
        Some(unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }?);
    Ok(Spawned {
        child,
        stdin: pipe::Sender::from_owned_fd(OwnedFd::from(in_w))?,
        stdout: pipe::Receiver::from_owned_fd(OwnedFd::from(out_r))?,
        stderr: pipe::Receiver::from_owned_fd(OwnedFd::from(err_r))?,
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
        // defaults before anything can be delivered. SIGPIPE too, which Rust programs
        // ignore and a command expects at its default.
        for sig in 1..=libc::SIGRTMAX() {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut current) == 0
                && (sig == libc::SIGPIPE
                    || (current.sa_sigaction != libc::SIG_DFL
                        && current.sa_sigaction != libc::SIG_IGN))
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        default_reserved_signals();
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
        for (fd, target) in a.stdio.iter().zip([0, 1, 2]) {
            if libc::dup2(*fd, target) < 0 {
                fail(a);
            }
        }
        if libc::chdir(a.cwd) != 0 {
            fail(a);
        }
        if sigprocmask_raw((&raw const a.mask).cast(), std::ptr::null_mut()) != 0 {
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

/// Sets the signals glibc keeps for itself (from 32 up to SIGRTMIN) back to their default.
/// Its wrappers refuse them, and a process started by `posix_spawn` may have them ignored,
/// which an `exec` would pass on; so through the kernel directly (a zeroed kernel
/// sigaction is SIG_DFL with no flags on every architecture). Async-signal-safe: for a
/// child between `fork`/`clone` and `exec`.
pub(crate) fn default_reserved_signals() {
    for sig in 32..libc::SIGRTMIN() {
        let default = [0u64; 4];
        // SAFETY: rt_sigaction reads the 32-byte zeroed action; no old action is written.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                default.as_ptr(),
                std::ptr::null_mut::<libc::c_void>(),
                8,
            );
        }
    }
}

/// `rt_sigprocmask(SIG_SETMASK, set, old)` on the 64-bit kernel set, without the libc
/// wrapper's filtering of glibc's internal signals.
///
/// # Safety
/// `set` must point to at least 8 readable bytes; `old`, if not null, to 8 writable ones.
unsafe fn sigprocmask_raw(set: *const libc::c_void, old: *mut libc::sigset_t) -> libc::c_long {
    // SAFETY: as documented; the kernel reads and writes exactly 8 bytes.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, set, old, 8) }
}

impl Child {
    pub(crate) fn id(&self) -> u32 {
        self.pid as u32
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

    fn reap_blocking(&mut self) {
        let _ = waitpid(self.pid, 0);
        self.reaped = true;
    }
}

impl Drop for Child {
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
        // on, never a `Child`, so nothing here can run this again.
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

/// The shell `execvp` hands a file without a `#!` line to.
const SH: &std::ffi::CStr = c"/bin/sh";

/// The paths to try for `program`, all absolute (the child changes directory before it
/// tries them): the program itself if it names a path; otherwise the name in each
/// directory of `path` (the environment's `PATH`, or a default), where a relative or
/// empty directory is taken from `cwd`, as `execvp` after `chdir` would.
fn candidates(program: &Path, cwd: &Path, path: Option<&OsStr>) -> io::Result<Vec<PathBuf>> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(vec![std::path::absolute(program)?]);
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(path)
        .map(|dir| std::path::absolute(cwd.join(dir).join(program)))
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

/// The same pipe end at a descriptor above 2, so that moving the three ends onto 0, 1 and
/// 2 cannot overwrite one of them (pipec may have been started with a standard stream
/// closed).
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        Ok(fd)
    } else {
        // `try_clone` duplicates to the lowest free descriptor from 3, close-on-exec.
        fd.try_clone()
    }
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor or -1; a non-negative result is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly opened descriptor that nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as libc::c_int) })
}
