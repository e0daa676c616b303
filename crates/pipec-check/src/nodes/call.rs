//! `call = tool(arg: expr, ...)`: a tool call as a node's body, its arguments checked
//! against the tool's parameters.

use crate::Checker;
use crate::expr::BodyScope;
use crate::hir::*;
use crate::settings::Settings;
use pipec_base::names;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind};

impl Checker<'_> {
    /// `call = tool(arg: expr, ...)`.
    pub(super) fn call_body(
        &mut self,
        f: usize,
        s: &Settings<'_>,
        scope: &mut BodyScope<'_>,
        decl: &ast::NodeDecl,
        in_act: bool,
    ) -> Body {
        let file = scope.file;
        let Some(e) = s.expr("call") else {
            return Body::Invalid;
        };
        let ExprKind::Call(callee, args) = &e.kind else {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    e.span,
                    "`call` takes a tool call",
                )
                .label("not a call")
                .help("write `call = tool_name(param: value, ...)`"),
            );
            return Body::Invalid;
        };
        let Some(path) = callee.as_path() else {
            self.diags.push(
                Diagnostic::new(
                    &r::UNKNOWN_NAME,
                    file,
                    callee.span,
                    "`call` takes the name of a tool",
                )
                .label("not a tool name"),
            );
            return Body::Invalid;
        };
        let path: Vec<String> = path.iter().map(|i| i.name.clone()).collect();
        let Some(tool) = self.lookup_tool(f, &path, callee.span) else {
            for a in args {
                self.infer(scope, &a.value);
            }
            return Body::Invalid;
        };
        let tool_def = self.hir.tool(tool);
        if tool_def.is_reader {
            self.diags.push(
                Diagnostic::new(
                    &r::TYPE_MISMATCH,
                    file,
                    callee.span,
                    format!(
                        "`{}` is a reader; a node reads a resource through a parameter",
                        path.join(".")
                    ),
                )
                .label("a reader, not a tool")
                .help("bind a parameter: `x: T = resource(\"uri/{var}\")`"),
            );
            return Body::Invalid;
        }
        if !in_act && !tool_def.read_only {
            self.diags.push(
                Diagnostic::new(&r::EFFECT_IN_NODE, file, callee.span, format!("`{}` may change things (it is not `read_only`), so only an `act` may call it", path.join(".")))
                    .label("a tool with effects")
                    .help(format!("declare the node as `act {}(...)`, or mark the tool `read_only = true` if it only reads", decl.name.name)),
            );
        }
        let params = tool_def.params.clone();
        let tool_name = tool_def.info.display.clone();
        let mut out: Vec<(String, Expr)> = Vec::new();
        for a in args {
            let Some(name) = &a.name else {
                self.diags.push(
                    Diagnostic::new(
                        &r::RECORD_LITERAL_MISMATCH,
                        file,
                        a.span,
                        "tool arguments are named",
                    )
                    .label("name this argument")
                    .help("write `param: value`"),
                );
                self.infer(scope, &a.value);
                continue;
            };
            if out.iter().any(|(k, _)| k == &name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::RECORD_LITERAL_MISMATCH,
                        file,
                        name.span,
                        format!("`{}` is given twice", name.name),
                    )
                    .label("given again here"),
                );
                continue;
            }
            match params.iter().find(|p| p.name == name.name) {
                Some(p) => {
                    let v = self.check_against(scope, &a.value, &p.ty, true);
                    out.push((name.name.clone(), v));
                }
                None => {
                    // The parameters no argument names are what it may have meant.
                    let open = params.iter().map(|p| p.name.as_str()).filter(|p| {
                        !args
                            .iter()
                            .any(|a| a.name.as_ref().is_some_and(|n| n.name == *p))
                    });
                    let near = names::suggestion_among(&name.name, open);
                    self.diags.push(
                        Diagnostic::new(
                            &r::RECORD_LITERAL_MISMATCH,
                            file,
                            name.span,
                            format!("`{tool_name}` has no parameter `{}`", name.name),
                        )
                        .label("unknown parameter")
                        .did_you_mean(
                            &self.db,
                            file,
                            name.span,
                            &name.name,
                            near.as_ref(),
                        ),
                    );
                    self.infer(scope, &a.value);
                }
            }
        }
        let missing: Vec<String> = params
            .iter()
            .filter(|p| p.required() && !out.iter().any(|(k, _)| k == &p.name))
            .map(|p| format!("`{}`", p.name))
            .collect();
        if !missing.is_empty() {
            self.diags.push(
                Diagnostic::new(
                    &r::RECORD_LITERAL_MISMATCH,
                    file,
                    e.span,
                    format!(
                        "the call of `{tool_name}` is missing {}",
                        missing.join(", ")
                    ),
                )
                .label(format!("missing {}", missing.join(", ")))
                .help("pass every parameter that has no default and is not optional"),
            );
        }
        Body::Call { tool, args: out }
    }
}
