//! Diagnostics: what every phase reports, and how it is rendered.
//!
//! A [`Diagnostic`] is data: a [`Rule`] (stable code, kebab-case name, default severity,
//! documentation), a message, a primary span and secondary labels, and an optional help
//! line. Rendering (terminal via miette, JSON, SARIF) lives in the submodules.
#![warn(unreachable_pub)]

mod clip;
mod render;
mod rule;
pub mod rules;
mod runtime_codes;

pub use render::{
    JSON_FORMAT_VERSION, JsonFormatVersion, TerminalOptions, render_json, render_sarif,
    render_terminal,
};
pub use rule::{Rule, Severity};
pub use runtime_codes::*;

use pipec_base::source::{FileId, SourceDb, Span};

#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub file: FileId,
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub rule: &'static Rule,
    pub severity: Severity,
    pub message: String,
    /// Where it happened; `None` for diagnostics about no place in particular.
    pub primary: Option<Label>,
    pub secondary: Vec<Label>,
    pub help: Option<String>,
    pub notes: Vec<String>,
    /// Edits that would fix what the diagnostic reports, where the fix is certain
    /// enough to offer (`pipec check --fix`, an editor's code actions).
    pub fixes: Vec<Fix>,
}

/// A machine-applicable fix: a title and the edits that make it, all in one file or
/// several, applied together or not at all.
#[derive(Clone, Debug, PartialEq)]
pub struct Fix {
    /// What the fix does, as an imperative ("rename `x` to `y`").
    pub title: String,
    pub applicability: Applicability,
    pub edits: Vec<Edit>,
}

/// Whether a fix may be applied without a person looking at it (ruff's distinction).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    /// Keeps the meaning the author evidently intended: `pipec check --fix` applies it.
    Safe,
    /// Changes what the program means (a type, a limit): only `--unsafe-fixes` applies it.
    Unsafe,
}

/// Replace the bytes of `span` in `file` with `replacement` (an empty span inserts).
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    pub file: FileId,
    pub span: Span,
    pub replacement: String,
}

impl Diagnostic {
    pub fn new(rule: &'static Rule, file: FileId, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            rule,
            severity: rule.severity,
            message: message.into(),
            primary: Some(Label {
                file,
                span,
                message: String::new(),
            }),
            secondary: Vec::new(),
            help: None,
            notes: Vec::new(),
            fixes: Vec::new(),
        }
    }

    pub fn without_location(rule: &'static Rule, message: impl Into<String>) -> Self {
        Diagnostic {
            rule,
            severity: rule.severity,
            message: message.into(),
            primary: None,
            secondary: Vec::new(),
            help: None,
            notes: Vec::new(),
            fixes: Vec::new(),
        }
    }

    /// The text under the primary span.
    pub fn label(mut self, text: impl Into<String>) -> Self {
        if let Some(primary) = &mut self.primary {
            primary.message = text.into();
        }
        self
    }

    pub fn secondary(mut self, file: FileId, span: Span, text: impl Into<String>) -> Self {
        self.secondary.push(Label {
            file,
            span,
            message: text.into(),
        });
        self
    }

    pub fn help(mut self, text: impl Into<String>) -> Self {
        self.help = Some(text.into());
        self
    }

    pub fn maybe_help(mut self, text: Option<String>) -> Self {
        if text.is_some() {
            self.help = text;
        }
        self
    }

    /// Offers a fix for what the diagnostic reports.
    pub fn fix(mut self, fix: Fix) -> Self {
        self.fixes.push(fix);
        self
    }

    /// "did you mean `x`?" as the help line, with the rename as a fix, when the text of
    /// `span` is `name` (or `"name"`, a quoted one). A rename to the only close
    /// candidate is safe; with others as close, a person should choose.
    pub fn did_you_mean(
        mut self,
        db: &SourceDb,
        file: FileId,
        span: Span,
        name: &str,
        suggestion: Option<&pipec_base::names::Suggestion>,
    ) -> Self {
        let Some(s) = suggestion else {
            return self;
        };
        self.help = Some(format!("did you mean `{}`?", s.name));
        let text = db.get(file).slice(span);
        let target = if text == name {
            Some(span)
        } else if text.len() == name.len() + 2
            && text.starts_with('"')
            && text.ends_with('"')
            && &text[1..text.len() - 1] == name
        {
            Some(Span::new(span.start + 1, span.end - 1))
        } else {
            None
        };
        if let Some(target) = target {
            self.fixes.push(Fix {
                title: format!("rename `{name}` to `{}`", s.name),
                applicability: if s.unique {
                    Applicability::Safe
                } else {
                    Applicability::Unsafe
                },
                edits: vec![Edit {
                    file,
                    span: target,
                    replacement: s.name.clone(),
                }],
            });
        }
        self
    }

    pub fn note(mut self, text: impl Into<String>) -> Self {
        self.notes.push(text.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The sort key that keeps output stable: file, position, code.
    pub fn sort_key(&self) -> (u32, u32, u32, &'static str) {
        match &self.primary {
            Some(l) => (l.file.0, l.span.start, l.span.end, self.rule.code),
            None => (u32::MAX, 0, 0, self.rule.code),
        }
    }
}

/// Sorts diagnostics by place and removes exact duplicates.
pub fn sort_and_dedup(diags: &mut Vec<Diagnostic>) {
    diags.sort_by(|a, b| {
        a.sort_key()
            .cmp(&b.sort_key())
            .then(a.message.cmp(&b.message))
    });
    diags.dedup_by(|a, b| a.sort_key() == b.sort_key() && a.message == b.message);
}

/// Moves every label onto char boundaries inside its file: renderers and editors rely
/// on it, and a span computed from a decoded string could otherwise split a character.
pub fn snap_spans(db: &SourceDb, diags: &mut [Diagnostic]) {
    for d in diags {
        for label in d.primary.iter_mut().chain(d.secondary.iter_mut()) {
            let text = &db.get(label.file).text;
            let start = pipec_base::source::floor_char_boundary(text, label.span.start as usize);
            let mut end = (label.span.end as usize).clamp(start, text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            label.span = Span::new(start as u32, end as u32);
        }
    }
}

/// Counts of errors and warnings, for summaries and exit codes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
}

impl Counts {
    pub fn of(diags: &[Diagnostic]) -> Counts {
        let mut c = Counts::default();
        for d in diags {
            match d.severity {
                Severity::Error => c.errors += 1,
                Severity::Warning => c.warnings += 1,
            }
        }
        c
    }
}

/// Where a label points, in the terms users see: file name, 1-based line and column.
pub fn location(db: &SourceDb, label: &Label) -> (String, (u32, u32), (u32, u32)) {
    let file = db.get(label.file);
    (
        file.name.clone(),
        file.line_col(label.span.start),
        file.line_col(label.span.end),
    )
}
