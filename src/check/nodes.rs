//! Nodes: signatures, settings and bodies (which see only the node's parameters), then
//! the sources of every parameter (which see only nodes and `input.`), and outputs.

use super::Checker;
use super::expr::BodyScope;
use super::hir::*;
use super::settings::{Settings, literal_json};
use super::ty::{self, Ty};
use crate::diagnostic::Diagnostic;
use crate::names;
use crate::rules as r;
use crate::source::{FileId, Span};
use crate::syntax::ast::{self, ExprKind, ItemKind, NodeKind};
use crate::uri::UriTemplate;

pub(crate) fn empty_node(info: DeclInfo, decl: &ast::NodeDecl) -> NodeDef {
    NodeDef {
        info,
        kind: decl.kind,
        kind_span: decl.kind_span,
        params: Vec::new(),
        output: Ty::Error,
        output_span: decl.name.span,
        output_declared: decl.returns.is_some(),
        body: Body::Invalid,
        when: None,
        after: Vec::new(),
        timeout_ms: None,
        retries: None,
        backoff_ms: None,
        concurrency: None,
        drop_failed_items: false,
        gate_timeout_ms: None,
        each: None,
        deps: Vec::new(),
        skippable: false,
        body_span: decl.body.span,
    }
}

const COMMON: &[&str] = &[
    "when",
    "timeout",
    "retries",
    "backoff",
    "after",
    "concurrency",
    "on_item_error",
];
const NODE_SETTINGS: &[&str] = &["return", "call", "exec", "host", "idempotent"];
const THINK_SETTINGS: &[&str] = &["model", "prompt", "repairs", "temperature", "max_tokens"];
const AGENT_SETTINGS: &[&str] = &[
    "model",
    "prompt",
    "tools",
    "max_steps",
    "tool_timeout",
    "temperature",
    "max_tokens",
];
const ACT_SETTINGS: &[&str] = &[
    "model",
    "prompt",
    "tools",
    "max_steps",
    "tool_timeout",
    "temperature",
    "max_tokens",
    "limits",
    "approve",
    "call",
];
const GATE_SETTINGS: &[&str] = &["message", "timeout", "on_timeout", "when", "after"];

/// The names of the functions that make a source.
const SOURCE_FUNCTIONS: &[&str] = &["resource", "resources", "each", "env", "secret"];

fn allowed_settings(kind: NodeKind) -> Vec<&'static str> {
    let own: &[&str] = match kind {
        NodeKind::Node => NODE_SETTINGS,
        NodeKind::Think => THINK_SETTINGS,
        NodeKind::Agent => AGENT_SETTINGS,
        NodeKind::Act => ACT_SETTINGS,
        NodeKind::Gate => return GATE_SETTINGS.to_vec(),
    };
    let mut all: Vec<&str> = own.to_vec();
    all.extend(COMMON);
    all
}

