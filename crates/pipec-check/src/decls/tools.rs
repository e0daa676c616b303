//! Tool and reader declarations: the server a tool calls, its parameters and result,
//! its effect flags, the link kinds it returns, and its limits.

use super::readers::READER_SETTINGS;
use crate::Checker;
use crate::hir::*;
use crate::mismatch::Target;
use crate::settings::literal_json;
use crate::ty::Ty;
use pipec_base::names;
use pipec_base::source::Span;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind};

pub(crate) fn empty_tool(info: DeclInfo, is_reader: bool) -> ToolDef {
    ToolDef {
        wire_name: info.name.clone(),
        info,
        is_reader,
        params: Vec::new(),
        returns: Ty::Json,
        returns_declared: false,
        server: None,
        read_only: is_reader,
        idempotent: is_reader,
        destructive: !is_reader,
        links: Vec::new(),
        timeout_ms: None,
        max_result_bytes: None,
        task: pipec_plan::ToolTask::Forbidden,
        uri: None,
        max_bytes: None,
        mime: None,
    }
}

const TOOL_SETTINGS: &[&str] = &[
    "read_only",
    "idempotent",
    "destructive",
    "name",
    "links",
    "timeout",
    "max_result_bytes",
    "task",
];

impl Checker<'_> {
    pub(super) fn check_tool(&mut self, f: usize, id: ToolId, decl: &ast::ToolDecl, span: Span) {
        let file = self.files[f].id;
        let is_reader = self.hir.tools[id as usize].is_reader;
        let what = if is_reader { "a reader" } else { "a tool" };
        let mut params: Vec<ToolParam> = Vec::new();
        for p in &decl.params.params {
            if params.iter().any(|x| x.name == p.name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        p.name.span,
                        format!("the parameter `{}` is declared twice", p.name.name),
                    )
                    .label("declared again here"),
                );
                continue;
            }
            let ty = self.resolve_type(f, &p.ty);
            let mut default = None;
            if let Some(e) = &p.value {
                match literal_json(e) {
                    Some(v) => {
                        self.check_literal_fits(file, e, &v, &ty, Target::Param(&p.name.name));
                        default = Some(v);
                    }
                    None if matches!(e.kind, ExprKind::Error) => {}
                    None => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            e.span,
                            "a tool parameter's default must be a literal",
                        )
                        .label("not a literal"),
                    ),
                }
            }
            if is_reader && (p.wire_name.is_some() || default.is_some()) {
                self.diags.push(
                    Diagnostic::new(
                        &r::READER_SIGNATURE_MISMATCH,
                        file,
                        p.span,
                        "a reader's parameters are exactly its URI template's variables",
                    )
                    .label("no `as` names or defaults on reader parameters"),
                );
            }
            params.push(ToolParam {
                name: p.name.name.clone(),
                wire_name: p
                    .wire_name
                    .as_ref()
                    .map_or_else(|| p.name.name.clone(), |w| w.value.clone()),
                ty,
                doc: p.doc.as_ref().map(|d| d.text.clone()),
                default,
                span: p.span,
            });
        }
        let returns_declared = decl.returns.is_some();
        let returns = match &decl.returns {
            Some(t) => self.resolve_type(f, t),
            None => Ty::Json,
        };
        let server = self.lookup_server(f, &decl.server);
        let body = decl.body.clone().unwrap_or(ast::Block {
            settings: Vec::new(),
            stray_docs: Vec::new(),
            span,
        });
        let s = self.settings(
            file,
            &body,
            if is_reader {
                READER_SETTINGS
            } else {
                TOOL_SETTINGS
            },
            what,
        );
        let tool_name = decl.name.name.clone();
        if is_reader {
            let uri = self.string_setting(&s, "uri");
            let uri_lit = s.expr("uri").and_then(|e| match &e.kind {
                ExprKind::Str(l) => Some(l.clone()),
                _ => None,
            });
            let template = uri
                .as_ref()
                .and_then(|(text, span)| self.uri_template_at(file, text, *span, uri_lit.as_ref()));
            if uri.is_none() && !s.has("uri") {
                self.missing_setting(file, decl.name.span, &format!("the reader `{tool_name}`"), "uri", "name the resource it reads: `uri = \"mcp://server/items/{id}\"`, whose variables are the reader's parameters");
            }
            if let Some(t) = &template {
                self.check_reader_signature(file, decl, &params, t, uri_lit.as_ref());
            }
            let max_bytes = self.size_setting(&s, "max_bytes");
            let mime = self.string_setting(&s, "mime");
            if let Some((m, mspan)) = &mime {
                self.check_mime(file, *mspan, m, &returns);
            }
            let mime = mime.map(|x| x.0);
            let tool = &mut self.hir.tools[id as usize];
            tool.uri = template;
            tool.max_bytes = max_bytes;
            tool.mime = mime;
        } else {
            let read_only = self.bool_setting(&s, "read_only").map(|x| x.0);
            let idempotent = self.bool_setting(&s, "idempotent");
            let destructive = self.bool_setting(&s, "destructive").map(|x| x.0);
            if let (Some(true), Some((false, ispan))) = (read_only, idempotent) {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        ispan,
                        "a read-only tool is always idempotent",
                    )
                    .label("contradicts `read_only = true`")
                    .help("remove `idempotent = false`"),
                );
            }
            let wire = self.string_setting(&s, "name").map(|x| x.0);
            let mut links = Vec::new();
            for (kind, kspan) in self.strings_setting(&s, "links").unwrap_or_default() {
                match self.lookup_link(f, &kind) {
                    Some(l) => {
                        self.hir.used.insert(DeclRef::Link(l));
                        links.push((l, kspan));
                    }
                    None if self.poisoned(f, "link", std::slice::from_ref(&kind)) => {}
                    None => {
                        let known = self.link_names(f);
                        let near = names::suggestion(&kind, known.iter().map(String::as_str));
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_NAME,
                                file,
                                kspan,
                                format!("unknown link kind \"{kind}\""),
                            )
                            .label("not declared")
                            .help(format!(
                                "declare it: `link \"{kind}\": Type = \"uri-template\"`"
                            ))
                            .did_you_mean(
                                &self.db,
                                file,
                                kspan,
                                &kind,
                                near.as_ref(),
                            ),
                        );
                    }
                }
            }
            let timeout_ms = self.duration_setting(&s, "timeout");
            let max_result_bytes = self.size_setting(&s, "max_result_bytes");
            let task = match self.string_setting(&s, "task") {
                None => pipec_plan::ToolTask::Forbidden,
                Some((text, span)) => match text.as_str() {
                    "required" => pipec_plan::ToolTask::Required,
                    "optional" => pipec_plan::ToolTask::Optional,
                    "forbidden" => pipec_plan::ToolTask::Forbidden,
                    _ => {
                        self.wrong_value(
                            file,
                            span,
                            "task",
                            "\"required\" (the server runs it only as an MCP task), \"optional\" or \"forbidden\" (the default)",
                        );
                        pipec_plan::ToolTask::Forbidden
                    }
                },
            };
            let read_only = read_only.unwrap_or(false);
            let tool = &mut self.hir.tools[id as usize];
            tool.read_only = read_only;
            tool.idempotent = read_only || idempotent.map(|x| x.0).unwrap_or(false);
            tool.destructive = !read_only && destructive.unwrap_or(true);
            if let Some(w) = wire {
                tool.wire_name = w;
            }
            tool.links = links;
            tool.timeout_ms = timeout_ms;
            tool.max_result_bytes = max_result_bytes;
            tool.task = task;
        }
        let tool = &mut self.hir.tools[id as usize];
        tool.params = params;
        tool.returns = returns;
        tool.returns_declared = returns_declared;
        tool.server = server;
    }
}
