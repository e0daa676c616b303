//! Opening a path beneath a directory descriptor without following any symbolic link and
//! without blocking, and listing a directory by its descriptor. On Linux the kernel
//! resolves the whole path under `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`;
//! elsewhere, or where `openat2` is unavailable (old kernels, seccomp filters), the path
//! is walked one component at a time with `O_NOFOLLOW`. Either way no check is separate
//! from the open, so swapping a folder for a link between the two cannot win.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

/// How a path is resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Resolve {
    /// `openat2` where the kernel has it, the walk otherwise.
    #[default]
    Auto,
    /// The component-by-component walk, even where `openat2` exists.
    Walk,
}

/// Why a path could not be opened.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    /// No entry by that name (or a folder along the path is missing or is a file).
    NotFound,
    /// A component is a symbolic link, or the path would leave the directory.
    Symlink,
    /// The entry is a socket or another thing that cannot be opened for reading.
    NotOpenable,
    Io(io::Error),
}

/// Opens the root folder itself. It is the server's own configuration, so a link in its
/// path is followed; only what lies beneath it is held to the rules.
pub(crate) fn open_directory(path: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)?;
    Ok(file.into())
}

/// The flags the last component is opened with: read only, never a link, and never
/// waiting (a FIFO opens at once and is then refused by `fstat`).
const LEAF_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY;
/// The flags each folder along the path is opened with.
const FOLDER_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;

/// Opens `segments` (already checked: no empty, `.`, `..` or `/`-holding segment)
/// beneath `root`. `directory`: the last one must be a folder (for listing).
pub(crate) fn open_beneath(
    root: BorrowedFd<'_>,
    segments: &[String],
    directory: bool,
    resolve: Resolve,
) -> Result<File, OpenFailure> {
    let leaf = if directory { FOLDER_FLAGS } else { LEAF_FLAGS };
    if segments.is_empty() {
        // The root itself, as a new descriptor of its own.
        let dot = c_name(".")?;
        return openat(root, &dot, FOLDER_FLAGS).map(File::from);
    }
    #[cfg(target_os = "linux")]
    if resolve == Resolve::Auto && openat2_available() {
        let joined = c_name(&segments.join("/"))?;
        match openat2(root, &joined, leaf) {
            Err(OpenFailure::Io(e))
                if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) =>
            {
                OPENAT2_MISSING.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            other => return other.map(File::from),
        }
    }
    let _ = resolve;
    walk(root, segments, leaf).map(File::from)
}

fn c_name(name: &str) -> Result<CString, OpenFailure> {
    // A NUL was refused long before; a name holding one is simply not there.
    CString::new(name).map_err(|_| OpenFailure::NotFound)
}

fn walk(
    root: BorrowedFd<'_>,
    segments: &[String],
    leaf: libc::c_int,
) -> Result<OwnedFd, OpenFailure> {
    let mut current: Option<OwnedFd> = None;
    for (i, segment) in segments.iter().enumerate() {
        let name = c_name(segment)?;
        let flags = if i + 1 == segments.len() {
            leaf
        } else {
            FOLDER_FLAGS
        };
        let dir = match &current {
            Some(fd) => fd_borrow(fd),
            None => root,
        };
        let next = match openat(dir, &name, flags) {
            // `O_DIRECTORY | O_NOFOLLOW` on a link says "not a folder"; say "link", as
            // `openat2` does. The look is for the message only: nothing is opened.
            Err(OpenFailure::NotFound)
                if mode_of(dir, &name).is_some_and(|m| m & libc::S_IFMT == libc::S_IFLNK) =>
            {
                return Err(OpenFailure::Symlink);
            }
            other => other?,
        };
        current = Some(next);
    }
    current.ok_or(OpenFailure::NotFound)
}

fn fd_borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    fd.as_fd()
}

fn failure(error: io::Error) -> OpenFailure {
    match error.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => OpenFailure::NotFound,
        Some(libc::ELOOP | libc::EXDEV) => OpenFailure::Symlink,
        Some(libc::ENXIO | libc::EOPNOTSUPP) => OpenFailure::NotOpenable,
        _ => OpenFailure::Io(error),
    }
}

