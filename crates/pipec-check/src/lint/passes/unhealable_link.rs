//! The pass that reports P0307 unhealable-link.

use crate::graph::Ancestors;
use crate::hir::SourceKind;
use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::UNHEALABLE_LINK;
use pipec_syntax::ast::NodeKind;

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
