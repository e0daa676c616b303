//! A YAML document as a tree of nodes that know where they are in the text, built from
//! the events of `saphyr-parser`. Only what a Resources file needs is kept: scalars with
//! whether they were quoted, sequences, and mappings in the order they were written.
//!
//! The tree is bounded whatever the input: nesting deeper than [`MAX_DEPTH`] and aliases
//! that would expand past [`MAX_EXPANDED_NODES`] are errors, so neither a deep file nor an
//! alias bomb can exhaust the stack or the memory of the code that walks the tree.

use std::collections::HashMap;
use std::rc::Rc;

use saphyr_parser::{Event, Parser, ScalarStyle, Span as YamlSpan};

use pipec_base::source::Span;

/// Deeper than this, a file is refused: no Resources file nests more than a few levels,
/// and the tree is dropped recursively.
pub(crate) const MAX_DEPTH: usize = 64;

/// Aliases let a small text stand for a huge tree; past this many nodes counted with
/// every alias expanded, a file is refused.
pub(crate) const MAX_EXPANDED_NODES: u64 = 1_000_000;

/// One node and the byte range of its text (for an alias, the range of the `*name`).
#[derive(Clone, Debug)]
pub(crate) struct YamlNode {
    pub span: Span,
    pub value: Rc<YamlValue>,
}

#[derive(Debug)]
pub(crate) enum YamlValue {
    /// `quoted` is true for every style but plain, and for a plain scalar tagged `!!str`:
    /// such a scalar is text, never a number, a boolean or null.
    Scalar {
        text: String,
        quoted: bool,
    },
    Sequence(Vec<YamlNode>),
    /// Keys in the order written; a repeated key is reported, and only its first entry kept.
    Mapping(Vec<(YamlNode, YamlNode)>),
}

impl YamlNode {
    /// A plain `null`, `Null`, `NULL`, `~` or nothing at all (YAML 1.2 core schema).
    pub(super) fn is_null(&self) -> bool {
        match &*self.value {
            YamlValue::Scalar { text, quoted } => {
                !quoted && matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL")
            }
            _ => false,
        }
    }

    /// The text of a scalar.
    pub(super) fn scalar(&self) -> Option<&str> {
        match &*self.value {
            YamlValue::Scalar { text, .. } => Some(text),
            _ => None,
        }
    }

    /// What kind of value it is, in the words of messages.
    pub(super) fn kind_name(&self) -> &'static str {
        match &*self.value {
            YamlValue::Scalar { .. } if self.is_null() => "nothing (null)",
            YamlValue::Scalar { quoted: true, .. } => "a quoted text",
            YamlValue::Scalar { .. } => "a plain value",
            YamlValue::Sequence(_) => "a list",
            YamlValue::Mapping(_) => "a mapping",
        }
    }
}

/// A problem with the YAML itself, at a byte range of the text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct YamlProblem {
    pub message: String,
    pub span: Span,
    pub label: String,
    pub help: Option<String>,
    /// Another place the problem involves, and its label.
    pub related: Option<(Span, String)>,
}

/// The document (`None` when the text could not be read as YAML, or holds none) and
/// every problem found. A problem that stops the parser leaves no document; a repeated
/// key or a second document leaves the first one.
#[derive(Debug)]
pub(crate) struct YamlDocument {
    pub root: Option<YamlNode>,
    pub problems: Vec<YamlProblem>,
}

/// A collection being built: its items so far and where it began.
enum Frame {
    Sequence {
        start: usize,
        anchor: usize,
        items: Vec<YamlNode>,
        weight: u64,
    },
    Mapping {
        start: usize,
        anchor: usize,
        entries: Vec<(YamlNode, YamlNode)>,
        pending_key: Option<YamlNode>,
        weight: u64,
        /// Set when the key waiting for its value repeats an earlier one: the entry is
        /// then dropped.
        pending_is_duplicate: bool,
    },
}

/// Byte offsets of the parser's character positions.
struct Offsets {
    bytes_of_chars: Vec<u32>,
}

impl Offsets {
    fn new(text: &str) -> Offsets {
        let mut bytes_of_chars: Vec<u32> = text.char_indices().map(|(b, _)| b as u32).collect();
        bytes_of_chars.push(text.len() as u32);
        Offsets { bytes_of_chars }
    }

