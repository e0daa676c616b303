//! Body expressions (`return`, `when`, `call` arguments, `where:` values): they see only
//! the node's own parameters. Typing is bidirectional: an expected type is pushed into
//! record and list literals, so a typo in a record field is reported at the field.

use std::sync::Arc;

use serde_json::Value;

use super::Checker;
use super::hir::{self, ExprKind as H, ParamDef};
use super::mismatch::Target;
use super::settings::literal_json;
use super::ty::{self, FieldTy, RecordTy, Ty};
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, BinOp, ExprKind};

/// What a body expression can see.
pub(crate) struct BodyScope<'a> {
    pub file: FileId,
    pub node: &'a str,
    pub params: &'a mut Vec<ParamDef>,
}

impl BodyScope<'_> {
    fn find(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }
}

fn mk(kind: H, span: Span, ty: Ty) -> hir::Expr {
    hir::Expr { kind, span, ty }
}

fn error(span: Span) -> hir::Expr {
    mk(H::Error, span, Ty::Error)
}

impl Checker<'_> {
    /// Infers the type of a body expression.
    pub(crate) fn infer(&mut self, scope: &mut BodyScope<'_>, e: &ast::Expr) -> hir::Expr {
        let file = scope.file;
        match &e.kind {
            ExprKind::Str(s) => mk(H::Const(Value::String(s.value.clone())), e.span, Ty::String),
            ExprKind::Int(v) => mk(H::Const(Value::from(*v)), e.span, Ty::Int),
            ExprKind::Float(v) => match serde_json::Number::from_f64(*v) {
                Some(n) => mk(H::Const(Value::Number(n)), e.span, Ty::Float),
                None => error(e.span),
            },
            ExprKind::Size(v, _) => mk(H::Const(Value::from(*v)), e.span, Ty::Int),
            ExprKind::Duration(v, _) => mk(H::Duration(*v), e.span, Ty::Duration),
            ExprKind::Bool(b) => mk(H::Const(Value::Bool(*b)), e.span, Ty::Bool),
            ExprKind::Null => mk(H::Const(Value::Null), e.span, Ty::Null),
            ExprKind::Error => error(e.span),
            ExprKind::Paren(inner) => self.infer(scope, inner),
            ExprKind::Name(id) => match scope.find(&id.name) {
                Some(i) => {
                    scope.params[i].used = true;
                    let ty = scope.params[i].ty.clone();
                    mk(H::Param(i), e.span, ty)
                }
                None => {
                    self.unknown_in_body(scope, &id.name, id.span);
                    error(e.span)
                }
            },
            ExprKind::Field(base, field) => {
                let base = self.infer(scope, base);
                let ty = self.field_type(file, &base.ty, &field.name, field.span, false);
                mk(H::Field(Box::new(base), field.name.clone()), e.span, ty)
            }
            ExprKind::Splat(base, field) => {
                let base = self.infer(scope, base);
                let (optional, elem) = match ty::resolve(&self.hir, base.ty.strip_optional()) {
                    Ty::List(inner) => (base.ty.is_optional(), Some((**inner).clone())),
                    Ty::Json => (false, Some(Ty::Json)),
                    Ty::Error => (false, Some(Ty::Error)),
                    _ => (false, None),
                };
                let ty = match elem {
                    Some(elem) => {
                        let f = self.field_type(file, &elem, &field.name, field.span, true);
                        let list = f.list();
                        if optional { list.optional() } else { list }
                    }
                    None => {
                        let shown = ty::display(&self.hir, &base.ty);
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_FIELD,
                                file,
                                e.span,
                                format!("`[*]` takes a list, and this is `{shown}`"),
                            )
                            .label("not a list")
                            .help(format!(
                                "write `.{}` to read a field of a record",
                                field.name
                            )),
                        );
                        Ty::Error
                    }
                };
                mk(H::Splat(Box::new(base), field.name.clone()), e.span, ty)
            }
            ExprKind::Call(callee, args) => self.infer_call(scope, e, callee, args),
            ExprKind::Record(entries) => {
                let mut fields = Vec::new();
                let mut out = Vec::new();
                for en in entries {
                    if out
                        .iter()
                        .any(|(k, _): &(String, hir::Expr)| k == &en.key.name)
                    {
                        self.diags.push(
                            Diagnostic::new(
                                &r::RECORD_LITERAL_MISMATCH,
                                file,
                                en.key.span,
                                format!("the field `{}` is given twice", en.key.name),
                            )
                            .label("given again here"),
                        );
                        continue;
                    }
                    let v = self.infer(scope, &en.value);
                    fields.push(FieldTy {
                        name: en.key.name.clone(),
                        ty: v.ty.clone(),
                        doc: None,
                    });
                    out.push((en.key.name.clone(), v));
                }
                mk(
                    H::Record(out),
                    e.span,
                    Ty::Record(Arc::new(RecordTy { fields })),
                )
            }
            ExprKind::List(items) => {
                let items: Vec<hir::Expr> = items.iter().map(|i| self.infer(scope, i)).collect();
                let elem = items
                    .iter()
                    .map(|i| i.ty.clone())
                    .find(|t| *t != Ty::Null && *t != Ty::Error)
                    .unwrap_or(Ty::Json);
                mk(H::List(items), e.span, elem.list())
            }
            ExprKind::Not(inner) => {
                let inner = self.infer(scope, inner);
                self.expect_bool(file, &inner, "`!`");
                mk(H::Not(Box::new(inner)), e.span, Ty::Bool)
            }
            ExprKind::Binary(op, a, b) => self.infer_binary(scope, e.span, *op, a, b),
        }
    }

    fn infer_call(
        &mut self,
        scope: &mut BodyScope<'_>,
        e: &ast::Expr,
        callee: &ast::Expr,
        args: &[ast::Arg],
    ) -> hir::Expr {
        let file = scope.file;
        let name = match &callee.kind {
            ExprKind::Name(n) => n.name.as_str(),
            _ => "",
        };
        if name == "len" && args.len() == 1 && args[0].name.is_none() {
            let arg = self.infer(scope, &args[0].value);
            match ty::resolve(&self.hir, &arg.ty) {
                Ty::List(_) | Ty::String | Ty::Map(_) | Ty::Json | Ty::Error => {}
                other if ty::as_record(&self.hir, other).is_some() => {}
                Ty::Optional(_) | Ty::Null => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::OPTIONAL_INTO_REQUIRED,
                            file,
                            args[0].value.span,
                            "`len` of a value that may be missing",
                        )
                        .label(format!("this is `{}`", ty::display(&self.hir, &arg.ty)))
                        .help(format!(
                            "give a default: `len({} ?? [])`",
                            self.written(file, args[0].value.span)
                                .unwrap_or_else(|| "x".into())
                        )),
                    );
                }
                _ => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::TYPE_MISMATCH,
                            file,
                            args[0].value.span,
                            format!(
                                "`len` takes a list, a string or a record, not `{}`",
                                ty::display(&self.hir, &arg.ty)
                            ),
                        )
                        .label("has no length"),
                    );
                }
            }
            return mk(H::Len(Box::new(arg)), e.span, Ty::Int);
        }
        let (msg, help) = match name {
            "len" => ("`len` takes one list".to_string(), "write `len(list)`".to_string()),
            "resource" | "resources" | "each" | "env" | "secret" | "file" => (
                format!("`{name}(...)` is a source, not a body expression"),
                format!("bind it to a parameter: `x: T = {name}(...)`, then use `x` here"),
            ),
            "" => ("only functions can be called".to_string(), "body expressions have `len(...)`".to_string()),
            other => (
                format!("unknown function `{other}`"),
                "body expressions have `len(...)`; compute anything else in an `exec` or `host` node".to_string(),
            ),
        };
        self.diags.push(
            Diagnostic::new(&r::UNKNOWN_NAME, file, callee.span, msg)
                .label("not a function here")
                .help(help),
        );
        for a in args {
            self.infer(scope, &a.value);
        }
        error(e.span)
    }

    fn infer_binary(
        &mut self,
        scope: &mut BodyScope<'_>,
        span: Span,
        op: BinOp,
        a: &ast::Expr,
        b: &ast::Expr,
    ) -> hir::Expr {
        let file = scope.file;
        match op {
            BinOp::And | BinOp::Or => {
                let l = self.infer(scope, a);
                let rr = self.infer(scope, b);
                self.expect_bool(file, &l, op.symbol());
                self.expect_bool(file, &rr, op.symbol());
                mk(H::Binary(op, Box::new(l), Box::new(rr)), span, Ty::Bool)
            }
            BinOp::Coalesce => {
                let l = self.infer(scope, a);
                let inner = l.ty.strip_optional().clone();
                let rr = if inner == Ty::Null || inner == Ty::Error || inner == Ty::Json {
                    self.infer(scope, b)
                } else {
                    self.check_against(scope, b, &l.ty.strip_optional().clone().optional(), false)
                };
                let ty = if rr.ty.is_optional() {
                    inner.optional()
                } else if inner == Ty::Null {
                    rr.ty.clone()
                } else {
                    inner
                };
                mk(H::Binary(op, Box::new(l), Box::new(rr)), span, ty)
            }
            BinOp::Eq | BinOp::Ne => {
                let l = self.infer(scope, a);
                let rr = self.infer(scope, b);
                self.check_comparable(file, &l, a, &rr, b);
                mk(H::Binary(op, Box::new(l), Box::new(rr)), span, Ty::Bool)
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let l = self.infer(scope, a);
                let rr = self.infer(scope, b);
                for side in [&l, &rr] {
                    match ty::resolve(&self.hir, &side.ty) {
                        Ty::Int | Ty::Float | Ty::Duration | Ty::Json | Ty::Error => {}
                        Ty::Optional(_) | Ty::Null => self.diags.push(
                            Diagnostic::new(
                                &r::OPTIONAL_INTO_REQUIRED,
                                file,
                                side.span,
                                format!(
                                    "`{}` compares numbers, and this may be missing",
                                    op.symbol()
                                ),
                            )
                            .label(format!("this is `{}`", ty::display(&self.hir, &side.ty)))
                            .help(self.default_help(
                                file,
                                side.span,
                                side.ty.strip_optional(),
                                "give a default",
                            )),
                        ),
                        _ => self.diags.push(
                            Diagnostic::new(
                                &r::TYPE_MISMATCH,
                                file,
                                side.span,
                                format!(
                                    "`{}` compares numbers, not `{}`",
                                    op.symbol(),
                                    ty::display(&self.hir, &side.ty)
                                ),
                            )
                            .label("not a number"),
                        ),
                    }
                }
                mk(H::Binary(op, Box::new(l), Box::new(rr)), span, Ty::Bool)
            }
        }
    }

    /// `==` and `!=` need types that can be equal; a string literal compared with an enum
    /// or a literal union must be one of its members.
    fn check_comparable(
        &mut self,
        file: FileId,
        l: &hir::Expr,
        la: &ast::Expr,
        rr: &hir::Expr,
        ra: &ast::Expr,
    ) {
        for (lit_side, lit_ast, other) in [(l, la, rr), (rr, ra, l)] {
            if let (H::Const(Value::String(s)), Some(members)) = (
                &lit_side.kind,
                ty::as_literals(&self.hir, other.ty.strip_optional()),
            ) {
                if !members.contains(s) {
                    let help = self.member_help(s, members, self.written(file, other.span));
                    let shown: Vec<String> = members.iter().map(|m| format!("\"{m}\"")).collect();
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            lit_ast.span,
                            format!("\"{s}\" is not one of {}", shown.join(", ")),
                        )
                        .label("never equal")
                        .help(help)
                        .did_you_mean(
                            &self.db,
                            file,
                            lit_ast.span,
                            s,
                            names::suggestion(s, members.iter().map(String::as_str)).as_ref(),
                        ),
                    );
                }
                return;
            }
        }
        let (lt, rt) = (l.ty.strip_optional(), rr.ty.strip_optional());
        if *lt == Ty::Null || *rt == Ty::Null {
            return;
        }
        if ty::fits(&self.hir, lt, rt).is_err() && ty::fits(&self.hir, rt, lt).is_err() {
            self.diags.push(
                Diagnostic::new(
                    &r::TYPE_MISMATCH,
                    file,
                    l.span.to(rr.span),
                    format!(
                        "`{}` and `{}` can never be equal",
                        ty::display(&self.hir, &l.ty),
                        ty::display(&self.hir, &rr.ty)
                    ),
                )
                .label("compares values of different types"),
            );
        }
    }

    pub(crate) fn expect_bool(&mut self, file: FileId, e: &hir::Expr, what: &str) {
        match ty::resolve(&self.hir, &e.ty) {
            Ty::Bool | Ty::Json | Ty::Error => {}
            Ty::Optional(inner) if **inner == Ty::Bool => self.diags.push(
                Diagnostic::new(
                    &r::OPTIONAL_INTO_REQUIRED,
                    file,
                    e.span,
                    format!("{what} needs a `bool`, and this may be missing"),
                )
                .label("this is `bool?`")
                .help(self.default_help(
                    file,
                    e.span,
                    &Ty::Bool,
                    "say what a missing value means",
                )),
            ),
            other => {
                let shown = ty::display(&self.hir, other);
                self.diags.push(
                    Diagnostic::new(
                        &r::TYPE_MISMATCH,
                        file,
                        e.span,
                        format!("{what} needs a `bool`, not `{shown}`"),
                    )
                    .label(format!("this is `{shown}`"))
                    .help("compare it to get a bool, e.g. `x != null` or `len(x) > 0`"),
                );
            }
        }
    }

    /// The type of `base.name`.
    pub(crate) fn field_type(
        &mut self,
        file: FileId,
        base: &Ty,
        name: &str,
        span: Span,
        in_splat: bool,
    ) -> Ty {
        let optional = base.is_optional();
        let inner = ty::resolve(&self.hir, base.strip_optional()).clone();
        let found = match &inner {
            Ty::Json | Ty::Error => Some(inner.clone()),
            Ty::Map(v) => Some((**v).clone()),
            Ty::Ref(t) => {
                let shown = ty::display(&self.hir, t);
                self.diags.push(
                    Diagnostic::new(
                        &r::UNKNOWN_FIELD,
                        file,
                        span,
                        format!("`ref<{shown}>` is a reference; its fields are not fetched here"),
                    )
                    .label("not fetched")
                    .help(format!(
                        "declare the parameter as `{shown}` to fetch the resource at this node"
                    )),
                );
                return Ty::Error;
            }
            Ty::List(_) if !in_splat => {
                self.diags.push(
                    Diagnostic::new(
                        &r::UNKNOWN_FIELD,
                        file,
                        span,
                        format!("a list has no field `{name}`"),
                    )
                    .label("this is a list")
                    .help(format!(
                        "to take `{name}` of every item, write `[*].{name}`"
                    )),
                );
                return Ty::Error;
            }
            other => match ty::as_record(&self.hir, other) {
                Some(rec) => match rec.field(name) {
                    Some(f) => Some(f.ty.clone()),
                    None => {
                        let near =
                            names::suggestion(name, rec.fields.iter().map(|f| f.name.as_str()));
                        let shown = ty::display(&self.hir, &inner);
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_FIELD,
                                file,
                                span,
                                format!("`{shown}` has no field `{name}`"),
                            )
                            .label("unknown field")
                            .did_you_mean(
                                &self.db,
                                file,
                                span,
                                name,
                                near.as_ref(),
                            ),
                        );
                        return Ty::Error;
                    }
                },
                None => {
                    let shown = ty::display(&self.hir, &inner);
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_FIELD,
                            file,
                            span,
                            format!("`{shown}` has no fields"),
                        )
                        .label(format!("`{name}` cannot be read here")),
                    );
                    return Ty::Error;
                }
            },
        };
        let t = found.unwrap_or(Ty::Error);
        if optional { t.optional() } else { t }
    }

    /// A name a body cannot see: explain the scopes.
    fn unknown_in_body(&mut self, scope: &BodyScope<'_>, name: &str, span: Span) {
        let file = scope.file;
        let is_elsewhere = name == "input" || self.hir.nodes.iter().any(|n| n.info.name == name);
        let mut near = None;
        let help = if is_elsewhere {
            format!(
                "a body sees only the parameters of `{}`; add one: `x: T = {name}`",
                scope.node
            )
        } else {
            near = names::suggestion(name, scope.params.iter().map(|p| p.name.as_str()));
            format!(
                "the parameters of `{}` are the names a body can use",
                scope.node
            )
        };
        self.diags.push(
            Diagnostic::new(
                &r::UNKNOWN_NAME,
                file,
                span,
                format!("`{name}` is not a parameter of `{}`", scope.node),
            )
            .label("unknown here")
            .help(help)
            .did_you_mean(&self.db, file, span, name, near.as_ref()),
        );
    }

    /// Checks an expression against an expected type. `exact` makes record literals match
    /// field for field (for `return` and `call`), instead of allowing extra fields.
    pub(crate) fn check_against(
        &mut self,
        scope: &mut BodyScope<'_>,
        e: &ast::Expr,
        expected: &Ty,
        exact: bool,
    ) -> hir::Expr {
        let file = scope.file;
        let want = ty::resolve(&self.hir, expected).clone();
        match (&e.kind, &want) {
            (ExprKind::Paren(inner), _) => {
                return self.check_against(scope, inner, expected, exact);
            }
            (_, Ty::Error) => return self.infer(scope, e),
            (ExprKind::Null, Ty::Optional(_) | Ty::Json) => {
                return mk(H::Const(Value::Null), e.span, expected.clone());
            }
            (_, Ty::Optional(inner))
                if !matches!(
                    e.kind,
                    ExprKind::Name(_)
                        | ExprKind::Field(..)
                        | ExprKind::Splat(..)
                        | ExprKind::Binary(..)
                ) =>
            {
                let inner = (**inner).clone();
                return self.check_against(scope, e, &inner, exact);
            }
            (ExprKind::Record(entries), _) => {
                if let Some(rec) = ty::as_record(&self.hir, &want).cloned() {
                    return self.check_record_literal(scope, e, entries, &rec, expected, exact);
                }
                if let Ty::Map(v) = &want {
                    let v = (**v).clone();
                    let mut out = Vec::new();
                    for en in entries {
                        out.push((
                            en.key.name.clone(),
                            self.check_against(scope, &en.value, &v, exact),
                        ));
                    }
                    return mk(H::Record(out), e.span, expected.clone());
                }
            }
            (ExprKind::List(items), Ty::List(elem)) => {
                let elem = (**elem).clone();
                let items = items
                    .iter()
                    .map(|i| self.check_against(scope, i, &elem, exact))
                    .collect();
                return mk(H::List(items), e.span, expected.clone());
            }
            (ExprKind::Str(s), _) if ty::as_literals(&self.hir, &want).is_some() => {
                let members = ty::as_literals(&self.hir, &want)
                    .cloned()
                    .unwrap_or_default();
                if !members.contains(&s.value) {
                    let help = self.member_help(&s.value, &members, None);
                    let shown: Vec<String> = members.iter().map(|m| format!("\"{m}\"")).collect();
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            e.span,
                            format!("\"{}\" is not one of {}", s.value, shown.join(", ")),
                        )
                        .label(format!("expected {}", ty::display(&self.hir, expected)))
                        .help(help)
                        .did_you_mean(
                            &self.db,
                            file,
                            e.span,
                            &s.value,
                            names::suggestion(&s.value, members.iter().map(String::as_str))
                                .as_ref(),
                        ),
                    );
                }
                return mk(
                    H::Const(Value::String(s.value.clone())),
                    e.span,
                    expected.clone(),
                );
            }
            (ExprKind::Binary(BinOp::Coalesce, a, b), _) => {
                let l = self.infer(scope, a);
                let inner = l.ty.strip_optional().clone();
                self.report_mismatch(file, l.span, &inner, expected, "", Target::Part);
                let rr = self.check_against(scope, b, expected, exact);
                return mk(
                    H::Binary(BinOp::Coalesce, Box::new(l), Box::new(rr)),
                    e.span,
                    expected.clone(),
                );
            }
            _ => {}
        }
        let got = self.infer(scope, e);
        let is_literal = matches!(
            e.kind,
            ExprKind::Str(_)
                | ExprKind::Int(_)
                | ExprKind::Float(_)
                | ExprKind::Bool(_)
                | ExprKind::Null
                | ExprKind::Size(..)
                | ExprKind::Duration(..)
        );
        if is_literal {
            if let Err(m) = ty::fits(&self.hir, &got.ty, expected) {
                let help =
                    literal_json(e).and_then(|v| self.literal_help(&v, expected, Target::Part));
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        e.span,
                        format!("this literal does not fit `{}`", m.expected),
                    )
                    .label(format!("expected {}, found {}", m.expected, m.found))
                    .maybe_help(help),
                );
            }
        } else {
            self.report_mismatch(file, got.span, &got.ty, expected, "", Target::Part);
        }
        got
    }

    /// Reports P0201 (or P0204 when only optionality differs) if `found` does not fit.
    pub(crate) fn report_mismatch(
        &mut self,
        file: FileId,
        span: Span,
        found: &Ty,
        expected: &Ty,
        context: &str,
        target: Target<'_>,
    ) -> bool {
        match ty::fits(&self.hir, found, expected) {
            Ok(()) => true,
            Err(m) if m.optional_only && m.path.is_empty() => {
                self.diags.push(
                    Diagnostic::new(
                        &r::OPTIONAL_INTO_REQUIRED,
                        file,
                        span,
                        format!(
                            "{context}this may be missing, and `{}` is required",
                            ty::display(&self.hir, expected)
                        ),
                    )
                    .label(format!("this is `{}`", ty::display(&self.hir, found)))
                    .help(self.optional_help(file, span, expected, target)),
                );
                false
            }
            Err(m) => {
                let shown_found = ty::display(&self.hir, found);
                let shown_expected = ty::display(&self.hir, expected);
                let label = if m.path.is_empty() {
                    format!("this is `{shown_found}`")
                } else {
                    format!("this is `{shown_found}`; {}", m.describe())
                };
                let d = Diagnostic::new(
                    &r::TYPE_MISMATCH,
                    file,
                    span,
                    format!("{context}expected `{shown_expected}`, found `{shown_found}`"),
                )
                .label(label)
                .maybe_help(self.mismatch_help(file, span, found, expected, target));
                self.diags.push(d);
                false
            }
        }
    }

    fn check_record_literal(
        &mut self,
        scope: &mut BodyScope<'_>,
        e: &ast::Expr,
        entries: &[ast::RecordEntry],
        rec: &RecordTy,
        expected: &Ty,
        exact: bool,
    ) -> hir::Expr {
        let file = scope.file;
        let mut out: Vec<(String, hir::Expr)> = Vec::new();
        let shown = ty::display(&self.hir, expected);
        for en in entries {
            if out.iter().any(|(k, _)| k == &en.key.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::RECORD_LITERAL_MISMATCH,
                        file,
                        en.key.span,
                        format!("the field `{}` is given twice", en.key.name),
                    )
                    .label("given again here"),
                );
                continue;
            }
            match rec.field(&en.key.name) {
                Some(f) => {
                    let v = self.check_against(scope, &en.value, &f.ty, exact);
                    out.push((en.key.name.clone(), v));
                }
                None => {
                    if exact {
                        let near = names::suggestion(
                            &en.key.name,
                            rec.fields.iter().map(|f| f.name.as_str()),
                        );
                        self.diags.push(
                            Diagnostic::new(
                                &r::RECORD_LITERAL_MISMATCH,
                                file,
                                en.key.span,
                                format!("`{shown}` has no field `{}`", en.key.name),
                            )
                            .label("unknown field")
                            .did_you_mean(
                                &self.db,
                                file,
                                en.key.span,
                                &en.key.name,
                                near.as_ref(),
                            ),
                        );
                    }
                    let v = self.infer(scope, &en.value);
                    out.push((en.key.name.clone(), v));
                }
            }
        }
        let missing: Vec<&str> = rec
            .fields
            .iter()
            .filter(|f| !f.ty.is_optional() && !out.iter().any(|(k, _)| k == &f.name))
            .map(|f| f.name.as_str())
            .collect();
        if !missing.is_empty() {
            let list: Vec<String> = missing.iter().map(|m| format!("`{m}`")).collect();
            self.diags.push(
                Diagnostic::new(
                    &r::RECORD_LITERAL_MISMATCH,
                    file,
                    e.span,
                    format!("this `{shown}` is missing {}", list.join(", ")),
                )
                .label(format!("missing {}", list.join(", ")))
                .help(
                    "every required field must be given; declare a field `T?` to make it optional",
                ),
            );
        }
        mk(H::Record(out), e.span, expected.clone())
    }
}
