//! Rendering diagnostics: the terminal (miette, with source snippets), versioned JSON,
//! and SARIF 2.1.0 for code-scanning tools.

use std::fmt;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan};
use serde::Serialize;

use super::clip::ClippedSource;
use super::{Applicability, Counts, Diagnostic, Edit, Fix, Label, Rule, Severity};
use pipec_base::source::SourceDb;

/// How to draw diagnostics on a terminal.
#[derive(Clone, Copy, Debug)]
pub struct TerminalOptions {
    pub color: bool,
    /// Wrap width; tests use a fixed one so snapshots do not depend on the terminal.
    pub width: usize,
}

impl Default for TerminalOptions {
    fn default() -> Self {
        TerminalOptions {
            color: false,
            width: 100,
        }
    }
}

/// The version of the JSON output format; bumped on any incompatible change (a new field,
/// such as `fixes`, is not one).
pub const JSON_FORMAT_VERSION: u32 = 1;

/// Marker type naming the JSON format version in the API.
pub struct JsonFormatVersion;

impl JsonFormatVersion {
    pub const CURRENT: u32 = JSON_FORMAT_VERSION;
}

/// Renders every diagnostic for a terminal, one after another.
pub fn render_terminal(db: &SourceDb, diags: &[Diagnostic], opts: TerminalOptions) -> String {
    let theme = if opts.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(opts.width)
        .with_links(false)
        .with_context_lines(1);
    let mut out = String::new();
    for d in diags {
        let report = Report::new(db, d);
        if handler.render_report(&mut out, &report).is_err() {
            out.push_str(&format!(
                "{}[{}]: {}\n",
                d.severity.as_str(),
                d.rule.code,
                d.message
            ));
        }
    }
    out
}

/// One diagnostic, as miette wants it.
struct Report<'a> {
    diag: &'a Diagnostic,
    source: Option<ClippedSource>,
    labels: Vec<LabeledSpan>,
    related: Vec<Related>,
    help: Option<String>,
    code: String,
}

impl<'a> Report<'a> {
    fn new(db: &'a SourceDb, diag: &'a Diagnostic) -> Report<'a> {
        let mut labels = Vec::new();
        let mut related = Vec::new();
        let mut source = None;
        if let Some(primary) = &diag.primary {
            let file = db.get(primary.file);
            let here: Vec<&Label> = std::iter::once(primary)
                .chain(diag.secondary.iter().filter(|l| l.file == primary.file))
                .collect();
            let shown = ClippedSource::new(
                &file.name,
                file.text.clone(),
                &label_ends(&here, &file.text),
            );
            for (i, l) in here.iter().enumerate() {
                let span = shown_span(&shown, l, file.text.len());
                labels.push(if i == 0 {
                    LabeledSpan::new_primary_with_span(non_empty(&l.message), span)
                } else {
                    LabeledSpan::new_with_span(non_empty(&l.message), span)
                });
            }
            source = Some(shown);
            for l in diag.secondary.iter().filter(|l| l.file != primary.file) {
                let other = db.get(l.file);
                let shown = ClippedSource::new(
                    &other.name,
                    other.text.clone(),
                    &label_ends(&[l], &other.text),
                );
                related.push(Related {
                    message: if l.message.is_empty() {
                        "related".into()
                    } else {
                        l.message.clone()
                    },
                    label: LabeledSpan::new_primary_with_span(
                        None,
                        shown_span(&shown, l, other.text.len()),
                    ),
                    source: shown,
                });
            }
        }
        let mut help = diag.help.clone();
        for note in &diag.notes {
            help = Some(match help {
                Some(h) => format!("{h}\nnote: {note}"),
                None => format!("note: {note}"),
            });
        }
        Report {
            diag,
            source,
            labels,
            related,
            help,
            code: format!("{} {}", diag.rule.code, diag.rule.name),
        }
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// The starts and ends of labels, as offsets on character boundaries of `text`.
fn label_ends(labels: &[&Label], text: &str) -> Vec<usize> {
    labels
        .iter()
        .flat_map(|l| [l.span.start, l.span.end])
        .map(|o| pipec_base::source::floor_char_boundary(text, (o as usize).min(text.len())))
        .collect()
}

fn shown_span(shown: &ClippedSource, l: &Label, len: usize) -> miette::SourceSpan {
    let start = (l.span.start as usize).min(len);
    let end = (l.span.end as usize).min(len).max(start);
    shown.span(start, end)
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.diag.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.diag.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(&self.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diag.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() {
            None
        } else {
            Some(Box::new(self.labels.iter().cloned()))
        }
    }

    fn related<'b>(&'b self) -> Option<Box<dyn Iterator<Item = &'b dyn miette::Diagnostic> + 'b>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(
                self.related.iter().map(|r| r as &dyn miette::Diagnostic),
            ))
        }
    }
}