impl Checker<'_> {
    pub(crate) fn check_nodes(&mut self, root: usize) {
        let nodes: Vec<(NodeId, usize)> = self
            .decl_items
            .iter()
            .filter_map(|(d, f, i)| match d {
                DeclRef::Node(id) if *f == root => Some((*id, *i)),
                _ => None,
            })
            .collect();
        // Signatures and bodies first: a body sees only its own parameters, so every
        // node's output type is known before any source refers to it.
        // The syntax tree is moved out while nodes are checked (nothing below reads it
        // through `self`), which saves cloning every declaration.
        let items = std::mem::take(&mut self.files[root].ast.items);
        for (id, i) in &nodes {
            if let Some(ItemKind::Node(decl)) = items.get(*i).map(|it| &it.kind) {
                self.check_node_signature(root, *id, decl);
                self.check_node_body(root, *id, decl);
            }
        }
        for (id, i) in &nodes {
            if let Some(ItemKind::Node(decl)) = items.get(*i).map(|it| &it.kind) {
                self.check_node_sources(root, *id, decl);
            }
        }
        self.files[root].ast.items = items;
    }

    fn check_node_signature(&mut self, f: usize, id: NodeId, decl: &ast::NodeDecl) {
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

    fn check_node_body(&mut self, f: usize, id: NodeId, decl: &ast::NodeDecl) {
        let file = self.files[f].id;
        let kind = decl.kind;
        let allowed = allowed_settings(kind);
        let what = format!(
            "{} `{}` node",
            if kind == NodeKind::Act || kind == NodeKind::Agent {
                "an"
            } else {
                "a"
            },
            kind.keyword()
        );
        if kind == NodeKind::Think
            && let Some(t) = decl.body.settings.iter().find(|s| s.name.name == "tools")
        {
            self.diags.push(
                    Diagnostic::new(&r::UNKNOWN_SETTING, file, t.name.span, "a `think` node makes one model call and has no tools")
                        .label("not a setting of `think`")
                        .help(format!("to let the model call tools, declare it `agent {}(...)` (read-only tools) or `act` (tools with effects)", decl.name.name)),
                );
        }
        let allowed: Vec<&str> = if kind == NodeKind::Think {
            allowed.into_iter().chain(["tools"]).collect()
        } else {
            allowed
        };
        let s = self.settings(file, &decl.body, &allowed, &what);
        let mut params = std::mem::take(&mut self.hir.nodes[id as usize].params);
        let node_name = decl.name.name.clone();
        let declared_output = decl.returns.is_some();
        let mut output = self.hir.nodes[id as usize].output.clone();

        let mut scope = BodyScope {
            file,
            node: &node_name,
            params: &mut params,
        };

        let body = match kind {
            NodeKind::Node => self.node_body(f, &s, &mut scope, decl, declared_output, &mut output),
            NodeKind::Think | NodeKind::Agent | NodeKind::Act => {
                if kind == NodeKind::Act && s.has("call") {
                    for other in [
                        "model",
                        "prompt",
                        "tools",
                        "approve",
                        "limits",
                        "max_steps",
                        "tool_timeout",
                        "temperature",
                        "max_tokens",
                    ] {
                        if let Some(setting) = s.get(other) {
                            self.diags.push(
                                Diagnostic::new(&r::UNKNOWN_SETTING, file, setting.name.span, format!("an `act` with `call` runs one tool call; `{other}` belongs to an `act` loop"))
                                    .label("not used with `call`")
                                    .help("remove it, or remove `call` to let a model choose the calls"),
                            );
                        }
                    }
                    let b = self.call_body(f, &s, &mut scope, decl, true);
                    match (&b, declared_output) {
                        (Body::Call { tool, .. }, false) => {
                            output = self.hir.tool(*tool).returns.clone()
                        }
                        (Body::Call { tool, .. }, true) => {
                            let returns = self.hir.tool(*tool).returns.clone();
                            if let Some(span) = decl.returns.as_ref().map(|t| t.span) {
                                self.report_mismatch(
                                    file,
                                    span,
                                    &returns,
                                    &output.clone(),
                                    "the tool returns something else: ",
                                );
                            }
                        }
                        _ => {}
                    }
                    b
                } else {
                    if !declared_output {
                        output = Ty::String;
                    }
                    self.model_body(f, &s, &mut scope, decl, &output)
                }
            }
            NodeKind::Gate => {
                if !declared_output {
                    output = Ty::Bool;
                }
                let message = s.expr("message").and_then(|e| {
                    self.template(file, &node_name, scope.params, e, false, &Ty::Error)
                });
                let on_timeout = match s.expr("on_timeout") {
                    Some(e) => match literal_json(e) {
                        Some(v) => {
                            self.check_literal_fits(file, e, &v, &output);
                            Some(v)
                        }
                        None => {
                            self.diags.push(
                                Diagnostic::new(
                                    &r::INVALID_LITERAL_TYPE,
                                    file,
                                    e.span,
                                    "`on_timeout` takes the answer to use, as a literal",
                                )
                                .label("not a literal"),
                            );
                            None
                        }
                    },
                    None => None,
                };
                if s.has("on_timeout")
                    && !s.has("timeout")
                    && let Some(setting) = s.get("on_timeout")
                {
                    self.missing_setting(
                        file,
                        setting.name.span,
                        "`on_timeout`",
                        "timeout",
                        "say how long the gate waits: `timeout = 2d`",
                    );
                }
                // Gate parameters are its message context and its place in the graph.
                for p in scope.params.iter_mut() {
                    p.used = true;
                }
                Body::Gate {
                    message,
                    on_timeout,
                }
            }
        };

        let when = s.expr("when").map(|e| {
            let w = self.infer(&mut scope, e);
            self.expect_bool(file, &w, "`when`");
            w
        });

        let timeout = self.duration_setting(&s, "timeout");
        let retries = self.count_setting(&s, "retries");
        let backoff = self.duration_setting(&s, "backoff");
        let concurrency = self.count_setting(&s, "concurrency");
        let drop_failed = match self.string_setting(&s, "on_item_error") {
            Some((v, span)) => match v.as_str() {
                "drop" => true,
                "fail" => false,
                _ => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            span,
                            format!("`on_item_error` is \"fail\" or \"drop\", not \"{v}\""),
                        )
                        .label("expected \"fail\" or \"drop\""),
                    );
                    false
                }
            },
            None => false,
        };
        let mut after = Vec::new();
        for (path, span) in self.names_setting(&s, "after").unwrap_or_default() {
            if let Some(n) = self.lookup_node(file, &path, span, "after") {
                after.push((n, span));
            }
        }
        let node = &mut self.hir.nodes[id as usize];
        node.params = params;
        node.output = output;
        node.body = body;
        node.when = when;
        node.after = after;
        node.retries = retries;
        node.backoff_ms = backoff;
        node.concurrency = concurrency;
        node.drop_failed_items = drop_failed;
        if kind == NodeKind::Gate {
            node.gate_timeout_ms = timeout;
        } else {
            node.timeout_ms = timeout;
        }
    }

    fn node_body(
        &mut self,
        f: usize,
        s: &Settings<'_>,
        scope: &mut BodyScope<'_>,
        decl: &ast::NodeDecl,
        declared: bool,
        output: &mut Ty,
    ) -> Body {
        let file = scope.file;
        let present: Vec<&str> = ["return", "call", "exec", "host"]
            .into_iter()
            .filter(|k| s.has(k))
            .collect();
        if present.is_empty() {
            self.diags.push(
                Diagnostic::new(&r::MISSING_SETTING, file, decl.name.span, format!("the node `{}` does not say how it computes its output", decl.name.name))
                    .label("no `return`, `call`, `exec` or `host`")
                    .help("give it exactly one of `return = expr`, `call = tool(...)`, `exec = [\"cmd\"]` or `host = \"name\"`"),
            );
            return Body::Invalid;
        }
        if present.len() > 1
            && let Some(second) = s.get(present[1])
        {
            self.diags.push(
                    Diagnostic::new(&r::MISSING_SETTING, file, second.name.span, format!("a node has exactly one of `return`, `call`, `exec` and `host`, and this one also has `{}`", present[0]))
                        .label("second way to compute the output")
                        .help("split the work into two nodes"),
                );
        }
        if s.has("idempotent")
            && present[0] != "exec"
            && let Some(setting) = s.get("idempotent")
        {
            self.diags.push(
                Diagnostic::new(
                    &r::UNKNOWN_SETTING,
                    file,
                    setting.name.span,
                    "`idempotent` describes an `exec` command",
                )
                .label("only for `exec`")
                .help("tools declare `idempotent` on their `tool` declaration"),
            );
        }
        match present[0] {
            "return" => {
                let Some(e) = s.expr("return") else {
                    return Body::Invalid;
                };
                let value = if declared && *output != Ty::Error {
                    self.check_against(scope, e, &output.clone(), true)
                } else {
                    let v = self.infer(scope, e);
                    if !declared {
                        *output = v.ty.clone();
                    }
                    v
                };
                Body::Return(value)
            }
            "call" => {
                let b = self.call_body(f, s, scope, decl, false);
                if !declared {
                    *output = match &b {
                        Body::Call { tool, .. } => self.hir.tool(*tool).returns.clone(),
                        _ => Ty::Error,
                    };
                } else if let Body::Call { tool, .. } = &b {
                    let returns = self.hir.tool(*tool).returns.clone();
                    if let Some(span) = decl.returns.as_ref().map(|t| t.span) {
                        self.report_mismatch(
                            file,
                            span,
                            &returns,
                            &output.clone(),
                            "the tool returns something else: ",
                        );
                    }
                }
                b
            }
            "exec" => {
                if !declared {
                    *output = Ty::Json;
                }
                for p in scope.params.iter_mut() {
                    p.used = true;
                }
                let argv = self.strings_setting(s, "exec").unwrap_or_default();
                if argv.is_empty() {
                    if let Some(e) = s.expr("exec") {
                        self.diags.push(
                            Diagnostic::new(&r::MISSING_SETTING, file, e.span, "`exec` needs a command")
                                .label("empty")
                                .help("write `exec = [\"./script.sh\", \"--flag\"]`; the parameters arrive as JSON on stdin"),
                        );
                    }
                    return Body::Invalid;
                }
                let base = self.base_dir(f);
                let mut argv: Vec<String> = argv.into_iter().map(|(a, _)| a).collect();
                if argv[0].contains('/') {
                    argv[0] = super::decls::join_rel(&base, &argv[0]);
                    if !argv[0].starts_with('/') && !argv[0].starts_with("../") {
                        argv[0] = format!("./{}", argv[0]);
                    }
                }
                let idempotent = self
                    .bool_setting(s, "idempotent")
                    .map(|x| x.0)
                    .unwrap_or(false);
                Body::Exec { argv, idempotent }
            }
            _ => {
                if !declared {
                    *output = Ty::Json;
                }
                for p in scope.params.iter_mut() {
                    p.used = true;
                }
                match self.string_setting(s, "host") {
                    Some((name, _)) => Body::Host { name },
                    None => Body::Invalid,
                }
            }
        }
    }

    /// `call = tool(arg: expr, ...)`.
    fn call_body(
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
                    let help =
                        names::did_you_mean(&name.name, params.iter().map(|p| p.name.as_str()));
                    self.diags.push(
                        Diagnostic::new(
                            &r::RECORD_LITERAL_MISMATCH,
                            file,
                            name.span,
                            format!("`{tool_name}` has no parameter `{}`", name.name),
                        )
                        .label("unknown parameter")
                        .maybe_help(help),
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

    fn model_body(
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
            Some((path, span)) => self.lookup_model(f, &path, span),
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
            Some(e) => self.template(file, &decl.name.name, scope.params, e, true, output),
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
                        match en.value.kind {
                            ExprKind::Int(n) if n >= 0 => limits.push((t, n as u64)),
                            _ => self.diags.push(
                                Diagnostic::new(
                                    &r::INVALID_LITERAL_TYPE,
                                    file,
                                    en.value.span,
                                    "a limit is a whole number of calls",
                                )
                                .label("expected a number"),
                            ),
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

    pub(crate) fn lookup_node(
        &mut self,
        file: FileId,
        path: &[String],
        span: Span,
        what: &str,
    ) -> Option<NodeId> {
        let root = self.files.iter().position(|f| f.is_root).unwrap_or(0);
        if let [name] = path
            && let Some(DeclRef::Node(id)) = self.scopes[root].values.get(name)
        {
            return Some(*id);
        }
        if self.poisoned(root, "value", path) {
            return None;
        }
        let joined = path.join(".");
        let help =
            names::did_you_mean(&joined, self.hir.nodes.iter().map(|n| n.info.name.as_str()));
        self.diags.push(
            Diagnostic::new(
                &r::UNKNOWN_NAME,
                file,
                span,
                format!("`{joined}` is not a node"),
            )
            .label(format!("`{what}` names nodes"))
            .maybe_help(help),
        );
        None
    }

    fn lookup_value(&mut self, f: usize, path: &[String]) -> Option<DeclRef> {
        match path {
            [name] => self.scopes[f].values.get(name).copied(),
            [ns, name] => {
                let target = *self.scopes[f].namespaces.get(ns)?;
                self.own[target].values.get(name).copied()
            }
            _ => None,
        }
    }

    fn value_candidates(&self, f: usize, pred: impl Fn(&DeclRef) -> bool) -> Vec<String> {
        let mut out: Vec<String> = self.scopes[f]
            .values
            .iter()
            .filter(|(_, v)| pred(v))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, target) in &self.scopes[f].namespaces {
            out.extend(
                self.own[*target]
                    .values
                    .iter()
                    .filter(|(_, v)| pred(v))
                    .map(|(k, _)| format!("{ns}.{k}")),
            );
        }
        out.sort();
        out
    }

    pub(crate) fn lookup_tool(&mut self, f: usize, path: &[String], span: Span) -> Option<ToolId> {
        let file = self.files[f].id;
        match self.lookup_value(f, path) {
            Some(DeclRef::Tool(id)) => {
                self.hir.used.insert(DeclRef::Tool(id));
                Some(id)
            }
            None if self.poisoned(f, "value", path) => None,
            found => {
                let joined = path.join(".");
                let candidates = self.value_candidates(f, |v| matches!(v, DeclRef::Tool(_)));
                let help = names::did_you_mean(&joined, candidates.iter().map(String::as_str));
                let msg = if found.is_some() {
                    format!("`{joined}` is not a tool or reader")
                } else {
                    format!("unknown tool `{joined}`")
                };
                self.diags.push(
                    Diagnostic::new(&r::UNKNOWN_NAME, file, span, msg)
                        .label("not a declared tool")
                        .help(help.unwrap_or_else(|| {
                            format!("declare it: `tool {joined}(...) -> T from server`")
                        })),
                );
                None
            }
        }
    }

    fn lookup_model(&mut self, f: usize, path: &[String], span: Span) -> Option<ModelId> {
        let file = self.files[f].id;
        match self.lookup_value(f, path) {
            Some(DeclRef::Model(id)) => {
                self.hir.used.insert(DeclRef::Model(id));
                Some(id)
            }
            None if self.poisoned(f, "value", path) => None,
            found => {
                let joined = path.join(".");
                let candidates = self.value_candidates(f, |v| matches!(v, DeclRef::Model(_)));
                let help = names::did_you_mean(&joined, candidates.iter().map(String::as_str));
                let msg = if found.is_some() {
                    format!("`{joined}` is not a model")
                } else {
                    format!("unknown model `{joined}`")
                };
                self.diags.push(
                    Diagnostic::new(&r::UNKNOWN_NAME, file, span, msg)
                        .label("not a declared model")
                        .help(help.unwrap_or_else(|| format!("declare it: `model {joined} {{ provider = \"openai\" name = \"...\" }}`"))),
                );
                None
            }
        }
    }

    // ------------------------------------------------------------ sources

    fn check_node_sources(&mut self, f: usize, id: NodeId, decl: &ast::NodeDecl) {
        let file = self.files[f].id;
        let mut params = std::mem::take(&mut self.hir.nodes[id as usize].params);
        let mut each: Option<(usize, Span)> = None;
        for (i, p) in decl.params.params.iter().enumerate() {
            let Some(idx) = params.iter().position(|x| x.span == p.span) else {
                continue;
            };
            let _ = i;
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

    /// Checks a source and that its value fits `expected`.
    fn source(
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
                self.bind(file, &src, expected);
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
                        let help = names::did_you_mean(
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
                            .maybe_help(help),
                        );
                    }
                    let s = self.source(ctx, &en.value, &want, false);
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
                let out: Vec<Source> = items
                    .iter()
                    .map(|i| self.source(ctx, i, &elem, false))
                    .collect();
                Source {
                    kind: SourceKind::List(out),
                    span,
                    ty: elem.list(),
                }
            }
            _ => match literal_json(e) {
                Some(v) => {
                    self.check_literal_fits(file, e, &v, expected);
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
    fn bind(&mut self, file: FileId, src: &Source, expected: &Ty) {
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
        self.report_mismatch(file, src.span, &src.ty, expected, "");
    }

    fn path_source(&mut self, ctx: &mut SourceCtx<'_>, e: &ast::Expr) -> Source {
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
                    let help = names::did_you_mean(
                        &name.name,
                        self.scopes[ctx.f].inputs.keys().map(String::as_str),
                    )
                    .unwrap_or_else(|| format!("declare it: `input {}: string`", name.name));
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_NAME,
                            file,
                            name.span,
                            format!("unknown input `{}`", name.name),
                        )
                        .label("not declared")
                        .help(help),
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
                        names::did_you_mean(&root.name, cands.iter().map(String::as_str))
                            .unwrap_or_else(|| {
                                "name a node, or an input as `input.name`".to_string()
                            })
                    };
                    let msg = match other {
                        Some(_) => format!("`{}` is not a node", root.name),
                        None => format!("unknown node `{}`", root.name),
                    };
                    self.diags.push(
                        Diagnostic::new(&r::UNKNOWN_NAME, file, root.span, msg)
                            .label("not a node")
                            .help(help),
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

    fn source_call(
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
                self.bind(file, &src, expected);
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

    fn resource_source(
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
        let mut uri: Option<&ast::StrLit> = None;
        let mut kind: Option<&ast::StrLit> = None;
        let mut max_bytes = None;
        let mut max_total = None;
        let mut mime = None;
        let mut from = None;
        let mut server_name: Option<&ast::Ident> = None;
        let mut where_: Vec<(&ast::Ident, &ast::Expr)> = Vec::new();
        let allowed: &[&str] = if many {
            &["ref", "max_bytes", "max_total", "mime", "from", "where"]
        } else {
            &["ref", "max_bytes", "mime", "from", "where", "server"]
        };
        for a in args {
            let Some(n) = &a.name else {
                match (&a.value.kind, uri.is_none() && !many) {
                    (ExprKind::Str(s), true) => uri = Some(s),
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
                let help =
                    names::did_you_mean(&n.name, allowed.iter().copied()).unwrap_or_else(|| {
                        format!("`{fname}` takes {}", super::settings::list_words(allowed))
                    });
                self.diags.push(
                    Diagnostic::new(
                        &r::UNKNOWN_SETTING,
                        file,
                        n.span,
                        format!("`{fname}` has no option `{}`", n.name),
                    )
                    .label("unknown option")
                    .help(help),
                );
                continue;
            }
            let v = &a.value;
            match n.name.as_str() {
                _ if matches!(v.kind, ExprKind::Error) && !n.name.starts_with("max_") => {}
                "ref" => match &v.kind {
                    ExprKind::Str(s) => kind = Some(s),
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            v.span,
                            "`ref` takes a link kind as a string",
                        )
                        .label("expected \"kind\""),
                    ),
                },
                "max_bytes" | "max_total" => {
                    let value = match v.kind {
                        ExprKind::Size(b, _) => Some(b),
                        ExprKind::Int(b) if b >= 0 => Some(b as u64),
                        // Already reported as an invalid literal: count it as given.
                        ExprKind::Error => Some(u64::MAX),
                        _ => {
                            self.diags.push(
                                Diagnostic::new(
                                    &r::INVALID_LITERAL_TYPE,
                                    file,
                                    v.span,
                                    format!("`{}` takes a size such as `100kb`", n.name),
                                )
                                .label("not a size"),
                            );
                            None
                        }
                    };
                    if n.name == "max_bytes" {
                        max_bytes = value
                    } else {
                        max_total = value
                    }
                }
                "mime" => match &v.kind {
                    ExprKind::Str(s) => mime = Some(s.value.clone()),
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            v.span,
                            "`mime` takes a MIME type such as \"text/*\"",
                        )
                        .label("expected a string"),
                    ),
                },
                "from" => match v.as_path() {
                    Some(p) => {
                        let path: Vec<String> = p.iter().map(|i| i.name.clone()).collect();
                        if let Some(nid) = self.lookup_node(file, &path, v.span, "from") {
                            from = Some((nid, v.span));
                        }
                    }
                    None => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            v.span,
                            "`from` names the node that produced the link",
                        )
                        .label("expected a node name"),
                    ),
                },
                "server" => match &v.kind {
                    ExprKind::Name(id) => server_name = Some(id),
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            v.span,
                            "`server` names a server",
                        )
                        .label("expected a server name"),
                    ),
                },
                _ => match &v.kind {
                    ExprKind::Record(entries) => {
                        for en in entries {
                            where_.push((&en.key, &en.value));
                        }
                    }
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
            (Some(_), Some(k)) => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        k.span,
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
                        let server = self.route(ctx.f, file, &t, server_name, lit.span);
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
            (None, Some(k)) => {
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
                match self.lookup_link(ctx.f, &k.value) {
                    Some(link) => {
                        self.hir.used.insert(DeclRef::Link(link));
                        let link_ty = self.hir.links[link as usize].ty.clone();
                        if let Err(m) = ty::fits(&self.hir, &link_ty, &content) {
                            self.diags.push(
                                Diagnostic::new(&r::LINK_TYPE_MISMATCH, file, span, format!("links of kind \"{}\" hold `{}`, which does not fit `{}`", k.value, ty::display(&self.hir, &link_ty), ty::display(&self.hir, &content)))
                                    .label(m.describe())
                                    .help("declare the parameter with the link kind's type, or fix the kind's type"),
                            );
                        }
                        let template = self.hir.links[link as usize].template.clone();
                        let mut where_out = Vec::new();
                        let node_name = self.hir.nodes[ctx.node as usize].info.name.clone();
                        for (key, value) in where_ {
                            if !template.variables().any(|v| v.name == key.name) {
                                let help = names::did_you_mean(
                                    &key.name,
                                    template.variables().map(|v| v.name.as_str()),
                                );
                                self.diags.push(
                                    Diagnostic::new(
                                        &r::UNBOUND_URI_VARIABLE,
                                        file,
                                        key.span,
                                        format!(
                                            "`{}` is not a variable of the link kind \"{}\" ({})",
                                            key.name, k.value, template.text
                                        ),
                                    )
                                    .label("not captured by the template")
                                    .maybe_help(help),
                                );
                                continue;
                            }
                            let mut scope = BodyScope {
                                file,
                                node: &node_name,
                                params: ctx.params,
                            };
                            let v = self.infer(&mut scope, value);
                            where_out.push((key.name.clone(), v));
                        }
                        SourceKind::Link(LinkBinding {
                            link,
                            many,
                            from,
                            producer: None,
                            where_: where_out,
                            max_bytes,
                            max_total,
                            mime,
                        })
                    }
                    None if self.poisoned(ctx.f, "link", std::slice::from_ref(&k.value)) => {
                        SourceKind::Error
                    }
                    None => {
                        let known = self.link_names(ctx.f);
                        let help = names::did_you_mean(&k.value, known.iter().map(String::as_str))
                            .unwrap_or_else(|| {
                                format!(
                                    "declare it: `link \"{}\": Type = \"uri-template\"`",
                                    k.value
                                )
                            });
                        self.diags.push(
                            Diagnostic::new(
                                &r::UNKNOWN_NAME,
                                file,
                                k.span,
                                format!("unknown link kind \"{}\"", k.value),
                            )
                            .label("not declared")
                            .help(help),
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
    fn check_uri_variables(&mut self, ctx: &mut SourceCtx<'_>, t: &UriTemplate, lit: &ast::StrLit) {
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
                let help = names::did_you_mean(root, candidates)
                    .unwrap_or_else(|| format!("add a parameter: `{root}: string = input.{root}`"));
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
                    .help(help),
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

    /// The servers file `f` sees, computed once per file.
    fn visible_servers(&mut self, f: usize) -> Vec<ServerId> {
        if let Some(v) = self.server_cache.get(&f) {
            return v.clone();
        }
        let mut v: Vec<ServerId> = self.scopes[f]
            .values
            .values()
            .filter_map(|d| match d {
                DeclRef::Server(s) => Some(*s),
                _ => None,
            })
            .collect();
        v.sort();
        self.server_cache.insert(f, v.clone());
        v
    }

    /// The server a resource URI goes to.
    fn route(
        &mut self,
        f: usize,
        file: FileId,
        t: &UriTemplate,
        explicit: Option<&ast::Ident>,
        span: Span,
    ) -> Option<ServerId> {
        if let Some(name) = explicit {
            return self.lookup_server(f, name);
        }
        let visible = self.visible_servers(f);
        if let Some(authority) = t.mcp_authority()
            && let Some(DeclRef::Server(s)) = self.scopes[f].values.get(authority).copied()
        {
            self.hir.used.insert(DeclRef::Server(s));
            return Some(s);
        }
        let prefix = t.literal_prefix();
        let claimed: Vec<ServerId> = visible
            .iter()
            .copied()
            .filter(|s| {
                self.hir.servers[*s as usize].resources.iter().any(|p| {
                    if p.has_expressions() {
                        prefix.starts_with(p.literal_prefix())
                    } else {
                        p.text == t.text
                    }
                })
            })
            .collect();
        let pick = match (claimed.as_slice(), visible.as_slice()) {
            ([one], _) => Some(*one),
            ([], [only]) => Some(*only),
            _ => None,
        };
        match pick {
            Some(s) => {
                self.hir.used.insert(DeclRef::Server(s));
                Some(s)
            }
            None => {
                let why = if visible.is_empty() {
                    "no server is declared".to_string()
                } else if claimed.len() > 1 {
                    "several servers claim it".to_string()
                } else {
                    "no server claims it and there are several".to_string()
                };
                self.diags.push(
                    Diagnostic::new(&r::UNROUTABLE_RESOURCE, file, span, format!("cannot tell which server serves `{}`: {why}", t.text))
                        .label("no server for this URI")
                        .help("use `mcp://SERVER/...`, list the URI pattern in a server's `resources`, or say `server: name`"),
                );
                None
            }
        }
    }

    pub(crate) fn check_outputs(&mut self, root: usize) {
        let file = self.files[root].id;
        let items: Vec<ast::Item> = self.files[root]
            .ast
            .items
            .iter()
            .filter(|i| matches!(i.kind, ItemKind::Output(_)))
            .cloned()
            .collect();
        let mut seen: Vec<(String, Span)> = Vec::new();
        for item in &items {
            let ItemKind::Output(o) = &item.kind else {
                continue;
            };
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == o.name.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        o.name.span,
                        format!("the output `{}` is declared twice", o.name.name),
                    )
                    .label("declared again here")
                    .secondary(file, *first, "first declared here"),
                );
                continue;
            }
            seen.push((o.name.name.clone(), o.name.span));
            let declared = o.ty.as_ref().map(|t| self.resolve_type(root, t));
            let expected = declared.clone().unwrap_or(Ty::Json);
            let mut params = Vec::new();
            let mut ctx = SourceCtx {
                f: root,
                file,
                node: u32::MAX,
                params: &mut params,
                current: usize::MAX,
            };
            let src = self.output_source(&mut ctx, &o.value, &expected);
            let ty = declared.clone().unwrap_or_else(|| src.ty.clone());
            self.hir.outputs.push(OutputDef {
                info: DeclInfo {
                    name: o.name.name.clone(),
                    display: o.name.name.clone(),
                    file,
                    span: item.span,
                    name_span: o.name.span,
                    doc: item.doc.as_ref().map(|d| d.text.clone()),
                },
                declared_optional: declared.as_ref().is_some_and(|t| t.is_optional()),
                ty,
                source: src,
                value_span: o.value.span,
            });
        }
    }

    /// Outputs take the same sources as parameters, except resources (nothing fetches
    /// for an output) and `each`.
    fn output_source(&mut self, ctx: &mut SourceCtx<'_>, e: &ast::Expr, expected: &Ty) -> Source {
        if let ExprKind::Call(callee, _) = &e.kind
            && let ExprKind::Name(n) = &callee.kind
            && matches!(n.name.as_str(), "resource" | "resources" | "each")
        {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_SOURCE,
                    ctx.file,
                    e.span,
                    format!("an output cannot be `{}(...)`", n.name),
                )
                .label("outputs take node values, inputs and constants")
                .help("read it in a node and output that node"),
            );
            return Source {
                kind: SourceKind::Error,
                span: e.span,
                ty: Ty::Error,
            };
        }
        self.source(ctx, e, expected, false)
    }
}

/// What a source check needs to know about the node it is in.
pub(crate) struct SourceCtx<'a> {
    pub f: usize,
    pub file: FileId,
    pub node: NodeId,
    pub params: &'a mut Vec<ParamDef>,
    /// The parameter whose source this is.
    pub current: usize,
}

impl ParamDef {
    /// Whether a parameter is bound to a resource, as written.
    fn fetches_by_decl(&self) -> bool {
        self.binds_resource
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
