//! A node's signature: its parameters (names, types, what they are bound to as
//! written) and its declared output.

use crate::Checker;
use crate::hir::*;
use crate::ty::Ty;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind, NodeKind};

impl Checker<'_> {
    pub(super) fn check_node_signature(&mut self, f: usize, id: NodeId, decl: &ast::NodeDecl) {
        let file = self.files[f].id;
        if matches!(decl.name.name.as_str(), "input" | "true" | "false" | "null") {
            self.diags.push(
                Diagnostic::new(
                    &r::RESERVED_NAME,
                    file,
                    decl.name.span,
                    format!(
                        "`{}` cannot name a node: it is a word of the language",
                        decl.name.name
                    ),
                )
                .label("reserved")
                .help(if decl.name.name == "input" {
                    "`input.x` names pipeline inputs; rename the node"
                } else {
                    "rename the node"
                }),
            );
        }
        let prompted = matches!(
            decl.kind,
            NodeKind::Think | NodeKind::Agent | NodeKind::Act | NodeKind::Gate
        );
        let mut params: Vec<ParamDef> = Vec::with_capacity(decl.params.params.len());
        for p in &decl.params.params {
            if let Some(first) = params.iter().find(|x| x.name == p.name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        p.name.span,
                        format!("the parameter `{}` is declared twice", p.name.name),
                    )
                    .label("declared again here")
                    .secondary(file, first.name_span, "first declared here"),
                );
                continue;
            }
            let reserved = match p.name.name.as_str() {
                "input" | "true" | "false" | "null" => Some("is a word of the language"),
                "output_schema" | "role" if prompted && decl.kind != NodeKind::Gate => {
                    Some("is what a prompt template uses for the output schema and message roles")
                }
                "output_schema" | "role" => None,
                _ => None,
            };
            if let Some(why) = reserved {
                self.diags.push(
                    Diagnostic::new(
                        &r::RESERVED_NAME,
                        file,
                        p.name.span,
                        format!("`{}` cannot name a parameter: it {why}", p.name.name),
                    )
                    .label("reserved")
                    .help("rename the parameter"),
                );
            }
            if p.wire_name.is_some() {
                self.diags.push(
                    Diagnostic::new(
                        &r::SYNTAX_ERROR,
                        file,
                        p.span,
                        "`as \"name\"` renames tool parameters, not node parameters",
                    )
                    .label("not allowed on a node"),
                );
            }
            let ty = self.resolve_type(f, &p.ty);
            params.push(ParamDef {
                name: p.name.name.clone(),
                span: p.span,
                name_span: p.name.span,
                ty,
                doc: p.doc.as_ref().map(|d| d.text.clone()),
                source: Source {
                    kind: SourceKind::Error,
                    span: p.span,
                    ty: Ty::Error,
                },
                used: false,
                binds_resource: p.value.as_ref().is_some_and(|v| {
                    matches!(call_name(v), Some("resource" | "resources")) || each_of_resource(v)
                }),
                binds_secret: p
                    .value
                    .as_ref()
                    .is_some_and(|v| call_name(v) == Some("secret")),
            });
        }
        let output = decl
            .returns
            .as_ref()
            .map(|t| (self.resolve_type(f, t), t.span));
        // Known now, so that nodes checked earlier see this one's value as a list.
        let each = decl
            .params
            .params
            .iter()
            .position(|p| p.value.as_ref().and_then(call_name) == Some("each"));
        let node = &mut self.hir.nodes[id as usize];
        node.each = each;
        node.params = params;
        if let Some((ty, span)) = output {
            node.output = ty;
            node.output_span = span;
        }
    }
}

/// The name of the function a source expression calls, if it is a call of a name.
fn call_name(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        ExprKind::Call(callee, _) => match &callee.kind {
            ExprKind::Name(n) => Some(n.name.as_str()),
            _ => None,
        },
        ExprKind::Paren(inner) => call_name(inner),
        _ => None,
    }
}

/// `each(resources(...))`.
fn each_of_resource(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Call(_, args) if call_name(e) == Some("each") => args
            .first()
            .is_some_and(|a| matches!(call_name(&a.value), Some("resource" | "resources"))),
        _ => false,
    }
}
