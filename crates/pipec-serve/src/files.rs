//! Serving files beneath a root folder: the path a template's values name, opened beneath
//! the root without following links and without blocking, read only when it is a regular
//! file and only up to a size cap, typed by its extension, and given back as text or
//! bytes. Also the completion of a path variable, which offers only what a read would
//! serve.

use std::fmt;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::matcher::{Captures, Piece, Template};
use super::mime_type;
pub use super::open_beneath::Resolve;
use super::open_beneath::{self, EntryKind, OpenFailure};
use super::template_path::{self, PathError};
use super::value_check::{self, Refusal};

/// The size cap of a served file unless the template sets one.
pub const DEFAULT_MAX_BYTES: u64 = 8 * 1024 * 1024;
/// The most values one completion answers (MCP's own limit).
pub const MAX_COMPLETION_VALUES: usize = 100;
/// The most folder entries one completion looks at.
pub const MAX_COMPLETION_SCAN: usize = 10_000;

/// How a root serves its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOptions {
    /// Files larger than this are refused, never truncated.
    pub max_bytes: u64,
    /// Serve names that start with `.` (`.env`, `.git/`); off unless asked for.
    pub allow_hidden: bool,
    pub resolve: Resolve,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            max_bytes: DEFAULT_MAX_BYTES,
            allow_hidden: false,
            resolve: Resolve::Auto,
        }
    }
}

/// A folder whose files are served.
#[derive(Clone, Debug)]
pub struct FileRoot {
    root: PathBuf,
    options: FileOptions,
}

/// A served file's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Valid UTF-8 of a text MIME type.
    Text(String),
    Blob(Vec<u8>),
}

/// What a read gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRead {
    pub mime_type: String,
    pub body: Body,
    pub size: u64,
}

/// Why a read (or a completion) served nothing. Messages name the path relative to the
/// root only, never the root's own place on disk.
#[derive(Debug)]
pub enum FileError {
    /// Nothing by that name beneath the root (MCP: resource not found).
    NotFound { path: String },
    /// The request is refused for what it names (MCP: invalid params).
    Refused { path: String, reason: FileRefusal },
    /// Over the size cap (MCP: internal error "too large").
    TooLarge { path: String, max_bytes: u64 },
    /// The system failed (MCP: internal error).
    Io { path: String, error: std::io::Error },
}

/// What makes a request refused rather than not found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRefusal {
    /// The values name no acceptable path.
    Path(PathError),
    /// A component is a symbolic link.
    Symlink,
    /// A folder, FIFO, device or socket.
    NotRegular { kind: &'static str },
}

impl fmt::Display for FileRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileRefusal::Path(error) => write!(f, "{error}"),
            FileRefusal::Symlink => {
                f.write_str("a symbolic link is on its path, and links are not followed")
            }
            FileRefusal::NotRegular { kind } => write!(f, "it is a {kind}, not a regular file"),
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::NotFound { path } => write!(f, "no file `{path}`"),
            FileError::Refused { path, reason } => write!(f, "`{path}` is refused: {reason}"),
            FileError::TooLarge { path, max_bytes } => {
                write!(f, "`{path}` is larger than the limit of {max_bytes} bytes")
            }
            FileError::Io { path, error } => write!(f, "cannot read `{path}`: {error}"),
        }
    }
}

/// Values for a path variable, as MCP's `completion/complete` answers them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    /// Sorted; at most [`MAX_COMPLETION_VALUES`].
    pub values: Vec<String>,
    /// How many matched among the entries looked at.
    pub total: usize,
    /// More matched than `values` holds, or the folder was larger than the scan bound.
    pub has_more: bool,
}

impl FileRoot {
    pub fn new(root: impl Into<PathBuf>, options: FileOptions) -> FileRoot {
        FileRoot {
            root: root.into(),
            options,
        }
    }

    pub fn options(&self) -> &FileOptions {
        &self.options
    }

    /// Reads the file a matched template names (see
    /// [`template_path::file_segments`] for which part of the URI is the path).
    pub fn read(&self, template: &Template, captures: &Captures) -> Result<FileRead, FileError> {
        let segments = template_path::file_segments(template, captures, self.options.allow_hidden)
            .map_err(|e| FileError::Refused {
                path: shown(template, captures),
                reason: FileRefusal::Path(e),
            })?;
        self.read_segments(&segments)
    }

    /// Reads `relative` (decoded, `/`-separated) beneath the root, under the same checks.
    pub fn read_path(&self, relative: &str) -> Result<FileRead, FileError> {
        let segments = self.checked_segments(relative)?;
        self.read_segments(&segments)
    }

    fn checked_segments(&self, relative: &str) -> Result<Vec<String>, FileError> {
        let refuse = |reason| FileError::Refused {
            path: relative.to_string(),
            reason: FileRefusal::Path(PathError::Refused {
                variable: None,
                reason,
            }),
        };
        value_check::check_path_value(relative).map_err(refuse)?;
        let mut segments = Vec::new();
        for segment in relative.split('/') {
            if value_check::names_a_drive(segment) {
                return Err(refuse(Refusal::DriveLetter));
            }
            if !self.options.allow_hidden && segment.starts_with('.') {
                return Err(refuse(Refusal::Hidden));
            }
            segments.push(segment.to_string());
        }
        Ok(segments)
    }

