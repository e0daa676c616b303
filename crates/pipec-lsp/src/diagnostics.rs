//! The checker's diagnostics as the editor's: one list per file (a prompt template's
//! problems on the template's own URI), secondary labels as related information, the
//! rule code with a link to what `pipec explain` prints.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use lsp_types::{
    CodeDescription, Diagnostic as LspDiagnostic, DiagnosticRelatedInformation, DiagnosticSeverity,
    Location, NumberOrString, Url,
};

use super::documents::{path_uri, range};
use pipec_check::Analysis;
use pipec_diagnostic::rules::find_rule;
use pipec_diagnostic::{Diagnostic, Severity};

/// Each file's diagnostics, by path (files with none are absent).
pub(crate) fn by_file(
    analysis: &Analysis,
    explain: &mut ExplainPages,
) -> BTreeMap<PathBuf, Vec<LspDiagnostic>> {
    let mut out: BTreeMap<PathBuf, Vec<LspDiagnostic>> = BTreeMap::new();
    for d in &analysis.diagnostics {
        let Some((path, diag)) = convert(analysis, d, explain) else {
            continue;
        };
        out.entry(path).or_default().push(diag);
    }
    out
}

/// One diagnostic, with the file it belongs to. A diagnostic about no place in
/// particular (a root file that cannot be read) goes at the top of the root file.
pub(crate) fn convert(
    analysis: &Analysis,
    d: &Diagnostic,
    explain: &mut ExplainPages,
) -> Option<(PathBuf, LspDiagnostic)> {
    let (path, lsp_range) = match &d.primary {
        Some(label) => {
            let file = analysis.db.get(label.file);
            (file.path.clone(), range(&file.text, label.span))
        }
        None => {
            let root = analysis.hir.root?;
            (
                analysis.db.get(root).path.clone(),
                lsp_types::Range::default(),
            )
        }
    };
    let related: Vec<DiagnosticRelatedInformation> = d
        .secondary
        .iter()
        .filter_map(|l| {
            let file = analysis.db.get(l.file);
            Some(DiagnosticRelatedInformation {
                location: Location::new(path_uri(&file.path)?, range(&file.text, l.span)),
                message: if l.message.is_empty() {
                    "here".into()
                } else {
                    l.message.clone()
                },
            })
        })
        .collect();
    let mut message = d.message.clone();
    if let Some(label) = d.primary.as_ref().filter(|l| !l.message.is_empty()) {
        message.push_str(&format!(" ({})", label.message));
    }
    if let Some(help) = &d.help {
        message.push_str(&format!("\nhelp: {help}"));
    }
    for note in &d.notes {
        message.push_str(&format!("\nnote: {note}"));
    }
    Some((
        path,
        LspDiagnostic {
            range: lsp_range,
            severity: Some(match d.severity {
                Severity::Error => DiagnosticSeverity::ERROR,
                Severity::Warning => DiagnosticSeverity::WARNING,
            }),
            code: Some(NumberOrString::String(d.rule.code.to_string())),
            code_description: explain
                .page(d.rule.code)
                .map(|href| CodeDescription { href }),
            source: Some("pipec".into()),
            message,
            related_information: (!related.is_empty()).then_some(related),
            tags: None,
            data: None,
        },
    ))
}

/// The documentation `pipec explain` prints, one Markdown page per rule code, written
/// once per server under the temporary folder so that a diagnostic's code can link to it
/// (the editor opens it like any file).
pub(crate) struct ExplainPages {
    dir: PathBuf,
    written: HashSet<&'static str>,
}

impl Default for ExplainPages {
    fn default() -> Self {
        ExplainPages {
            dir: std::env::temp_dir().join(format!("pipec-{}-explain", env!("CARGO_PKG_VERSION"))),
            written: HashSet::new(),
        }
    }
}

impl ExplainPages {
    pub(crate) fn page(&mut self, code: &str) -> Option<Url> {
        let rule = find_rule(code)?;
        let path = self.dir.join(format!("{}.md", rule.code));
        if !self.written.contains(rule.code) {
            let text = explanation(code)?;
            std::fs::create_dir_all(&self.dir).ok()?;
            std::fs::write(&path, text).ok()?;
            self.written.insert(rule.code);
        }
        path_uri(&path)
    }
}

/// A rule's documentation as Markdown: what `pipec explain CODE` prints.
pub(crate) fn explanation(code: &str) -> Option<String> {
    let rule = find_rule(code)?;
    Some(format!(
        "# {} {} ({})\n\n{}\n",
        rule.code,
        rule.name,
        rule.severity.as_str(),
        rule.documentation()
    ))
}
