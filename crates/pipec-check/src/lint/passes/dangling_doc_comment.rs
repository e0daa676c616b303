//! The pass that reports P0003 dangling-doc-comment.

use crate::SyntaxFile;
use crate::lint::LintContext;
use pipec_base::source::Span;
use pipec_diagnostic::rules::DANGLING_DOC_COMMENT;
use pipec_diagnostic::{Applicability, Diagnostic, Edit, Fix};
use pipec_syntax::ast::{self, ItemKind, SettingValue};
use pipec_syntax::lexer::CommentKind;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    for file in cx.syntax {
        let mut spans: Vec<(Span, &str)> = Vec::new();
        collect(file, &mut spans);
        for (span, why) in spans {
            let mut d = Diagnostic::new(&DANGLING_DOC_COMMENT, file.file, span, "this doc comment documents nothing")
                .label(why)
                .help("put `///` right above a declaration, field, parameter, enum variant, input or output; use `//` for other comments");
            let edits = plain_comment_edits(cx, file.file, span);
            if !edits.is_empty() {
                // Only a comment changes: what the program means stays the same.
                d = d.fix(Fix {
                    title: "make it a plain `//` comment".to_string(),
                    applicability: Applicability::Safe,
                    edits,
                });
            }
            out.push(d);
        }
    }
}

/// The edits that turn each `///` or `//!` line of the comment at `span` into `//`.
fn plain_comment_edits(
    cx: &LintContext<'_>,
    file: pipec_base::source::FileId,
    span: Span,
) -> Vec<Edit> {
    let src = cx.db.get(file);
    let mut edits = Vec::new();
    for line in src.line_of(span.start)..=src.line_of(span.end.saturating_sub(1).max(span.start)) {
        let Some(l) = src.line_span(line) else {
            continue;
        };
        let text = src.slice(l);
        let lead = (text.len() - text.trim_start().len()) as u32;
        let rest = text.trim_start();
        if (rest.starts_with("///") && !rest.starts_with("////")) || rest.starts_with("//!") {
            let at = l.start + lead + 2;
            edits.push(Edit {
                file,
                span: Span::new(at, at + 1),
                replacement: String::new(),
            });
        }
    }
    edits
}

fn collect<'a>(file: &'a SyntaxFile, out: &mut Vec<(Span, &'a str)>) {
    let first_item = file.ast.items.first().map_or(u32::MAX, |i| i.span.start);
    for c in &file.comments {
        if c.kind == CommentKind::FileDoc && c.span.start > first_item {
            out.push((c.span, "a `//!` file doc belongs at the top of the file"));
        }
    }
    for d in &file.ast.stray_docs {
        out.push((d.span, "nothing follows it"));
    }
    for item in &file.ast.items {
        match &item.kind {
            ItemKind::Import(_) => {
                if let Some(d) = &item.doc {
                    out.push((d.span, "an import is not documented"));
                }
            }
            ItemKind::Type(t) => {
                if let ast::TypeDeclBody::Record(r) = &t.body {
                    record(r, out);
                }
            }
            ItemKind::Enum(e) => {
                out.extend(e.stray_docs.iter().map(|d| (d.span, "nothing follows it")))
            }
            ItemKind::Server(b) | ItemKind::Model(b) | ItemKind::Test(b) => block(&b.body, out),
            ItemKind::Tool(t) | ItemKind::Reader(t) => {
                out.extend(
                    t.params
                        .stray_docs
                        .iter()
                        .map(|d| (d.span, "nothing follows it")),
                );
                if let Some(b) = &t.body {
                    block(b, out);
                }
            }
            ItemKind::Node(n) => {
                out.extend(
                    n.params
                        .stray_docs
                        .iter()
                        .map(|d| (d.span, "nothing follows it")),
                );
                block(&n.body, out);
            }
            ItemKind::Serve(s) => {
                out.extend(s.stray_docs.iter().map(|d| (d.span, "nothing follows it")));
                for e in &s.entries {
                    block(&e.body, out);
                }
                for t in &s.tools {
                    block(&t.body, out);
                }
                for p in &s.prompts {
                    out.extend(
                        p.params
                            .stray_docs
                            .iter()
                            .map(|d| (d.span, "nothing follows it")),
                    );
                    block(&p.body, out);
                }
            }
            _ => {}
        }
    }
}

fn record<'a>(r: &'a ast::RecordType, out: &mut Vec<(Span, &'a str)>) {
    out.extend(r.stray_docs.iter().map(|d| (d.span, "nothing follows it")));
    for f in &r.fields {
        if let ast::TypeExprKind::Record(inner) = &f.ty.kind {
            record(inner, out);
        }
    }
}

fn block<'a>(b: &'a ast::Block, out: &mut Vec<(Span, &'a str)>) {
    out.extend(b.stray_docs.iter().map(|d| (d.span, "nothing follows it")));
    for s in &b.settings {
        if let Some(d) = &s.doc {
            out.push((d.span, "settings are not documented"));
        }
        if let SettingValue::Block(inner) = &s.value {
            block(inner, out);
        }
    }
}
