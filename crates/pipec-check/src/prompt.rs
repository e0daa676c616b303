//! Prompt and message templates (minijinja): loading `prompts/<name>.jinja` or an inline
//! string, following `include`, `import` and `extends`, and checking every variable and
//! field path against the node's parameters and their types.
//!
//! The walk uses minijinja's syntax tree (its `unstable_machinery` API, pinned by exact
//! version) because it carries spans: every problem points into the template file, or
//! into the inline string, at the variable itself.

use std::collections::HashMap;
use std::sync::Arc;

use minijinja::machinery::ast::{self as j, CallArg, Expr, Stmt};

use super::hir::{ParamDef, Template};
use super::ty::{self, Ty};
use super::{Checker, NOT_UTF8_HELP};
use pipec_base::names;
use pipec_base::source::{FileId, Span, is_not_utf8};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind};

/// Functions and values every template may use.
const BUILTINS: &[&str] = &[
    "range",
    "dict",
    "debug",
    "namespace",
    "true",
    "false",
    "none",
    "True",
    "False",
    "None",
];

/// Where a template's text sits, to turn template offsets into file spans.
#[derive(Clone)]
enum Place {
    /// A `.jinja` file of its own.
    File(FileId),
    /// An inline string literal in a `.pipe` file.
    Inline(FileId, ast::StrLit),
}

impl Place {
    fn span(&self, s: minijinja::machinery::Span) -> (FileId, Span) {
        self.range(s.start_offset as usize, s.end_offset as usize)
    }

    fn range(&self, start: usize, end: usize) -> (FileId, Span) {
        match self {
            Place::File(f) => (*f, Span::new(start as u32, end as u32)),
            Place::Inline(f, lit) => (*f, lit.source_span(start, end)),
        }
    }
}

/// A local name of the template: typed when its type is known.
type Locals = Vec<HashMap<String, Option<Ty>>>;

/// What a template is: a node's `prompt`, a gate's `message`, or a prompt `pipec serve`
/// offers (roles `user` and `assistant` only, `resource(URI)`, no `output_schema`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TemplateUse {
    Prompt,
    Message,
    Served,
}

struct Walk<'p> {
    params: &'p mut Vec<ParamDef>,
    prompt: bool,
    /// A served prompt's template.
    served: bool,
    node: String,
    sources: Vec<(String, String)>,
    stack: Vec<String>,
    diags: Vec<Diagnostic>,
}

/// Whether a prompt template parses (what a fix must keep true of a template it edits).
pub fn template_parses(text: &str) -> bool {
    pipec_base::nesting::template_too_deep(text).is_none()
        && minijinja::machinery::parse(text, "template", minijinja::syntax::SyntaxConfig::default())
            .is_ok()
}

