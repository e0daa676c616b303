//! Parameter sources: inputs, nodes and paths into them, `??` joins, records and lists
//! of sources, constants, `env`, `secret` and `each`. Resources are in `resources.rs`.

use crate::Checker;
use crate::decls::Holds;
use crate::hir::*;
use crate::mismatch::Target;
use crate::settings::literal_json;
use crate::ty::{self, Ty};
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind, NodeKind};

/// The names of the functions that make a source.
const SOURCE_FUNCTIONS: &[&str] = &["resource", "resources", "each", "env", "secret"];

impl Checker<'_> {
    pub(super) fn check_node_sources(&mut self, f: usize, id: NodeId, decl: &ast::NodeDecl) {
        let file = self.files[f].id;
        let mut params = std::mem::take(&mut self.hir.nodes[id as usize].params);
        let mut each: Option<(usize, Span)> = None;
        for p in &decl.params.params {
            let Some(idx) = params.iter().position(|x| x.span == p.span) else {
                continue;
            };
            let Some(value) = &p.value else {
                self.diags.push(
                    Diagnostic::new(&r::MISSING_SETTING, file, p.span, format!("the parameter `{}` does not say where its value comes from", p.name.name))
                        .label("no source")
                        .help(format!("bind it: `{}: T = input.x`, `= other_node`, `= resource(\"uri\")`, or a constant", p.name.name)),
                );
                continue;
            };
            let expected = params[idx].ty.clone();
            let mut ctx = SourceCtx {
                f,
                file,
                node: id,
                params: &mut params,
                current: idx,
                name: &p.name.name,
                whole: value.span,
            };
            let src = self.source(&mut ctx, value, &expected, true);
            if let SourceKind::Each { .. } = src.kind {
                match each {
                    Some((_, first)) => {
                        self.diags.push(
                            Diagnostic::new(&r::MULTIPLE_EACH, file, value.span, format!("`{}` has a second `each` parameter", decl.name.name))
                                .label("second `each`")
                                .secondary(file, first, "first `each`")
                                .help("a node fans out over one list; pair the lists in an upstream node, or chain two `each` nodes"),
                        );
                    }
                    None => each = Some((idx, value.span)),
                }
            }
            params[idx].source = src;
        }
        let node = &mut self.hir.nodes[id as usize];
        node.params = params;
        node.each = each.map(|(i, _)| i);
    }

    /// A resource is fetched only as a whole parameter: hydration never looks inside the
    /// parts of a record or list source, which would reach the body unread.
    fn refuse_nested_resource(&mut self, file: FileId, part: &Source, within: &str) {
        if matches!(part.kind, SourceKind::Resource(_) | SourceKind::Link(_)) {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_SOURCE,
                    file,
                    part.span,
                    format!("a resource cannot be a part of {within} source"),
                )
                .label("read only as a whole parameter")
                .help(
                    "bind the resource to a parameter of its own, and build the record in the body",
                ),
            );
        }
    }

    /// Checks a source and that its value fits `expected`.
    pub(crate) fn source(
        &mut self,
        ctx: &mut SourceCtx<'_>,
        e: &ast::Expr,
        expected: &Ty,
        top: bool,
    ) -> Source {
        let file = ctx.file;
        let span = e.span;
        if let ExprKind::Call(callee, args) = &e.kind
            && let ExprKind::Name(n) = &callee.kind
            && SOURCE_FUNCTIONS.contains(&n.name.as_str())
        {
            if ctx.node == SourceCtx::OUTPUT
                && matches!(n.name.as_str(), "resource" | "resources" | "each")
            {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_SOURCE,
                        file,
                        span,
                        format!("an output cannot be `{}(...)`", n.name),
                    )
                    .label("outputs take node values, inputs and constants")
                    .help("read it in a node and output that node"),
                );
                return Source {
                    kind: SourceKind::Error,
                    span,
                    ty: Ty::Error,
                };
            }
            // A gate is answered inline by the scheduler, which fetches nothing: the
            // parameter would be missing when its message is rendered.
            if let Some(gate) = self
                .hir
                .nodes
                .get(ctx.node as usize)
                .filter(|n| n.kind == NodeKind::Gate)
                && matches!(n.name.as_str(), "resource" | "resources")
            {
                let gate = gate.info.name.clone();
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_SOURCE,
                        file,
                        span,
                        format!("the gate `{gate}` cannot read `{}(...)`", n.name),
                    )
                    .label("gates take node values, inputs and constants")
                    .help(format!(
                        "read it in a node before `{gate}` and bind that node's value to `{}`",
                        ctx.name
                    )),
                );
                return Source {
                    kind: SourceKind::Error,
                    span,
                    ty: Ty::Error,
                };
            }
            return self.source_call(ctx, e, &n.name, args, expected, top);
        }
        match &e.kind {
            ExprKind::Paren(inner) => self.source(ctx, inner, expected, top),
            ExprKind::Error => Source {
                kind: SourceKind::Error,
                span,
                ty: Ty::Error,
            },
            ExprKind::Name(_) | ExprKind::Field(..) | ExprKind::Splat(..) => {
                let src = self.path_source(ctx, e);
                self.bind(file, &src, expected, ctx.target(span));
                src
            }
            ExprKind::Binary(ast::BinOp::Coalesce, _, _) => {
                let mut sides = Vec::new();
                flatten_coalesce(e, &mut sides);
                let last = sides.len() - 1;
                let mut out = Vec::new();
                for (i, side) in sides.iter().enumerate() {
                    // Every side but the last may be missing: that is what `??` is for.
                    let want = if i < last {
                        expected.clone().optional()
                    } else {
                        expected.clone()
                    };
                    let s = self.source(ctx, side, &want, false);
                    if matches!(
                        s.kind,
                        SourceKind::Each { .. } | SourceKind::Resource(_) | SourceKind::Link(_)
                    ) {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_SOURCE,
                                file,
                                side.span,
                                "`??` joins node outputs, inputs and constants",
                            )
                            .label("cannot be joined")
                            .help("bind the resource to a parameter of its own"),
                        );
                    }
                    out.push(s);
                }
                let ty = out.last().map(|s| s.ty.clone()).unwrap_or(Ty::Error);
                Source {
                    kind: SourceKind::Join(out),
                    span,
                    ty,
                }
            }
            ExprKind::Record(entries) if literal_json(e).is_none() => {
                let rec = ty::as_record(&self.hir, expected.strip_optional()).cloned();
                let mut fields = Vec::new();
                let mut out = Vec::new();
                for en in entries {
                    let want = rec
                        .as_ref()
                        .and_then(|r| r.field(&en.key.name))
                        .map(|f| f.ty.clone())
                        .unwrap_or(Ty::Json);
                    if let Some(r) = &rec
                        && r.field(&en.key.name).is_none()
                    {
                        let near = names::suggestion(
                            &en.key.name,
                            r.fields.iter().map(|f| f.name.as_str()),
                        );
                        self.diags.push(
                            Diagnostic::new(
                                &r::RECORD_LITERAL_MISMATCH,
                                file,
                                en.key.span,
                                format!(
                                    "`{}` has no field `{}`",
                                    ty::display(&self.hir, expected),
                                    en.key.name
                                ),
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
                    let s = self.source(ctx, &en.value, &want, false);
                    self.refuse_nested_resource(file, &s, "a record");
                    fields.push(ty::FieldTy {
                        name: en.key.name.clone(),
                        ty: s.ty.clone(),
                        doc: None,
                    });
                    out.push((en.key.name.clone(), s));
                }
                if let Some(r) = &rec {
                    let missing: Vec<String> = r
                        .fields
                        .iter()
                        .filter(|f| !f.ty.is_optional() && !out.iter().any(|(k, _)| k == &f.name))
                        .map(|f| format!("`{}`", f.name))
                        .collect();
                    if !missing.is_empty() {
                        self.diags.push(
                            Diagnostic::new(
                                &r::RECORD_LITERAL_MISMATCH,
                                file,
                                span,
                                format!("this record is missing {}", missing.join(", ")),
                            )
                            .label(format!("missing {}", missing.join(", "))),
                        );
                    }
                }
                Source {
                    kind: SourceKind::Record(out),
                    span,
                    ty: Ty::Record(std::sync::Arc::new(ty::RecordTy { fields })),
                }
            }
            ExprKind::List(items) if literal_json(e).is_none() => {
                let elem = match ty::resolve(&self.hir, expected.strip_optional()) {
                    Ty::List(t) => (**t).clone(),
                    _ => Ty::Json,
                };
                let mut out = Vec::new();
                for i in items {
                    let s = self.source(ctx, i, &elem, false);
                    self.refuse_nested_resource(file, &s, "a list");
                    out.push(s);
                }
                Source {
                    kind: SourceKind::List(out),
                    span,
                    ty: elem.list(),
                }
            }
            _ => match literal_json(e) {
                Some(v) => {
                    self.check_literal_fits(file, e, &v, expected, ctx.target(span));
                    Source {
                        kind: SourceKind::Const(v),
                        span,
                        ty: expected.clone(),
                    }
                }
                None => {
                    self.diags.push(
                        Diagnostic::new(&r::INVALID_SOURCE, file, span, "this is not a source")
                            .label("computed here")
                            .help("a source is a pipeline input, a node (or a field of it), `a ?? b`, a constant, `env()`, `secret()`, `resource()`, `resources()` or `each()`; compute values in the node's body, or in a node of their own"),
                    );
                    Source {
                        kind: SourceKind::Error,
                        span,
                        ty: Ty::Error,
                    }
                }
            },
        }
    }

    /// Checks that a source's value fits the declared type.
    pub(super) fn bind(&mut self, file: FileId, src: &Source, expected: &Ty, target: Target<'_>) {
        if src.ty == Ty::Error {
            return;
        }
        if let Ty::Ref(want) = ty::resolve(&self.hir, expected.strip_optional()) {
            match ty::resolve(&self.hir, src.ty.strip_optional()) {
                Ty::Ref(_) => {}
                _ => {
                    self.diags.push(
                        Diagnostic::new(&r::TYPE_MISMATCH, file, src.span, format!("a `ref<{}>` parameter takes a reference, and this is a value of type `{}`", ty::display(&self.hir, want), ty::display(&self.hir, &src.ty)))
                            .label("a value, not a reference")
                            .help("bind a `resource(...)`, or an upstream value of type `ref<T>`"),
                    );
                    return;
                }
            }
        }
        self.report_mismatch(file, src.span, &src.ty, expected, "", target);
    }

    pub(super) fn path_source(&mut self, ctx: &mut SourceCtx<'_>, e: &ast::Expr) -> Source {
        let file = ctx.file;
        let mut segs: Vec<(bool, &ast::Ident)> = Vec::new();
        let mut cur = e;
        let root = loop {
            match &cur.kind {
                ExprKind::Field(base, id) => {
                    segs.push((false, id));
                    cur = base;
                }
                ExprKind::Splat(base, id) => {
                    segs.push((true, id));
                    cur = base;
                }
                ExprKind::Name(id) => break id,
                ExprKind::Paren(inner) => cur = inner,
                _ => {
                    self.diags.push(
                        Diagnostic::new(&r::INVALID_SOURCE, file, e.span, "this is not a source")
                            .label("not a node or input"),
                    );
                    return Source {
                        kind: SourceKind::Error,
                        span: e.span,
                        ty: Ty::Error,
                    };
                }
            }
        };
        segs.reverse();
        let (kind_base, mut ty, rest): (SourceKind, Ty, &[(bool, &ast::Ident)]) = if root.name
            == "input"
        {
            let Some(((splat, name), rest)) = segs.split_first() else {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_SOURCE,
                        file,
                        root.span,
                        "`input` alone is not a value",
                    )
                    .label("name an input")
                    .help("write `input.name`"),
                );
                return Source {
                    kind: SourceKind::Error,
                    span: e.span,
                    ty: Ty::Error,
                };
            };
            if *splat {
                return Source {
                    kind: SourceKind::Error,
                    span: e.span,
                    ty: Ty::Error,
                };
            }
            match self.scopes[ctx.f].inputs.get(&name.name).copied() {
                Some(iid) => {
                    self.hir.used.insert(DeclRef::Input(iid));
                    let input = &self.hir.inputs[iid as usize];
                    let t = if input.default.as_ref().is_some_and(|d| !d.is_null()) {
                        input.ty.strip_optional().clone()
                    } else {
                        input.ty.clone()
                    };
                    (
                        SourceKind::Input {
                            input: iid,
                            path: Vec::new(),
                        },
                        t,
                        rest,
                    )
                }
                None if self.scopes[ctx.f].is_poisoned("input", &name.name) => {
                    return Source {
                        kind: SourceKind::Error,
                        span: e.span,
                        ty: Ty::Error,
                    };
                }
                None => {
                    let near = names::suggestion(
                        &name.name,
                        self.scopes[ctx.f].inputs.keys().map(String::as_str),
                    );
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_NAME,
                            file,
                            name.span,
                            format!("unknown input `{}`", name.name),
                        )
                        .label("not declared")
                        .help(format!("declare it: `input {}: string`", name.name))
                        .did_you_mean(
                            &self.db,
                            file,
                            name.span,
                            &name.name,
                            near.as_ref(),
                        ),
                    );
                    return Source {
                        kind: SourceKind::Error,
                        span: e.span,
                        ty: Ty::Error,
                    };
                }
            }
        } else {
            match self.scopes[ctx.f].values.get(&root.name).copied() {
                Some(DeclRef::Node(nid)) => {
                    self.hir.used.insert(DeclRef::Node(nid));
                    let t = self.hir.nodes[nid as usize].value_ty();
                    (
                        SourceKind::Node {
                            node: nid,
                            path: Vec::new(),
                        },
                        t,
                        segs.as_slice(),
                    )
                }
                None if self.scopes[ctx.f].is_poisoned("value", &root.name) => {
                    return Source {
                        kind: SourceKind::Error,
                        span: e.span,
                        ty: Ty::Error,
                    };
                }
                other => {
                    let is_param = ctx.params.iter().any(|p| p.name == root.name);
                    let mut near = None;
                    let help = if is_param {
                        format!(
                            "sources see nodes and `input.`, not the node's own parameters; `{}` is a parameter here",
                            root.name
                        )
                    } else if other.is_some() {
                        "a source is a node, `input.x`, a constant or a resource".to_string()
                    } else {
                        let mut cands: Vec<String> =
                            self.hir.nodes.iter().map(|n| n.info.name.clone()).collect();
                        cands.extend(
                            self.scopes[ctx.f]
                                .inputs
                                .keys()
                                .map(|k| format!("input.{k}")),
                        );
                        near = names::suggestion(&root.name, cands.iter().map(String::as_str));
                        "name a node, or an input as `input.name`".to_string()
                    };
                    let msg = match other {
                        Some(_) => format!("`{}` is not a node", root.name),
                        None => format!("unknown node `{}`", root.name),
                    };
                    self.diags.push(
                        Diagnostic::new(&r::UNKNOWN_NAME, file, root.span, msg)
                            .label("not a node")
                            .help(help)
                            .did_you_mean(&self.db, file, root.span, &root.name, near.as_ref()),
                    );
                    return Source {
                        kind: SourceKind::Error,
                        span: e.span,
                        ty: Ty::Error,
                    };
                }
            }
        };
        let mut path = Vec::new();
        for (splat, id) in rest {
            if *splat {
                let elem = match ty::resolve(&self.hir, ty.strip_optional()) {
                    Ty::List(inner) => Some((**inner).clone()),
                    Ty::Json | Ty::Error => Some(Ty::Json),
                    _ => None,
                };
                match elem {
                    Some(el) => {
                        let optional = ty.is_optional();
                        let ft = self.field_type(file, &el, &id.name, id.span, true).list();
                        ty = if optional { ft.optional() } else { ft };
                    }
                    None => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_FIELD,
                                file,
                                id.span,
                                format!(
                                    "`[*]` takes a list, and this is `{}`",
                                    ty::display(&self.hir, &ty)
                                ),
                            )
                            .label("not a list"),
                        );
                        ty = Ty::Error;
                    }
                }
                path.push(PathSeg::Splat(id.name.clone()));
            } else {
                ty = self.field_type(file, &ty, &id.name, id.span, false);
                path.push(PathSeg::Field(id.name.clone()));
            }
        }
        let kind = match kind_base {
            SourceKind::Input { input, .. } => SourceKind::Input { input, path },
            SourceKind::Node { node, .. } => SourceKind::Node { node, path },
            other => other,
        };
        Source {
            kind,
            span: e.span,
            ty,
        }
    }

    pub(super) fn source_call(
        &mut self,
        ctx: &mut SourceCtx<'_>,
        e: &ast::Expr,
        name: &str,
        args: &[ast::Arg],
        expected: &Ty,
        top: bool,
    ) -> Source {
        let file = ctx.file;
        let span = e.span;
        match name {
            "env" => {
                let Some((var, default)) = self.env_args(file, span, args) else {
                    return Source {
                        kind: SourceKind::Error,
                        span,
                        ty: Ty::Error,
                    };
                };
                match ty::resolve(&self.hir, expected.strip_optional()) {
                    Ty::String | Ty::Int | Ty::Float | Ty::Bool | Ty::Json | Ty::Error => {}
                    other if ty::as_literals(&self.hir, other).is_some() => {}
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::TYPE_MISMATCH,
                            file,
                            span,
                            format!(
                                "`env(...)` gives a string (or a number or boolean), not `{}`",
                                ty::display(&self.hir, expected)
                            ),
                        )
                        .label("configuration is a scalar"),
                    ),
                }
                let read = ConfigValue::Env {
                    var: var.clone(),
                    default: default.clone(),
                };
                self.check_credential(file, span, &read, &Holds::Config);
                Source {
                    kind: SourceKind::Env { var, default },
                    span,
                    ty: expected.clone(),
                }
            }
            "secret" => {
                let Some((var, default)) = self.env_args(file, span, args) else {
                    return Source {
                        kind: SourceKind::Error,
                        span,
                        ty: Ty::Error,
                    };
                };
                if default.is_some() {
                    self.diags.push(
                        Diagnostic::new(&r::UNKNOWN_SETTING, file, span, "a secret has no default")
                            .label("remove `default:`")
                            .help("a missing secret fails the run before any node starts"),
                    );
                }
                let src = Source {
                    kind: SourceKind::Secret { var },
                    span,
                    ty: Ty::String,
                };
                self.bind(file, &src, expected, ctx.target(span));
                src
            }
            "each" => {
                if !top {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_SOURCE,
                            file,
                            span,
                            "`each(...)` must be the whole source of a parameter",
                        )
                        .label("nested `each`"),
                    );
                }
                let mut list = None;
                let mut max = None;
                for a in args {
                    match &a.name {
                        None if list.is_none() => list = Some(&a.value),
                        Some(n) if n.name == "max" => match a.value.kind {
                            ExprKind::Int(v) if v > 0 => max = Some(v as u64),
                            ExprKind::Error => max = Some(u64::MAX),
                            _ => self.diags.push(
                                Diagnostic::new(
                                    &r::INVALID_LITERAL_TYPE,
                                    file,
                                    a.value.span,
                                    "`max` is a positive whole number",
                                )
                                .label("expected a number"),
                            ),
                        },
                        _ => self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_SETTING,
                                file,
                                a.span,
                                "`each` takes a list and `max:`",
                            )
                            .label("not an argument of `each`"),
                        ),
                    }
                }
                let Some(list) = list else {
                    self.diags.push(
                        Diagnostic::new(&r::MISSING_SETTING, file, span, "`each` needs a list")
                            .label("write `each(node.items)`"),
                    );
                    return Source {
                        kind: SourceKind::Error,
                        span,
                        ty: Ty::Error,
                    };
                };
                let inner = self.source(ctx, list, &expected.clone().list(), false);
                if matches!(
                    inner.kind,
                    SourceKind::Const(_)
                        | SourceKind::Env { .. }
                        | SourceKind::Secret { .. }
                        | SourceKind::Resource(_)
                ) {
                    self.diags.push(
                        Diagnostic::new(&r::INVALID_SOURCE, file, list.span, "`each` fans out over a list from a node, an input or `resources(ref: ...)`")
                            .label("not such a list"),
                    );
                }
                Source {
                    kind: SourceKind::Each {
                        inner: Box::new(inner),
                        max,
                    },
                    span,
                    ty: expected.clone(),
                }
            }
            _ => self.resource_source(ctx, e, name == "resources", args, expected),
        }
    }
}

