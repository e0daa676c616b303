//! Where a command's program is, found as `execvp` finds it from the child's working
//! directory: a name with a `/` is a path (relative to that directory), a bare name is
//! searched on `PATH`, whose relative or empty entries are taken from that directory too.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

/// The `PATH` `execvp` searches when the environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Whether `program` is searched on `PATH` (it names no path).
pub(crate) fn is_bare_name(program: &str) -> bool {
    !program.contains('/')
}

/// `program` as the child should be given it: a path made absolute against `cwd` (the
/// child changes into `cwd` before it starts the program, and pipec's own directory may
/// differ), a bare name as it is.
pub(crate) fn program(program: &str, cwd: &Path) -> PathBuf {
    if is_bare_name(program) || Path::new(program).is_absolute() {
        PathBuf::from(program)
    } else {
        let joined = cwd.join(program);
        std::path::absolute(&joined).unwrap_or(joined)
    }
}

/// The absolute paths to try for `program`, in turn: the program itself if it names a
/// path; otherwise the name in each directory of `path` (the child's `PATH`, or the
/// default), where a relative or empty directory is taken from `cwd`.
pub(crate) fn candidates(
    program: &str,
    cwd: &Path,
    path: Option<&OsStr>,
) -> io::Result<Vec<PathBuf>> {
    if !is_bare_name(program) {
        return Ok(vec![std::path::absolute(cwd.join(program))?]);
    }
    let path = path.unwrap_or(OsStr::new(DEFAULT_PATH));
    std::env::split_paths(path)
        .map(|dir| std::path::absolute(cwd.join(dir).join(program)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_tried_in_every_path_directory_relative_ones_from_the_cwd() {
        let found = candidates(
            "tool",
            Path::new("/project"),
            Some(OsStr::new("/usr/bin::bin")),
        )
        .expect("candidates");
        assert_eq!(
            found,
            vec![
                PathBuf::from("/usr/bin/tool"),
                PathBuf::from("/project/tool"),
                PathBuf::from("/project/bin/tool"),
            ]
        );
    }

    #[test]
    fn a_path_is_taken_from_the_cwd() {
        assert_eq!(
            candidates("./x.sh", Path::new("/p"), None).expect("candidates"),
            vec![PathBuf::from("/p/x.sh")]
        );
        assert_eq!(program("./x.sh", Path::new("/p")), PathBuf::from("/p/x.sh"));
        assert_eq!(program("sh", Path::new("/p")), PathBuf::from("sh"));
    }
}
