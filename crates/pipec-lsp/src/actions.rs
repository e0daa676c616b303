//! Code actions (each fix a diagnostic carries, as a quick fix) and formatting (`pipec
//! fmt`'s printer on the buffer).

use std::collections::HashMap;

use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, DocumentFormattingParams,
    Position, Range, TextEdit, Url, WorkspaceEdit,
};
use serde_json::Value;

use super::documents::{self, path_uri};
use super::server::{Answer, Failure, known_path};
use super::workspace::Workspace;
use pipec_diagnostic::Applicability;

pub(crate) fn code_actions(ws: &mut Workspace, p: CodeActionParams) -> Answer {
    let path = known_path(ws, &p.text_document.uri)?;
    let mut actions: Vec<CodeActionOrCommand> = Vec::new();
    for (snap, file) in ws.snapshots_containing(&path) {
        let analysis = &snap.analysis;
        let text = &analysis.db.get(file).text;
        let start = documents::offset(text, p.range.start);
        let end = documents::offset(text, p.range.end);
        for d in &analysis.diagnostics {
            let Some(l) = &d.primary else { continue };
            if l.file != file || l.span.end < start || l.span.start > end || d.fixes.is_empty() {
                continue;
            }
            let mut explain = super::diagnostics::ExplainPages::default();
            let lsp_diag = super::diagnostics::convert(analysis, d, &mut explain).map(|(_, d)| d);
            for fix in &d.fixes {
                let mut changes: HashMap<Url, Vec<TextEdit>> = HashMap::new();
                for e in &fix.edits {
                    let f = analysis.db.get(e.file);
                    let Some(uri) = path_uri(&f.path) else {
                        continue;
                    };
                    changes.entry(uri).or_default().push(TextEdit {
                        range: documents::range(&f.text, e.span),
                        new_text: e.replacement.clone(),
                    });
                }
                let action = CodeAction {
                    title: fix.title.clone(),
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: lsp_diag.clone().map(|d| vec![d]),
                    edit: Some(WorkspaceEdit {
                        changes: Some(changes),
                        ..WorkspaceEdit::default()
                    }),
                    is_preferred: Some(fix.applicability == Applicability::Safe),
                    ..CodeAction::default()
                };
                if !actions.iter().any(|a| matches!(a, CodeActionOrCommand::CodeAction(o) if o.title == action.title && o.edit == action.edit)) {
                    actions.push(CodeActionOrCommand::CodeAction(action));
                }
            }
        }
    }
    serde_json::to_value(actions).map_err(|e| Failure::invalid(e.to_string()))
}

pub(crate) fn formatting(ws: &mut Workspace, p: DocumentFormattingParams) -> Answer {
    let path = known_path(ws, &p.text_document.uri)?;
    if !super::workspace::is_pipe(&path) {
        return Ok(Value::Null);
    }
    let Some(text) = ws.text_of(&path) else {
        return Ok(Value::Null);
    };
    match pipec_syntax::format_source(&text) {
        Ok(formatted) if formatted == text => Ok(serde_json::json!([])),
        Ok(formatted) => {
            let end = documents::position(&text, text.len() as u32);
            let edit = TextEdit {
                range: Range::new(Position::new(0, 0), end),
                new_text: formatted,
            };
            serde_json::to_value(vec![edit]).map_err(|e| Failure::invalid(e.to_string()))
        }
        Err(diags) => Err(Failure::refused(format!(
            "the file does not parse, so it is not formatted: {}",
            diags
                .first()
                .map_or_else(String::new, |d| d.message.clone())
        ))),
    }
}
