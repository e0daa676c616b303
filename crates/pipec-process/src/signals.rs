//! Signal set-up for a process pipec starts, between `fork`/`clone` and `exec` (or for the
//! reaper, for good): handlers back to their defaults, glibc's reserved signals too, and
//! the signal mask set through the kernel directly. Everything here is a system call and
//! async-signal-safe.

/// Sets every caught signal back to its default action, and SIGPIPE too (Rust programs
/// ignore it; a command expects it at its default). Ignored signals other than SIGPIPE
/// stay ignored, as `exec` would leave them.
///
/// # Safety
/// Only for a child between `fork`/`clone` and `exec`, or a process that runs none of
/// pipec's handlers any more: the handlers it replaces stop running in this process.
pub(crate) unsafe fn reset_handlers() {
    for sig in 1..=libc::SIGRTMAX() {
        // SAFETY: sigaction is a plain C struct, valid when zeroed; the calls only read
        // and write these locals.
        unsafe {
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
    }
    default_reserved_signals();
}

/// Sets `sig` to be ignored.
///
/// # Safety
/// As [`reset_handlers`]: for a process that runs none of pipec's handlers.
pub(crate) unsafe fn ignore(sig: libc::c_int) {
    // SAFETY: as above; a zeroed sigaction with SIG_IGN.
    unsafe {
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        libc::sigaction(sig, &ignore, std::ptr::null_mut());
    }
}

/// Sets the signals glibc keeps for itself (from 32 up to SIGRTMIN) back to their default.
/// Its wrappers refuse them, and a process started by `posix_spawn` may have them ignored,
/// which an `exec` would pass on; so through the kernel directly (a zeroed kernel
/// sigaction is SIG_DFL with no flags on every architecture).
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
pub(crate) unsafe fn sigprocmask_raw(
    set: *const libc::c_void,
    old: *mut libc::sigset_t,
) -> libc::c_long {
    // SAFETY: as documented; the kernel reads and writes exactly 8 bytes.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, set, old, 8) }
}

/// Blocks every signal of this thread (glibc's own included); the mask it replaced.
pub(crate) fn block_all() -> std::io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is a plain bit set, valid when zeroed.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    let all = [u64::MAX; 1];
    // SAFETY: rt_sigprocmask reads the 8-byte kernel set `all` and writes the old set into
    // `old`, which is larger than that.
    if unsafe { sigprocmask_raw(all.as_ptr().cast(), &mut old) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(old)
}

/// Restores a mask saved by [`block_all`].
pub(crate) fn restore(mask: &libc::sigset_t) {
    // SAFETY: `mask` is a full sigset_t, larger than the 8 bytes the kernel reads.
    unsafe {
        sigprocmask_raw((mask as *const libc::sigset_t).cast(), std::ptr::null_mut());
    }
}
