//! The `.pipe` files named on a command line (`pipec check`, `pipec fmt`): a file is taken
//! as it is; a folder stands for its `.pipe` files and those of its subfolders, in name
//! order, skipping hidden files and folders (`.git/`, the store's `.pipec/`) and not
//! following links to folders (which could loop).

use std::path::{Path, PathBuf};

/// A path of the command line that names nothing to read.
pub(super) enum PathProblem {
    /// Neither a file nor a folder.
    Missing(PathBuf),
    /// A folder without a `.pipe` file at any depth.
    NoPipeFiles(PathBuf),
}

impl PathProblem {
    pub(super) fn message(&self) -> String {
        match self {
            PathProblem::Missing(p) => {
                format!(
                    "error: cannot read `{}`: no such file or folder",
                    p.display()
                )
            }
            PathProblem::NoPipeFiles(p) => format!(
                "error: `{}` holds no .pipe file (hidden files and folders are not searched)",
                p.display()
            ),
        }
    }
}

/// Every file the paths stand for, or the first path that stands for none.
pub(super) fn pipe_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, PathProblem> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let before = out.len();
            search(p, &mut out);
            if out.len() == before {
                return Err(PathProblem::NoPipeFiles(p.clone()));
            }
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(PathProblem::Missing(p.clone()));
        }
    }
    Ok(out)
}

/// The `.pipe` files of `dir`, then those of its subfolders, each level in name order.
fn search(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<(PathBuf, bool)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| {
                    // The entry's own type: a link to a folder is not a folder here.
                    let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                    (e.path(), is_dir)
                })
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    let mut folders = Vec::new();
    for (path, is_dir) in entries {
        // Hidden entries are tools' own (`.git/`, `.pipec/`, an editor's `.#x.pipe`).
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        if is_dir {
            folders.push(path);
        } else if path.extension().is_some_and(|x| x == "pipe") && path.is_file() {
            out.push(path);
        }
    }
    for f in folders {
        search(&f, out);
    }
}
