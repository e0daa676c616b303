//! Edits the lint passes offer as fixes, built on the text of the file they change: an
//! argument appended to a call, a setting added to a block.

use pipec_base::source::{FileId, SourceDb, Span};
use pipec_diagnostic::Edit;

/// The edit that appends `arg` (`max_bytes: 100kb`) to the call written at `call`
/// (`resource("...")`, `each(list)`), after its last argument and before the `)`, keeping
/// a trailing comma where there is one. `None` when the text there is not a call.
pub(crate) fn append_argument(db: &SourceDb, file: FileId, call: Span, arg: &str) -> Option<Edit> {
    let text = db.get(file).slice(call);
    if !text.ends_with(')') || !text.contains('(') {
        return None;
    }
    let inside = &text[..text.len() - 1];
    let last = inside.trim_end();
    let at = call.start + last.len() as u32;
    let replacement = match last.chars().last()? {
        '(' => arg.to_string(),
        ',' => format!(" {arg},"),
        _ => format!(", {arg}"),
    };
    Some(Edit {
        file,
        span: Span::new(at, at),
        replacement,
    })
}

/// The edit that adds `setting` (`max_bytes = 100kb`) as the last line of the block
/// written at `block`, indented as its other settings are (two spaces when it has none).
/// `None` when the block's `}` does not stand on a line of its own.
pub(crate) fn add_setting(db: &SourceDb, file: FileId, block: Span, setting: &str) -> Option<Edit> {
    let src = db.get(file);
    let text = src.slice(block);
    if !text.ends_with('}') {
        return None;
    }
    let close = block.end - 1;
    let line = src.line_span(src.line_of(close))?;
    if !src.slice(Span::new(line.start, close)).trim().is_empty() {
        return None;
    }
    let outer = src.slice(Span::new(line.start, close)).to_string();
    // The indentation of the line above the `}`, if it is a setting of the block.
    let above = src
        .line_of(close)
        .checked_sub(1)
        .and_then(|l| src.line_span(l));
    let indent = above
        .filter(|s| s.start > block.start)
        .map(|s| {
            let t = src.slice(s);
            t[..t.len() - t.trim_start().len()].to_string()
        })
        .filter(|i| i.len() > outer.len())
        .unwrap_or_else(|| format!("{outer}  "));
    Some(Edit {
        file,
        span: Span::new(line.start, line.start),
        replacement: format!("{indent}{setting}\n"),
    })
}
