//! A pre-pass over the raw text, before the parser: comments, unterminated strings, and the
//! places where the file can be cut into independently parsed pieces.
//!
//! The grammar skips comments, but `fmt` must keep every one and `// pipec: allow(...)` lines are
//! suppressions, so this pass collects them. It knows just enough about strings (regular
//! and N-hash raw) not to mistake `"http://x"` for a comment.
//!
//! It also measures how deep brackets nest, so that a piece nested past
//! [`MAX_NESTING`] is refused before the parser, whose recursion follows the brackets, sees it.

use pipec_base::source::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommentKind {
    /// `// ...`
    Line,
    /// `/// ...` (also in the syntax tree, attached to what it documents)
    Doc,
    /// `//! ...`
    FileDoc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    pub kind: CommentKind,
    /// The whole comment, from the slashes to the end of the line (newline excluded).
    pub span: Span,
    /// The text after the slashes, with one leading space removed.
    pub text: String,
    /// Whether only whitespace precedes it on its line.
    pub own_line: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub comments: Vec<Comment>,
    /// Strings that never close: (span of the opening quote or hashes, is raw).
    pub unterminated: Vec<(Span, bool)>,
    /// Byte offsets where a new top-level declaration starts (with its leading comments).
    pub cuts: Vec<u32>,
    /// The first bracket of each piece that opened past [`MAX_NESTING`] levels.
    pub too_deep: Vec<Span>,
}

use pipec_base::nesting::MAX_NESTING;

/// The brackets open at a point of the text. `<` opens a level too, since `list<...>`
/// nests a type: a `<` that was a comparison is forgotten at the next `>`, at the
/// bracket that closes around it, or at a token no type holds (`=`, `,`, `:`, `;`,
/// `&&`, `||`, `??`, `!=`).
#[derive(Default)]
struct Nesting {
    open: Vec<u8>,
    /// Whether this piece already went past the limit (reported once per piece).
    reported: bool,
}

impl Nesting {
    fn reset(&mut self) {
        self.open.clear();
        self.reported = false;
    }

    fn open(&mut self, bracket: u8, at: usize, out: &mut Scan) {
        self.open.push(bracket);
        if self.open.len() > MAX_NESTING && !self.reported {
            self.reported = true;
            out.too_deep.push(Span::new(at as u32, at as u32 + 1));
        }
    }

    /// A closing `)`, `]` or `}`: closes its opener and every `<` opened inside it.
    fn close(&mut self, opener: u8) {
        while let Some(top) = self.open.pop() {
            if top == opener || top != b'<' {
                break;
            }
        }
    }

    fn close_angle(&mut self) {
        if self.open.last() == Some(&b'<') {
            self.open.pop();
        }
    }

    /// Forgets the `<` opened since the innermost bracket: they were comparisons.
    fn forget_angles(&mut self) {
        while self.open.last() == Some(&b'<') {
            self.open.pop();
        }
    }
}

/// Words that start a top-level declaration.
const DECL_KEYWORDS: &[&str] = &[
    "import", "type", "enum", "input", "output", "server", "model", "link", "tool", "reader",
    "node", "think", "agent", "act", "gate", "serve", "test",
];

pub fn scan(text: &str) -> Scan {
    let bytes = text.as_bytes();
    let mut out = Scan::default();
    let mut i = 0usize;
    let mut line_start = true;
    // Start of the current line, and whether everything on it so far is blank.
    let mut cur_line = 0usize;
    let mut nesting = Nesting::default();
    while i < bytes.len() {
        let b = bytes[i];
        if line_start {
            line_start = false;
            cur_line = i;
            if i > 0 && starts_declaration(&text[i..]) {
                out.cuts.push(back_over_comments(text, i) as u32);
                nesting.reset();
            }
        }
        let next = bytes.get(i + 1).copied();
        match b {
            b'(' | b'[' | b'{' => {
                nesting.open(b, i, &mut out);
                i += 1;
            }
            b')' => {
                nesting.close(b'(');
                i += 1;
            }
            b']' => {
                nesting.close(b'[');
                i += 1;
            }
            b'}' => {
                nesting.close(b'{');
                i += 1;
            }
            b'-' if next == Some(b'>') => {
                // `->` closes nothing.
                i += 2;
            }
            b'<' | b'>' | b'!' | b'=' if next == Some(b'=') => {
                // `<=`, `>=`, `!=`, `==` are comparisons: no type holds them.
                nesting.forget_angles();
                i += 2;
            }
            b'<' => {
                nesting.open(b'<', i, &mut out);
                i += 1;
            }
            b'>' => {
                nesting.close_angle();
                i += 1;
            }
            b'=' | b',' | b':' | b';' => {
                nesting.forget_angles();
                i += 1;
            }
            b'&' | b'|' | b'?' if next == Some(b) => {
                nesting.forget_angles();
                i += 2;
            }
            b'\n' => {
                line_start = true;
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let mut end = text[i..].find('\n').map_or(bytes.len(), |n| i + n);
                if end > i && bytes[end - 1] == b'\r' {
                    end -= 1;
                }
                let raw = &text[i..end];
                let (kind, body) = if let Some(rest) = raw.strip_prefix("///") {
                    if rest.starts_with('/') {
                        (CommentKind::Line, &raw[2..])
                    } else {
                        (CommentKind::Doc, rest)
                    }
                } else if let Some(rest) = raw.strip_prefix("//!") {
                    (CommentKind::FileDoc, rest)
                } else {
                    (CommentKind::Line, &raw[2..])
                };
                let body = body.strip_suffix('\r').unwrap_or(body);
                out.comments.push(Comment {
                    kind,
                    span: Span::new(i as u32, end as u32),
                    text: body.strip_prefix(' ').unwrap_or(body).to_string(),
                    own_line: text[cur_line..i].trim().is_empty(),
                });
                i = end;
            }
            b'"' => {
                i = skip_string(text, i, &mut out);
            }
            b'#' => {
                let hashes = bytes[i..].iter().take_while(|c| **c == b'#').count();
                if bytes.get(i + hashes) == Some(&b'"') {
                    i = skip_raw_string(text, i, hashes, &mut out);
                } else {
                    i += hashes;
                }
            }
            _ => {
                i += utf8_len(b);
            }
        }
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Skips a regular string starting at the quote; returns the offset after it. A string
/// that reaches the end of its line is unterminated (regular strings hold no raw newline).
fn skip_string(text: &str, start: usize, out: &mut Scan) -> usize {
    let bytes = text.as_bytes();
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                i += 1;
                if i < bytes.len() && bytes[i] != b'\n' {
                    i += utf8_len(bytes[i]);
                }
            }
            b'"' => return i + 1,
            b'\n' => break,
            c => i += utf8_len(c),
        }
    }
    out.unterminated
        .push((Span::new(start as u32, start as u32 + 1), false));
    i.min(bytes.len())
}

