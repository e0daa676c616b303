//! Source files, spans and the one loader through which the compiler reads files.
//!
//! The compiler never touches the file system except through a [`Loader`]: `compile_str`
//! and the tests use an in-memory loader, the CLI the real one.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A byte range in one file. Offsets always lie on char boundaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: u32, end: u32) -> Span {
        Span {
            start,
            end: end.max(start),
        }
    }

    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }

    pub fn len(self) -> u32 {
        self.end - self.start
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    pub fn contains(self, other: Span) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    pub fn shift(self, by: u32) -> Span {
        Span::new(self.start + by, self.end + by)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// One loaded file: its path as shown to users and its text.
#[derive(Debug)]
pub struct SourceFile {
    /// The path used in messages (as given, or relative to the working directory).
    pub name: String,
    /// The path used to resolve relative paths inside the file.
    pub path: PathBuf,
    pub text: Arc<str>,
    line_starts: Vec<u32>,
}

impl SourceFile {
    pub fn new(name: String, path: PathBuf, text: Arc<str>) -> SourceFile {
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line_starts.push(i as u32 + 1);
            }
        }
        SourceFile {
            name,
            path,
            text,
            line_starts,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (u32, u32) {
        let offset = offset.min(self.text.len() as u32);
        let line = self.line_starts.partition_point(|s| *s <= offset).max(1) - 1;
        let start = self.line_starts[line] as usize;
        let end = floor_char_boundary(&self.text, offset as usize);
        let col = self.text[start..end.max(start)].chars().count() as u32 + 1;
        (line as u32 + 1, col)
    }

    /// 0-based line number of an offset.
    pub fn line_of(&self, offset: u32) -> usize {
        self.line_starts.partition_point(|s| *s <= offset).max(1) - 1
    }

    /// The byte range of a 0-based line, without its newline.
    pub fn line_span(&self, line: usize) -> Option<Span> {
        let start = *self.line_starts.get(line)?;
        let end = match self.line_starts.get(line + 1) {
            Some(next) => next - 1,
            None => self.text.len() as u32,
        };
        Some(Span::new(start, end))
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    pub fn slice(&self, span: Span) -> &str {
        self.text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("")
    }
}

/// `text` cut to at most `max_bytes` bytes, at a character boundary, with `…` after it
/// when something was cut.
pub fn shorten(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    format!("{}…", &text[..floor_char_boundary(text, max_bytes)])
}

pub fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// All files of one compilation: the checked file, its imports and prompt templates.
#[derive(Debug, Default)]
pub struct SourceDb {
    files: Vec<SourceFile>,
}

impl SourceDb {
    pub fn add(&mut self, name: String, path: PathBuf, text: Arc<str>) -> FileId {
        self.files.push(SourceFile::new(name, path, text));
        FileId(self.files.len() as u32 - 1)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn find(&self, path: &Path) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.path == path)
            .map(|i| FileId(i as u32))
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Reads source and template files for the compiler.
pub trait Loader: Sync {
    fn read(&self, path: &Path) -> std::io::Result<String>;
    fn exists(&self, path: &Path) -> bool;
    fn is_dir(&self, path: &Path) -> bool;
    /// The path made absolute, so that folders can be searched upwards.
    fn absolute(&self, path: &Path) -> PathBuf {
        path.to_path_buf()
    }
}

/// Reads a file as UTF-8 text. Text in another encoding is an error of kind
/// `InvalidData` that says where the first byte that is not UTF-8 is.
pub fn read_text(path: &Path) -> std::io::Result<String> {
    decode_utf8(std::fs::read(path)?)
}

/// Bytes as UTF-8 text, or an `InvalidData` error naming the line and column of the first
/// byte that is not UTF-8.
pub fn decode_utf8(bytes: Vec<u8>) -> std::io::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|b| **b == b'\n').count() + 1;
        let line_start = valid.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        // The column counts characters, which the valid prefix of the line has.
        let column = String::from_utf8_lossy(&valid[line_start..])
            .chars()
            .count()
            + 1;
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (the first invalid byte is at line {line}, column {column})"),
        )
    })
}

/// Whether a read failed because the file is not UTF-8 text.
pub fn is_not_utf8(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidData
}

/// The file system.
pub struct FsLoader;

impl Loader for FsLoader {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        read_text(path)
    }
    fn exists(&self, path: &Path) -> bool {
        path.is_file()
    }
    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }
    fn absolute(&self, path: &Path) -> PathBuf {
        std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
    }
}

/// Files held in memory, keyed by normalised path; used by `compile_str` and tests.
#[derive(Default, Clone)]
pub struct MemoryLoader {
    files: BTreeMap<PathBuf, String>,
}

impl MemoryLoader {
    pub fn new() -> MemoryLoader {
        MemoryLoader::default()
    }

    pub fn with(mut self, path: impl AsRef<Path>, text: impl Into<String>) -> MemoryLoader {
        self.insert(path, text);
        self
    }

    pub fn insert(&mut self, path: impl AsRef<Path>, text: impl Into<String>) {
        self.files
            .insert(normalize_path(path.as_ref()), text.into());
    }
}

impl Loader for MemoryLoader {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        self.files
            .get(&normalize_path(path))
            .cloned()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
    }
    fn exists(&self, path: &Path) -> bool {
        self.files.contains_key(&normalize_path(path))
    }
    fn is_dir(&self, path: &Path) -> bool {
        let dir = normalize_path(path);
        self.files.keys().any(|p| p.starts_with(&dir) && p != &dir)
    }
}

/// Removes `.` and folds `..` without touching the file system.
pub fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn shortening_keeps_whole_characters() {
        assert_eq!(super::shorten("short", 10), "short");
        assert_eq!(super::shorten("abcdef", 3), "abc…");
        assert_eq!(super::shorten("aé€", 4), "aé…");
    }

    use super::*;

    #[test]
    fn text_that_is_not_utf8_says_where() {
        assert_eq!(
            decode_utf8(b"caf\xc3\xa9\n".to_vec()).ok(),
            Some("café\n".into())
        );
        let e = decode_utf8(b"input x: string\n// caf\xe9\n".to_vec()).expect_err("Latin-1");
        assert!(is_not_utf8(&e));
        assert_eq!(
            e.to_string(),
            "not UTF-8 text (the first invalid byte is at line 2, column 7)"
        );
        let e = decode_utf8(b"\xc3\xa9\xff".to_vec()).expect_err("invalid byte");
        assert_eq!(
            e.to_string(),
            "not UTF-8 text (the first invalid byte is at line 1, column 2)"
        );
    }
}
