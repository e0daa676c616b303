//! Links that have "expired": email reads armed to fail the way a read of a resource that
//! is gone fails. Three ways arm them: `CRM_EXPIRE_EMAILS` (the first N email reads of this
//! process), the `arm_expiry` tool (the next N of this process), and `CRM_EXPIRE_FILE` (a
//! count in a file that every process decrements, so a test can arm the process a
//! resume will start).

use std::path::PathBuf;
use std::sync::Mutex;

use super::locked_file;

pub(crate) struct Expiry {
    /// Email reads of this process still to fail.
    armed: Mutex<u64>,
    file: Option<PathBuf>,
}

impl Expiry {
    pub(crate) fn new(armed: u64, file: Option<PathBuf>) -> Expiry {
        Expiry {
            armed: Mutex::new(armed),
            file,
        }
    }

    /// Arms the next `count` email reads of this process (instead of what was armed).
    pub(crate) fn arm(&self, count: u64) {
        if let Ok(mut armed) = self.armed.lock() {
            *armed = count;
        }
    }

    /// Whether this email read fails as expired; taking one from the count that says so.
    pub(crate) fn take(&self) -> bool {
        if let Ok(mut armed) = self.armed.lock()
            && *armed > 0
        {
            *armed -= 1;
            return true;
        }
        let Some(path) = &self.file else {
            return false;
        };
        let taken = locked_file::update(path, |text| match text.trim().parse::<u64>() {
            Ok(0) => (None, Ok(false)),
            Ok(count) => (Some(format!("{}\n", count - 1)), Ok(true)),
            Err(_) => (None, Err(text.trim().to_string())),
        });
        match taken {
            Ok(Some(Ok(taken))) => taken,
            Ok(None) => false,
            Ok(Some(Err(text))) => {
                eprintln!(
                    "pipec-demo-crm: CRM_EXPIRE_FILE {} holds {text:?}, not a count; no read expires\n  help: write a whole number into it, such as `1`",
                    path.display()
                );
                false
            }
            Err(e) => {
                eprintln!(
                    "pipec-demo-crm: CRM_EXPIRE_FILE {} could not be read: {e}",
                    path.display()
                );
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_count_runs_out_and_arming_replaces_it() {
        let expiry = Expiry::new(2, None);
        assert!(expiry.take());
        assert!(expiry.take());
        assert!(!expiry.take());
        expiry.arm(1);
        assert!(expiry.take());
        assert!(!expiry.take());
    }

    #[test]
    fn the_file_count_is_taken_one_read_at_a_time() {
        let path = std::env::temp_dir().join(format!("pipec-expiry-file-{}", std::process::id()));
        std::fs::write(&path, "2\n").ok();
        let expiry = Expiry::new(0, Some(path.clone()));
        assert!(expiry.take());
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("1\n"));
        assert!(expiry.take());
        assert!(!expiry.take());
        assert_eq!(std::fs::read_to_string(&path).ok().as_deref(), Some("0\n"));
        std::fs::write(&path, "many").ok();
        assert!(!expiry.take(), "a file that holds no count arms nothing");
        let _ = std::fs::remove_file(&path);
        assert!(!expiry.take(), "nor does a missing one");
    }
}
