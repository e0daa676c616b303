//! Every place a name is written, and what it names: the table definition, references,
//! rename, hover and semantic tokens read.
//!
//! The checker resolves names without keeping where each use was; this walks the syntax
//! trees of a checked program once more and resolves each name the way the checker's
//! scopes do (a file's own declarations, then what its imports show, `ns.Name` for a
//! namespaced import), reading types from the [`Hir`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use pipec_base::source::{FileId, Span, normalize_path};
use pipec_check::Analysis;
use pipec_check::hir::{DeclRef, Hir, NodeId};
use pipec_check::ty::{Ty, TypeBody, TypeEnv, TypeId};
use pipec_syntax::ast::{self, ExprKind, ItemKind, SettingValue, TypeExprKind};

/// What a written name stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Sym {
    Decl(DeclRef),
    /// A field of a named record type.
    Field(TypeId, String),
    /// A node's parameter, by index.
    Param(NodeId, usize),
    /// A file: an import's target or a prompt template.
    File(PathBuf),
}

/// One written name.
#[derive(Clone, Debug)]
pub(crate) struct Occurrence {
    pub file: FileId,
    pub span: Span,
    pub sym: Sym,
    /// Whether this is where the thing is declared.
    pub is_def: bool,
}

#[derive(Default)]
pub(crate) struct Index {
    pub occurrences: Vec<Occurrence>,
}

impl Index {
    pub(crate) fn build(analysis: &Analysis) -> Index {
        let names = Names::new(&analysis.hir);
        let mut out = Vec::new();
        for sf in &analysis.syntax {
            let dir = analysis
                .db
                .get(sf.file)
                .path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let mut w = Walker {
                hir: &analysis.hir,
                names: &names,
                file: sf.file,
                dir,
                out: &mut out,
            };
            for item in &sf.ast.items {
                w.item(item);
            }
        }
        out.sort_by_key(|o| (o.file, o.span.start, o.span.end));
        Index { occurrences: out }
    }

    /// The name at a byte offset of a file (the cursor may sit just after it).
    pub(crate) fn at(&self, file: FileId, offset: u32) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| o.file == file && o.span.start <= offset && offset <= o.span.end)
            .min_by_key(|o| o.span.len())
    }

    pub(crate) fn of<'a>(&'a self, sym: &'a Sym) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.occurrences.iter().filter(move |o| &o.sym == sym)
    }

    pub(crate) fn in_file(&self, file: FileId) -> impl Iterator<Item = &Occurrence> {
        self.occurrences.iter().filter(move |o| o.file == file)
    }
}

/// Declarations by where they are written and by the names files see them by.
struct Names {
    at: HashMap<(FileId, u32), DeclRef>,
    own_values: HashMap<(FileId, String), DeclRef>,
    shown_values: HashMap<String, DeclRef>,
    own_types: HashMap<(FileId, String), TypeId>,
    shown_types: HashMap<String, TypeId>,
    links: HashMap<String, u32>,
    inputs: HashMap<String, u32>,
}

impl Names {
    fn new(hir: &Hir) -> Names {
        let mut n = Names {
            at: HashMap::new(),
            own_values: HashMap::new(),
            shown_values: HashMap::new(),
            own_types: HashMap::new(),
            shown_types: HashMap::new(),
            links: HashMap::new(),
            inputs: HashMap::new(),
        };
        for (i, t) in hir.types.iter().enumerate() {
            let id = i as TypeId;
            n.at.insert((t.info.file, t.info.name_span.start), DeclRef::Type(id));
            n.own_types.insert((t.info.file, t.info.name.clone()), id);
            n.shown_types.entry(t.info.display.clone()).or_insert(id);
        }
        let mut value = |info: &pipec_check::hir::DeclInfo, d: DeclRef| {
            n.at.insert((info.file, info.name_span.start), d);
            n.own_values.insert((info.file, info.name.clone()), d);
            n.shown_values.entry(info.display.clone()).or_insert(d);
        };
        for (i, s) in hir.servers.iter().enumerate() {
            value(&s.info, DeclRef::Server(i as u32));
        }
        for (i, m) in hir.models.iter().enumerate() {
            value(&m.info, DeclRef::Model(i as u32));
        }
        for (i, t) in hir.tools.iter().enumerate() {
            value(&t.info, DeclRef::Tool(i as u32));
        }
        for (i, node) in hir.nodes.iter().enumerate() {
            value(&node.info, DeclRef::Node(i as u32));
        }
        for (i, l) in hir.links.iter().enumerate() {
            n.at.insert(
                (l.info.file, l.info.name_span.start),
                DeclRef::Link(i as u32),
            );
            n.links.entry(l.kind.clone()).or_insert(i as u32);
        }
        for (i, input) in hir.inputs.iter().enumerate() {
            n.at.insert(
                (input.info.file, input.info.name_span.start),
                DeclRef::Input(i as u32),
            );
            n.inputs.entry(input.info.name.clone()).or_insert(i as u32);
        }
        n
    }