impl Checker<'_> {
    /// Checks a `prompt` (when `prompt`) or gate `message` template and returns what the
    /// plan needs to render it.
    pub(crate) fn template(
        &mut self,
        file: FileId,
        node: &str,
        params: &mut Vec<ParamDef>,
        e: &ast::Expr,
        used_as: TemplateUse,
        output: &Ty,
    ) -> Option<Template> {
        let _ = output;
        let prompt = used_as != TemplateUse::Message;
        let served = used_as == TemplateUse::Served;
        let (entry, place, text, file_name) = match &e.kind {
            ExprKind::Str(lit) => {
                self.check_file_name_as_prompt(file, e.span, lit, prompt);
                let name = format!("{node}.{}", if prompt { "prompt" } else { "message" });
                (
                    name,
                    Place::Inline(file, lit.clone()),
                    lit.value.clone(),
                    None,
                )
            }
            ExprKind::Call(callee, args) if matches!(&callee.kind, ExprKind::Name(n) if n.name == "file") =>
            {
                let Some(ast::Arg {
                    value:
                        ast::Expr {
                            kind: ExprKind::Str(path),
                            ..
                        },
                    name: None,
                    ..
                }) = args.first()
                else {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            e.span,
                            "`file` takes the template's path as a string",
                        )
                        .label("write `file(\"dir/name\")`"),
                    );
                    return None;
                };
                let name = template_name(&path.value);
                match self.load_template(&name) {
                    Ok((id, text)) => (
                        name.clone(),
                        Place::File(id),
                        text.to_string(),
                        Some(path.value.clone()),
                    ),
                    Err(e) if is_not_utf8(&e) => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_ENCODING,
                                file,
                                path.span,
                                format!("the prompt template `prompts/{name}` is {e}"),
                            )
                            .label("read here")
                            .help(NOT_UTF8_HELP),
                        );
                        return None;
                    }
                    Err(_) => {
                        let shown = self.prompts_dir.join(&name);
                        let shown = shown
                            .strip_prefix(&self.hir.project_root)
                            .map(|p| p.to_path_buf())
                            .unwrap_or(shown);
                        self.diags.push(
                            Diagnostic::new(&r::PROMPT_NOT_FOUND, file, path.span, format!("no prompt template `{}`", shown.display()))
                                .label("no such file")
                                .help(format!("create prompts/{name}, or write the template inline as a string: `prompt = #\"...\"#`")),
                        );
                        return None;
                    }
                }
            }
            _ => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        e.span,
                        format!(
                            "`{}` takes a template: a string, or `file(\"dir/name\")`",
                            match used_as {
                                TemplateUse::Prompt => "prompt",
                                TemplateUse::Message => "message",
                                TemplateUse::Served => "text",
                            }
                        ),
                    )
                    .label("not a template"),
                );
                return None;
            }
        };
        let mut walk = Walk {
            params,
            prompt,
            served,
            node: node.to_string(),
            sources: Vec::new(),
            stack: vec![entry.clone()],
            diags: Vec::new(),
        };
        let mut locals: Locals = vec![HashMap::new()];
        let ok = self.walk_template(&mut walk, &entry, &place, &text, &mut locals);
        let Walk { sources, diags, .. } = walk;
        self.diags.extend(diags);
        let mut all = vec![(entry.clone(), text)];
        all.extend(sources);
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|a, b| a.0 == b.0);
        ok.then_some(Template {
            file: file_name,
            entry,
            sources: all,
        })
    }

    /// P0407 for an inline template that is only the name of a template file that exists
    /// (`"research/scan"` for `prompts/research/scan.jinja`), with `file(...)` as a fix.
    fn check_file_name_as_prompt(
        &mut self,
        file: FileId,
        span: Span,
        lit: &ast::StrLit,
        prompt: bool,
    ) {
        let value = lit.value.trim();
        let looks_like_a_name = !value.is_empty()
            && value.len() <= 200
            && value
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
        if !looks_like_a_name
            || !self
                .loader
                .exists(&self.prompts_dir.join(template_name(value)))
        {
            return;
        }
        let setting = if prompt { "prompt" } else { "message" };
        let written = self.db.get(file).slice(span).to_string();
        self.diags.push(
            Diagnostic::new(
                &r::FILE_NAME_AS_PROMPT,
                file,
                span,
                format!(
                    "the {setting} is the text \"{value}\", the name of the template `prompts/{}`",
                    template_name(value)
                ),
            )
            .label("sent as it is written")
            .help(format!(
                "to use the template, write `{setting} = file({written})`"
            ))
            .fix(pipec_diagnostic::Fix {
                title: format!("use the template `prompts/{}`", template_name(value)),
                applicability: pipec_diagnostic::Applicability::Safe,
                edits: vec![pipec_diagnostic::Edit {
                    file,
                    span,
                    replacement: format!("file({written})"),
                }],
            }),
        );
    }

    /// Reads `prompts/<name>` once per check.
    fn load_template(&mut self, name: &str) -> std::io::Result<(FileId, Arc<str>)> {
        let path = self.prompts_dir.join(name);
        if let Some(id) = self.db.find(&path) {
            return Ok((id, self.db.get(id).text.clone()));
        }
        let text = self.loader.read(&path)?;
        let display = match path.strip_prefix(std::env::current_dir().unwrap_or_default()) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        };
        let text: Arc<str> = Arc::from(text);
        let id = self.db.add(display, path, text.clone());
        Ok((id, text))
    }

    /// Parses and walks one template; `false` when it does not parse.
    fn walk_template(
        &mut self,
        w: &mut Walk<'_>,
        name: &str,
        place: &Place,
        text: &str,
        locals: &mut Locals,
    ) -> bool {
        // minijinja recurses once per operator of a chain: a template nested past the
        // limit is refused before it parses.
        if let Some(deep) = pipec_base::nesting::template_too_deep(text) {
            let (f, span) = place.range(deep.range.start, deep.range.end);
            w.diags.push(
                Diagnostic::new(&r::NESTING_TOO_DEEP, f, span, deep.what)
                    .label("too deep")
                    .help("split it: compute parts in a node of their own, or move inner blocks to a template of their own (`{% include %}`)"),
            );
            return false;
        }
        let parsed =
            minijinja::machinery::parse(text, name, minijinja::syntax::SyntaxConfig::default());
        match parsed {
            Ok(tree) => {
                self.stmt(w, place, &tree, locals);
                true
            }
            Err(err) => {
                let range = err.range().unwrap_or(0..text.len().min(1));
                let detail = err
                    .detail()
                    .map(str::to_string)
                    .unwrap_or_else(|| err.kind().to_string());
                // An unclosed block is found at the end of the text; point at its opener.
                let unclosed = (range.end >= text.trim_end().len())
                    .then(|| unclosed_block(text))
                    .flatten();
                let d = match unclosed {
                    Some((start, end, tag)) => {
                        let (f, span) = place.range(start, end);
                        Diagnostic::new(
                            &r::PROMPT_SYNTAX_ERROR,
                            f,
                            span,
                            format!(
                                "the template does not parse: this `{tag}` block is never closed"
                            ),
                        )
                        .label("opened here")
                        .help(format!("close it with `{{% end{tag} %}}`"))
                    }
                    None => {
                        let (f, span) =
                            place.range(range.start.min(text.len()), range.end.min(text.len()));
                        Diagnostic::new(&r::PROMPT_SYNTAX_ERROR, f, span, format!("the template does not parse: {detail}"))
                            .label("here")
                            .help("templates use minijinja (Jinja2) syntax: `{{ value }}` inserts a value, `{% for x in list %}` loops")
                    }
                };
                w.diags.push(d);
                false
            }
        }
    }

    fn include(
        &mut self,
        w: &mut Walk<'_>,
        place: &Place,
        target: &Expr<'_>,
        at: minijinja::machinery::Span,
        walk: bool,
        ignore_missing: bool,
        locals: &mut Locals,
    ) {
        let Expr::Const(c) = target else { return };
        let Some(raw) = c.value.as_str() else { return };
        let name = template_name(raw);
        if w.stack.contains(&name) {
            return;
        }
        match self.load_template(&name) {
            Ok((id, text)) => {
                if !w.sources.iter().any(|(n, _)| *n == name) {
                    w.sources.push((name.clone(), text.to_string()));
                }
                w.stack.push(name.clone());
                if walk {
                    self.walk_template(w, &name, &Place::File(id), &text, locals);
                } else {
                    // An imported module sees no context; check only that it parses.
                    let mut own: Locals = vec![HashMap::new()];
                    let mut sub = Walk {
                        params: &mut Vec::new(),
                        prompt: w.prompt,
                        served: w.served,
                        node: w.node.clone(),
                        sources: Vec::new(),
                        stack: w.stack.clone(),
                        diags: Vec::new(),
                    };
                    self.walk_template_module(&mut sub, &name, &Place::File(id), &text, &mut own);
                    w.diags.extend(
                        sub.diags
                            .into_iter()
                            .filter(|d| d.rule.code != r::UNDEFINED_PROMPT_VARIABLE.code),
                    );
                    w.sources.extend(sub.sources);
                }
                w.stack.pop();
            }
            Err(e) if is_not_utf8(&e) => {
                let (f, span) = place.span(at);
                w.diags.push(
                    Diagnostic::new(
                        &r::INVALID_ENCODING,
                        f,
                        span,
                        format!("the template `prompts/{name}` is {e}"),
                    )
                    .label("included here")
                    .help(NOT_UTF8_HELP),
                );
            }
            Err(_) if ignore_missing => {}
            Err(_) => {
                let (f, span) = place.span(at);
                w.diags.push(
                    Diagnostic::new(
                        &r::PROMPT_NOT_FOUND,
                        f,
                        span,
                        format!("no template `prompts/{name}` to include"),
                    )
                    .label("not found")
                    .help("template names are relative to the prompts folder"),
                );
            }
        }
    }

    fn walk_template_module(
        &mut self,
        w: &mut Walk<'_>,
        name: &str,
        place: &Place,
        text: &str,
        locals: &mut Locals,
    ) {
        self.walk_template(w, name, place, text, locals);
    }

    fn stmts(&mut self, w: &mut Walk<'_>, place: &Place, body: &[Stmt<'_>], locals: &mut Locals) {
        for s in body {
            self.stmt(w, place, s, locals);
        }
    }

    fn stmt(&mut self, w: &mut Walk<'_>, place: &Place, s: &Stmt<'_>, locals: &mut Locals) {
        match s {
            Stmt::Template(t) => self.stmts(w, place, &t.children, locals),
            Stmt::EmitExpr(e) => {
                self.expr(w, place, &e.expr, locals);
            }
            Stmt::EmitRaw(raw) => self.single_braces(w, place, raw.raw, raw.span()),
            Stmt::ForLoop(f) => {
                let iter_ty = self.expr(w, place, &f.iter, locals);
                let elem = iter_ty.and_then(|t| match ty::resolve(&self.hir, t.strip_optional()) {
                    Ty::List(inner) => Some((**inner).clone()),
                    Ty::Json => Some(Ty::Json),
                    _ => None,
                });
                let mut scope = HashMap::new();
                bind_target(&f.target, elem, &mut scope);
                scope.insert("loop".to_string(), None);
                locals.push(scope);
                if let Some(fe) = &f.filter_expr {
                    self.expr(w, place, fe, locals);
                }
                self.stmts(w, place, &f.body, locals);
                locals.pop();
                self.stmts(w, place, &f.else_body, locals);
            }
            Stmt::IfCond(i) => {
                self.expr(w, place, &i.expr, locals);
                self.stmts(w, place, &i.true_body, locals);
                self.stmts(w, place, &i.false_body, locals);
            }
            Stmt::WithBlock(b) => {
                let mut scope = HashMap::new();
                for (target, value) in &b.assignments {
                    let t = self.expr(w, place, value, locals);
                    bind_target(target, t, &mut scope);
                }
                locals.push(scope);
                self.stmts(w, place, &b.body, locals);
                locals.pop();
            }
            Stmt::Set(set) => {
                let t = self.expr(w, place, &set.expr, locals);
                if let Some(top) = locals.last_mut() {
                    bind_target(&set.target, t, top);
                }
            }
            Stmt::SetBlock(set) => {
                if let Some(top) = locals.last_mut() {
                    bind_target(&set.target, None, top);
                }
                if let Some(filter) = &set.filter {
                    self.expr(w, place, filter, locals);
                }
                self.stmts(w, place, &set.body, locals);
            }
            Stmt::AutoEscape(a) => self.stmts(w, place, &a.body, locals),
            Stmt::FilterBlock(fb) => {
                self.expr(w, place, &fb.filter, locals);
                self.stmts(w, place, &fb.body, locals);
            }
            Stmt::Block(b) => self.stmts(w, place, &b.body, locals),
            Stmt::Extends(e) => self.include(w, place, &e.name, s_span(s), true, false, locals),
            Stmt::Include(i) => {
                self.include(w, place, &i.name, s_span(s), true, i.ignore_missing, locals)
            }
            Stmt::Import(i) => {
                self.include(w, place, &i.expr, s_span(s), false, false, locals);
                if let Some(top) = locals.last_mut() {
                    bind_target(&i.name, None, top);
                }
            }
            Stmt::FromImport(i) => {
                self.include(w, place, &i.expr, s_span(s), false, false, locals);
                for (name, alias) in &i.names {
                    if let Some(top) = locals.last_mut() {
                        bind_target(alias.as_ref().unwrap_or(name), None, top);
                    }
                }
            }
            Stmt::Macro(m) => {
                if let Some(top) = locals.last_mut() {
                    top.insert(m.name.to_string(), None);
                }
                self.macro_body(w, place, m, None, locals);
            }
            Stmt::CallBlock(cb) => {
                self.call(w, place, &cb.call, locals);
                self.macro_body(w, place, &cb.macro_decl, Some("caller"), locals);
            }
            Stmt::Do(d) => self.call(w, place, &d.call, locals),
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn macro_body(
        &mut self,
        w: &mut Walk<'_>,
        place: &Place,
        m: &j::Macro<'_>,
        extra: Option<&str>,
        locals: &mut Locals,
    ) {
        for d in &m.defaults {
            self.expr(w, place, d, locals);
        }
        let mut scope = HashMap::new();
        for a in &m.args {
            bind_target(a, None, &mut scope);
        }
        for special in ["caller", "varargs", "kwargs"] {
            scope.insert(special.to_string(), None);
        }
        if let Some(x) = extra {
            scope.insert(x.to_string(), None);
        }
        locals.push(scope);
        self.stmts(w, place, &m.body, locals);
        locals.pop();
    }

    fn call(&mut self, w: &mut Walk<'_>, place: &Place, c: &j::Call<'_>, locals: &mut Locals) {
        match &c.expr {
            Expr::Var(v)
                if v.id == "role" && w.prompt && lookup_local(locals, "role").is_none() =>
            {
                if let [CallArg::Pos(Expr::Const(k))] = c.args.as_slice() {
                    let roles: &[&str] = if w.served {
                        &["user", "assistant"]
                    } else {
                        &["system", "user", "assistant"]
                    };
                    let ok = k.value.as_str().is_some_and(|r| roles.contains(&r));
                    if !ok {
                        let (f, span) = place.span(k.span());
                        let message = if w.served {
                            "a served prompt's role is \"user\" or \"assistant\" (MCP prompts have no system messages)"
                        } else {
                            "a role is \"system\", \"user\" or \"assistant\""
                        };
                        w.diags.push(
                            Diagnostic::new(&r::UNDEFINED_PROMPT_VARIABLE, f, span, message)
                                .label("unknown role"),
                        );
                    }
                }
            }
            // A served resource placed in a served prompt: one argument, its URI.
            Expr::Var(v)
                if v.id == "resource" && w.served && lookup_local(locals, "resource").is_none() =>
            {
                match c.args.as_slice() {
                    [CallArg::Pos(uri)] => {
                        self.expr(w, place, uri, locals);
                    }
                    _ => {
                        let (f, span) = place.span(v.span());
                        w.diags.push(
                            Diagnostic::new(
                                &r::UNDEFINED_PROMPT_VARIABLE,
                                f,
                                span,
                                "`resource` takes the URI of a served resource: `resource(\"docs://readme\")`",
                            )
                            .label("one argument, the URI"),
                        );
                    }
                }
            }
            // A method call: `x.items()`, `name.upper()`; the attribute is the method.
            Expr::GetAttr(g) => {
                self.expr(w, place, &g.expr, locals);
            }
            other => {
                self.expr(w, place, other, locals);
            }
        }
        for a in &c.args {
            match a {
                CallArg::Pos(e)
                | CallArg::Kwarg(_, e)
                | CallArg::PosSplat(e)
                | CallArg::KwargSplat(e) => {
                    self.expr(w, place, e, locals);
                }
            }
        }
    }

    /// Walks an expression; returns its type when known.
    fn expr(
        &mut self,
        w: &mut Walk<'_>,
        place: &Place,
        e: &Expr<'_>,
        locals: &mut Locals,
    ) -> Option<Ty> {
        match e {
            Expr::Var(v) => self.var(w, place, v.id, v.span(), locals),
            Expr::Const(_) => None,
            Expr::GetAttr(g) => {
                let base = self.expr(w, place, &g.expr, locals)?;
                self.attr(w, place, &base, g.name, g.span(), &g.expr)
            }
            Expr::GetItem(g) => {
                let base = self.expr(w, place, &g.expr, locals);
                self.expr(w, place, &g.subscript_expr, locals);
                let base = base?;
                let optional = base.is_optional();
                let t = match ty::resolve(&self.hir, base.strip_optional()) {
                    Ty::List(inner) => Some((**inner).clone()),
                    Ty::Map(inner) => Some((**inner).clone()),
                    Ty::Json => Some(Ty::Json),
                    other => match (&g.subscript_expr, ty::as_record(&self.hir, other)) {
                        (Expr::Const(k), Some(_)) => match k.value.as_str() {
                            Some(key) => {
                                let key = key.to_string();
                                return self.attr(w, place, &base, &key, g.span(), &g.expr);
                            }
                            None => None,
                        },
                        _ => None,
                    },
                };
                t.map(|t| if optional { t.optional() } else { t })
            }
            Expr::Call(c) => {
                self.call(w, place, c, locals);
                None
            }
            Expr::Filter(f) => {
                let base = f.expr.as_ref().and_then(|x| self.expr(w, place, x, locals));
                for a in &f.args {
                    match a {
                        CallArg::Pos(x)
                        | CallArg::Kwarg(_, x)
                        | CallArg::PosSplat(x)
                        | CallArg::KwargSplat(x) => {
                            self.expr(w, place, x, locals);
                        }
                    }
                }
                // A few filters keep the type of what they filter.
                match f.name {
                    "default" | "d" => base.map(|t| t.strip_optional().clone()),
                    "first" | "last" => {
                        base.and_then(|t| match ty::resolve(&self.hir, t.strip_optional()) {
                            Ty::List(inner) => Some((**inner).clone()),
                            _ => None,
                        })
                    }
                    "reverse" | "unique" | "sort" => base,
                    _ => None,
                }
            }
            Expr::Test(t) => {
                self.expr(w, place, &t.expr, locals);
                for a in &t.args {
                    match a {
                        CallArg::Pos(x)
                        | CallArg::Kwarg(_, x)
                        | CallArg::PosSplat(x)
                        | CallArg::KwargSplat(x) => {
                            self.expr(w, place, x, locals);
                        }
                    }
                }
                None
            }
            Expr::Slice(s) => {
                let base = self.expr(w, place, &s.expr, locals);
                for x in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(w, place, x, locals);
                }
                base
            }
            Expr::UnaryOp(u) => {
                self.expr(w, place, &u.expr, locals);
                None
            }
            Expr::BinOp(b) => {
                self.expr(w, place, &b.left, locals);
                self.expr(w, place, &b.right, locals);
                None
            }
            Expr::Compare(c) => {
                self.expr(w, place, &c.expr, locals);
                for op in &c.ops {
                    self.expr(w, place, &op.expr, locals);
                }
                None
            }
            Expr::IfExpr(i) => {
                self.expr(w, place, &i.test_expr, locals);
                let t = self.expr(w, place, &i.true_expr, locals);
                if let Some(f) = &i.false_expr {
                    self.expr(w, place, f, locals);
                }
                t
            }
            Expr::List(l) => {
                for x in &l.items {
                    self.expr(w, place, x, locals);
                }
                None
            }
            Expr::Tuple(t) => {
                for x in &t.items {
                    self.expr(w, place, x, locals);
                }
                None
            }
            Expr::Map(m) => {
                for x in m.keys.iter().chain(&m.values) {
                    self.expr(w, place, x, locals);
                }
                None
            }
        }
    }

    fn var(
        &mut self,
        w: &mut Walk<'_>,
        place: &Place,
        name: &str,
        at: minijinja::machinery::Span,
        locals: &Locals,
    ) -> Option<Ty> {
        if let Some(local) = lookup_local(locals, name) {
            return local.clone();
        }
        if let Some(p) = w.params.iter_mut().find(|p| p.name == name) {
            p.used = true;
            return Some(p.ty.clone());
        }
        if w.prompt && name == "role" || w.served && name == "resource" {
            return None;
        }
        if w.prompt && !w.served && name == "output_schema" {
            return Some(Ty::String);
        }
        if BUILTINS.contains(&name) {
            return None;
        }
        let (f, span) = place.span(at);
        let mut candidates: Vec<&str> = w.params.iter().map(|p| p.name.as_str()).collect();
        if w.prompt && !w.served {
            candidates.push("output_schema");
        }
        let near = names::suggestion(name, candidates);
        w.diags.push(
            Diagnostic::new(
                &r::UNDEFINED_PROMPT_VARIABLE,
                f,
                span,
                if w.served {
                    format!("`{name}` is not an argument of the prompt `{}`", w.node)
                } else {
                    format!("`{name}` is not a parameter of `{}`", w.node)
                },
            )
            .label("undefined in this template")
            .help(if w.served {
                format!("a served prompt's template sees its arguments; add one: `{name}: string`")
            } else {
                format!(
                    "a template sees the parameters of `{}`; add one: `{name}: T = source`",
                    w.node
                )
            })
            .did_you_mean(&self.db, f, span, name, near.as_ref()),
        );
        None
    }

    fn attr(
        &mut self,
        w: &mut Walk<'_>,
        place: &Place,
        base: &Ty,
        name: &str,
        at: minijinja::machinery::Span,
        base_expr: &Expr<'_>,
    ) -> Option<Ty> {
        let optional = base.is_optional();
        let inner = ty::resolve(&self.hir, base.strip_optional()).clone();
        let found = match &inner {
            Ty::Json | Ty::Error => return Some(Ty::Json),
            Ty::Map(v) => Some((**v).clone()),
            Ty::Ref(_) => None,
            other => match ty::as_record(&self.hir, other) {
                Some(rec) => match rec.field(name) {
                    Some(f) => Some(f.ty.clone()),
                    None => {
                        // Point at the attribute name: the end of the span.
                        let end = at.end_offset as usize;
                        let start = end
                            .saturating_sub(name.len())
                            .max(base_expr.span().end_offset as usize);
                        let (f, span) = place.range(start, end);
                        let near =
                            names::suggestion(name, rec.fields.iter().map(|f| f.name.as_str()));
                        let help = format!(
                            "its fields are {}",
                            rec.fields
                                .iter()
                                .map(|f| format!("`{}`", f.name))
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                        w.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_PROMPT_FIELD,
                                f,
                                span,
                                format!(
                                    "`{}` has no field `{name}`",
                                    ty::display(&self.hir, &inner)
                                ),
                            )
                            .label("unknown field")
                            .help(help)
                            .did_you_mean(
                                &self.db,
                                f,
                                span,
                                name,
                                near.as_ref(),
                            ),
                        );
                        return None;
                    }
                },
                None => None,
            },
        };
        found.map(|t| if optional { t.optional() } else { t })
    }

    /// `{deal_id}` in template text prints literally; it is almost always a mistake for
    /// `{{ deal_id }}`.
    fn single_braces(
        &mut self,
        w: &mut Walk<'_>,
        place: &Place,
        raw: &str,
        at: minijinja::machinery::Span,
    ) {
        let base = at.start_offset as usize;
        let bytes = raw.as_bytes();
        let mut i = 0;
        while let Some(open) = raw[i..].find('{').map(|o| o + i) {
            let Some(close) = raw[open + 1..].find('}').map(|c| c + open + 1) else {
                break;
            };
            let inner = &raw[open + 1..close];
            let doubled = open > 0 && bytes[open - 1] == b'{';
            let root = inner.split('.').next().unwrap_or("");
            if !doubled
                && !inner.is_empty()
                && inner
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                && w.params.iter().any(|p| p.name == root)
            {
                let (f, span) = place.range(base + open, base + close + 1);
                w.diags.push(
                    Diagnostic::new(
                        &r::SINGLE_BRACE_PLACEHOLDER,
                        f,
                        span,
                        format!("`{{{inner}}}` prints literally"),
                    )
                    .label("single braces")
                    .help(format!("to insert the value, write `{{{{ {inner} }}}}`")),
                );
            }
            i = close + 1;
        }
    }

    /// A serve template's `render` text sees the URI's variables.
    pub(crate) fn check_render_template(
        &mut self,
        file: FileId,
        body: &ast::Block,
        text: &str,
        vars: &[String],
    ) {
        let Some(lit) = body.settings.iter().find_map(|s| match &s.value {
            ast::SettingValue::Expr(ast::Expr {
                kind: ExprKind::Str(l),
                ..
            }) if s.name.name == "render" => Some(l.clone()),
            _ => None,
        }) else {
            return;
        };
        let mut params: Vec<ParamDef> = vars
            .iter()
            .map(|v| ParamDef {
                name: v.clone(),
                span: lit.span,
                name_span: lit.span,
                ty: Ty::Json,
                doc: None,
                source: super::hir::Source {
                    kind: super::hir::SourceKind::Error,
                    span: lit.span,
                    ty: Ty::Json,
                },
                used: true,
                binds_resource: false,
                binds_secret: false,
            })
            .collect();
        let mut w = Walk {
            params: &mut params,
            prompt: false,
            served: false,
            node: "the template URI".into(),
            sources: Vec::new(),
            stack: vec!["render".into()],
            diags: Vec::new(),
        };
        let mut locals: Locals = vec![HashMap::new()];
        self.walk_template(
            &mut w,
            "render",
            &Place::Inline(file, lit),
            text,
            &mut locals,
        );
        self.diags.extend(w.diags);
    }
}

