//! Long source lines clipped around the spans drawn on them, for the terminal renderer.
//!
//! miette pads a caret to its column with a format width, and Rust refuses a width past
//! 65,535, so a label far out on one line (a minified literal) panics it. A long line is
//! unreadable on a terminal anyway: as rustc does, only a window of it is shown around
//! each label's ends, and `…` stands for what was left out. Lines keep their numbers (no
//! line is removed), and the location in the snippet's header is the one in the file.

use std::ops::Range;

use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

/// Lines up to this many characters are shown whole.
const LONG_LINE: usize = 240;
/// Characters kept on each side of a label's start and end on a clipped line.
const CONTEXT: usize = 60;
/// What stands for the characters left out.
const ELLIPSIS: &str = "…";

/// A file's text as the renderer shows it, with offsets mapped both ways.
pub(super) struct ClippedSource {
    name: String,
    text: String,
    /// The original file's text, for the header's column.
    original: std::sync::Arc<str>,
    /// Kept pieces in order: (start in the original, start in `text`, length). Empty
    /// when nothing was clipped (the texts are then the same).
    kept: Vec<(usize, usize, usize)>,
}

impl ClippedSource {
    /// The text of `original` with its long lines clipped around `points` (byte offsets
    /// of label starts and ends, which stay visible).
    pub(super) fn new(
        name: &str,
        original: std::sync::Arc<str>,
        points: &[usize],
    ) -> ClippedSource {
        let text: &str = &original;
        let mut keeps: Vec<Range<usize>> = Vec::new();
        let mut any_clipped = false;
        let mut line_start = 0;
        while line_start < text.len() {
            let line_end = text[line_start..]
                .find('\n')
                .map_or(text.len(), |n| line_start + n + 1);
            let line = &text[line_start..line_end];
            if line.len() > LONG_LINE && line.chars().count() > LONG_LINE {
                any_clipped = true;
                let mut windows: Vec<Range<usize>> = points
                    .iter()
                    .filter(|p| (line_start..line_end).contains(*p))
                    .map(|p| {
                        let at = *p - line_start;
                        back(line, at, CONTEXT) + line_start..ahead(line, at, CONTEXT) + line_start
                    })
                    .collect();
                if windows.is_empty() {
                    // A line around the labelled ones: its start is enough to place it.
                    windows.push(line_start..ahead(line, 0, 2 * CONTEXT) + line_start);
                }
                // The line's end (its newline) is always kept, so that a label ending there
                // and the next line stay where they are.
                let body_end = line_start + line.trim_end_matches(['\n', '\r']).len();
                windows.push(body_end..line_end);
                windows.sort_by_key(|w| w.start);
                keeps.extend(windows);
            } else {
                keeps.push(line_start..line_end);
            }
            line_start = line_end;
        }
        if !any_clipped {
            return ClippedSource {
                name: name.to_string(),
                text: text.to_string(),
                original,
                kept: Vec::new(),
            };
        }
        // Merge windows that touch, or whose gap is no wider than the ellipsis.
        let mut merged: Vec<Range<usize>> = Vec::new();
        for w in keeps {
            match merged.last_mut() {
                Some(last) if w.start <= last.end + ELLIPSIS.len() => {
                    last.end = last.end.max(w.end);
                }
                _ => merged.push(w),
            }
        }
        let mut out = String::new();
        let mut kept = Vec::with_capacity(merged.len());
        let mut previous_end = 0;
        for w in merged {
            if w.start > previous_end {
                out.push_str(ELLIPSIS);
            }
            kept.push((w.start, out.len(), w.end - w.start));
            out.push_str(&text[w.clone()]);
            previous_end = w.end;
        }
        if previous_end < text.len() {
            out.push_str(ELLIPSIS);
        }
        ClippedSource {
            name: name.to_string(),
            text: out,
            original,
            kept,
        }
    }