    fn open_root(&self, path: &str) -> Result<OwnedFd, FileError> {
        open_beneath::open_directory(&self.root).map_err(|error| FileError::Io {
            path: path.to_string(),
            // The root's own path stays out of the message.
            error: std::io::Error::new(error.kind(), "the served folder cannot be opened"),
        })
    }

    fn read_segments(&self, segments: &[String]) -> Result<FileRead, FileError> {
        let path = segments.join("/");
        let root = self.open_root(&path)?;
        let file = open_beneath::open_beneath(root.as_fd(), segments, false, self.options.resolve)
            .map_err(|f| open_error(&path, f))?;
        let metadata = file.metadata().map_err(|error| FileError::Io {
            path: path.clone(),
            error,
        })?;
        if !metadata.is_file() {
            return Err(FileError::Refused {
                path,
                reason: FileRefusal::NotRegular {
                    kind: kind_name(&metadata.file_type()),
                },
            });
        }
        let max = self.options.max_bytes;
        if metadata.len() > max {
            return Err(FileError::TooLarge {
                path,
                max_bytes: max,
            });
        }
        // The size is read again while streaming: the file may grow after `fstat`.
        let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
        file.take(max.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|error| FileError::Io {
                path: path.clone(),
                error,
            })?;
        if bytes.len() as u64 > max {
            return Err(FileError::TooLarge {
                path,
                max_bytes: max,
            });
        }
        let name = segments.last().map(String::as_str).unwrap_or("");
        let mime = mime_type::for_file_name(name);
        Ok(file_read(bytes, mime))
    }

    /// Completes a path variable: `typed` is what the client has typed so far (decoded);
    /// the folder it names is listed, and the entries whose names start with its last
    /// segment are offered as full values. `multi_segment`: folders are offered too (with
    /// a trailing `/`), since the value may go on into them. Whatever fails (a refused or
    /// missing folder) answers no values, never an error: completion discloses nothing a
    /// read would not.
    pub fn complete(&self, typed: &str, multi_segment: bool) -> Completion {
        let (folder, start) = match typed.rsplit_once('/') {
            Some((folder, start)) if multi_segment => (folder, start),
            Some(_) => return Completion::default(),
            None => ("", typed),
        };
        if value_check::check_text(start).is_err()
            || (!self.options.allow_hidden && start.starts_with('.'))
        {
            return Completion::default();
        }
        let segments = if folder.is_empty() {
            Vec::new()
        } else {
            match self.checked_segments(folder) {
                Ok(s) => s,
                Err(_) => return Completion::default(),
            }
        };
        let Ok(root) = self.open_root(folder) else {
            return Completion::default();
        };
        let Ok(dir) =
            open_beneath::open_beneath(root.as_fd(), &segments, true, self.options.resolve)
        else {
            return Completion::default();
        };
        let Ok((entries, truncated)) = open_beneath::list_directory(dir, MAX_COMPLETION_SCAN)
        else {
            return Completion::default();
        };
        let mut values: Vec<String> = entries
            .into_iter()
            .filter(|(name, kind)| {
                name.starts_with(start)
                    && (self.options.allow_hidden || !name.starts_with('.'))
                    && value_check::check_segment(name).is_ok()
                    && match kind {
                        EntryKind::File => true,
                        EntryKind::Folder => multi_segment,
                        EntryKind::Other => false,
                    }
            })
            .map(|(name, kind)| {
                let mut value = if folder.is_empty() {
                    name
                } else {
                    format!("{folder}/{name}")
                };
                if kind == EntryKind::Folder {
                    value.push('/');
                }
                value
            })
            .collect();
        values.sort();
        let total = values.len();
        values.truncate(MAX_COMPLETION_VALUES);
        Completion {
            has_more: truncated || total > values.len(),
            total,
            values,
        }
    }

    /// Completes the variable `argument` of a file template whose served path is that
    /// variable alone (`file:///docs/{+path}`, `file:///src/{path}?mode=raw`); any other
    /// shape answers no values.
    pub fn complete_argument(
        &self,
        template: &Template,
        argument: &str,
        typed: &str,
    ) -> Completion {
        match template.path() {
            [Piece::Literal(prefix), Piece::Var(variable)]
                if prefix.ends_with(b"/") && variable.name == argument =>
            {
                self.complete(typed, variable.multi_segment)
            }
            _ => Completion::default(),
        }
    }