/// A label in another file, drawn as a related note.
struct Related {
    message: String,
    source: ClippedSource,
    label: LabeledSpan,
}

impl fmt::Debug for Related {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl fmt::Display for Related {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for Related {}

impl miette::Diagnostic for Related {
    fn severity(&self) -> Option<miette::Severity> {
        Some(miette::Severity::Advice)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(std::iter::once(self.label.clone())))
    }
}

// ---------------------------------------------------------------- JSON

#[derive(Serialize)]
struct JsonOutput<'a> {
    version: u32,
    diagnostics: Vec<JsonDiagnostic<'a>>,
    summary: JsonSummary,
}

#[derive(Serialize)]
struct JsonSummary {
    errors: usize,
    warnings: usize,
}

#[derive(Serialize)]
struct JsonPosition {
    line: u32,
    column: u32,
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'static str,
    name: &'static str,
    severity: &'static str,
    message: &'a str,
    file: Option<String>,
    line: Option<u32>,
    column: Option<u32>,
    end: Option<JsonPosition>,
    labels: Vec<JsonLabel<'a>>,
    help: Option<&'a str>,
    notes: &'a [String],
    fixes: Vec<JsonFix<'a>>,
}

#[derive(Serialize)]
struct JsonFix<'a> {
    title: &'a str,
    applicability: Applicability,
    edits: Vec<JsonEdit<'a>>,
}

#[derive(Serialize)]
struct JsonEdit<'a> {
    file: String,
    line: u32,
    column: u32,
    end: JsonPosition,
    /// Byte offsets into the file's text, `end` exclusive.
    byte_start: u32,
    byte_end: u32,
    replacement: &'a str,
}

fn json_fix<'a>(db: &SourceDb, fix: &'a Fix) -> JsonFix<'a> {
    JsonFix {
        title: &fix.title,
        applicability: fix.applicability,
        edits: fix.edits.iter().map(|e| json_edit(db, e)).collect(),
    }
}

fn json_edit<'a>(db: &SourceDb, e: &'a Edit) -> JsonEdit<'a> {
    let file = db.get(e.file);
    let start = file.line_col(e.span.start);
    let end = file.line_col(e.span.end);
    JsonEdit {
        file: file.name.clone(),
        line: start.0,
        column: start.1,
        end: JsonPosition {
            line: end.0,
            column: end.1,
        },
        byte_start: e.span.start,
        byte_end: e.span.end,
        replacement: &e.replacement,
    }
}

#[derive(Serialize)]
struct JsonLabel<'a> {
    file: String,
    line: u32,
    column: u32,
    end: JsonPosition,
    message: &'a str,
    primary: bool,
}

fn json_label<'a>(db: &SourceDb, l: &'a Label, primary: bool) -> JsonLabel<'a> {
    let (file, start, end) = super::location(db, l);
    JsonLabel {
        file,
        line: start.0,
        column: start.1,
        end: JsonPosition {
            line: end.0,
            column: end.1,
        },
        message: &l.message,
        primary,
    }
}