/// The last block tag (`{% for %}`, `{% if %}`, ...) that is never closed: its byte range
/// and its name.
fn unclosed_block(text: &str) -> Option<(usize, usize, String)> {
    const BLOCKS: &[&str] = &[
        "for",
        "if",
        "block",
        "macro",
        "call",
        "filter",
        "with",
        "autoescape",
        "raw",
    ];
    let mut stack: Vec<(usize, usize, String)> = Vec::new();
    let mut i = 0;
    while let Some(open) = text[i..].find("{%").map(|o| o + i) {
        let Some(close) = text[open..].find("%}").map(|c| c + open + 2) else {
            break;
        };
        let inner = text[open + 2..close - 2]
            .trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        let word: String = inner
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `{% set x %}...{% endset %}` is a block; `{% set x = 1 %}` is not.
        if BLOCKS.contains(&word.as_str()) || (word == "set" && !inner.contains('=')) {
            stack.push((open, close, word));
        } else if let Some(name) = word.strip_prefix("end")
            && let Some(pos) = stack.iter().rposition(|(_, _, w)| w == name)
        {
            stack.truncate(pos);
        }
        i = close;
    }
    stack.pop()
}

fn s_span(s: &Stmt<'_>) -> minijinja::machinery::Span {
    match s {
        Stmt::Include(x) => x.span(),
        Stmt::Import(x) => x.span(),
        Stmt::FromImport(x) => x.span(),
        Stmt::Extends(x) => x.span(),
        _ => minijinja::machinery::Span::default(),
    }
}

fn lookup_local<'a>(locals: &'a Locals, name: &str) -> Option<&'a Option<Ty>> {
    locals.iter().rev().find_map(|scope| scope.get(name))
}

fn bind_target(target: &Expr<'_>, ty: Option<Ty>, scope: &mut HashMap<String, Option<Ty>>) {
    match target {
        Expr::Var(v) => {
            scope.insert(v.id.to_string(), ty);
        }
        Expr::Tuple(t) => {
            for item in &t.items {
                bind_target(item, None, scope);
            }
        }
        Expr::List(l) => {
            for item in &l.items {
                bind_target(item, None, scope);
            }
        }
        _ => {}
    }
}

/// `research/scan` → `research/scan.jinja`.
pub(crate) fn template_name(path: &str) -> String {
    let p = path.trim_start_matches("./");
    if p.ends_with(".jinja") || p.ends_with(".j2") || p.ends_with(".txt") || p.ends_with(".md") {
        p.to_string()
    } else {
        format!("{p}.jinja")
    }
}
