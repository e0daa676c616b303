//! Edits as byte-range replacements on a file's text, and the choice of the fixes one
//! pass applies: the first fix of each diagnostic that the mode allows, in diagnostic
//! order, leaving any whose edits overlap one already chosen for a later pass.

use pipec_base::source::Span;
use pipec_diagnostic::{Applicability, Diagnostic, Edit, Fix};

/// Which fixes a run applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The safe fixes only (`pipec check --fix`).
    Safe,
    /// Safe and unsafe fixes (`--unsafe-fixes`).
    Unsafe,
}

impl Mode {
    pub fn allows(self, a: Applicability) -> bool {
        match self {
            Mode::Safe => a == Applicability::Safe,
            Mode::Unsafe => true,
        }
    }
}

/// Whether two edits of one file touch the same text. Two insertions at one place, or an
/// insertion at either end of a replaced range, count as touching: their order would be
/// a guess.
pub fn overlaps(a: &Edit, b: &Edit) -> bool {
    if a.file != b.file {
        return false;
    }
    let start = a.span.start.max(b.span.start);
    let end = a.span.end.min(b.span.end);
    start < end || ((a.span.is_empty() || b.span.is_empty()) && start <= end)
}

/// The fixes one pass applies, in order: for each diagnostic its first fix that `mode`
/// allows and `refused` does not exclude, unless one of its edits overlaps an edit
/// already chosen (that fix waits for the next pass, on the text the others left).
pub fn choose<'a>(
    diags: &'a [Diagnostic],
    mode: Mode,
    refused: &dyn Fn(&Fix) -> bool,
) -> Vec<(&'a Diagnostic, &'a Fix)> {
    let mut chosen: Vec<(&Diagnostic, &Fix)> = Vec::new();
    for d in diags {
        let Some(fix) = d
            .fixes
            .iter()
            .find(|f| mode.allows(f.applicability) && !f.edits.is_empty() && !refused(f))
        else {
            continue;
        };
        // The same fix offered twice (two diagnostics of one mistake) is made once.
        if chosen.iter().any(|(_, f)| f.edits == fix.edits) {
            continue;
        }
        let clashes = fix.edits.iter().enumerate().any(|(i, e)| {
            fix.edits[..i].iter().any(|o| overlaps(e, o))
                || chosen
                    .iter()
                    .any(|(_, f)| f.edits.iter().any(|o| overlaps(e, o)))
        });
        if !clashes {
            chosen.push((d, fix));
        }
    }
    chosen
}

/// `text` with each `(span, replacement)` made, the spans taken on `text` as it is (so
/// earlier replacements do not move later ones). `None` when a span lies outside the
/// text, splits a character, or two spans overlap.
pub fn apply(text: &str, edits: &[(Span, &str)]) -> Option<String> {
    let mut sorted: Vec<&(Span, &str)> = edits.iter().collect();
    sorted.sort_by_key(|(s, _)| (s.start, s.end));
    let mut out = String::with_capacity(text.len());
    let mut at = 0usize;
    for (span, replacement) in sorted {
        let (start, end) = (span.start as usize, span.end as usize);
        if start < at || end > text.len() {
            return None;
        }
        if !text.is_char_boundary(start) || !text.is_char_boundary(end) {
            return None;
        }
        out.push_str(&text[at..start]);
        out.push_str(replacement);
        at = end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_base::source::FileId;

    fn edit(file: u32, start: u32, end: u32) -> Edit {
        Edit {
            file: FileId(file),
            span: Span::new(start, end),
            replacement: String::new(),
        }
    }

    #[test]
    fn replacements_are_taken_on_the_original_text() {
        let text = "node reserch(x: strng)";
        let out = apply(
            text,
            &[
                (Span::new(16, 21), "string"),
                (Span::new(5, 12), "research"),
            ],
        );
        assert_eq!(out.as_deref(), Some("node research(x: string)"));
        // An insertion is an empty span.
        let out = apply("x: T", &[(Span::new(4, 4), "?")]);
        assert_eq!(out.as_deref(), Some("x: T?"));
    }

    #[test]
    fn bad_spans_are_refused() {
        assert_eq!(apply("abc", &[(Span::new(2, 9), "x")]), None);
        assert_eq!(
            apply("abcdef", &[(Span::new(0, 3), "x"), (Span::new(2, 4), "y")]),
            None
        );
        // `é` is two bytes: a span that ends inside it is refused.
        assert_eq!(apply("é", &[(Span::new(0, 1), "e")]), None);
    }

    #[test]
    fn overlap_is_per_file_and_counts_touching_insertions() {
        assert!(overlaps(&edit(0, 2, 5), &edit(0, 4, 8)));
        assert!(!overlaps(&edit(0, 2, 5), &edit(0, 5, 8)));
        assert!(!overlaps(&edit(0, 2, 5), &edit(1, 2, 5)));
        assert!(overlaps(&edit(0, 3, 3), &edit(0, 3, 3)));
        assert!(overlaps(&edit(0, 5, 5), &edit(0, 2, 5)));
        assert!(!overlaps(&edit(0, 6, 6), &edit(0, 2, 5)));
    }
}
