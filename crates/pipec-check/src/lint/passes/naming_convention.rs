//! The pass that reports P0109 naming-convention.

use crate::lint::LintContext;
use pipec_base::names::{is_camel_case, is_snake_case, to_camel_case, to_snake_case};
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::NAMING_CONVENTION;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    let hir = cx.hir;
    let mut report = |file: FileId, span: Span, what: &str, name: &str, camel: bool| {
        let ok = if camel {
            is_camel_case(name)
        } else {
            is_snake_case(name)
        };
        if ok || !hir.is_root_file(file) {
            return;
        }
        let (style, suggestion) = if camel {
            ("CamelCase", to_camel_case(name))
        } else {
            ("snake_case", to_snake_case(name))
        };
        out.push(
            Diagnostic::new(
                &NAMING_CONVENTION,
                file,
                span,
                format!("the {what} `{name}` is not {style}"),
            )
            .label(format!("{what} names are {style}"))
            .help(format!("rename it `{suggestion}`")),
        );
    };
    for t in &hir.types {
        report(t.info.file, t.info.name_span, "type", &t.info.name, true);
    }
    for s in &hir.servers {
        report(s.info.file, s.info.name_span, "server", &s.info.name, false);
    }
    for m in &hir.models {
        report(m.info.file, m.info.name_span, "model", &m.info.name, false);
    }
    for t in &hir.tools {
        let what = if t.is_reader { "reader" } else { "tool" };
        report(t.info.file, t.info.name_span, what, &t.info.name, false);
    }
    for i in &hir.inputs {
        report(i.info.file, i.info.name_span, "input", &i.info.name, false);
    }
    for o in &hir.outputs {
        report(o.info.file, o.info.name_span, "output", &o.info.name, false);
    }
    for n in &hir.nodes {
        report(n.info.file, n.info.name_span, "node", &n.info.name, false);
        for p in &n.params {
            report(n.info.file, p.name_span, "parameter", &p.name, false);
        }
    }
}
