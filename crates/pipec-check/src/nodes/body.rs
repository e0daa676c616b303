//! A node's body: the settings its kind takes, the settings every node shares (`when`,
//! `timeout`, `retries`, ...), and how a `node` computes its output (`return`, `exec`,
//! `host`; `call` is in `call.rs`) or what a gate asks.

use crate::Checker;
use crate::expr::BodyScope;
use crate::hir::*;
use crate::mismatch::Target;
use crate::settings::{Settings, literal_json};
use crate::ty::Ty;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, NodeKind};

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
const GATE_SETTINGS: &[&str] = &[
    "message",
    "timeout",
    "on_timeout",
    "when",
    "after",
    "ask",
    "suggest",
];

pub(crate) fn allowed_settings(kind: NodeKind) -> Vec<&'static str> {
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
    pub(super) fn check_node_body(&mut self, f: usize, id: NodeId, decl: &ast::NodeDecl) {
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
                                    Target::CallResult,
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
                let ask = self.gate_ask(file, &s, declared_output, &mut output);
                if !declared_output && ask.is_none() {
                    output = Ty::Bool;
                }
                let message = s.expr("message").and_then(|e| {
                    self.template(
                        file,
                        &node_name,
                        scope.params,
                        e,
                        crate::prompt::TemplateUse::Message,
                        &Ty::Error,
                    )
                });
                let on_timeout = match s.expr("on_timeout") {
                    Some(e) => match literal_json(e) {
                        Some(v) => {
                            self.check_literal_fits(file, e, &v, &output, Target::Part);
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
                let suggest = self.gate_suggestion(file, &s, &output);
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
                    ask,
                    suggest,
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

    pub(super) fn node_body(
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
                            Target::CallResult,
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
                let program_span = argv[0].1;
                let mut argv: Vec<String> = argv.into_iter().map(|(a, _)| a).collect();
                if argv[0].contains('/') {
                    argv[0] = crate::decls::join_rel(&base, &argv[0]);
                    if !argv[0].starts_with('/') && !argv[0].starts_with("../") {
                        argv[0] = format!("./{}", argv[0]);
                    }
                    // A bare name is looked up on `PATH` when it runs: only a path is
                    // certain to be missing.
                    self.check_path_exists(
                        file,
                        program_span,
                        &argv[0],
                        crate::paths::PathKind::File,
                        "the program",
                    );
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
}

/// What a client's roots are, as a gate with `ask = "roots"` takes them: MCP's
/// `ListRootsResult`, its roots' URIs and names.
fn roots_ty() -> Ty {
    use crate::ty::{FieldTy, RecordTy};
    use std::sync::Arc;
    let field = |name: &str, ty: Ty| FieldTy {
        name: name.into(),
        ty,
        doc: None,
    };
    let root = Ty::Record(Arc::new(RecordTy {
        fields: vec![
            field("uri", Ty::String),
            field("name", Ty::String.optional()),
        ],
    }));
    Ty::Record(Arc::new(RecordTy {
        fields: vec![field("roots", root.list())],
    }))
}

impl Checker<'_> {
    /// A gate's `suggest`: the answer a person is offered, filled in (a record's fields,
    /// some or all, or the one value), as a literal that fits the gate's type.
    fn gate_suggestion(
        &mut self,
        file: pipec_base::source::FileId,
        s: &Settings<'_>,
        output: &Ty,
    ) -> Option<serde_json::Value> {
        let e = s.expr("suggest")?;
        let Some(value) = literal_json(e) else {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    e.span,
                    "`suggest` takes the answer to offer, as a literal",
                )
                .label("not a literal"),
            );
            return None;
        };
        // A record may be suggested in part: each field it gives must fit.
        let partial = crate::ty::as_record(&self.hir, output).map(|record| {
            let fields = record
                .fields
                .iter()
                .map(|f| crate::ty::FieldTy {
                    ty: f.ty.clone().optional(),
                    ..f.clone()
                })
                .collect();
            Ty::Record(std::sync::Arc::new(crate::ty::RecordTy { fields }))
        });
        self.check_literal_fits(
            file,
            e,
            &value,
            partial.as_ref().unwrap_or(output),
            Target::Part,
        );
        Some(value).filter(|v| !v.is_null())
    }

    /// A gate's `ask`: who answers it, when not a person. `"roots"` is the client's roots
    /// (MCP `roots/list`): the gate's type, `{ roots: { uri: string, name: string? }[] }`
    /// when it declares none, must hold every answer a client gives.
    fn gate_ask(
        &mut self,
        file: pipec_base::source::FileId,
        s: &Settings<'_>,
        declared_output: bool,
        output: &mut Ty,
    ) -> Option<String> {
        let (ask, span) = self.string_setting(s, "ask")?;
        if ask != "roots" {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    span,
                    format!("a gate asks \"roots\" of the client, not \"{ask}\""),
                )
                .label("expected \"roots\"")
                .help("leave `ask` out for a gate a person answers"),
            );
            return None;
        }
        let roots = roots_ty();
        if !declared_output {
            *output = roots;
        } else if let Err(m) = crate::ty::fits(&self.hir, &roots, output) {
            self.diags.push(
                Diagnostic::new(
                    &r::TYPE_MISMATCH,
                    file,
                    span,
                    format!(
                        "a client's roots are `{}`, which does not fit the gate's type `{}`",
                        crate::ty::display(&self.hir, &roots),
                        crate::ty::display(&self.hir, output)
                    ),
                )
                .label(m.describe())
                .help("declare the gate `-> { roots: { uri: string, name: string? }[] }`, or leave its type out"),
            );
        }
        Some(ask)
    }
}
