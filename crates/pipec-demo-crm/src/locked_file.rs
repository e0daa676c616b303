//! Read-modify-write of a small control file (the fault file, the expiry count) that
//! several server processes may share: each change happens under an exclusive lock on
//! the file, so two processes never both take the last count.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

/// Reads the file at `path` under an exclusive lock and hands its text to `change`, which
/// returns the new text (or `None` to leave the file as it is) and a value passed back.
/// A missing file gives `Ok(None)`: these files arm something only while they exist.
pub(crate) fn update<T>(
    path: &Path,
    change: impl FnOnce(&str) -> (Option<String>, T),
) -> io::Result<Option<T>> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    file.lock()?;
    let result = rewrite(&mut file, change);
    // Closing the file releases the lock too; unlocking first says so.
    let _ = file.unlock();
    result.map(Some)
}

fn rewrite<T>(file: &mut File, change: impl FnOnce(&str) -> (Option<String>, T)) -> io::Result<T> {
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let (new_text, value) = change(&text);
    if let Some(new_text) = new_text {
        // In place rather than by renaming a new file over it: the lock belongs to this
        // inode, and a process waiting for it must then read what was written.
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(new_text.as_bytes())?;
        file.flush()?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("pipec-locked-file-{tag}-{}", std::process::id()))
    }

    #[test]
    fn a_change_is_written_and_its_value_returned() {
        let path = temp("change");
        std::fs::write(&path, "3\n").ok();
        let seen = update(&path, |text| (Some("2\n".to_string()), text.to_string()));
        assert_eq!(seen.ok().flatten().as_deref(), Some("3\n"));
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("2\n"));
        let kept = update(&path, |_| (None, ()));
        assert!(matches!(kept, Ok(Some(()))));
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("2\n"));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_missing_file_changes_nothing() {
        let path = temp("missing");
        let _ = std::fs::remove_file(&path);
        let seen = update(&path, |_| (Some("x".to_string()), ()));
        assert!(matches!(seen, Ok(None)));
        assert!(!path.exists(), "a missing file is not created");
    }
}