    /// The root, for the server's own messages (never sent to clients).
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Bytes as text when they are UTF-8 of a text type, as a blob otherwise.
pub fn file_read(bytes: Vec<u8>, mime_type: &str) -> FileRead {
    let size = bytes.len() as u64;
    let body = if mime_type::is_text(mime_type) {
        match String::from_utf8(bytes) {
            Ok(text) => Body::Text(text),
            Err(e) => Body::Blob(e.into_bytes()),
        }
    } else {
        Body::Blob(bytes)
    };
    FileRead {
        mime_type: mime_type.to_string(),
        body,
        size,
    }
}

/// The values as the client sent them, for messages about a refused template path.
fn shown(template: &Template, captures: &Captures) -> String {
    template
        .variable_names()
        .iter()
        .filter_map(|n| captures.get(n))
        .collect::<Vec<_>>()
        .join("/")
}

fn open_error(path: &str, failure: OpenFailure) -> FileError {
    let path = path.to_string();
    match failure {
        OpenFailure::NotFound => FileError::NotFound { path },
        OpenFailure::Symlink => FileError::Refused {
            path,
            reason: FileRefusal::Symlink,
        },
        OpenFailure::NotOpenable => FileError::Refused {
            path,
            reason: FileRefusal::NotRegular {
                kind: "socket or special file",
            },
        },
        OpenFailure::Io(error) => FileError::Io { path, error },
    }
}

fn kind_name(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "folder"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "device"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::matcher::match_uri;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp(tag: &str) -> Dir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("pipec-files-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/docs")).unwrap();
        std::fs::write(dir.join("root/docs/guide.md"), "# Guide").unwrap();
        std::fs::write(dir.join("root/logo.png"), [0x89, b'P', b'N', b'G']).unwrap();
        std::fs::write(dir.join("root/.env"), "SECRET=1").unwrap();
        Dir(dir)
    }

    fn both(root: &Path) -> [FileRoot; 2] {
        [Resolve::Auto, Resolve::Walk].map(|resolve| {
            FileRoot::new(
                root,
                FileOptions {
                    resolve,
                    ..FileOptions::default()
                },
            )
        })
    }

    #[test]
    fn text_and_blobs_are_told_apart() {
        let dir = temp("kinds");
        for files in both(&dir.0.join("root")) {
            let read = files.read_path("docs/guide.md").unwrap();
            assert_eq!(read.mime_type, "text/markdown");
            assert_eq!(read.body, Body::Text("# Guide".into()));
            let read = files.read_path("logo.png").unwrap();
            assert!(matches!(read.body, Body::Blob(ref b) if b.len() == 4));
            assert!(matches!(
                files.read_path("docs/none.md"),
                Err(FileError::NotFound { .. })
            ));
            assert!(matches!(
                files.read_path("none/x.md"),
                Err(FileError::NotFound { .. })
            ));
        }
    }

    #[test]
    fn a_template_read_uses_the_path_after_the_literal_folder() {
        let dir = temp("template");
        let template = Template::parse("file:///handbook/{+path}").unwrap();
        let captures = match_uri(&template, "file:///handbook/docs/guide.md")
            .unwrap()
            .unwrap();
        for files in both(&dir.0.join("root")) {
            let read = files.read(&template, &captures).unwrap();
            assert_eq!(read.body, Body::Text("# Guide".into()));
        }
    }

    #[test]
    fn dotfiles_are_denied_unless_allowed() {
        let dir = temp("hidden");
        let root = dir.0.join("root");
        let files = FileRoot::new(&root, FileOptions::default());
        assert!(matches!(
            files.read_path(".env"),
            Err(FileError::Refused { .. })
        ));
        let open = FileRoot::new(
            &root,
            FileOptions {
                allow_hidden: true,
                ..FileOptions::default()
            },
        );
        assert!(open.read_path(".env").is_ok());
    }

    #[test]
    fn completion_offers_what_a_read_serves() {
        let dir = temp("complete");
        let root = dir.0.join("root");
        std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
        for files in both(&root) {
            let all = files.complete("", true);
            assert_eq!(all.values, ["docs/", "logo.png"]);
            assert_eq!(files.complete("do", true).values, ["docs/"]);
            assert_eq!(files.complete("docs/g", true).values, ["docs/guide.md"]);
            // One segment: folders cannot be read, so they are not offered.
            assert_eq!(files.complete("", false).values, ["logo.png"]);
            assert!(files.complete("docs/", false).values.is_empty());
            assert!(files.complete("../", true).values.is_empty());
            assert!(files.complete("etc-link/", true).values.is_empty());
            assert!(files.complete(".", true).values.is_empty());
        }
    }

    #[test]
    fn completion_is_bounded() {
        let dir = temp("many");
        let root = dir.0.join("root");
        for i in 0..150 {
            std::fs::write(root.join(format!("f{i:03}.txt")), "x").unwrap();
        }
        let files = FileRoot::new(&root, FileOptions::default());
        let got = files.complete("f", false);
        assert_eq!(got.values.len(), MAX_COMPLETION_VALUES);
        assert_eq!(got.total, 150);
        assert!(got.has_more);
        let template = Template::parse("file:///x/{name}").unwrap();
        assert_eq!(
            files
                .complete_argument(&template, "name", "f14")
                .values
                .len(),
            10
        );
        assert!(
            files
                .complete_argument(&template, "other", "f")
                .values
                .is_empty()
        );
    }
}
