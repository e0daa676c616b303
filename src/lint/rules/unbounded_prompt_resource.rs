//! P0306 unbounded-prompt-resource.

crate::declare_rule! {
    /// ## What it catches
    /// Content that reaches a model with no size cap: a `resource(...)` parameter of a `think`,
    /// `agent` or `act` without `max_bytes`, a `resources(...)` one without `max_total`, or a
    /// reader without `max_bytes` given to an agent.
    ///
    /// ## Why it matters
    /// The server decides a resource's size at run time. One large file can overflow the
    /// model's context or cost far more than expected. `max_bytes` is checked before the content
    /// is parsed and fails the node with a clear error (R0101 resource-too-large).
    ///
    /// ## Example
    /// ```pipe
    /// agent research(
    ///   deal_id: string = input.deal_id,
    ///   dossier: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity"),
    /// ) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// agent research(
    ///   deal_id: string = input.deal_id,
    ///   dossier: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 50kb),
    /// ) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// For a list, cap the whole: `resources(ref: "ticket", max_bytes: 20kb, max_total: 1mb)`.
    pub static UNBOUNDED_PROMPT_RESOURCE = {
        code: "P0306",
        name: "unbounded-prompt-resource",
        severity: Warning,
        summary: "a resource that reaches a model without a size cap",
    };
}

use std::collections::BTreeSet;

use crate::check::hir::{Body, SourceKind};
use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    let mut readers = BTreeSet::new();
    for node in &hir.nodes {
        let Body::Model { tools, .. } = &node.body else {
            continue;
        };
        for p in node.params.iter().filter(|p| p.fetches()) {
            let (src, per_item) = match &p.source.kind {
                SourceKind::Each { inner, .. } => (&inner.kind, true),
                other => (other, false),
            };
            let missing = match src {
                SourceKind::Resource(r) => r.max_bytes.is_none().then_some("max_bytes"),
                SourceKind::Link(l) if !l.many || per_item => {
                    l.max_bytes.is_none().then_some("max_bytes")
                }
                SourceKind::Link(l) => l.max_total.is_none().then_some("max_total"),
                _ => None,
            };
            if let Some(option) = missing {
                let what = if option == "max_total" {
                    "these resources reach"
                } else {
                    "this resource reaches"
                };
                out.push(
                    Diagnostic::new(&UNBOUNDED_PROMPT_RESOURCE, node.info.file, p.source.span, format!("{what} the model in `{}` with no size cap", node.info.name))
                        .label(format!("no `{option}`"))
                        .help(format!("cap what the prompt can receive: add `{option}: 100kb` (or a size that fits the model's context)")),
                );
            }
        }
        for t in tools {
            let tool = hir.tool(*t);
            if tool.is_reader && tool.max_bytes.is_none() {
                readers.insert(*t);
            }
        }
    }
    for t in readers {
        let tool = hir.tool(t);
        out.push(
            Diagnostic::new(
                &UNBOUNDED_PROMPT_RESOURCE,
                tool.info.file,
                tool.info.name_span,
                format!(
                    "the reader `{}` gives a model what it reads with no size cap",
                    tool.info.name
                ),
            )
            .label("no `max_bytes`")
            .help("add `max_bytes = 100kb` to the reader"),
        );
    }
}