    fn value(&self, file: FileId, name: &str) -> Option<DeclRef> {
        self.own_values
            .get(&(file, name.to_string()))
            .or_else(|| self.shown_values.get(name))
            .copied()
    }

    fn ty(&self, file: FileId, name: &str) -> Option<TypeId> {
        self.own_types
            .get(&(file, name.to_string()))
            .or_else(|| self.shown_types.get(name))
            .copied()
    }
}

/// Where an expression is: a parameter's source sees nodes and inputs, a node's body
/// sees its parameters (and the declarations settings name), anything else sees
/// declarations.
#[derive(Clone, Copy)]
enum Context {
    Source,
    Body(NodeId),
    Decl,
}

struct Walker<'a> {
    hir: &'a Hir,
    names: &'a Names,
    file: FileId,
    dir: PathBuf,
    out: &'a mut Vec<Occurrence>,
}

impl Walker<'_> {
    fn push(&mut self, span: Span, sym: Sym, is_def: bool) {
        self.out.push(Occurrence {
            file: self.file,
            span,
            sym,
            is_def,
        });
    }

    fn def(&mut self, span: Span) -> Option<DeclRef> {
        let d = self.names.at.get(&(self.file, span.start)).copied()?;
        self.push(span, Sym::Decl(d), true);
        Some(d)
    }

    fn item(&mut self, item: &ast::Item) {
        match &item.kind {
            ItemKind::Import(i) => {
                let target = normalize_path(&self.dir.join(&i.path.value));
                self.push(content_span(&i.path), Sym::File(target), false);
            }
            ItemKind::Type(t) => {
                let id = match self.def(t.name.span) {
                    Some(DeclRef::Type(id)) => Some(id),
                    _ => None,
                };
                match &t.body {
                    ast::TypeDeclBody::Record(r) => self.record(r, id),
                    ast::TypeDeclBody::Alias(e) => self.type_expr(e),
                }
            }
            ItemKind::Enum(e) => {
                self.def(e.name.span);
            }
            ItemKind::Input(i) => {
                self.def(i.name.span);
                self.type_expr(&i.ty);
            }
            ItemKind::Output(o) => {
                if let Some(t) = &o.ty {
                    self.type_expr(t);
                }
                self.expr(&o.value, Context::Source);
            }
            ItemKind::Server(b) | ItemKind::Model(b) => {
                self.def(b.name.span);
                self.block(&b.body, Context::Decl);
            }
            ItemKind::Test(b) => self.block(&b.body, Context::Decl),
            ItemKind::Link(l) => {
                if let Some(d) = self.names.at.get(&(self.file, l.kind.span.start)).copied() {
                    self.push(content_span(&l.kind), Sym::Decl(d), true);
                }
                self.type_expr(&l.ty);
            }
            ItemKind::Tool(t) | ItemKind::Reader(t) => {
                self.def(t.name.span);
                for p in &t.params.params {
                    self.type_expr(&p.ty);
                }
                if let Some(r) = &t.returns {
                    self.type_expr(r);
                }
                if let Some(d) = self.names.value(self.file, &t.server.name) {
                    self.push(t.server.span, Sym::Decl(d), false);
                }
                if let Some(b) = &t.body {
                    self.block(b, Context::Decl);
                }
            }
            ItemKind::Node(n) => {
                let id = match self.def(n.name.span) {
                    Some(DeclRef::Node(id)) => Some(id),
                    _ => None,
                };
                for (i, p) in n.params.params.iter().enumerate() {
                    if let Some(id) = id {
                        self.push(p.name.span, Sym::Param(id, i), true);
                    }
                    self.type_expr(&p.ty);
                    if let Some(v) = &p.value {
                        self.expr(v, Context::Source);
                    }
                }
                if let Some(r) = &n.returns {
                    self.type_expr(r);
                }
                let cx = id.map_or(Context::Decl, Context::Body);
                self.block(&n.body, cx);
            }
            ItemKind::Serve(s) => {
                for e in &s.entries {
                    self.block(&e.body, Context::Decl);
                }
                for p in &s.prompts {
                    for param in &p.params.params {
                        self.type_expr(&param.ty);
                    }
                    self.block(&p.body, Context::Decl);
                }
                for t in &s.tools {
                    self.block(&t.body, Context::Decl);
                }
            }
        }
    }

    fn record(&mut self, r: &ast::RecordType, owner: Option<TypeId>) {
        for f in &r.fields {
            if let Some(id) = owner {
                self.push(f.name.span, Sym::Field(id, f.name.name.clone()), true);
            }
            self.type_expr(&f.ty);
        }
    }

    fn type_expr(&mut self, t: &ast::TypeExpr) {
        match &t.kind {
            TypeExprKind::Name(path) => {
                let joined = join(path.iter());
                if let (Some(id), Some(last)) = (self.names.ty(self.file, &joined), path.last()) {
                    self.push(last.span, Sym::Decl(DeclRef::Type(id)), false);
                }
            }
            TypeExprKind::Generic(_, inner)
            | TypeExprKind::List(inner)
            | TypeExprKind::Optional(inner)
            | TypeExprKind::Paren(inner) => self.type_expr(inner),
            TypeExprKind::Record(r) => self.record(r, None),
            TypeExprKind::Union(items) => {
                for i in items {
                    self.type_expr(i);
                }
            }
            TypeExprKind::Literal(_) => {}
        }
    }

    fn block(&mut self, b: &ast::Block, cx: Context) {
        for s in &b.settings {
            match &s.value {
                SettingValue::Expr(e) => {
                    if s.name.name == "links" {
                        self.link_strings(e);
                    }
                    if s.name.name == "prompt" || s.name.name == "message" {
                        self.prompt_file(e);
                    }
                    self.expr(e, cx);
                }
                SettingValue::Block(inner) => self.block(inner, cx),
            }
        }
    }

    fn link_strings(&mut self, e: &ast::Expr) {
        if let ExprKind::List(items) = &e.kind {
            for i in items {
                self.link_string(i);
            }
        }
    }

    fn link_string(&mut self, e: &ast::Expr) {
        if let ExprKind::Str(s) = &e.kind
            && let Some(id) = self.names.links.get(&s.value)
        {
            self.push(content_span(s), Sym::Decl(DeclRef::Link(*id)), false);
        }
    }

    fn prompt_file(&mut self, e: &ast::Expr) {
        if let ExprKind::Call(callee, args) = &e.kind
            && matches!(&callee.kind, ExprKind::Name(n) if n.name == "file")
            && let Some(ExprKind::Str(s)) = args.first().map(|a| &a.value.kind)
        {
            let path = self
                .hir
                .project_root
                .join("prompts")
                .join(pipec_check::prompt_file_name(&s.value));
            self.push(content_span(s), Sym::File(normalize_path(&path)), false);
        }
    }

    fn expr(&mut self, e: &ast::Expr, cx: Context) {
        match &e.kind {
            ExprKind::Name(_) | ExprKind::Field(..) => {
                self.path(e, cx);
            }
            ExprKind::Splat(base, field) => {
                let ty = self.expr_ty(base, cx);
                if let Some(ty) = ty.map(|t| element(self.hir, &t)) {
                    self.field(&ty, field);
                }
            }
            ExprKind::Call(callee, args) => {
                match &callee.kind {
                    ExprKind::Name(n) if is_builtin(&n.name) => {}
                    _ => {
                        self.path(callee, Context::Decl);
                    }
                }
                for a in args {
                    match a.name.as_ref().map(|n| n.name.as_str()) {
                        Some("ref") => self.link_string(&a.value),
                        Some("server") | Some("from") => {
                            self.path(&a.value, Context::Decl);
                        }
                        _ => self.expr(&a.value, cx),
                    }
                }
            }
            ExprKind::Record(entries) => {
                for en in entries {
                    self.expr(&en.value, cx);
                }
            }
            ExprKind::List(items) => {
                for i in items {
                    self.expr(i, cx);
                }
            }
            ExprKind::Not(inner) | ExprKind::Paren(inner) => self.expr(inner, cx),
            ExprKind::Binary(_, a, b) => {
                self.expr(a, cx);
                self.expr(b, cx);
            }
            _ => {}
        }
    }

    /// Records the names of a path such as `search.themes` or `input.query`, and returns
    /// the type of the whole path where it is known.
    fn path(&mut self, e: &ast::Expr, cx: Context) -> Option<Ty> {
        let Some(path) = e.as_path() else {
            // `a[*].b.c`: the base is walked, the rest is fields of its type.
            if let ExprKind::Field(base, field) = &e.kind {
                let ty = self.expr_ty(base, cx);
                self.expr(base, cx);
                return ty.and_then(|t| self.field(&t, field));
            }
            self.expr(e, cx);
            return None;
        };
        let (mut ty, used) = self.head(&path, cx)?;
        for seg in &path[used..] {
            ty = self.field(&ty, seg)?;
        }
        Some(ty)
    }

    /// The declaration (or parameter) a path starts with, the type it has, and how many
    /// segments it took.
    fn head(&mut self, path: &[&ast::Ident], cx: Context) -> Option<(Ty, usize)> {
        let first = path.first()?;
        if let Context::Body(node) = cx
            && let Some(i) = self
                .hir
                .node(node)
                .params
                .iter()
                .position(|p| p.name == first.name)
        {
            self.push(first.span, Sym::Param(node, i), false);
            return Some((self.hir.node(node).params[i].ty.clone(), 1));
        }
        if first.name == "input"
            && matches!(cx, Context::Source)
            && let Some(second) = path.get(1)
            && let Some(id) = self.names.inputs.get(&second.name)
        {
            self.push(second.span, Sym::Decl(DeclRef::Input(*id)), false);
            return Some((self.hir.inputs[*id as usize].ty.clone(), 2));
        }
        for used in 1..=path.len().min(2) {
            let joined = join(path[..used].iter().copied());
            if let Some(d) = self.names.value(self.file, &joined) {
                self.push(path[used - 1].span, Sym::Decl(d), false);
                let ty = match d {
                    DeclRef::Node(n) => self.hir.node(n).value_ty(),
                    _ => Ty::Error,
                };
                return Some((ty, used));
            }
        }
        None
    }

    /// The type of an expression without recording anything.
    fn expr_ty(&self, e: &ast::Expr, cx: Context) -> Option<Ty> {
        let mut scratch = Vec::new();
        let mut w = Walker {
            hir: self.hir,
            names: self.names,
            file: self.file,
            dir: self.dir.clone(),
            out: &mut scratch,
        };
        w.path(e, cx)
    }

    /// Records `.name` on a value of type `ty`, and returns the field's type.
    fn field(&mut self, ty: &Ty, name: &ast::Ident) -> Option<Ty> {
        let (owner, fty) = field_of(self.hir, ty, &name.name)?;
        if let Some(owner) = owner {
            self.push(name.span, Sym::Field(owner, name.name.clone()), false);
        }
        Some(fty)
    }
}

