//! Where the program a pipeline names (a server's `command`, a tool's) is, found as
//! pipec resolves it before starting anything: a name with a `/` is a path relative to
//! the pipeline's folder, a bare name is looked for beside pipec's own executable (so
//! programs shipped with pipec win over whatever `PATH` holds) and then on `PATH`.

use std::path::{Path, PathBuf};

/// The executable file `command` names, as an absolute path, or `None` when there is no
/// such executable file. `base_dir` is the folder a path is relative to (the pipeline's
/// project root), and also where a relative `PATH` entry is taken from.
pub fn find_program(command: &str, base_dir: &Path) -> Option<PathBuf> {
    if command.is_empty() {
        return None;
    }
    if command.contains('/') {
        return executable(&base_dir.join(command));
    }
    let beside_pipec = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf));
    if let Some(found) = beside_pipec.and_then(|dir| executable(&dir.join(command))) {
        return Some(found);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter_map(|dir| executable(&base_dir.join(dir).join(command)))
        .next()
}

/// `path`, made absolute, if it is a regular file someone may execute.
fn executable(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return None;
        }
    }
    std::path::absolute(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pipec-find-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    #[cfg(unix)]
    fn make(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[cfg(unix)]
    #[test]
    fn a_path_is_taken_from_the_base_folder_and_must_be_executable() {
        let dir = scratch("path");
        std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
        make(&dir.join("bin/server"), 0o755);
        make(&dir.join("bin/data"), 0o644);
        let server = std::path::absolute(dir.join("bin/server")).expect("absolute");
        assert_eq!(find_program("./bin/server", &dir), Some(server.clone()));
        assert_eq!(find_program("bin/server", &dir), Some(server));
        assert_eq!(find_program("bin/data", &dir), None);
        assert_eq!(find_program("bin/missing", &dir), None);
        assert_eq!(find_program("bin", &dir), None, "a folder is not a program");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_bare_name_is_found_on_path() {
        let found = find_program("sh", Path::new("/")).expect("sh is on PATH");
        assert!(found.is_absolute());
        assert!(found.ends_with("sh"));
        assert_eq!(
            find_program("no-such-program-pipec-knows", Path::new("/")),
            None
        );
        assert_eq!(find_program("", Path::new("/")), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_bare_name_beside_pipec_wins_over_path() {
        // The test binary stands in for pipec: a program next to it is found first.
        let exe = std::env::current_exe().expect("exe");
        let dir = exe.parent().expect("folder");
        let name = format!("pipec-beside-{}", std::process::id());
        let beside = dir.join(&name);
        make(&beside, 0o755);
        let found = find_program(&name, Path::new("/"));
        let _ = std::fs::remove_file(&beside);
        assert_eq!(found, Some(beside));
    }
}
