//! Paths a pipeline names that are read when it runs or serves, not when it is compiled
//! (an `exec` program written as a path, a scripted model's replies, a served folder):
//! each is held against the project through the loader, so a wrong one shows at check
//! time (P0110).

use std::path::{Path, PathBuf};

use super::Checker;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;

/// What a path must name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathKind {
    File,
    Folder,
}

impl Checker<'_> {
    /// P0110 when `path` (relative to the project root, as the plan keeps it, or
    /// absolute) names no file or folder of `kind`. `what` says what it is ("the replies
    /// file"); `span` is where it is written.
    pub(crate) fn check_path_exists(
        &mut self,
        file: FileId,
        span: Span,
        path: &str,
        kind: PathKind,
        what: &str,
    ) {
        let full: PathBuf = if Path::new(path).is_absolute() {
            PathBuf::from(path)
        } else {
            self.hir.project_root.join(path)
        };
        let (found, other) = match kind {
            PathKind::File => (self.loader.exists(&full), self.loader.is_dir(&full)),
            PathKind::Folder => (self.loader.is_dir(&full), self.loader.exists(&full)),
        };
        if found {
            return;
        }
        let shown = path.trim_start_matches("./");
        let (message, label) = match (other, kind) {
            (true, PathKind::File) => (format!("{what} `{shown}` is a folder"), "not a file"),
            (true, PathKind::Folder) => (format!("{what} `{shown}` is a file"), "not a folder"),
            (false, _) => (format!("{what} `{shown}` does not exist"), "no such path"),
        };
        self.diags.push(
            Diagnostic::new(&r::PATH_NOT_FOUND, file, span, message)
                .label(label)
                .help("a path is taken from the folder of the file that names it (the message shows it from the project root): correct the path, or make sure it exists before the pipeline runs"),
        );
    }
}
