//! How deep sources and values may nest: the one limit of `.pipe` files and prompt
//! templates, and measuring a template against it before minijinja parses it.
//!
//! Parsing and every walk over a syntax tree recurse once per level, so a limit keeps
//! any input from overflowing the stack (serde_json and CPython's parser have one for the
//! same reason). The `.pipe` lexer measures brackets with it (`syntax::lexer`) and the
//! parser the depth of what it builds; this file measures templates.
//!
//! minijinja bounds the nesting of brackets and blocks as it parses, but builds chains
//! of operators (`a.b.c`, `x ~ y ~ z`, `not not x`) one level per operator, and parsing
//! `not`, compiling, rendering, the checker's walk and dropping the tree all recurse once
//! per level. So a template is refused when a tag's operators and brackets, or its
//! blocks, go past [`MAX_NESTING`]: the count of a tag's operators and brackets is at
//! least the depth of the tree it parses to.

use std::ops::Range;

/// How deep brackets may nest in a `.pipe` declaration, how many levels an expression
/// or a type may have, and how deep a prompt template may nest. 32 levels is far more
/// than a pipeline needs, and keeps what a declaration lowers to (two JSON levels per
/// level at most) well within the 128 levels a plan's JSON may nest when it is read.
pub const MAX_NESTING: usize = 32;

/// How many levels of arrays and objects a value a run takes in may nest (an input, an
/// answer, a command's output, a tool's result, a model's reply). JSON parsers stop at
/// 128, and the store wraps a value in a few levels of its own, which a value 127 deep
/// would push past what it can read back; 64 leaves room for the records and literals
/// (at most [`MAX_NESTING`] deep) a pipeline builds around values.
pub const MAX_VALUE_NESTING: usize = 64;

