//! The reaper: a small process forked from pipec that kills the process groups of pipec's
//! children once pipec is gone, however it went (`kill -9` included).
//!
//! pipec holds the write end of a pipe whose read end only the reaper holds. Each child
//! writes one fixed-size record ("watch group G") to the pipe before it calls `exec`, and
//! pipec writes "unwatch G" once G is gone. A record is 8 bytes, so each write is atomic
//! and records never interleave. When pipec dies, the kernel closes its write end (its
//! children closed theirs at `exec`, close-on-exec), the reaper reads end-of-file, sends
//! SIGKILL to every group it still watches, waits until each has no live process (within
//! a bound), and exits.
//!
//! After `fork` only system calls run here: nothing allocates or takes a lock (another
//! thread of pipec may have held one at the fork). The table of groups is allocated by
//! pipec before the fork and filled with the groups already live (when a reaper replaces
//! one that died). The reaper takes its own process group, so a terminal's Ctrl-C or a
//! kill of pipec's group does not reach it, ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT so
//! that it outlives pipec for the clean-up, changes to `/` so that it keeps no directory
//! busy, and closes every descriptor but its pipe: held, the write end of a child's stdout
//! would hide the child's end-of-file from pipec, and a lock file would stay locked after
//! pipec died.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use super::proc_stat;
use super::signals;

/// The size of one record: an operation and a process group, native-endian.
pub(crate) const RECORD_LEN: usize = 8;
/// "Watch this group": written by the child itself, before `exec`.
pub(crate) const WATCH: i32 = 1;
/// "This group is gone": written by pipec.
pub(crate) const UNWATCH: i32 = 2;

/// How many groups the reaper's table holds. pipec refuses to start a child beyond
/// [`super::watch::LIVE_LIMIT`] live groups, well below this, so the table cannot fill
/// with children in flight; if it did, the reaper would kill the group it cannot record
/// rather than leave it unwatched.
pub(crate) const CAPACITY: usize = 32 * 1024;

/// How long the reaper keeps killing after pipec died before it exits anyway (a process
/// stuck in the kernel with SIGKILL pending runs no user code again).
pub(crate) const CLEANUP_LIMIT: Duration = Duration::from_secs(5);

/// One record.
pub(crate) fn record(op: i32, group: i32) -> [u8; RECORD_LEN] {
    let [a, b, c, d] = op.to_ne_bytes();
    let [e, f, g, h] = group.to_ne_bytes();
    [a, b, c, d, e, f, g, h]
}

/// Writes one record to the reaper's pipe: whether all of it was written.
pub(crate) fn write_record(fd: libc::c_int, op: i32, group: i32) -> bool {
    let rec = record(op, group);
    loop {
        // SAFETY: write(2) reads RECORD_LEN bytes of the local `rec`.
        let n = unsafe { libc::write(fd, rec.as_ptr().cast(), RECORD_LEN) };
        if n == RECORD_LEN as isize {
            return true;
        }
        // SAFETY: reads this thread's errno.
        if n < 0 && unsafe { *libc::__errno_location() } == libc::EINTR {
            continue;
        }
        return false;
    }
}

/// Forks the reaper, reading `input`, watching `live` (group, count) from the start; it
/// closes every other descriptor, pipec's write end included. Returns the reaper's pid.
pub(crate) fn fork(input: OwnedFd, live: &[(i32, u32)]) -> io::Result<libc::pid_t> {
    // One entry per group: the group in the low half, how often it was registered in the
    // high half (a pid reused as a group id may be registered again before the
    // unregistration of its previous group arrives).
    let mut table = vec![0u64; CAPACITY];
    let mut len = 0usize;
    for (slot, (group, count)) in table.iter_mut().zip(live) {
        *slot = entry(*group, *count);
        len += 1;
    }
    let fd = input.as_raw_fd();
    // SAFETY: the child runs only `run`, which makes system calls on memory that is its
    // own copy (the table, its stack) and never returns.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: this is the freshly forked child.
        unsafe { run(fd, &mut table, len) }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    drop(input);
    Ok(pid)
}

