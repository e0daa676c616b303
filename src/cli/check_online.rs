//! `pipec check --online`: the servers of each checked file started, what they list
//! compared with the declarations (`runtime::check_online`), and each finding put at the
//! span of the declaration it is about. Only a file without errors is compared: its plan
//! says exactly what a run would send.

use crate::check::hir::Hir;
use crate::diagnostic::{self, Diagnostic, Rule};
use crate::runtime::{Finding, Subject};
use crate::source::{FileId, Span};

/// The run-time codes an online check reports besides its own rules (SARIF lists them).
pub(crate) static RUNTIME_RULES: &[&Rule] = &[
    &diagnostic::CONFIG_MISSING,
    &diagnostic::MCP_SERVER_FAILED,
    &diagnostic::MCP_TOOL_MISMATCH,
];

/// What `--online` needs across files: one runtime for every session.
pub(crate) struct Online {
    runtime: tokio::runtime::Runtime,
}

impl Online {
    pub(crate) fn start() -> Result<Online, String> {
        Ok(Online {
            runtime: super::common::runtime()?,
        })
    }

    /// The findings of the servers of one checked file, as diagnostics. A file with
    /// errors has no plan to compare, so it starts nothing (and a note says so).
    pub(crate) fn diagnostics(&self, analysis: &crate::Analysis, name: &str) -> Vec<Diagnostic> {
        if analysis.has_errors() {
            super::err(&format!(
                "note: `{name}` has errors, so `--online` started none of its servers"
            ));
            return Vec::new();
        }
        let plan = pipec_check::lower(&analysis.hir, name);
        let root = analysis.hir.project_root.clone();
        let environment = |k: &str| std::env::var(k).ok();
        let findings =
            self.runtime
                .block_on(crate::runtime::check_online(&plan, &root, &environment));
        findings
            .into_iter()
            .map(|f| diagnostic_of(&analysis.hir, f))
            .collect()
    }
}

/// A finding at the span of its declaration.
fn diagnostic_of(hir: &Hir, f: Finding) -> Diagnostic {
    let place = place_of(hir, &f.subject);
    let mut d = match place {
        Some((file, span, label)) => Diagnostic::new(f.rule, file, span, f.message).label(label),
        None => Diagnostic::without_location(f.rule, f.message),
    };
    d.severity = f.severity;
    d.help = f.help.filter(|h| !h.is_empty());
    d
}

fn place_of(hir: &Hir, subject: &Subject) -> Option<(FileId, Span, &'static str)> {
    match subject {
        Subject::Server(i) => hir
            .servers
            .get(*i)
            .map(|s| (s.info.file, s.info.name_span, "this server")),
        Subject::Tool(i) => hir.tools.get(*i).map(|t| {
            let label = if t.is_reader {
                "this reader"
            } else {
                "this tool"
            };
            (t.info.file, t.info.name_span, label)
        }),
        Subject::ToolParam(i, p) => hir.tools.get(*i).and_then(|t| {
            t.params
                .get(*p)
                .map(|param| (t.info.file, param.span, "this parameter"))
        }),
        Subject::ToolLinks(i) => hir.tools.get(*i).map(|t| match t.links.first() {
            Some((_, first)) => {
                let last = t.links.last().map_or(*first, |(_, s)| *s);
                (
                    t.info.file,
                    Span::new(first.start, last.end),
                    "links declared here",
                )
            }
            None => (t.info.file, t.info.name_span, "this tool"),
        }),
        Subject::Binding { node, param } => {
            let n = hir.nodes.iter().find(|n| &n.info.name == node)?;
            let p = n.params.iter().find(|p| &p.name == param)?;
            Some((n.info.file, p.source.span, "read here"))
        }
    }
}
