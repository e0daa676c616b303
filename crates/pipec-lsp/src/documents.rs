//! The buffers an editor has open, the loader that reads them before the disk, and the
//! conversion between byte offsets and the editor's positions (lines and UTF-16 columns).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use lsp_types::{Position, Range, Url};

use pipec_base::source::{FsLoader, Loader, Span, normalize_path};

/// One open buffer: its text as the editor has it now, saved or not.
#[derive(Clone)]
pub(crate) struct Document {
    pub text: String,
    pub version: i32,
}

/// Every open buffer, keyed by its normalised path.
#[derive(Clone, Default)]
pub(crate) struct Documents {
    open: HashMap<PathBuf, Document>,
}

impl Documents {
    pub(crate) fn open(&mut self, path: PathBuf, text: String, version: i32) {
        self.open.insert(path, Document { text, version });
    }

    pub(crate) fn close(&mut self, path: &Path) {
        self.open.remove(path);
    }

    pub(crate) fn get(&self, path: &Path) -> Option<&Document> {
        self.open.get(path)
    }

    pub(crate) fn get_mut(&mut self, path: &Path) -> Option<&mut Document> {
        self.open.get_mut(path)
    }
}

/// Reads an open buffer where there is one and the file on disk otherwise, so that the
/// checker sees what the user sees: unsaved `.pipe` files, imports and prompt templates.
pub(crate) struct OverlayLoader<'d> {
    pub documents: &'d Documents,
}

impl Loader for OverlayLoader<'_> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        match self.documents.get(&normalize_path(path)) {
            Some(doc) => Ok(doc.text.clone()),
            None => FsLoader.read(path),
        }
    }
    fn exists(&self, path: &Path) -> bool {
        self.documents.get(&normalize_path(path)).is_some() || FsLoader.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        FsLoader.is_dir(path)
    }
    fn absolute(&self, path: &Path) -> PathBuf {
        FsLoader.absolute(path)
    }
}

/// The file path of a `file:` URI, normalised; `None` for any other scheme.
pub(crate) fn uri_path(uri: &Url) -> Option<PathBuf> {
    if uri.scheme() != "file" {
        return None;
    }
    uri.to_file_path().ok().map(|p| normalize_path(&p))
}

pub(crate) fn path_uri(path: &Path) -> Option<Url> {
    Url::from_file_path(path).ok()
}

/// A byte offset as an editor position: 0-based line, UTF-16 column.
pub(crate) fn position(text: &str, offset: u32) -> Position {
    let offset = pipec_base::source::floor_char_boundary(text, offset as usize);
    let before = &text[..offset];
    let line = before.bytes().filter(|b| *b == b'\n').count() as u32;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character = before[line_start..].encode_utf16().count() as u32;
    Position { line, character }
}

pub(crate) fn range(text: &str, span: Span) -> Range {
    Range {
        start: position(text, span.start),
        end: position(text, span.end),
    }
}

/// An editor position as a byte offset, clamped to the text (a column past the end of
/// its line is the line's end).
pub(crate) fn offset(text: &str, pos: Position) -> u32 {
    let mut line_start = 0usize;
    for _ in 0..pos.line {
        match text[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => return text.len() as u32,
        }
    }
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let mut units = 0u32;
    for (i, ch) in text[line_start..line_end].char_indices() {
        if units >= pos.character {
            return (line_start + i) as u32;
        }
        units += ch.len_utf16() as u32;
    }
    line_end as u32
}

/// Applies one `didChange` edit: a range replaced, or the whole text when there is none.
pub(crate) fn apply_change(text: &mut String, range: Option<Range>, new_text: &str) {
    match range {
        Some(r) => {
            let start = offset(text, r.start) as usize;
            let end = (offset(text, r.end) as usize).max(start);
            text.replace_range(start..end, new_text);
        }
        None => {
            text.clear();
            text.push_str(new_text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units() {
        let text = "ab\né😀x\n";
        let x = text.find('x').unwrap_or(0) as u32;
        assert_eq!(position(text, x), Position::new(1, 3));
        assert_eq!(offset(text, Position::new(1, 3)), x);
        assert_eq!(offset(text, Position::new(0, 99)), 2);
        assert_eq!(offset(text, Position::new(9, 0)), text.len() as u32);
    }

    #[test]
    fn changes_replace_ranges() {
        let mut text = String::from("node a\nnode b\n");
        apply_change(
            &mut text,
            Some(Range::new(Position::new(1, 5), Position::new(1, 6))),
            "bee",
        );
        assert_eq!(text, "node a\nnode bee\n");
    }
}
