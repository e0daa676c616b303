//! Typed reading of a Resources file's values: texts, numbers, lists and mappings, each
//! with the wrong-type error (P0811) at the value when it is something else, and the
//! warning for keys a place does not define (P0813).
//!
//! Types follow reShapr's reader: any scalar is accepted where a text goes (a plain `1.0`
//! is the text `1.0`), a null is the same as the key left out, and a number must be
//! written as a number (a quoted `"0.8"` is a text).

use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;

use super::yaml_tree::{YamlNode, YamlValue};

/// Where the diagnostics of one file go.
pub(crate) struct Report {
    pub file: FileId,
    pub diagnostics: Vec<Diagnostic>,
}

/// A mapping's entries with scalar keys, in the order written.
pub(crate) struct Entries<'n> {
    pub entries: Vec<(&'n str, &'n YamlNode, &'n YamlNode)>,
}

impl<'n> Entries<'n> {
    pub(super) fn get(&self, key: &str) -> Option<&'n YamlNode> {
        self.entries
            .iter()
            .find(|(k, _, v)| *k == key && !v.is_null())
            .map(|(_, _, v)| *v)
    }

    /// The key itself, for diagnostics about an entry.
    pub(super) fn key_span(&self, key: &str) -> Option<Span> {
        self.entries
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|(_, k, _)| k.span)
    }

    pub(super) fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl Report {
    pub(super) fn new(file: FileId) -> Report {
        Report {
            file,
            diagnostics: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    fn wrong_type(&mut self, node: &YamlNode, what: &str, expected: &str, help: &str) {
        let found = match &*node.value {
            YamlValue::Scalar { text, quoted } if !node.is_null() => {
                let shown: String = text.chars().take(40).collect();
                let cut = if shown.len() < text.len() { "..." } else { "" };
                if *quoted {
                    format!("the quoted text `{shown}{cut}`")
                } else {
                    format!("`{shown}{cut}`")
                }
            }
            _ => node.kind_name().to_string(),
        };
        self.push(
            Diagnostic::new(
                &r::WRONG_SPEC_VALUE_TYPE,
                self.file,
                node.span,
                format!("{what} is {expected}, not {found}"),
            )
            .label(format!("not {expected}"))
            .help(help.to_string()),
        );
    }

    /// The entries of a mapping; a null is an empty mapping. Keys that are not scalars
    /// are reported and left out, and so are keys `known` does not list (a warning).
    pub(super) fn mapping<'n>(
        &mut self,
        node: &'n YamlNode,
        what: &str,
        known: Option<&[&str]>,
        help: &str,
    ) -> Option<Entries<'n>> {
        if node.is_null() {
            return Some(Entries {
                entries: Vec::new(),
            });
        }
        let YamlValue::Mapping(pairs) = &*node.value else {
            self.wrong_type(node, what, "a mapping", help);
            return None;
        };
        let mut entries = Vec::new();
        for (key, value) in pairs {
            let Some(text) = key.scalar() else {
                self.wrong_type(
                    key,
                    "a key",
                    "a text",
                    "write the key as a plain or quoted text",
                );
                continue;
            };
            if let Some(known) = known
                && !known.contains(&text)
            {
                let help = names::did_you_mean(text, known.iter().copied()).unwrap_or_else(|| {
                    format!(
                        "remove it, or use one of the keys {what} takes: {}",
                        known
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
                self.push(
                    Diagnostic::new(
                        &r::UNKNOWN_SPEC_KEY,
                        self.file,
                        key.span,
                        format!("{what} has no key `{text}`; it is ignored"),
                    )
                    .label("not a key of the Resources format")
                    .help(help),
                );
            }
            entries.push((text, key, value));
        }
        Some(Entries { entries })
    }

    /// The items of a list; a null is an empty list.
    pub(super) fn sequence<'n>(
        &mut self,
        node: &'n YamlNode,
        what: &str,
        help: &str,
    ) -> Option<&'n [YamlNode]> {
        if node.is_null() {
            return Some(&[]);
        }
        match &*node.value {
            YamlValue::Sequence(items) => Some(items),
            _ => {
                self.wrong_type(node, what, "a list", help);
                None
            }
        }
    }

    /// A text: any scalar, as written.
    pub(super) fn text(&mut self, node: &YamlNode, what: &str) -> Option<String> {
        if node.is_null() {
            return None;
        }
        match node.scalar() {
            Some(text) => Some(text.to_string()),
            None => {
                self.wrong_type(
                    node,
                    what,
                    "a text",
                    "write it as one line of text, quoted if it holds `:` or `#`",
                );
                None
            }
        }
    }

    /// A number written as one (a plain scalar that reads as a finite number).
    pub(super) fn number(&mut self, node: &YamlNode, what: &str, help: &str) -> Option<f64> {
        match &*node.value {
            YamlValue::Scalar {
                text,
                quoted: false,
            } => match text.parse::<f64>() {
                Ok(v) if v.is_finite() => Some(v),
                _ => {
                    self.wrong_type(node, what, "a number", help);
                    None
                }
            },
            _ => {
                self.wrong_type(node, what, "a number", help);
                None
            }
        }
    }

    /// A whole number of 0 or more, written as one.
    pub(super) fn count(&mut self, node: &YamlNode, what: &str, help: &str) -> Option<u64> {
        match &*node.value {
            YamlValue::Scalar {
                text,
                quoted: false,
            } => match text.parse::<u64>() {
                Ok(v) => Some(v),
                Err(_) => {
                    self.wrong_type(node, what, "a whole number of 0 or more", help);
                    None
                }
            },
            _ => {
                self.wrong_type(node, what, "a whole number of 0 or more", help);
                None
            }
        }
    }

    /// A list of texts.
    pub(super) fn texts(&mut self, node: &YamlNode, what: &str, help: &str) -> Vec<(String, Span)> {
        let Some(items) = self.sequence(node, what, help) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            if let Some(text) = self.text(item, &format!("an item of {what}")) {
                out.push((text, item.span));
            }
        }
        out
    }
}
