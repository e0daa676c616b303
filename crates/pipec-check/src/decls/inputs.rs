//! Input declarations: their type and default.

use crate::Checker;
use crate::hir::*;
use crate::mismatch::Target;
use crate::settings::literal_json;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind};

impl Checker<'_> {
    pub(super) fn check_input(&mut self, f: usize, id: InputId, decl: &ast::InputDecl) {
        let file = self.files[f].id;
        let ty = self.resolve_type(f, &decl.ty);
        let mut default = None;
        if let Some(e) = &decl.default {
            match literal_json(e) {
                Some(v) => {
                    self.check_literal_fits(file, e, &v, &ty, Target::Input(&decl.name.name));
                    default = Some(v);
                }
                None if matches!(e.kind, ExprKind::Error) => {}
                None => {
                    let (code, msg, help) = match &e.kind {
                        ExprKind::Call(c, _) if matches!(&c.kind, ExprKind::Name(n) if n.name == "secret") => {
                            (
                                &r::SECRET_OUT_OF_PLACE,
                                "an input's default cannot be a secret",
                                "read the secret where it is used: `token: string = secret(\"NAME\")` on a `call`, `exec` or `host` node",
                            )
                        }
                        _ => (
                            &r::INVALID_LITERAL_TYPE,
                            "an input's default must be a literal",
                            "write a string, number, boolean, list or record; use `env(\"NAME\")` on a node parameter for configuration",
                        ),
                    };
                    self.diags.push(
                        Diagnostic::new(code, file, e.span, msg)
                            .label("not a literal")
                            .help(help),
                    );
                }
            }
        }
        let input = &mut self.hir.inputs[id as usize];
        input.ty = ty;
        input.default = default;
    }
}
