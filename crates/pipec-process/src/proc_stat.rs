//! Reading `/proc/<pid>/stat` and scanning `/proc`, without allocating or taking a lock, so
//! that the reaper can use it after `fork` as well as pipec: a process's state, parent,
//! group and start time, and whether a process group still has a live member.
//!
//! A zombie counts as gone everywhere here: it runs no more code, and where orphans are
//! reparented to a first process that never reaps them (some containers), zombies stay
//! for good, so waiting for them to disappear would never end.

/// The fields of `/proc/<pid>/stat` that process control needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    /// The state letter (`R`, `S`, `D`, `Z`, ...).
    pub state: u8,
    pub ppid: i32,
    pub pgrp: i32,
    /// Clock ticks after boot at which the process started (field 22).
    pub start_time: u64,
}

impl Stat {
    /// Whether the process can still run code: not a zombie, not being torn down.
    pub(crate) fn is_live(&self) -> bool {
        !matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// The stat of `pid`, if such a process exists and its stat reads.
pub(crate) fn read(pid: i32) -> Option<Stat> {
    let mut path = [0u8; 32];
    stat_path(pid, &mut path)?;
    let mut buf = [0u8; 1024];
    let n = read_file(&path, &mut buf)?;
    parse(buf.get(..n)?)
}

/// Whether any process of group `pgrp` is live (zombies are not). Without `/proc` it
/// answers as `kill(-pgrp, 0)` does: a group of zombies then counts as live.
pub(crate) fn group_has_live_members(pgrp: i32) -> bool {
    if pgrp <= 0 || !group_exists(pgrp) {
        return false;
    }
    let mut live = false;
    let scanned = for_each_process(|stat| {
        if stat.pgrp == pgrp && stat.is_live() {
            live = true;
            return false;
        }
        true
    });
    live || !scanned
}

/// Whether `kill(-pgrp, 0)` finds the group (zombies included).
pub(crate) fn group_exists(pgrp: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; no memory effects.
    let r = unsafe { libc::kill(-pgrp, 0) };
    // SAFETY: reads this thread's errno.
    r == 0 || unsafe { *libc::__errno_location() } != libc::ESRCH
}

/// Calls `visit` with the stat of every process in `/proc` until it returns false;
/// whether `/proc` could be read.
pub(crate) fn for_each_process(mut visit: impl FnMut(&Stat) -> bool) -> bool {
    // SAFETY: open(2) on a NUL-terminated literal; the descriptor is closed below.
    let dir = unsafe {
        libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return false;
    }
    let mut entries = [0u8; 4096];
    'scan: loop {
        // SAFETY: getdents64 writes at most `entries.len()` bytes into `entries`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                entries.len(),
            )
        };
        if n <= 0 {
            break;
        }
        let filled = entries.get(..n as usize).unwrap_or(&[]);
        let mut at = 0usize;
        // Each record: inode (8), offset (8), record length (2), type (1), name, NUL.
        while let Some(record) = filled.get(at..) {
            let Some(&[lo, hi]) = record.get(16..18) else {
                break;
            };
            let reclen = u16::from_ne_bytes([lo, hi]) as usize;
            if reclen == 0 {
                break;
            }
            let name = record.get(19..reclen.min(record.len())).unwrap_or(&[]);
            let name = name.split(|b| *b == 0).next().unwrap_or(&[]);
            if let Some(pid) = parse_decimal(name)
                && let Some(stat) = read(pid as i32)
                && !visit(&stat)
            {
                break 'scan;
            }
            at = at.saturating_add(reclen);
        }
    }
    // SAFETY: closes the descriptor opened above.
    unsafe {
        libc::close(dir);
    }
    true
}

/// Writes `/proc/<pid>/stat` and a NUL into `out`; the length without the NUL.
fn stat_path(pid: i32, out: &mut [u8; 32]) -> Option<usize> {
    if pid <= 0 {
        return None;
    }
    let mut digits = [0u8; 10];
    let mut n = pid as u32;
    let mut count = 0usize;
    while n > 0 {
        *digits.get_mut(count)? = b'0' + (n % 10) as u8;
        n /= 10;
        count += 1;
    }
    let mut len = 0usize;
    let mut push = |b: u8, out: &mut [u8; 32]| -> Option<()> {
        *out.get_mut(len)? = b;
        len += 1;
        Some(())
    };
    for b in b"/proc/" {
        push(*b, out)?;
    }
    for i in (0..count).rev() {
        push(*digits.get(i)?, out)?;
    }
    for b in b"/stat\0" {
        push(*b, out)?;
    }
    Some(len - 1)
}

/// Reads up to `buf.len()` bytes of the file at the NUL-terminated `path`.
fn read_file(path: &[u8], buf: &mut [u8]) -> Option<usize> {
    // SAFETY: `path` is NUL-terminated (built by `stat_path`); the descriptor is closed
    // below.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut filled = 0usize;
    while filled < buf.len() {
        let rest = buf.get_mut(filled..).unwrap_or(&mut []);
        // SAFETY: read(2) writes at most `rest.len()` bytes into `rest`.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if n < 0 {
            // SAFETY: reads this thread's errno.
            if unsafe { *libc::__errno_location() } == libc::EINTR {
                continue;
            }
            break;
        }
        if n == 0 {
            break;
        }
        filled += n as usize;
    }
    // SAFETY: closes the descriptor opened above.
    unsafe {
        libc::close(fd);
    }
    (filled > 0).then_some(filled)
}

/// The fields after the command name, which ends at the line's last `)` (a name may
/// itself contain `)` and spaces; the fields after it are numbers).
fn parse(line: &[u8]) -> Option<Stat> {
    let close = line.iter().rposition(|b| *b == b')')?;
    let mut fields = line
        .get(close + 1..)?
        .split(|b| *b == b' ' || *b == b'\n')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let ppid = parse_decimal(fields.next()?)?;
    let pgrp = parse_decimal(fields.next()?)?;
    // Fields 6 to 21 lie between the group and the start time.
    let start_time = parse_decimal(fields.nth(16)?)?;
    Some(Stat {
        state,
        ppid: i32::try_from(ppid).ok()?,
        pgrp: i32::try_from(pgrp).ok()?,
        start_time,
    })
}

fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_parses_past_a_name_with_spaces_and_parentheses() {
        let line = b"4242 (a b) c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n";
        let stat = parse(line).expect("parses");
        assert_eq!(
            stat,
            Stat {
                state: b'S',
                ppid: 17,
                pgrp: 4242,
                start_time: 987654
            }
        );
    }

    #[test]
    fn this_process_reads_as_live_with_its_own_parent() {
        let stat = read(std::process::id() as i32).expect("own stat");
        assert!(stat.is_live());
        // SAFETY: getppid has no preconditions.
        #[allow(unsafe_code)]
        let parent = unsafe { libc::getppid() };
        assert_eq!(stat.ppid, parent);
        assert!(stat.start_time > 0);
    }

    #[test]
    fn the_scan_finds_this_process() {
        let me = read(std::process::id() as i32).expect("own stat");
        let mut seen = false;
        assert!(for_each_process(|s| {
            seen |= s.start_time == me.start_time && s.ppid == me.ppid && s.pgrp == me.pgrp;
            !seen
        }));
        assert!(seen);
    }

    #[test]
    fn a_path_is_built_for_large_pids() {
        let mut out = [0u8; 32];
        let len = stat_path(i32::MAX, &mut out).expect("fits");
        assert_eq!(&out[..len], b"/proc/2147483647/stat");
        assert_eq!(out[len], 0);
    }
}