    fn byte(&self, char_index: usize) -> u32 {
        self.bytes_of_chars
            .get(char_index)
            .or(self.bytes_of_chars.last())
            .copied()
            .unwrap_or(0)
    }

    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.byte(start), self.byte(end))
    }
}

/// Reads the first YAML document of `text`.
pub(crate) fn parse_document(text: &str) -> YamlDocument {
    // saphyr-parser is not known to panic, but a parser bug must not take pipec down
    // with it: a panic is reported as a problem of the file.
    let built = std::panic::catch_unwind(|| Builder::new(text).run());
    match built {
        Ok(document) => document,
        Err(_) => YamlDocument {
            root: None,
            problems: vec![YamlProblem {
                message: "the YAML parser failed on this file".into(),
                span: Span::new(0, 0),
                label: "here".into(),
                help: Some("simplify the file's YAML (plain mappings, lists and scalars)".into()),
                related: None,
            }],
        },
    }
}

struct Builder<'t> {
    text: &'t str,
    offsets: Offsets,
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Rc<YamlValue>, u64)>,
    expanded: u64,
    root: Option<YamlNode>,
    problems: Vec<YamlProblem>,
}

impl<'t> Builder<'t> {
    fn new(text: &'t str) -> Builder<'t> {
        Builder {
            text,
            offsets: Offsets::new(text),
            stack: Vec::new(),
            anchors: HashMap::new(),
            expanded: 0,
            root: None,
            problems: Vec::new(),
        }
    }

    fn run(mut self) -> YamlDocument {
        let mut parser = Parser::new_from_str(self.text);
        let mut documents = 0usize;
        while let Some(next) = parser.next_event() {
            let (event, span) = match next {
                Ok(pair) => pair,
                Err(e) => {
                    let at = self.offsets.byte(e.marker().index());
                    self.problems.push(YamlProblem {
                        message: format!("this is not valid YAML: {}", e.info()),
                        span: self.point(at),
                        label: "the YAML parser stopped here".into(),
                        help: None,
                        related: None,
                    });
                    self.root = None;
                    break;
                }
            };
            match event {
                Event::DocumentStart(_) => {
                    documents += 1;
                    if documents > 1 {
                        let at = self.offsets.span(span.start.index(), span.end.index());
                        self.problems.push(YamlProblem {
                            message: "a Resources file holds one YAML document".into(),
                            span: at,
                            label: "a second document begins here".into(),
                            help: Some(
                                "put each Resources specification in a file of its own".into(),
                            ),
                            related: None,
                        });
                        break;
                    }
                }
                Event::Scalar(text, style, anchor, tag) => {
                    let plain_text_tag = tag
                        .as_ref()
                        .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                    let quoted = !matches!(style, ScalarStyle::Plain) || plain_text_tag;
                    let value = Rc::new(YamlValue::Scalar {
                        text: text.into_owned(),
                        quoted,
                    });
                    if anchor > 0 {
                        self.anchors.insert(anchor, (value.clone(), 1));
                    }
                    let node = YamlNode {
                        span: self.scalar_span(span),
                        value,
                    };
                    if !self.complete(node, 1) {
                        break;
                    }
                }
                Event::Alias(anchor) => {
                    let at = self.offsets.span(span.start.index(), span.end.index());
                    let Some((value, weight)) = self.anchors.get(&anchor).cloned() else {
                        self.problems.push(YamlProblem {
                            message: "an alias of no anchor".into(),
                            span: at,
                            label: "refers to nothing".into(),
                            help: Some("define the anchor (`&name`) before its alias".into()),
                            related: None,
                        });
                        self.root = None;
                        break;
                    };
                    if !self.complete(YamlNode { span: at, value }, weight) {
                        break;
                    }
                }
                Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                    if self.stack.len() >= MAX_DEPTH {
                        let at = self.offsets.span(span.start.index(), span.end.index());
                        self.problems.push(YamlProblem {
                            message: format!("the YAML nests deeper than {MAX_DEPTH} levels"),
                            span: at,
                            label: "too deep".into(),
                            help: Some("a Resources file needs only a few levels".into()),
                            related: None,
                        });
                        self.root = None;
                        break;
                    }
                    let start = span.start.index();
                    self.stack
                        .push(if matches!(event, Event::SequenceStart(..)) {
                            Frame::Sequence {
                                start,
                                anchor,
                                items: Vec::new(),
                                weight: 1,
                            }
                        } else {
                            Frame::Mapping {
                                start,
                                anchor,
                                entries: Vec::new(),
                                pending_key: None,
                                weight: 1,
                                pending_is_duplicate: false,
                            }
                        });
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    let Some(frame) = self.stack.pop() else {
                        continue;
                    };
                    let (start, anchor, value, weight) = match frame {
                        Frame::Sequence {
                            start,
                            anchor,
                            items,
                            weight,
                        } => (start, anchor, YamlValue::Sequence(items), weight),
                        Frame::Mapping {
                            start,
                            anchor,
                            entries,
                            weight,
                            ..
                        } => (start, anchor, YamlValue::Mapping(entries), weight),
                    };
                    let value = Rc::new(value);
                    if anchor > 0 {
                        self.anchors.insert(anchor, (value.clone(), weight));
                    }
                    let node = YamlNode {
                        span: self.collection_span(start, span),
                        value,
                    };
                    if !self.complete(node, weight) {
                        break;
                    }
                }
                Event::StreamEnd => break,
                Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            }
        }
        YamlDocument {
            root: self.root,
            problems: self.problems,
        }
    }