/// What a source check needs to know about the node it is in.
pub(crate) struct SourceCtx<'a> {
    pub f: usize,
    pub file: FileId,
    /// The node, or [`SourceCtx::OUTPUT`] for the source of an output.
    pub node: NodeId,
    pub params: &'a mut Vec<ParamDef>,
    /// The parameter whose source this is.
    pub current: usize,
    /// The name of the parameter or output, for help lines.
    pub name: &'a str,
    /// Where its whole source is written.
    pub whole: Span,
}

impl SourceCtx<'_> {
    /// The `node` of an output's source, which belongs to no node.
    pub(crate) const OUTPUT: NodeId = NodeId::MAX;

    /// What the source at `span` is bound to: the parameter or output, when it is the
    /// whole source.
    pub(crate) fn target(&self, span: Span) -> Target<'_> {
        match (span == self.whole, self.node == Self::OUTPUT) {
            (true, true) => Target::Output(self.name),
            (true, false) => Target::Param(self.name),
            (false, _) => Target::Part,
        }
    }
}

fn flatten_coalesce<'a>(e: &'a ast::Expr, out: &mut Vec<&'a ast::Expr>) {
    match &e.kind {
        ExprKind::Binary(ast::BinOp::Coalesce, a, b) => {
            flatten_coalesce(a, out);
            flatten_coalesce(b, out);
        }
        ExprKind::Paren(inner) => flatten_coalesce(inner, out),
        _ => out.push(e),
    }
}