fn entry(group: i32, count: u32) -> u64 {
    u64::from(group as u32) | (u64::from(count) << 32)
}

fn group_of(entry: u64) -> i32 {
    entry as u32 as i32
}

fn count_of(entry: u64) -> u32 {
    (entry >> 32) as u32
}

/// The reaper's life: set-up, records until end-of-file, clean-up, exit.
///
/// # Safety
/// Only in a child just forked from pipec.
unsafe fn run(input: libc::c_int, table: &mut [u64], mut len: usize) -> ! {
    // SAFETY: every call is a system call wrapper on locals; this process runs none of
    // pipec's handlers any more.
    unsafe {
        libc::setpgid(0, 0);
        signals::reset_handlers();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            signals::ignore(sig);
        }
        let none = [0u64; 1];
        signals::sigprocmask_raw(none.as_ptr().cast(), std::ptr::null_mut());
        libc::prctl(
            libc::PR_SET_NAME,
            c"pipec-reaper".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
        libc::chdir(c"/".as_ptr());
    }
    close_all_except(input);

    let mut buf = [0u8; 4096];
    let mut held = 0usize;
    while let Some(free) = buf.get_mut(held..) {
        // SAFETY: read(2) writes at most `free.len()` bytes into `free`.
        let n = unsafe { libc::read(input, free.as_mut_ptr().cast(), free.len()) };
        if n == 0 {
            break;
        }
        if n < 0 {
            // SAFETY: reads this process's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            break;
        }
        held = held.saturating_add(n as usize).min(buf.len());
        let whole = held - held % RECORD_LEN;
        for rec in buf.get(..whole).unwrap_or(&[]).chunks_exact(RECORD_LEN) {
            let (Ok(op), Ok(group)) = (
                <[u8; 4]>::try_from(rec.get(..4).unwrap_or(&[])),
                <[u8; 4]>::try_from(rec.get(4..).unwrap_or(&[])),
            ) else {
                continue;
            };
            let (op, group) = (i32::from_ne_bytes(op), i32::from_ne_bytes(group));
            match op {
                WATCH if !watch(table, &mut len, group) => {
                    super::group::kill(group);
                }
                UNWATCH => unwatch(table, &mut len, group),
                _ => {}
            }
        }
        buf.copy_within(whole..held, 0);
        held -= whole;
    }
    clean_up(table, len);
    // SAFETY: ends this process without running anything of pipec's.
    unsafe { libc::_exit(0) }
}

/// Counts one more registration of `group`; false if the table is full.
fn watch(table: &mut [u64], len: &mut usize, group: i32) -> bool {
    let live = table.get_mut(..*len).unwrap_or(&mut []);
    if let Some(slot) = live.iter_mut().find(|e| group_of(**e) == group) {
        *slot = entry(group, count_of(*slot).saturating_add(1));
        return true;
    }
    match table.get_mut(*len) {
        Some(slot) => {
            *slot = entry(group, 1);
            *len += 1;
            true
        }
        None => false,
    }
}

/// Counts one registration of `group` less, and forgets it at none.
fn unwatch(table: &mut [u64], len: &mut usize, group: i32) {
    let Some(at) = table
        .get(..*len)
        .unwrap_or(&[])
        .iter()
        .position(|e| group_of(*e) == group)
    else {
        return;
    };
    let Some(current) = table.get(at).copied() else {
        return;
    };
    if count_of(current) > 1 {
        if let Some(slot) = table.get_mut(at) {
            *slot = entry(group, count_of(current) - 1);
        }
    } else {
        remove(table, len, at);
    }
}

fn remove(table: &mut [u64], len: &mut usize, at: usize) {
    if at < *len {
        *len -= 1;
        table.swap(at, *len);
    }
}

