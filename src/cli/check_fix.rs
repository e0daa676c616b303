//! `pipec check --fix`, `--unsafe-fixes` and `--diff`: the fixes of `crate::fix` written
//! back to the files (each atomically: a temporary file beside it, then a rename), or
//! shown as a unified diff with nothing written.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::fix::{self, FixReport, FixRun, Mode};
use crate::source::FsLoader;

/// What the fix flags asked for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FixRequest {
    pub mode: Mode,
    /// Show a diff and write nothing.
    pub diff: bool,
}

/// What happened, for `check` to go on with.
pub(crate) enum Fixed {
    /// The files were written (or nothing needed fixing): check them again from disk.
    Written,
    /// `--diff`, or a write that failed: the exit status.
    Done(u8),
}

pub(crate) fn run(roots: &[(PathBuf, String)], request: FixRequest) -> Fixed {
    let result = fix::fix_files(&FsLoader, roots, request.mode);
    let mut report = String::new();
    for r in &result.refused {
        report.push_str(&format!(
            "not fixed {}: {} (the file would not parse)\n",
            place(r),
            r.title
        ));
    }
    for name in &result.unfinished {
        report.push_str(&format!(
            "{name}: still offers fixes after {} passes; fixes there undo each other\n",
            fix::MAX_PASSES
        ));
    }
    if request.diff {
        let mut diff = String::new();
        for c in &result.changed {
            diff.push_str(&fix::diff::unified(&c.name, &c.before, &c.after));
        }
        super::out(&diff);
        let n = result.applied.len();
        report.push_str(&match n {
            0 => "nothing to fix\n".to_string(),
            1 => format!("would fix 1 problem in {}\n", files(&result)),
            n => format!("would fix {n} problems in {}\n", files(&result)),
        });
        eprint(&report);
        return Fixed::Done(if result.changed.is_empty() {
            EXIT_OK
        } else {
            EXIT_FINDINGS
        });
    }
    for c in &result.changed {
        if let Err(e) = write_back(&c.path, &c.before, &c.after) {
            for r in &result.applied {
                report.push_str(&format!("fixed {}: {}\n", place(r), r.title));
            }
            report.push_str(&format!("error: cannot write `{}`: {e}\n", c.name));
            report.push_str("help: the files before it were written; run `pipec check --fix` again once it is writable\n");
            eprint(&report);
            return Fixed::Done(EXIT_USAGE);
        }
    }
    for r in &result.applied {
        report.push_str(&format!("fixed {}: {}\n", place(r), r.title));
    }
    if !result.applied.is_empty() {
        let n = result.applied.len();
        report.push_str(&format!(
            "{} in {}\n",
            if n == 1 {
                "1 problem fixed".to_string()
            } else {
                format!("{n} problems fixed")
            },
            files(&result)
        ));
    }
    eprint(&report);
    Fixed::Written
}

fn place(r: &FixReport) -> String {
    format!("{}:{}:{} {} {}", r.file, r.line, r.column, r.code, r.name)
}

fn files(run: &FixRun) -> String {
    match run.changed.len() {
        1 => "1 file".to_string(),
        n => format!("{n} files"),
    }
}

fn eprint(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
}

/// Writes `after` over `path` through a temporary file in its folder and a rename, so a
/// reader never sees half a file; refuses when the file is no longer `before` (an editor
/// saved it meanwhile).
fn write_back(path: &Path, before: &str, after: &str) -> std::io::Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let now = crate::source::read_text(&target)?;
    if now != before {
        return Err(std::io::Error::other(
            "it changed while it was being fixed; nothing was written to it",
        ));
    }
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.pipec-fix.{}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(after.as_bytes())?;
        f.sync_all()?;
        if let Ok(meta) = std::fs::metadata(&target) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