/// The JSON document `--format json` prints (format version [`JSON_FORMAT_VERSION`]).
pub fn render_json(db: &SourceDb, diags: &[Diagnostic]) -> String {
    let counts = Counts::of(diags);
    let out = JsonOutput {
        version: JSON_FORMAT_VERSION,
        diagnostics: diags
            .iter()
            .map(|d| {
                let primary = d.primary.as_ref().map(|p| super::location(db, p));
                let mut labels = Vec::new();
                if let Some(p) = &d.primary {
                    labels.push(json_label(db, p, true));
                }
                labels.extend(d.secondary.iter().map(|l| json_label(db, l, false)));
                JsonDiagnostic {
                    code: d.rule.code,
                    name: d.rule.name,
                    severity: d.severity.as_str(),
                    message: &d.message,
                    file: primary.as_ref().map(|p| p.0.clone()),
                    line: primary.as_ref().map(|p| p.1.0),
                    column: primary.as_ref().map(|p| p.1.1),
                    end: primary.as_ref().map(|p| JsonPosition {
                        line: p.2.0,
                        column: p.2.1,
                    }),
                    labels,
                    help: d.help.as_deref(),
                    notes: &d.notes,
                    fixes: d.fixes.iter().map(|f| json_fix(db, f)).collect(),
                }
            })
            .collect(),
        summary: JsonSummary {
            errors: counts.errors,
            warnings: counts.warnings,
        },
    };
    serde_json::to_string_pretty(&out).unwrap_or_else(|_| "{}".into())
}

// ---------------------------------------------------------------- SARIF

/// A SARIF 2.1.0 log of the diagnostics, with every rule pipec has in the tool's rules.
pub fn render_sarif(db: &SourceDb, diags: &[Diagnostic], rules: &[&Rule]) -> String {
    use serde_json::json;
    let level = |s: Severity| match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let location = |l: &Label| {
        let (file, start, end) = super::location(db, l);
        json!({
            "physicalLocation": {
                "artifactLocation": { "uri": file.replace('\\', "/") },
                "region": {
                    "startLine": start.0,
                    "startColumn": start.1,
                    "endLine": end.0,
                    "endColumn": end.1
                }
            },
            "message": { "text": l.message }
        })
    };
    let rules_json: Vec<serde_json::Value> = rules
        .iter()
        .map(|r| {
            json!({
                "id": r.code,
                "name": r.name,
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": r.documentation() },
                "help": { "text": r.documentation(), "markdown": r.documentation() },
                "defaultConfiguration": { "level": level(r.severity) }
            })
        })
        .collect();
    let results: Vec<serde_json::Value> = diags
        .iter()
        .map(|d| {
            let mut text = d.message.clone();
            if let Some(h) = &d.help {
                text.push_str("\nhelp: ");
                text.push_str(h);
            }
            let fixes: Vec<serde_json::Value> = d
                .fixes
                .iter()
                .map(|f| {
                    let changes: Vec<serde_json::Value> = f
                        .edits
                        .iter()
                        .map(|e| {
                            let file = db.get(e.file);
                            let (start, end) =
                                (file.line_col(e.span.start), file.line_col(e.span.end));
                            json!({
                                "artifactLocation": { "uri": file.name.replace('\\', "/") },
                                "replacements": [{
                                    "deletedRegion": {
                                        "startLine": start.0,
                                        "startColumn": start.1,
                                        "endLine": end.0,
                                        "endColumn": end.1
                                    },
                                    "insertedContent": { "text": e.replacement }
                                }]
                            })
                        })
                        .collect();
                    json!({
                        "description": { "text": f.title },
                        "artifactChanges": changes
                    })
                })
                .collect();
            json!({
                "ruleId": d.rule.code,
                "fixes": fixes,
                "ruleIndex": rules.iter().position(|r| r.code == d.rule.code),
                "level": level(d.severity),
                "message": { "text": text },
                "locations": d.primary.iter().map(location).collect::<Vec<_>>(),
                "relatedLocations": d.secondary.iter().map(location).collect::<Vec<_>>()
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "pipec",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules_json
                }
            },
            "results": results
        }]
    });
    serde_json::to_string_pretty(&log).unwrap_or_else(|_| "{}".into())
}