/// Kills every watched group until none has a live process, or [`CLEANUP_LIMIT`].
fn clean_up(table: &mut [u64], mut len: usize) {
    let deadline = now_ms().saturating_add(CLEANUP_LIMIT.as_millis() as u64);
    loop {
        // Every group gets SIGKILL; a group with no process at all is done.
        let mut at = 0;
        while at < len {
            let group = table.get(at).map_or(0, |e| group_of(*e));
            if super::group::kill(group) {
                at += 1;
            } else {
                remove(table, &mut len, at);
            }
        }
        if len == 0 {
            return;
        }
        // Of the rest, a group whose processes are all zombies is done too: mark the groups
        // with a live process (count 1), in one pass over `/proc`, and drop the others.
        for e in table.iter_mut().take(len) {
            *e = entry(group_of(*e), 0);
        }
        let scanned = proc_stat::for_each_process(|stat| {
            if stat.is_live()
                && let Some(e) = table
                    .iter_mut()
                    .take(len)
                    .find(|e| group_of(**e) == stat.pgrp)
            {
                *e = entry(stat.pgrp, 1);
            }
            true
        });
        if scanned {
            let mut at = 0;
            while at < len {
                if table.get(at).is_some_and(|e| count_of(*e) == 0) {
                    remove(table, &mut len, at);
                } else {
                    at += 1;
                }
            }
        }
        if len == 0 || now_ms() >= deadline {
            return;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        // SAFETY: nanosleep reads the local `pause`.
        unsafe {
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}

/// Closes every descriptor but `keep`: `close_range` where the kernel has it (5.9), one by
/// one up to the descriptor limit elsewhere.
fn close_all_except(keep: libc::c_int) {
    let keep = keep.max(0) as u32;
    // SAFETY: close_range(2) only closes descriptors of this process.
    let below = if keep > 0 {
        unsafe { libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32) }
    } else {
        0
    };
    // SAFETY: as above.
    let above = unsafe { libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32) };
    if below == 0 && above == 0 {
        return;
    }
    // SAFETY: rlimit is a plain C struct, valid when zeroed; getrlimit writes it.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
    {
        limit.rlim_cur.min(1 << 20)
    } else {
        1 << 20
    };
    for fd in 0..max as u32 {
        if fd != keep {
            // SAFETY: close(2) on a descriptor of this process (or none).
            unsafe {
                libc::close(fd as libc::c_int);
            }
        }
    }
}

fn now_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the local `t`; it is async-signal-safe.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t);
    }
    (t.tv_sec.max(0) as u64)
        .saturating_mul(1000)
        .saturating_add(t.tv_nsec.max(0) as u64 / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_registered_twice_stays_watched_until_unwatched_twice() {
        let mut table = vec![0u64; 4];
        let mut len = 0;
        assert!(watch(&mut table, &mut len, 7));
        assert!(watch(&mut table, &mut len, 9));
        assert!(watch(&mut table, &mut len, 7));
        unwatch(&mut table, &mut len, 7);
        assert_eq!(len, 2);
        unwatch(&mut table, &mut len, 7);
        assert_eq!(len, 1);
        assert_eq!(group_of(table[0]), 9);
        // An unknown group changes nothing.
        unwatch(&mut table, &mut len, 11);
        assert_eq!(len, 1);
    }

    #[test]
    fn a_full_table_refuses() {
        let mut table = vec![0u64; 2];
        let mut len = 0;
        assert!(watch(&mut table, &mut len, 1));
        assert!(watch(&mut table, &mut len, 2));
        assert!(!watch(&mut table, &mut len, 3));
        assert!(watch(&mut table, &mut len, 2));
    }

    #[test]
    fn records_round_trip() {
        let r = record(WATCH, 123_456);
        assert_eq!(i32::from_ne_bytes([r[0], r[1], r[2], r[3]]), WATCH);
        assert_eq!(i32::from_ne_bytes([r[4], r[5], r[6], r[7]]), 123_456);
        assert_eq!(group_of(entry(-5, 3)), -5);
        assert_eq!(count_of(entry(-5, 3)), 3);
    }
}
