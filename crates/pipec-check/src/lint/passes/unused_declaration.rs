//! The pass that reports P0503 unused-declaration.

use crate::hir::DeclRef;
use crate::lint::LintContext;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::UNUSED_DECLARATION;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    if !cx.reports_unused() {
        return;
    }
    let mut report = |d: DeclRef, info: &crate::hir::DeclInfo, what: &str| {
        if hir.used.contains(&d) || !hir.is_root_file(info.file) {
            return;
        }
        out.push(
            Diagnostic::new(
                &UNUSED_DECLARATION,
                info.file,
                info.name_span,
                format!("the {what} `{}` is never used", info.display),
            )
            .label("unused")
            .help("remove it, or use it"),
        );
    };
    for (i, t) in hir.types.iter().enumerate() {
        report(DeclRef::Type(i as u32), &t.info, "type");
    }
    for (i, s) in hir.servers.iter().enumerate() {
        report(DeclRef::Server(i as u32), &s.info, "server");
    }
    for (i, m) in hir.models.iter().enumerate() {
        report(DeclRef::Model(i as u32), &m.info, "model");
    }
    for (i, l) in hir.links.iter().enumerate() {
        report(DeclRef::Link(i as u32), &l.info, "link kind");
    }
    for (i, t) in hir.tools.iter().enumerate() {
        report(
            DeclRef::Tool(i as u32),
            &t.info,
            if t.is_reader { "reader" } else { "tool" },
        );
    }
    for (i, inp) in hir.inputs.iter().enumerate() {
        report(DeclRef::Input(i as u32), &inp.info, "input");
    }
}