    /// Where a problem found at `at` is shown: a parser that stops at the end of the
    /// text points past the last line, where nothing can be underlined, so the last
    /// character written stands for it.
    fn point(&self, at: u32) -> Span {
        let at = (at as usize).min(self.text.len());
        let rest_is_blank = self.text.get(at..).is_some_and(|r| r.trim().is_empty());
        let written = self.text.get(..at).map_or("", str::trim_end);
        match written.chars().last() {
            Some(c) if rest_is_blank => {
                let end = written.len() as u32;
                Span::new(end - c.len_utf8() as u32, end)
            }
            _ => Span::new(at as u32, at as u32),
        }
    }

    /// A scalar's range; the parser's ends of block scalars run to the next token, so
    /// trailing white space is left out.
    fn scalar_span(&self, span: YamlSpan) -> Span {
        self.trimmed(self.offsets.span(span.start.index(), span.end.index()))
    }

    /// A collection runs from its start to its end event; the end of a block collection
    /// is found where the next token starts, so trailing white space is left out.
    fn collection_span(&self, start: usize, end: YamlSpan) -> Span {
        let end = end.end.index().max(end.start.index()).max(start);
        self.trimmed(self.offsets.span(start, end))
    }

    fn trimmed(&self, span: Span) -> Span {
        let text = self
            .text
            .get(span.start as usize..span.end as usize)
            .unwrap_or("");
        let kept = text.trim_end().len() as u32;
        Span::new(span.start, span.start + kept)
    }