fn skip_raw_string(text: &str, start: usize, hashes: usize, out: &mut Scan) -> usize {
    let body = start + hashes + 1;
    let mut closing = String::with_capacity(hashes + 1);
    closing.push('"');
    closing.extend(std::iter::repeat_n('#', hashes));
    match text.get(body..).and_then(|rest| rest.find(&closing)) {
        Some(n) => body + n + closing.len(),
        None => {
            out.unterminated
                .push((Span::new(start as u32, body as u32), true));
            text.len()
        }
    }
}

/// Whether a line starts a top-level declaration: a declaration keyword in column 0,
/// then whitespace and a name, a string or a `{`.
fn starts_declaration(line: &str) -> bool {
    DECL_KEYWORDS.iter().any(|kw| {
        let Some(rest) = line.strip_prefix(kw) else {
            return false;
        };
        let after = rest.trim_start_matches([' ', '\t']);
        if after.len() == rest.len() {
            return false;
        }
        matches!(after.chars().next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '"' || c == '{')
    })
}

/// Moves a cut back over the comment lines directly above a declaration, so that its
/// doc comments stay with it.
fn back_over_comments(text: &str, mut line_start: usize) -> usize {
    while line_start > 0 {
        let prev_end = line_start - 1;
        let prev_start = text[..prev_end].rfind('\n').map_or(0, |n| n + 1);
        let line = text[prev_start..prev_end].trim();
        if line.starts_with("//") && !line.starts_with("//!") {
            line_start = prev_start;
        } else {
            break;
        }
    }
    line_start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_collected_but_not_inside_strings() {
        let s = scan("server a { command = \"http://x\" } // trailing\n/// doc\n//! file\n");
        let kinds: Vec<_> = s
            .comments
            .iter()
            .map(|c| (c.kind, c.text.as_str()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (CommentKind::Line, "trailing"),
                (CommentKind::Doc, "doc"),
                (CommentKind::FileDoc, "file")
            ]
        );
        assert!(!s.comments[0].own_line);
        assert!(s.comments[1].own_line);
    }

    #[test]
    fn raw_strings_hide_declaration_keywords() {
        let text = "node a() -> string {\n  return = ##\"\ntype X = \"#\n\"##\n}\nnode b() -> int { return = 1 }\n";
        let s = scan(text);
        assert_eq!(s.cuts.len(), 1);
        assert!(text[s.cuts[0] as usize..].starts_with("node b"));
    }

    #[test]
    fn cuts_keep_doc_comments_with_their_declaration() {
        let text = "type A = int\n\n/// doc\n// note\ntype B = int\n";
        let s = scan(text);
        assert_eq!(s.cuts.len(), 1);
        assert!(text[s.cuts[0] as usize..].starts_with("/// doc"));
    }

    #[test]
    fn unterminated_strings_are_reported() {
        let s = scan("input a: string = \"abc\nnode b() {}\n");
        assert_eq!(s.unterminated.len(), 1);
        assert_eq!(s.cuts.len(), 1);
        let s = scan("input a: string = #\"abc\nnode b() {}\n");
        assert_eq!(s.unterminated.len(), 1);
        assert!(s.cuts.is_empty());
    }
}
