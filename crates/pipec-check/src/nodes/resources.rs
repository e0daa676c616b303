//! Resource bindings: `resource("uri")`, `resource(ref: "kind")` and `resources(...)`,
//! their arguments, the variables of their URI templates, and their MIME types.

use super::sources::SourceCtx;
use crate::Checker;
use crate::expr::BodyScope;
use crate::hir::*;
use crate::ty::{self, Ty};
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_base::uri::UriTemplate;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind};

impl Checker<'_> {
    pub(super) fn resource_source(
        &mut self,
        ctx: &mut SourceCtx<'_>,
        e: &ast::Expr,
        many: bool,
        args: &[ast::Arg],
        expected: &Ty,
    ) -> Source {
        let file = ctx.file;
        let span = e.span;
        let fname = if many { "resources" } else { "resource" };
        let ResourceArgs {
            uri,
            kind,
            max_bytes,
            max_total,
            mime,
            from,
            from_written,
            server: server_name,
            where_,
        } = self.resource_args(file, many, args);
        // What the binding holds: the declared type, or its element for `resources`.
        let target = if many {
            match ty::resolve(&self.hir, expected.strip_optional()) {
                Ty::List(inner) => (**inner).clone(),
                Ty::Error | Ty::Json => Ty::Json,
                other => {
                    let shown = ty::display(&self.hir, other);
                    self.diags.push(
                        Diagnostic::new(&r::TYPE_MISMATCH, file, span, format!("`resources(...)` gives a list, and the parameter is `{shown}`"))
                            .label("a list of resources")
                            .help(format!("declare the parameter as `{shown}[]`, or fan out with `each(resources(...))`")),
                    );
                    Ty::Error
                }
            }
        } else {
            expected.strip_optional().clone()
        };
        let content = match ty::resolve(&self.hir, &target) {
            Ty::Ref(inner) => (**inner).clone(),
            _ => target.clone(),
        };
        if let Some(m) = &mime {
            self.check_mime(file, span, m, &content);
        }
        let kind_out = match (uri, kind) {
            (Some(_), Some((_, kind_span))) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        kind_span,
                        format!("`{fname}` takes a URI or `ref:`, not both"),
                    )
                    .label("remove one"),
                );
                SourceKind::Error
            }
            (None, None) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::MISSING_SETTING,
                        file,
                        span,
                        format!(
                            "`{fname}` needs {}",
                            if many {
                                "`ref: \"kind\"`"
                            } else {
                                "a URI template or `ref: \"kind\"`"
                            }
                        ),
                    )
                    .label("says nothing to read"),
                );
                SourceKind::Error
            }
            (Some(lit), None) => {
                for (k, _) in &where_ {
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_SETTING,
                            file,
                            k.span,
                            "`where` selects among links; a URI binding names its resource itself",
                        )
                        .label("not used with a URI"),
                    );
                }
                if from.is_some() {
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_SETTING,
                            file,
                            span,
                            "`from` picks the producer of a link; a URI binding has none",
                        )
                        .label("not used with a URI"),
                    );
                }
                match self.uri_template_at(file, &lit.value, lit.span, Some(lit)) {
                    Some(t) => {
                        self.check_uri_variables(ctx, &t, lit);
                        let server = self.route(ctx.f, file, &t, server_name.as_ref(), lit.span);
                        SourceKind::Resource(ResourceBinding {
                            uri: t,
                            server,
                            max_bytes,
                            mime,
                        })
                    }
                    None => SourceKind::Error,
                }
            }
            (None, Some((kind_name, kind_span))) => {
                if server_name.is_some() {
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_SETTING,
                            file,
                            span,
                            "a link is always read from the server that produced it",
                        )
                        .label("remove `server:`"),
                    );
                }
                match self.lookup_link(ctx.f, &kind_name) {
                    Some(link) => {
                        self.hir.used.insert(DeclRef::Link(link));
                        let link_ty = self.hir.links[link as usize].ty.clone();
                        if let Err(m) = ty::fits(&self.hir, &link_ty, &content) {
                            self.diags.push(
                                Diagnostic::new(&r::LINK_TYPE_MISMATCH, file, span, format!("links of kind \"{}\" hold `{}`, which does not fit `{}`", kind_name, ty::display(&self.hir, &link_ty), ty::display(&self.hir, &content)))
                                    .label(m.describe())
                                    .help("declare the parameter with the link kind's type, or fix the kind's type"),
                            );
                        }
                        let template = self.hir.links[link as usize].template.clone();
                        let mut where_out = Vec::new();
                        let node_name = self.hir.nodes[ctx.node as usize].info.name.clone();
                        for (key, value) in &where_ {
                            if !template.variables().any(|v| v.name == key.name) {
                                // The variables no other key names are what it may have meant.
                                let open = template
                                    .variables()
                                    .map(|v| v.name.as_str())
                                    .filter(|v| !where_.iter().any(|(k, _)| k.name == *v));
                                let near = names::suggestion_among(&key.name, open);
                                self.diags.push(
                                    Diagnostic::new(
                                        &r::UNBOUND_URI_VARIABLE,
                                        file,
                                        key.span,
                                        format!(
                                            "`{}` is not a variable of the link kind \"{}\" ({})",
                                            key.name, kind_name, template.text
                                        ),
                                    )
                                    .label("not captured by the template")
                                    .did_you_mean(
                                        &self.db,
                                        file,
                                        key.span,
                                        &key.name,
                                        near.as_ref(),
                                    ),
                                );
                                continue;
                            }
                            let mut scope = BodyScope {
                                file,
                                node: &node_name,
                                params: ctx.params,
                            };
                            let v = self.infer(&mut scope, value);
                            self.check_where_value(file, &key.name, value.span, &v.ty);
                            where_out.push((key.name.clone(), v));
                        }
                        SourceKind::Link(LinkBinding {
                            link,
                            many,
                            from,
                            from_written,
                            producer: None,
                            where_: where_out,
                            max_bytes,
                            max_total,
                            mime,
                        })
                    }
                    None if self.poisoned(ctx.f, "link", std::slice::from_ref(&kind_name)) => {
                        SourceKind::Error
                    }
                    None => {
                        let known = self.link_names(ctx.f);
                        let near = names::suggestion(&kind_name, known.iter().map(String::as_str));
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_NAME,
                                file,
                                kind_span,
                                format!("unknown link kind \"{}\"", kind_name),
                            )
                            .label("not declared")
                            .help(format!(
                                "declare it: `link \"{}\": Type = \"uri-template\"`",
                                kind_name
                            ))
                            .did_you_mean(
                                &self.db,
                                file,
                                kind_span,
                                &kind_name,
                                near.as_ref(),
                            ),
                        );
                        SourceKind::Error
                    }
                }
            }
        };
        if !many && max_total.is_some() {
            self.diags.push(
                Diagnostic::new(
                    &r::UNKNOWN_SETTING,
                    file,
                    span,
                    "`max_total` caps a list of resources",
                )
                .label("use `max_bytes` for one resource"),
            );
        }
        let ty = if many {
            target.list()
        } else {
            expected.clone()
        };
        Source {
            kind: kind_out,
            span,
            ty,
        }
    }

    /// A `where:` value is compared with the text a link's URI captured for the variable,
    /// so it must be one value that can be written into a URI (P0201), and never none
    /// (P0204): none would keep only the links whose variable is the text `null`.
    fn check_where_value(&mut self, file: FileId, var: &str, span: Span, value: &Ty) {
        let resolved = ty::resolve(&self.hir, value);
        if matches!(resolved, Ty::Error | Ty::Json) {
            return;
        }
        let written = self.db.get(file).slice(span).to_string();
        if resolved.is_optional() || *resolved == Ty::Null {
            self.diags.push(
                Diagnostic::new(
                    &r::OPTIONAL_INTO_REQUIRED,
                    file,
                    span,
                    format!("`where: {{ {var}: ... }}` is compared with the `{var}` a link's URI holds, and `{written}` may be none"),
                )
                .label("may be none")
                .help(format!("give it a value for none: `{written} ?? \"...\"`")),
            );
            return;
        }
        let single = !matches!(resolved, Ty::List(_));
        if !single || !ty::is_uri_scalar(&self.hir, resolved) {
            self.diags.push(
                Diagnostic::new(
                    &r::TYPE_MISMATCH,
                    file,
                    span,
                    format!(
                        "`where: {{ {var}: ... }}` is compared with the text of `{var}` in a link's URI, and `{written}` is `{}`",
                        ty::display(&self.hir, value)
                    ),
                )
                .label("not a string, number or boolean")
                .help(if single {
                    format!("compare one field of it: `{var}: {written}.field`")
                } else {
                    "compare one value: fan out over the list with `each(...)`, so that each item has a `where:` of its own".to_string()
                }),
            );
        }
    }

    /// A non-JSON MIME expectation cannot be read into a record or list (P0310).
    pub(crate) fn check_mime(&mut self, file: FileId, span: Span, mime: &str, content: &Ty) {
        let jsonish = mime == "application/json" || mime.ends_with("+json") || mime == "*/*";
        let structured = ty::as_record(&self.hir, content).is_some()
            || matches!(
                ty::resolve(&self.hir, content.strip_optional()),
                Ty::List(_) | Ty::Map(_)
            );
        if !jsonish && structured {
            self.diags.push(
                Diagnostic::new(&r::MIME_TYPE_MISMATCH, file, span, format!("content of type \"{mime}\" cannot be read as `{}`", ty::display(&self.hir, content)))
                    .label("not JSON")
                    .help("bind it to `string` (text) or `bytes` (binary), or expect \"application/json\""),
            );
        }
    }

    /// Every variable of a resource URI is a non-resource parameter of the node, with a
    /// field path if dotted; each is marked used.
    pub(super) fn check_uri_variables(
        &mut self,
        ctx: &mut SourceCtx<'_>,
        t: &UriTemplate,
        lit: &ast::StrLit,
    ) {
        let file = ctx.file;
        let node_name = self.hir.nodes[ctx.node as usize].info.name.clone();
        for var in t.variables() {
            let at = lit.source_span(var.start, var.end);
            let mut parts = var.name.split('.');
            let root = parts.next().unwrap_or("");
            let Some(pi) = ctx.params.iter().position(|p| p.name == root) else {
                let candidates: Vec<&str> = ctx
                    .params
                    .iter()
                    .enumerate()
                    .filter(|(i, p)| *i != ctx.current && !p.fetches_by_decl())
                    .map(|(_, p)| p.name.as_str())
                    .collect();
                let near = names::suggestion(root, candidates);
                let root_at = Span::new(at.start, at.start + root.len() as u32);
                self.diags.push(
                    Diagnostic::new(
                        &r::UNBOUND_URI_VARIABLE,
                        file,
                        at,
                        format!(
                            "the URI variable `{}` is not a parameter of `{node_name}`",
                            var.name
                        ),
                    )
                    .label("no parameter provides it")
                    .help(format!("add a parameter: `{root}: string = input.{root}`"))
                    .did_you_mean(&self.db, file, root_at, root, near.as_ref()),
                );
                continue;
            };
            if ctx.params[pi].binds_secret {
                self.diags.push(
                    Diagnostic::new(&r::SECRET_OUT_OF_PLACE, file, at, format!("the URI variable `{}` would put a secret into a resource URI", var.name))
                        .label("secret")
                        .help("URIs are sent to servers, logged and stored on refs; give the server the secret through its `env`"),
                );
                continue;
            }
            if pi == ctx.current || ctx.params[pi].fetches_by_decl() {
                self.diags.push(
                    Diagnostic::new(
                        &r::UNBOUND_URI_VARIABLE,
                        file,
                        at,
                        format!("the URI variable `{}` names a resource parameter", var.name),
                    )
                    .label("resources cannot feed a URI")
                    .help("URI variables come from parameters bound to inputs, nodes or constants"),
                );
                continue;
            }
            ctx.params[pi].used = true;
            let mut ty = ctx.params[pi].ty.clone();
            for field in parts {
                ty = self.field_type(file, &ty, field, at, false);
            }
            if !ty::is_uri_scalar(&self.hir, &ty) {
                self.diags.push(
                    Diagnostic::new(
                        &r::TYPE_MISMATCH,
                        file,
                        at,
                        format!(
                            "`{}` is `{}`, which cannot be written into a URI",
                            var.name,
                            ty::display(&self.hir, &ty)
                        ),
                    )
                    .label("not a string, number or boolean")
                    .help("use a field of it: `{param.field}`"),
                );
            }
        }
    }
}