    /// Places a finished node in its parent, or makes it the document. `false` when the
    /// aliases expanded past the limit, which ends the parse.
    fn complete(&mut self, node: YamlNode, weight: u64) -> bool {
        self.expanded = self.expanded.saturating_add(weight);
        if self.expanded > MAX_EXPANDED_NODES {
            self.problems.push(YamlProblem {
                message: format!(
                    "with its aliases expanded, the YAML holds more than {MAX_EXPANDED_NODES} values"
                ),
                span: node.span,
                label: "the limit is passed here".into(),
                help: Some("write the values out instead of aliasing large parts".into()),
                related: None,
            });
            self.root = None;
            return false;
        }
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return true;
        };
        match frame {
            Frame::Sequence {
                items, weight: w, ..
            } => {
                *w = w.saturating_add(weight);
                items.push(node);
            }
            Frame::Mapping {
                entries,
                pending_key,
                weight: w,
                pending_is_duplicate,
                ..
            } => {
                *w = w.saturating_add(weight);
                match pending_key.take() {
                    None => {
                        let earlier = node.scalar().and_then(|k| {
                            entries
                                .iter()
                                .find(|(e, _)| e.scalar() == Some(k))
                                .map(|(e, _)| e.span)
                        });
                        *pending_is_duplicate = earlier.is_some();
                        if let (Some(first), Some(key)) = (earlier, node.scalar()) {
                            self.problems.push(YamlProblem {
                                message: format!("the key `{key}` appears twice in one mapping"),
                                span: node.span,
                                label: "repeated here".into(),
                                help: Some(format!("keep one `{key}`: YAML keys are unique")),
                                related: Some((first, "first here".into())),
                            });
                        }
                        *pending_key = Some(node);
                    }
                    Some(key) => {
                        if !*pending_is_duplicate {
                            entries.push((key, node));
                        }
                        *pending_is_duplicate = false;
                    }
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(text: &str, span: Span) -> &str {
        &text[span.start as usize..span.end as usize]
    }

    fn entries(node: &YamlNode) -> &[(YamlNode, YamlNode)] {
        match &*node.value {
            YamlValue::Mapping(e) => e,
            _ => &[],
        }
    }

    #[test]
    fn scalars_keys_and_collections_know_their_text() {
        let text = "a: 1\nb: 'two'\nc:\n  - x\n  - \"é y\"\nd: |\n  block\n  text\n\ne: {f: g}\n";
        let doc = parse_document(text);
        assert!(doc.problems.is_empty(), "{:?}", doc.problems);
        let root = doc.root.expect("a document");
        let e = entries(&root);
        assert_eq!(e.len(), 5);
        assert_eq!(slice(text, e[0].0.span), "a");
        assert_eq!(slice(text, e[0].1.span), "1");
        assert_eq!(slice(text, e[1].1.span), "'two'");
        assert!(matches!(
            &*e[1].1.value,
            YamlValue::Scalar { quoted: true, .. }
        ));
        assert!(matches!(
            &*e[0].1.value,
            YamlValue::Scalar { quoted: false, .. }
        ));
        let YamlValue::Sequence(items) = &*e[2].1.value else {
            panic!("a list")
        };
        assert_eq!(slice(text, items[1].span), "\"é y\"");
        assert_eq!(items[1].scalar(), Some("é y"));
        assert_eq!(e[3].1.scalar(), Some("block\ntext\n"));
        assert_eq!(slice(text, e[3].1.span), "block\n  text");
        assert_eq!(slice(text, e[4].1.span), "{f: g}");
        assert_eq!(slice(text, e[2].1.span), "- x\n  - \"é y\"");
    }

    #[test]
    fn a_syntax_error_is_located() {
        let text = "a: 1\nb: [x, y\n";
        let doc = parse_document(text);
        assert!(doc.root.is_none());
        assert_eq!(doc.problems.len(), 1);
        assert!(
            doc.problems[0]
                .message
                .starts_with("this is not valid YAML")
        );
    }

    #[test]
    fn a_repeated_key_is_reported_and_the_first_kept() {
        let text = "a: 1\na: 2\n";
        let doc = parse_document(text);
        assert_eq!(doc.problems.len(), 1);
        assert_eq!(slice(text, doc.problems[0].span), "a");
        assert_eq!(doc.problems[0].span.start, 5);
        let root = doc.root.expect("a document");
        assert_eq!(entries(&root).len(), 1);
        assert_eq!(entries(&root)[0].1.scalar(), Some("1"));
    }

    #[test]
    fn aliases_share_and_bombs_are_refused() {
        let doc = parse_document("a: &x {b: 1}\nc: *x\n");
        assert!(doc.problems.is_empty());
        let root = doc.root.expect("a document");
        assert!(matches!(&*entries(&root)[1].1.value, YamlValue::Mapping(_)));

        let mut bomb = String::from("a: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let prev = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let doc = parse_document(&bomb);
        assert!(doc.root.is_none());
        assert!(doc.problems[0].message.contains("aliases expanded"));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let doc = parse_document(&text);
        assert!(doc.root.is_none());
        assert!(doc.problems[0].message.contains("nests deeper"));
    }

    #[test]
    fn a_second_document_is_refused_and_the_first_kept() {
        let doc = parse_document("a: 1\n---\nb: 2\n");
        assert!(doc.root.is_some());
        assert_eq!(doc.problems.len(), 1);
        assert!(doc.problems[0].message.contains("one YAML document"));
    }
}