fn openat(dir: BorrowedFd<'_>, name: &CString, flags: libc::c_int) -> Result<OwnedFd, OpenFailure> {
    // SAFETY: `name` is a NUL-terminated string that outlives the call and `dir` is an
    // open descriptor; `openat` reads nothing else.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(failure(io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by `openat`, so it is open and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(target_os = "linux")]
static OPENAT2_MISSING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(target_os = "linux")]
fn openat2_available() -> bool {
    !OPENAT2_MISSING.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(target_os = "linux")]
fn openat2(
    dir: BorrowedFd<'_>,
    path: &CString,
    flags: libc::c_int,
) -> Result<OwnedFd, OpenFailure> {
    // SAFETY: `open_how` is plain integers, for which all zeroes is a valid value (and
    // what the kernel expects of fields pipec does not set).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS;
    // SAFETY: the path is NUL-terminated and `how` is a live `open_how` whose size is
    // passed with it, as the system call requires.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(failure(io::Error::last_os_error()));
    }
    let Ok(fd) = libc::c_int::try_from(fd) else {
        return Err(OpenFailure::Io(io::Error::other(
            "openat2 returned no descriptor",
        )));
    };
    // SAFETY: the descriptor was just returned by the kernel and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a directory entry is, without following it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryKind {
    File,
    Folder,
    /// A link, FIFO, device or socket: never served, so never offered.
    Other,
}

/// At most `limit` entries of the open folder `dir` (`.` and `..` left out), each with
/// its kind; `true` when the folder held more.
pub(crate) fn list_directory(
    dir: File,
    limit: usize,
) -> io::Result<(Vec<(String, EntryKind)>, bool)> {
    use std::os::fd::IntoRawFd;
    let owned: OwnedFd = dir.into();
    // A second descriptor for `fstatat`, since `fdopendir` takes the first one over.
    let stat_dir = owned.try_clone()?;
    let raw = owned.into_raw_fd();
    // SAFETY: `raw` is an open folder descriptor that nothing else owns now
    // (`into_raw_fd` gave it up); `closedir` below closes it.
    let stream = unsafe { libc::fdopendir(raw) };
    if stream.is_null() {
        let error = io::Error::last_os_error();
        // SAFETY: `fdopendir` failed, so `raw` is still open and still ours to close.
        unsafe { libc::close(raw) };
        return Err(error);
    }
    let mut entries = Vec::new();
    let mut more = false;
    loop {
        // SAFETY: `stream` is the live stream opened above, used by this thread only.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        if entries.len() == limit {
            more = true;
            break;
        }
        // SAFETY: `readdir` returned a valid entry whose `d_name` is NUL-terminated and
        // stays valid until the next `readdir` on this stream.
        let name = unsafe { std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()) };
        let Ok(text) = name.to_str() else {
            continue;
        };
        if text == "." || text == ".." {
            continue;
        }
        let kind = entry_kind(fd_borrow(&stat_dir), name);
        entries.push((text.to_string(), kind));
    }
    // SAFETY: `stream` is live and closed once, here.
    unsafe { libc::closedir(stream) };
    Ok((entries, more))
}

fn entry_kind(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> EntryKind {
    match mode_of(dir, name).map(|m| m & libc::S_IFMT) {
        Some(libc::S_IFREG) => EntryKind::File,
        Some(libc::S_IFDIR) => EntryKind::Folder,
        _ => EntryKind::Other,
    }
}

/// The mode of `name` in `dir`, a link's own rather than its target's.
fn mode_of(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> Option<libc::mode_t> {
    // SAFETY: all zeroes is a valid `stat` (plain integers), overwritten by `fstatat`.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is NUL-terminated, `stat` is a live, writable `stat`, `dir` is open.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    (rc == 0).then_some(stat.st_mode)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[cfg(target_os = "linux")]
    #[test]
    fn openat2_refuses_links_and_opens_files() {
        let dir = std::env::temp_dir().join(format!("pipec-openat2-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/file.txt"), "x").unwrap();
        std::os::unix::fs::symlink("sub", dir.join("link")).unwrap();
        let root = open_directory(&dir).unwrap();
        let name = CString::new("sub/file.txt").unwrap();
        match openat2(root.as_fd(), &name, LEAF_FLAGS) {
            // A kernel (or a sandbox) without it: the walk serves instead.
            Err(OpenFailure::Io(e))
                if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {}
            other => {
                assert!(other.is_ok(), "{other:?}");
                let through_link = CString::new("link/file.txt").unwrap();
                assert!(matches!(
                    openat2(root.as_fd(), &through_link, LEAF_FLAGS),
                    Err(OpenFailure::Symlink)
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