/// The field `name` of a value of type `ty`: the named record type that declares it
/// (if it is one) and the field's type.
pub(crate) fn field_of(hir: &Hir, ty: &Ty, name: &str) -> Option<(Option<TypeId>, Ty)> {
    let mut ty = ty.strip_optional().clone();
    for _ in 0..8 {
        match ty {
            Ty::Named(id) => match hir.type_body(id) {
                TypeBody::Record(r) => return Some((Some(id), r.field(name)?.ty.clone())),
                TypeBody::Alias(inner) => ty = inner.strip_optional().clone(),
                TypeBody::Enum(..) => return None,
            },
            Ty::Record(r) => return Some((None, r.field(name)?.ty.clone())),
            Ty::Ref(inner) => ty = inner.strip_optional().clone(),
            _ => return None,
        }
    }
    None
}

/// The fields a value of type `ty` has, with their types and docs.
pub(crate) fn fields_of(hir: &Hir, ty: &Ty) -> Vec<pipec_check::ty::FieldTy> {
    let mut ty = ty.strip_optional().clone();
    for _ in 0..8 {
        match ty {
            Ty::Named(id) => match hir.type_body(id) {
                TypeBody::Record(r) => return r.fields.clone(),
                TypeBody::Alias(inner) => ty = inner.strip_optional().clone(),
                TypeBody::Enum(..) => return Vec::new(),
            },
            Ty::Record(r) => return r.fields.clone(),
            Ty::Ref(inner) => ty = inner.strip_optional().clone(),
            _ => return Vec::new(),
        }
    }
    Vec::new()
}

/// The item type of a list (through aliases and `?`).
pub(crate) fn element(hir: &Hir, ty: &Ty) -> Ty {
    let mut ty = ty.strip_optional().clone();
    for _ in 0..8 {
        match ty {
            Ty::List(inner) => return *inner,
            Ty::Named(id) => match hir.type_body(id) {
                TypeBody::Alias(inner) => ty = inner.strip_optional().clone(),
                _ => return Ty::Error,
            },
            _ => return Ty::Error,
        }
    }
    Ty::Error
}

fn is_builtin(name: &str) -> bool {
    matches!(
        name,
        "resource" | "resources" | "each" | "env" | "secret" | "file" | "len"
    )
}

fn join<'a>(path: impl Iterator<Item = &'a ast::Ident>) -> String {
    path.map(|i| i.name.as_str()).collect::<Vec<_>>().join(".")
}

/// The span of a string literal's text, without its quotes.
pub(crate) fn content_span(s: &ast::StrLit) -> Span {
    s.source_span(0, s.value.len())
}