/// Whether a JSON value nests more than [`MAX_VALUE_NESTING`] levels of arrays and
/// objects. It walks with a stack of its own, so any value can be measured.
pub fn value_too_deep(value: &serde_json::Value) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &serde_json::Value>> = match v {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth + 1 > MAX_VALUE_NESTING {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// What nests too deep in a template: the byte range to point at and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TooDeep {
    pub range: Range<usize>,
    pub what: String,
}

/// Words of minijinja's expressions that are operators (each may add a level).
const OPERATOR_WORDS: &[&str] = &["not", "and", "or", "is", "in", "if", "else"];
/// Tags that open a block closed by `end<tag>`.
const BLOCK_TAGS: &[&str] = &[
    "if",
    "for",
    "macro",
    "call",
    "filter",
    "with",
    "block",
    "autoescape",
];

/// The first tag of a template that nests past the limit, if any.
pub fn template_too_deep(text: &str) -> Option<TooDeep> {
    let bytes = text.as_bytes();
    let mut blocks: Vec<usize> = Vec::new();
    let mut i = 0;
    while let Some(open) = text[i..].find('{').map(|n| i + n) {
        let close = match bytes.get(open + 1) {
            Some(b'{') => "}}",
            Some(b'%') => "%}",
            Some(b'#') => "#}",
            _ => {
                i = open + 1;
                continue;
            }
        };
        let body_start = open + 2;
        if close == "#}" {
            i = text[body_start..]
                .find(close)
                .map_or(text.len(), |n| body_start + n + 2);
            continue;
        }
        // A trim marker after the opening delimiter (`{%-`, `{{+`) is no operator.
        let body_start = match bytes.get(body_start) {
            Some(b'-' | b'+') => body_start + 1,
            _ => body_start,
        };
        let (body_end, levels) = scan_tag(text, body_start, close);
        let end = (body_end + 2).min(text.len());
        if levels > MAX_NESTING {
            return Some(TooDeep {
                range: open..end,
                what: format!(
                    "this template tag has more than {MAX_NESTING} operators and brackets"
                ),
            });
        }
        if close == "%}" {
            let body = &text[body_start..body_end];
            let word: &str = body
                .trim_start()
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                .next()
                .unwrap_or("");
            let opens_set_block = word == "set" && !body.contains('=');
            if BLOCK_TAGS.contains(&word) || opens_set_block {
                blocks.push(open);
                if blocks.len() > MAX_NESTING {
                    return Some(TooDeep {
                        range: open..end,
                        what: format!("blocks are nested more than {MAX_NESTING} deep"),
                    });
                }
            } else if word.starts_with("end") {
                blocks.pop();
            } else if word == "raw" {
                // A raw block's text is not parsed: go on after its end.
                let after = text[end..].find("endraw").map_or(text.len(), |n| end + n);
                i = text[after..]
                    .find("%}")
                    .map_or(text.len(), |n| after + n + 2);
                continue;
            }
        }
        i = end;
    }
    None
}

/// Scans a tag's body from `start` to its closing delimiter, skipping string literals.
/// Returns where the body ends and how many operators and brackets it holds.
fn scan_tag(text: &str, start: usize, close: &str) -> (usize, usize) {
    let bytes = text.as_bytes();
    let mut levels = 0;
    let mut i = start;
    while i < bytes.len() {
        if bytes[i..].starts_with(close.as_bytes()) {
            return (i, levels);
        }
        let b = bytes[i];
        // A trim marker before the closing delimiter (`-%}`, `+}}`) is no operator.
        if (b == b'-' || b == b'+') && bytes[i + 1..].starts_with(close.as_bytes()) {
            i += 1;
            continue;
        }
        match b {
            b'"' | b'\'' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            b'.' | b'[' | b'(' | b'{' | b'|' | b'~' | b'+' | b'-' | b'*' | b'/' | b'%' | b'<'
            | b'>' | b'!' => levels += 1,
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                levels += 1;
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let word_end = text[i..]
                    .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .map_or(text.len(), |n| i + n);
                if OPERATOR_WORDS.contains(&&text[i..word_end]) {
                    levels += 1;
                }
                i = word_end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (text.len(), levels)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_are_measured_in_levels_of_arrays_and_objects() {
        let nested = |n: usize| -> serde_json::Value {
            serde_json::from_str(&format!("{}1{}", "[".repeat(n), "]".repeat(n))).unwrap()
        };
        assert!(!value_too_deep(&nested(MAX_VALUE_NESTING)));
        assert!(value_too_deep(&nested(MAX_VALUE_NESTING + 1)));
        assert!(!value_too_deep(&serde_json::json!({"a": 1, "b": [1, 2]})));
    }

    #[test]
    fn ordinary_templates_pass() {
        let text = "Label {{ ticket.title }} ({{ ticket.status | upper }}).\n\
            {% for t in tickets if t.open %}{% if t.a and not t.b %}{{ t.x ~ \"}}\" }}{% endif %}{% endfor %}\n\
            {# a comment with {{ many.dots.here }} #}{% set x %}y{% endset %}";
        assert_eq!(template_too_deep(text), None);
    }

    #[test]
    fn a_long_chain_in_one_tag_is_template_too_deep() {
        let text = format!("ok {{{{ x{} }}}} after", ".a".repeat(MAX_NESTING + 1));
        let found = template_too_deep(&text).expect("too deep");
        assert_eq!(&text[found.range.clone()][..2], "{{");
        assert!(template_too_deep(&format!("{{{{ x{} }}}}", ".a".repeat(MAX_NESTING))).is_none());
        assert!(
            template_too_deep(&format!("{{{{ {}x }}}}", "not ".repeat(MAX_NESTING + 1))).is_some()
        );
    }

    #[test]
    fn blocks_nested_past_the_limit_are_template_too_deep() {
        let deep = |n: usize| format!("{}x{}", "{% if a %}".repeat(n), "{% endif %}".repeat(n));
        assert!(template_too_deep(&deep(MAX_NESTING)).is_none());
        let found = template_too_deep(&deep(MAX_NESTING + 1)).expect("too deep");
        assert!(found.what.starts_with("blocks are nested"));
    }

    #[test]
    fn strings_and_raw_blocks_are_not_counted() {
        let dots = ".".repeat(100);
        assert!(template_too_deep(&format!("{{{{ \"{dots}\" }}}}")).is_none());
        assert!(
            template_too_deep(&format!("{{% raw %}}{{{{ x{dots} }}}}{{% endraw %}}")).is_none()
        );
    }
}
