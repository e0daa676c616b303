//! P0307 unhealable-link.

crate::declare_rule! {
    /// ## What it catches
    /// A node that reads a link (`resource(ref: ...)`, `resources(ref: ...)`) after waiting for a
    /// gate, where the link was produced before the gate by a tool that is not idempotent.
    ///
    /// ## Why it matters
    /// A gate can pause a run for days, and links may expire in the meantime (signed URLs,
    /// temporary exports). pipec heals a dead link by repeating the call that produced it, but
    /// only for an idempotent tool (`read_only` implies `idempotent`). Otherwise the read fails
    /// with R0102 resource-expired and the run cannot go on.
    ///
    /// ## Example
    /// ```pipe
    /// tool export_emails(deal_id: string) -> Export from crm {
    ///   links = ["email-history"] // neither read-only nor idempotent
    /// }
    ///
    /// act export(deal_id: string = input.deal_id) -> Export {
    ///   call = export_emails(deal_id: deal_id)
    /// }
    ///
    /// gate review(export: Export = export) -> Approval {
    ///   message = "Brief the team on {{ export.deal_id }}?"
    /// }
    ///
    /// think consume(
    ///   ack: Approval = review,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   when = ack.approved
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as, when repeating the export is safe:
    /// ```pipe
    /// tool export_emails(deal_id: string) -> Export from crm {
    ///   idempotent = true
    ///   links = ["email-history"]
    /// }
    /// ```
    /// When it is not, read the history in a node before the gate, so that no link has to
    /// outlive the pause.
    pub static UNHEALABLE_LINK = {
        code: "P0307",
        name: "unhealable-link",
        severity: Warning,
        summary: "a link read after a gate from a tool that cannot safely be called again",
    };
}

use crate::check::graph::Ancestors;
use crate::check::hir::SourceKind;
use crate::diagnostic::Diagnostic;
use crate::lint::LintContext;
use crate::syntax::ast::NodeKind;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    if hir.order.len() != hir.nodes.len() {
        return;
    }
    let gates: Vec<u32> = hir
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind == NodeKind::Gate)
        .map(|(i, _)| i as u32)
        .collect();
    if gates.is_empty() {
        return;
    }
    let mut columns = gates.clone();
    columns.extend(
        hir.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| !hir.produced_links(n).is_empty())
            .map(|(i, _)| i as u32),
    );
    let anc = Ancestors::compute(hir, &columns);
    for (id, node) in hir.nodes.iter().enumerate() {
        let id = id as u32;
        for p in node.params.iter().filter(|p| p.fetches()) {
            let link = match &p.source.kind {
                SourceKind::Link(l) => l,
                SourceKind::Each { inner, .. } => match &inner.kind {
                    SourceKind::Link(l) => l,
                    _ => continue,
                },
                _ => continue,
            };
            let Some(producer) = link.producer else {
                continue;
            };
            // A pause can fall between the producer and this read when a gate is upstream
            // of the read but not of the producer.
            let Some(gate) = gates.iter().copied().find(|g| {
                anc.is_ancestor(*g, id) && *g != producer && !anc.is_ancestor(*g, producer)
            }) else {
                continue;
            };
            let tools = hir.producing_tools(hir.node(producer), link.link);
            let risky: Vec<String> = tools
                .iter()
                .filter(|t| !hir.tool(**t).idempotent)
                .map(|t| format!("`{}`", hir.tool(*t).info.display))
                .collect();
            if risky.is_empty() {
                continue;
            }
            let kind = &hir.links[link.link as usize].kind;
            let gname = &hir.node(gate).info.name;
            out.push(
                Diagnostic::new(&UNHEALABLE_LINK, node.info.file, p.source.span, format!("the link of kind \"{kind}\", read after the gate `{gname}`, cannot be re-derived if it expires during the pause"))
                    .label("read after a pause")
                    .secondary(hir.node(producer).info.file, hir.node(producer).info.name_span, format!("produced here by {}", risky.join(", ")))
                    .help(format!("declare {} `idempotent = true` if calling it again is safe, or read the link before the gate", risky.join(", "))),
            );
        }
    }
}