    /// Where an offset of the original text is in the shown one. Label ends are always
    /// in a kept piece; anything else maps to the end of the piece before it.
    pub(super) fn to_shown(&self, offset: usize) -> usize {
        if self.kept.is_empty() {
            return offset.min(self.text.len());
        }
        let i = self.kept.partition_point(|k| k.0 <= offset).max(1) - 1;
        let (orig, shown, len) = self.kept[i];
        shown + offset.saturating_sub(orig).min(len)
    }

    /// Where an offset of the shown text is in the original one.
    fn to_original(&self, offset: usize) -> usize {
        if self.kept.is_empty() {
            return offset;
        }
        let i = self.kept.partition_point(|k| k.1 <= offset).max(1) - 1;
        let (orig, shown, len) = self.kept[i];
        orig + offset.saturating_sub(shown).min(len)
    }

    /// A span of the original text as a span of the shown one.
    pub(super) fn span(&self, start: usize, end: usize) -> SourceSpan {
        let start = self.to_shown(start);
        let end = self.to_shown(end).max(start);
        SourceSpan::new(start.into(), end - start)
    }
}

/// The byte offset `count` characters before `at` in `line` (or its start).
fn back(line: &str, at: usize, count: usize) -> usize {
    line[..at]
        .char_indices()
        .rev()
        .take(count)
        .last()
        .map_or(at, |(i, _)| i)
}

/// The byte offset `count` characters after `at` in `line` (or the end of its text).
fn ahead(line: &str, at: usize, count: usize) -> usize {
    let body = line.trim_end_matches(['\n', '\r']).len().max(at);
    line[at..body]
        .char_indices()
        .nth(count)
        .map_or(body, |(i, _)| at + i)
}

impl SourceCode for ClippedSource {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let contents =
            self.text
                .as_str()
                .read_span(span, context_lines_before, context_lines_after)?;
        // The header shows the column of a label's start: miette counts it in bytes from
        // the start of the line, which must be the original line's, not the clipped one.
        let column = if context_lines_before == 0 && !self.kept.is_empty() {
            let at = self.to_original(span.offset()).min(self.original.len());
            let line_start = self.original[..at].rfind('\n').map_or(0, |n| n + 1);
            at - line_start
        } else {
            contents.column()
        };
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            contents.data(),
            *contents.span(),
            contents.line(),
            column,
            contents.line_count(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clip(text: &str, points: &[usize]) -> ClippedSource {
        ClippedSource::new("f.pipe", text.into(), points)
    }

    #[test]
    fn short_lines_are_kept_whole() {
        let text = "input a: int = 1\n";
        let c = clip(text, &[15, 16]);
        assert_eq!(c.text, text);
        assert_eq!(c.to_shown(15), 15);
    }

    #[test]
    fn a_long_line_keeps_a_window_around_each_label_end() {
        let text = format!("é{}é + 1\nnext\n", "x".repeat(1_000));
        let plus = text.find('+').unwrap_or_default();
        let c = clip(&text, &[plus, plus + 1]);
        assert!(c.text.starts_with('…'), "{}", c.text);
        assert!(c.text.ends_with(" + 1\nnext\n"), "{}", c.text);
        assert!(c.text.chars().count() < 200);
        let shown = c.to_shown(plus);
        assert_eq!(&c.text[shown..shown + 1], "+");
        assert_eq!(c.to_original(shown), plus);
    }

    #[test]
    fn a_long_span_keeps_both_of_its_ends() {
        let text = format!("a = \"{}\"\n", "é".repeat(1_000));
        let (start, end) = (4, text.len() - 1);
        let c = clip(&text, &[start, end]);
        let span = c.span(start, end);
        let shown = &c.text[span.offset()..span.offset() + span.len()];
        assert!(
            shown.starts_with("\"é") && shown.ends_with("é\""),
            "{shown}"
        );
        assert!(shown.contains('…'));
    }
}