impl ParamDef {
    /// Whether a parameter is bound to a resource, as written.
    pub(super) fn fetches_by_decl(&self) -> bool {
        self.binds_resource
    }
}

/// The arguments of a `resource(...)` or `resources(...)` call, read but not yet checked
/// against each other.
struct ResourceArgs<'a> {
    /// The URI template, as written.
    uri: Option<&'a ast::StrLit>,
    /// `ref: "kind"`: the link kind and where it is written.
    kind: Option<(String, Span)>,
    max_bytes: Option<u64>,
    max_total: Option<u64>,
    mime: Option<String>,
    /// `from: node`: the producer it names.
    from: Option<(NodeId, Span)>,
    /// Whether `from:` is written, whether or not it names a node.
    from_written: bool,
    /// `server: name`.
    server: Option<ast::Ident>,
    /// `where: { var: value }`.
    where_: Vec<(&'a ast::Ident, &'a ast::Expr)>,
}

impl Checker<'_> {
    /// Reads the arguments of `resource(...)` (`many`: `resources(...)`), reporting those it
    /// does not take and values of the wrong kind.
    fn resource_args<'a>(
        &mut self,
        file: FileId,
        many: bool,
        args: &'a [ast::Arg],
    ) -> ResourceArgs<'a> {
        let fname = if many { "resources" } else { "resource" };
        let mut out = ResourceArgs {
            uri: None,
            kind: None,
            max_bytes: None,
            max_total: None,
            mime: None,
            from: None,
            from_written: false,
            server: None,
            where_: Vec::new(),
        };
        let allowed: &[&str] = if many {
            &["ref", "max_bytes", "max_total", "mime", "from", "where"]
        } else {
            &["ref", "max_bytes", "mime", "from", "where", "server"]
        };
        for a in args {
            let Some(n) = &a.name else {
                match (&a.value.kind, out.uri.is_none() && !many) {
                    (ExprKind::Str(s), true) => out.uri = Some(s),
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            a.span,
                            format!(
                                "`{fname}` takes {}",
                                if many {
                                    "`ref: \"kind\"`"
                                } else {
                                    "a URI template string or `ref: \"kind\"`"
                                }
                            ),
                        )
                        .label("not an argument it takes"),
                    ),
                }
                continue;
            };
            if !allowed.contains(&n.name.as_str()) {
                let near = names::suggestion(&n.name, allowed.iter().copied());
                self.diags.push(
                    Diagnostic::new(
                        &r::UNKNOWN_SETTING,
                        file,
                        n.span,
                        format!("`{fname}` has no option `{}`", n.name),
                    )
                    .label("unknown option")
                    .help(format!(
                        "`{fname}` takes {}",
                        crate::settings::list_words(allowed)
                    ))
                    .did_you_mean(
                        &self.db,
                        file,
                        n.span,
                        &n.name,
                        near.as_ref(),
                    ),
                );
                continue;
            }
            let v = &a.value;
            match n.name.as_str() {
                "ref" => out.kind = self.string_value(file, v, "ref", "a link kind as a string"),
                // A size that did not parse is reported already: count it as given, so
                // that no warning about a missing cap follows.
                "max_bytes" | "max_total" => {
                    let value = match v.kind {
                        ExprKind::Error => Some(u64::MAX),
                        _ => self.size_value(file, v, &n.name),
                    };
                    if n.name == "max_bytes" {
                        out.max_bytes = value
                    } else {
                        out.max_total = value
                    }
                }
                "mime" => {
                    out.mime = self
                        .string_value(file, v, "mime", "a MIME type such as \"text/*\"")
                        .map(|(m, _)| m)
                }
                "from" => {
                    out.from_written = true;
                    let wanted = "the name of the node that produced the link";
                    if let Some((path, at)) = self.name_value(file, v, "from", wanted)
                        && let Some(node) = self.lookup_node(file, &path, at, "from")
                    {
                        out.from = Some((node, at));
                    }
                }
                "server" => {
                    out.server = self
                        .name_value(file, v, "server", "the name of a server")
                        .map(|(path, at)| ast::Ident {
                            name: path.join("."),
                            span: at,
                        })
                }
                _ => match &v.kind {
                    ExprKind::Record(entries) => {
                        for en in entries {
                            out.where_.push((&en.key, &en.value));
                        }
                    }
                    ExprKind::Error => {}
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            v.span,
                            "`where` takes a record of template variables and values",
                        )
                        .label("expected `{ var: value }`"),
                    ),
                },
            }
        }
        out
    }
}
