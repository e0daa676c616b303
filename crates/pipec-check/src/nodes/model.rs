//! The bodies of `think`, `agent` and `act` nodes: model, prompt, tools, and the limits
//! of a tool loop.

use crate::Checker;
use crate::expr::BodyScope;
use crate::hir::*;
use crate::settings::Settings;
use crate::ty::Ty;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind, NodeKind};

impl Checker<'_> {
    pub(super) fn model_body(
        &mut self,
        f: usize,
        s: &Settings<'_>,
        scope: &mut BodyScope<'_>,
        decl: &ast::NodeDecl,
        output: &Ty,
    ) -> Body {
        let file = scope.file;
        let what = format!("the `{}` node `{}`", decl.kind.keyword(), decl.name.name);
        let model = match self.name_setting(s, "model") {
            Some((path, span)) => {
                let id = self.lookup_model(f, &path, span);
                if let Some(id) = id
                    && decl.kind != NodeKind::Think
                    && self.hir.models[id as usize].provider == "client"
                {
                    self.diags.push(
                        Diagnostic::new(
                            &r::CLIENT_MODEL_IN_LOOP,
                            file,
                            span,
                            format!(
                                "`{}` is the calling client's model, which answers text one reply at a time; {what} calls tools turn after turn",
                                path.join(".")
                            ),
                        )
                        .label("the client's model")
                        .help(format!("make it a `think` node, or give {what} a model of its own")),
                    );
                }
                id
            }
            None => {
                if !s.has("model") {
                    self.missing_setting(
                        file,
                        decl.name.span,
                        &what,
                        "model",
                        "name the model it calls: `model = fast`",
                    );
                }
                None
            }
        };
        let prompt = match s.expr("prompt") {
            Some(e) => self.template(
                file,
                &decl.name.name,
                scope.params,
                e,
                crate::prompt::TemplateUse::Prompt,
                output,
            ),
            None => {
                if !s.has("prompt") {
                    self.missing_setting(file, decl.name.span, &what, "prompt", "give a template: `prompt = file(\"dir/name\")` for prompts/dir/name.jinja, or an inline string");
                }
                None
            }
        };
        let mut tools = Vec::new();
        if decl.kind != NodeKind::Think {
            for (path, span) in self.names_setting(s, "tools").unwrap_or_default() {
                if let Some(t) = self.lookup_tool(f, &path, span) {
                    if tools.contains(&t) {
                        continue;
                    }
                    let def = self.hir.tool(t);
                    if decl.kind == NodeKind::Agent && !def.is_reader && !def.read_only {
                        self.diags.push(
                            Diagnostic::new(&r::EFFECT_IN_AGENT, file, span, format!("`{}` may change things (it is not `read_only`), and an `agent` only reads", def.info.display))
                                .label("a tool with effects")
                                .help(format!("declare the node as `act {}(...)` so its effects are journaled, or mark the tool `read_only = true` if it only reads", decl.name.name)),
                        );
                    }
                    tools.push(t);
                }
            }
            if tools.is_empty() && !s.has("tools") {
                self.missing_setting(file, decl.name.span, &what, "tools", "list the tools and readers the model may use: `tools = [get_deal]`; a single model call without tools is a `think` node");
            }
        }
        let mut approve = Vec::new();
        for (path, span) in self.names_setting(s, "approve").unwrap_or_default() {
            if let Some(t) = self.lookup_tool(f, &path, span) {
                if !tools.contains(&t) {
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_NAME,
                            file,
                            span,
                            format!("`{}` is not one of this node's tools", path.join(".")),
                        )
                        .label("not in `tools`")
                        .help("`approve` lists tools from `tools` whose calls wait for a person"),
                    );
                } else {
                    approve.push(t);
                }
            }
        }
        let mut limits = Vec::new();
        if let Some(e) = s.expr("limits") {
            match &e.kind {
                ExprKind::Record(entries) => {
                    for en in entries {
                        let Some(t) =
                            self.lookup_tool(f, std::slice::from_ref(&en.key.name), en.key.span)
                        else {
                            continue;
                        };
                        if !tools.contains(&t) {
                            self.diags.push(
                                Diagnostic::new(
                                    &r::UNKNOWN_NAME,
                                    file,
                                    en.key.span,
                                    format!("`{}` is not one of this node's tools", en.key.name),
                                )
                                .label("not in `tools`"),
                            );
                            continue;
                        }
                        // A limit is a count of calls, read like any count.
                        if let Some(n) = self.count_value(file, &en.value, &en.key.name) {
                            limits.push((t, n));
                        }
                    }
                }
                _ => self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        e.span,
                        "`limits` takes a record of tools and call counts",
                    )
                    .label("expected `{ tool: 1 }`"),
                ),
            }
        }
        let max_steps = self.count_setting(s, "max_steps");
        let tool_timeout = self.duration_setting(s, "tool_timeout");
        let repairs = self.count_setting(s, "repairs");
        let temperature = self.float_setting(s, "temperature");
        let max_tokens = self.int_setting(s, "max_tokens");
        // A missing model or prompt is already reported; the node keeps its tools so
        // that what depends on them (link producers, effects) is still checked.
        match (model, prompt) {
            (None, None) if tools.is_empty() => Body::Invalid,
            (model, prompt) => Body::Model {
                model: model.unwrap_or(u32::MAX),
                prompt: prompt.unwrap_or(Template {
                    file: None,
                    entry: String::new(),
                    sources: Vec::new(),
                }),
                tools,
                limits,
                approve,
                max_steps,
                tool_timeout_ms: tool_timeout,
                repairs,
                temperature,
                max_tokens,
            },
        }
    }
}
