//! Checking the declarations that are not nodes: servers, models, link kinds, tools,
//! readers, inputs and the `serve` block.

use std::path::Path;

use super::Checker;
use super::credentials::{is_credential_header, is_credential_name, url_user_part};
use super::hir::*;
use super::mismatch::Target;
use super::paths::PathKind;
use super::settings::literal_json;
use super::ty::{self, Ty};
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_base::uri::{self, UriTemplate};
use pipec_diagnostic::rules as r;
use pipec_diagnostic::{Applicability, Diagnostic, Edit, Fix};
use pipec_syntax::ast::{self, ExprKind, ItemKind, SettingValue};

pub(crate) fn empty_server(info: DeclInfo) -> ServerDef {
    ServerDef {
        info,
        command: None,
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
        url: None,
        headers: Vec::new(),
        resources: Vec::new(),
        startup_timeout_ms: None,
        timeout_ms: None,
        base_dir: String::new(),
    }
}

pub(crate) fn empty_model(info: DeclInfo) -> ModelDef {
    ModelDef {
        info,
        provider: String::new(),
        model_name: None,
        base_url: None,
        api_key: None,
        temperature: None,
        max_tokens: None,
        timeout_ms: None,
        retries: None,
        max_reply_bytes: None,
        replies: None,
        extra: serde_json::Value::Null,
    }
}

pub(crate) fn empty_link(info: DeclInfo, kind: String) -> LinkDef {
    LinkDef {
        info,
        kind,
        ty: Ty::Error,
        template: UriTemplate {
            text: String::new(),
            parts: Vec::new(),
        },
        matchable: false,
    }
}

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
        uri: None,
        max_bytes: None,
        mime: None,
    }
}

const SERVER_SETTINGS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "resources",
    "startup_timeout",
    "timeout",
];
const MODEL_SETTINGS: &[&str] = &[
    "provider",
    "name",
    "base_url",
    "api_key",
    "temperature",
    "max_tokens",
    "timeout",
    "retries",
    "max_reply_bytes",
    "replies",
    "extra",
];
const TOOL_SETTINGS: &[&str] = &[
    "read_only",
    "idempotent",
    "destructive",
    "name",
    "links",
    "timeout",
    "max_result_bytes",
];
const READER_SETTINGS: &[&str] = &["uri", "max_bytes", "mime"];

/// What a configuration value holds, as far as credentials go.
pub(crate) enum Holds {
    /// A credential (a model's `api_key`, the value of a header that carries one): it must
    /// be read with `secret()` (P0605). `what` names it in messages, `var` is the variable
    /// the help suggests.
    Credential { what: String, var: String },
    /// A server's `env` variable of this name: a credential if its name says so (P0606).
    Named(String),
    /// Anything else: only an `env()` read of a variable named like a credential (P0606).
    Config,
}
const PROVIDERS: &[&str] = &["openai", "scripted"];

impl Checker<'_> {
    /// The folder of a file, relative to the project root ("" for the root itself).
    pub(crate) fn base_dir(&self, f: usize) -> String {
        let dir = &self.files[f].dir;
        match dir.strip_prefix(&self.hir.project_root) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => relative_path(&self.hir.project_root, dir),
        }
    }

    pub(crate) fn resolve_decls(&mut self) {
        for (d, f, i) in self.decl_items.clone() {
            if matches!(d, DeclRef::Node(_) | DeclRef::Type(_) | DeclRef::Tool(_)) {
                continue;
            }
            let item = self.item(f, i).clone();
            match (d, &item.kind) {
                (DeclRef::Server(id), ItemKind::Server(s)) => self.check_server(f, id, s),
                (DeclRef::Model(id), ItemKind::Model(m)) => self.check_model(f, id, m),
                (DeclRef::Link(id), ItemKind::Link(l)) => self.check_link(f, id, l),
                (DeclRef::Input(id), ItemKind::Input(inp)) => self.check_input(f, id, inp),
                _ => {}
            }
        }
        // Tools refer to servers and link kinds, so they come after them.
        for (d, f, i) in self.decl_items.clone() {
            if !matches!(d, DeclRef::Tool(_)) {
                continue;
            }
            let item = self.item(f, i).clone();
            if let (DeclRef::Tool(id), ItemKind::Tool(t) | ItemKind::Reader(t)) = (d, &item.kind) {
                self.check_tool(f, id, t, item.span);
            }
        }
        self.check_link_overlaps();
    }

    fn check_server(&mut self, f: usize, id: ServerId, decl: &ast::BlockDecl) {
        let file = self.files[f].id;
        let s = self.settings(file, &decl.body, SERVER_SETTINGS, "a server");
        let command = s
            .expr("command")
            .and_then(|e| self.server_string(file, e, "command"))
            .map(|x| x.0);
        let url = s
            .expr("url")
            .and_then(|e| self.server_string(file, e, "url"));
        if let Some((ConfigValue::Literal(text), span)) = &url {
            self.check_server_url(file, text, *span);
        }
        let url = url.map(|x| x.0);
        if command.is_none() && url.is_none() && !s.has("command") && !s.has("url") {
            self.missing_setting(
                file,
                decl.name.span,
                &format!("the server `{}`", decl.name.name),
                "command",
                "say how to start it: `command = \"my-mcp-server\"` (an MCP server over stdio)",
            );
        }
        let args = match s.expr("args") {
            Some(e) => match &e.kind {
                ExprKind::List(items) => items
                    .iter()
                    .filter_map(|item| self.server_string(file, item, "args"))
                    .map(|x| x.0)
                    .collect(),
                ExprKind::Error => Vec::new(),
                _ => {
                    self.wrong_value(file, e.span, "args", "a list of strings");
                    Vec::new()
                }
            },
            None => Vec::new(),
        };
        let cwd = self.string_setting(&s, "cwd").map(|x| x.0);
        let server_name = &decl.name.name;
        let env = match s.get("env") {
            Some(setting) => self.config_record(file, setting, "env", "NAME", server_name),
            None => Vec::new(),
        };
        let headers = match s.get("headers") {
            Some(setting) => {
                self.config_record(file, setting, "headers", "Header-Name", server_name)
            }
            None => Vec::new(),
        };
        if let Some(e) = s.expr("url") {
            let var = names::env_var_name(&format!("{server_name} authorization"));
            self.credentials_in_url(
                file,
                e,
                &format!("the `url` of the server `{server_name}`"),
                &format!(
                    "send them in a header read from a secret: `headers = {{ Authorization: secret(\"{var}\") }}`"
                ),
            );
        }
        let mut resources = Vec::new();
        for (pattern, span) in self.strings_setting(&s, "resources").unwrap_or_default() {
            if let Some(t) = self.uri_template_at(file, &pattern, span, None) {
                resources.push(t);
            }
        }
        let startup_timeout_ms = self.duration_setting(&s, "startup_timeout");
        let timeout_ms = self.duration_setting(&s, "timeout");
        let base_dir = self.base_dir(f);
        let server = &mut self.hir.servers[id as usize];
        server.command = command;
        server.url = url;
        server.args = args;
        server.cwd = cwd;
        server.env = env;
        server.headers = headers;
        server.resources = resources;
        server.startup_timeout_ms = startup_timeout_ms;
        server.timeout_ms = timeout_ms;
        server.base_dir = base_dir;
    }

    /// A server's `command`, `url` or one of its `args`: a string, or `env("NAME")`,
    /// which a run reads when it starts. A secret is refused: a command line is visible
    /// to every user of the machine, and a URL ends up in logs.
    fn server_string(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
    ) -> Option<(ConfigValue, Span)> {
        match &e.kind {
            ExprKind::Str(lit) => Some((ConfigValue::Literal(lit.value.clone()), lit.span)),
            ExprKind::Call(..) => self
                .config_value(file, e, false, &Holds::Config)
                .map(|v| (v, e.span)),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "a string or `env(\"NAME\")`");
                None
            }
        }
    }

    /// P0206 for a literal `url` that is not an http(s) URL, with the scheme it lacks as
    /// a fix when it lacks one (unsafe: `http` or `https` is the author's choice).
    fn check_server_url(&mut self, file: FileId, text: &str, span: Span) {
        let Some(problem) = uri::server_url_problem(text) else {
            return;
        };
        let mut d = Diagnostic::new(
            &r::INVALID_SERVER_URL,
            file,
            span,
            format!(
                "the server url `{text}` is not an http(s) URL: {}",
                problem.why
            ),
        )
        .label(problem.why.clone());
        match &problem.meant {
            Some(meant) => {
                d = d.help(format!("write `url = \"{meant}\"`"));
                let literal = self.db.get(file).slice(span);
                if literal.starts_with('"') && !literal.starts_with("\"\"\"") && text == text.trim()
                {
                    let scheme = &meant[..meant.len() - text.len()];
                    let at = span.start + 1;
                    d = d.fix(pipec_diagnostic::Fix {
                        title: format!("add `{scheme}`"),
                        applicability: pipec_diagnostic::Applicability::Unsafe,
                        edits: vec![pipec_diagnostic::Edit {
                            file,
                            span: Span::new(at, at),
                            replacement: scheme.to_string(),
                        }],
                    });
                }
            }
            None => {
                d = d.help(
                    "a `url` server speaks streamable HTTP: write `url = \"https://host/mcp\"`",
                );
            }
        }
        self.diags.push(d);
    }

    /// A record of values that may be secrets: a server's `env` or `headers`.
    fn config_record(
        &mut self,
        file: FileId,
        setting: &ast::Setting,
        what: &str,
        example: &str,
        server: &str,
    ) -> Vec<(String, ConfigValue)> {
        let mut out = Vec::new();
        {
            let entries: Vec<(String, Span, &ast::Expr)> = match &setting.value {
                SettingValue::Block(b) => b
                    .settings
                    .iter()
                    .filter_map(|x| match &x.value {
                        SettingValue::Expr(e) => Some((x.name.name.clone(), x.name.span, e)),
                        SettingValue::Block(_) => None,
                    })
                    .collect(),
                SettingValue::Expr(e) => match &e.kind {
                    ExprKind::Record(entries) => entries
                        .iter()
                        .map(|en| (en.key.name.clone(), en.key.span, &en.value))
                        .collect(),
                    _ => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_LITERAL_TYPE,
                                file,
                                e.span,
                                format!("`{what}` takes a record"),
                            )
                            .label(format!("expected `{{ {example}: \"value\" }}`")),
                        );
                        Vec::new()
                    }
                },
            };
            for (name, _span, value) in entries {
                let holds = if what != "headers" {
                    Holds::Named(name.clone())
                } else if is_credential_header(&name) {
                    Holds::Credential {
                        what: format!("the header `{name}` of the server `{server}`"),
                        var: names::env_var_name(&format!("{server} {name}")),
                    }
                } else {
                    Holds::Config
                };
                if let Some(v) = self.config_value(file, value, true, &holds) {
                    out.push((name, v));
                }
            }
        }
        out
    }

    /// A value that may be a literal, `env("X")` or (where allowed) `secret("X")`; one that
    /// `holds` a credential must be a secret.
    pub(crate) fn config_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        secret_ok: bool,
        holds: &Holds,
    ) -> Option<ConfigValue> {
        let value = self.config_value_of(file, e, secret_ok)?;
        self.check_credential(file, e.span, &value, holds);
        Some(value)
    }

    /// Reports a credential that is not read with `secret()`: P0605 for what certainly is
    /// one, P0606 for what is named like one.
    pub(crate) fn check_credential(
        &mut self,
        file: FileId,
        span: Span,
        value: &ConfigValue,
        holds: &Holds,
    ) {
        // Reads the same variable as a secret: safe unless it drops a default.
        let to_secret = |var: &str, default: &Option<String>, applicability| Fix {
            title: format!("read `{var}` with `secret()`"),
            applicability: if default.is_some() {
                Applicability::Unsafe
            } else {
                applicability
            },
            edits: vec![Edit {
                file,
                span,
                replacement: format!("secret(\"{var}\")"),
            }],
        };
        let diagnostic = match (holds, value) {
            (_, ConfigValue::Secret { .. }) => return,
            (_, ConfigValue::Literal(text)) if text.is_empty() => return,
            (Holds::Credential { what, var }, ConfigValue::Literal(_)) => Diagnostic::new(
                &r::CREDENTIAL_NOT_SECRET,
                file,
                span,
                format!("{what} is written in the source: the compiled plan would hold the credential"),
            )
            .label("a credential in clear")
            .help(format!(
                "read it from the environment when a run needs it, and never store it: write `secret(\"{var}\")` and set `{var}`"
            )),
            (Holds::Credential { what, .. }, ConfigValue::Env { var, default }) => {
                Diagnostic::new(
                    &r::CREDENTIAL_NOT_SECRET,
                    file,
                    span,
                    format!("{what} is read with `env()`: every thread would store the credential"),
                )
                .label("recorded with the thread")
                .help(format!(
                    "write `secret(\"{var}\")`: a secret is read when a run needs it and never stored"
                ))
                .fix(to_secret(var, default, Applicability::Safe))
            }
            (_, ConfigValue::Env { var, default }) if is_credential_name(var) => Diagnostic::new(
                &r::CREDENTIAL_NAME_NOT_SECRET,
                file,
                span,
                format!("`{var}` is named like a credential, and `env()` stores its value with every thread"),
            )
            .label("recorded with the thread")
            .help(format!(
                "if it is a credential, write `secret(\"{var}\")`: a secret is read when a run needs it and never stored"
            ))
            .fix(to_secret(var, default, Applicability::Unsafe)),
            (Holds::Named(name), ConfigValue::Env { default, .. }) if is_credential_name(name) => {
                Diagnostic::new(
                    &r::CREDENTIAL_NAME_NOT_SECRET,
                    file,
                    span,
                    format!("`{name}` is named like a credential, and `env()` stores its value with every thread"),
                )
                .label("recorded with the thread")
                .help(format!(
                    "if it is a credential, write `secret(\"{name}\")`: a secret is read when a run needs it and never stored"
                ))
                .fix(to_secret(name, default, Applicability::Unsafe))
            }
            (Holds::Named(name), ConfigValue::Literal(_)) if is_credential_name(name) => {
                Diagnostic::new(
                    &r::CREDENTIAL_NAME_NOT_SECRET,
                    file,
                    span,
                    format!("`{name}` is named like a credential, and written in the source: the compiled plan would hold it"),
                )
                .label("in clear")
                .help(format!(
                    "if it is a credential, write `secret(\"{name}\")` and set `{name}`: a secret is read when a run needs it and never stored"
                ))
            }
            _ => return,
        };
        self.diags.push(diagnostic);
    }

    /// Reports a URL whose user part holds credentials (P0605): a literal, or the default
    /// of an `env()` read.
    fn credentials_in_url(&mut self, file: FileId, e: &ast::Expr, what: &str, help: &str) {
        let at = match &e.kind {
            ExprKind::Str(lit) => {
                url_user_part(&lit.value).map(|r| lit.source_span(r.start, r.end))
            }
            ExprKind::Call(_, args) => args
                .iter()
                .filter(|a| a.name.as_ref().is_some_and(|n| n.name == "default"))
                .find_map(|a| match &a.value.kind {
                    ExprKind::Str(lit) => url_user_part(&lit.value).map(|_| a.value.span),
                    _ => None,
                }),
            _ => None,
        };
        if let Some(at) = at {
            self.diags.push(
                Diagnostic::new(
                    &r::CREDENTIAL_NOT_SECRET,
                    file,
                    at,
                    format!("{what} holds credentials in its user part: the compiled plan would hold them"),
                )
                .label("credentials in clear")
                .help(help.to_string()),
            );
        }
    }

    /// [`Checker::config_value`] without the credential check.
    fn config_value_of(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        secret_ok: bool,
    ) -> Option<ConfigValue> {
        match &e.kind {
            ExprKind::Str(s) => Some(ConfigValue::Literal(s.value.clone())),
            ExprKind::Int(v) => Some(ConfigValue::Literal(v.to_string())),
            ExprKind::Call(callee, args) => {
                let name = match &callee.kind {
                    ExprKind::Name(n) => n.name.as_str(),
                    _ => "",
                };
                match name {
                    "env" => {
                        let (var, default) = self.env_args(file, e.span, args)?;
                        Some(ConfigValue::Env { var, default })
                    }
                    "secret" => {
                        let (var, _) = self.env_args(file, e.span, args)?;
                        if !secret_ok {
                            self.diags.push(
                                Diagnostic::new(&r::SECRET_OUT_OF_PLACE, file, e.span, "a secret cannot be used here")
                                    .label("secret")
                                    .help("secrets go only into server `env` and `headers`, model `api_key`, `call` arguments and `exec`/`host` parameters"),
                            );
                            return None;
                        }
                        Some(ConfigValue::Secret { var })
                    }
                    _ => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_LITERAL_TYPE,
                                file,
                                e.span,
                                "expected a string, `env(\"NAME\")` or `secret(\"NAME\")`",
                            )
                            .label("not a value this setting takes"),
                        );
                        None
                    }
                }
            }
            ExprKind::Error => None,
            _ => {
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        e.span,
                        "expected a string, `env(\"NAME\")` or `secret(\"NAME\")`",
                    )
                    .label("not a value this setting takes"),
                );
                None
            }
        }
    }

    /// The arguments of `env("NAME", default: "x")` and `secret("NAME")`.
    pub(crate) fn env_args(
        &mut self,
        file: FileId,
        span: Span,
        args: &[ast::Arg],
    ) -> Option<(String, Option<String>)> {
        let mut var = None;
        let mut default = None;
        for arg in args {
            match (&arg.name, &arg.value.kind) {
                (None, ExprKind::Str(s)) if var.is_none() => var = Some(s.value.clone()),
                (Some(n), ExprKind::Str(s)) if n.name == "default" => {
                    default = Some(s.value.clone())
                }
                (Some(n), ExprKind::Int(v)) if n.name == "default" => default = Some(v.to_string()),
                (Some(n), ExprKind::Bool(v)) if n.name == "default" => {
                    default = Some(v.to_string())
                }
                _ => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            arg.span,
                            "expected the variable's name as a string, and optionally `default:`",
                        )
                        .label("not an argument this takes"),
                    );
                }
            }
        }
        if var.is_none() {
            self.diags.push(
                Diagnostic::new(
                    &r::MISSING_SETTING,
                    file,
                    span,
                    "the name of the environment variable is missing",
                )
                .label("write `env(\"NAME\")`"),
            );
        }
        if let Some(v) = &var
            && (v.is_empty() || v.contains('=') || v.contains('\0'))
        {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    span,
                    format!("`{v}` is not an environment variable name"),
                )
                .label("not a variable name"),
            );
            return None;
        }
        var.map(|v| (v, default))
    }

    fn check_model(&mut self, f: usize, id: ModelId, decl: &ast::BlockDecl) {
        let file = self.files[f].id;
        let s = self.settings(file, &decl.body, MODEL_SETTINGS, "a model");
        let provider = match self.string_setting(&s, "provider") {
            Some((p, span)) => {
                if !PROVIDERS.contains(&p.as_str()) {
                    let near = names::suggestion(&p, PROVIDERS.iter().copied());
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            span,
                            format!("unknown model provider \"{p}\""),
                        )
                        .label("not a provider")
                        .help("providers are \"openai\" (any OpenAI-compatible API) and \"scripted\" (canned replies)")
                        .did_you_mean(&self.db, file, span, &p, near.as_ref()),
                    );
                }
                p
            }
            None => {
                if !s.has("provider") {
                    self.missing_setting(file, decl.name.span, &format!("the model `{}`", decl.name.name), "provider", "write `provider = \"openai\"` for any OpenAI-compatible API, or `\"scripted\"` for canned replies");
                }
                String::new()
            }
        };
        let model_name = self.string_setting(&s, "name").map(|x| x.0);
        if provider == "openai" && model_name.is_none() && !s.has("name") {
            self.missing_setting(
                file,
                decl.name.span,
                &format!("the model `{}`", decl.name.name),
                "name",
                "name the model the endpoint serves, e.g. `name = \"gpt-4o-mini\"`",
            );
        }
        let model = &decl.name.name;
        let key_var = if provider == "openai" {
            "OPENAI_API_KEY".to_string()
        } else {
            names::env_var_name(&format!("{model} api key"))
        };
        let base_url = s
            .expr("base_url")
            .and_then(|e| self.config_value(file, e, false, &Holds::Config));
        if let Some(e) = s.expr("base_url") {
            self.credentials_in_url(
                file,
                e,
                &format!("the `base_url` of the model `{model}`"),
                &format!("leave them out of the URL, and give the key as `api_key = secret(\"{key_var}\")`"),
            );
        }
        let api_key = s.expr("api_key").and_then(|e| {
            // An `env("X")` becomes `secret("X")`; a literal needs a name.
            let holds = Holds::Credential {
                what: format!("the `api_key` of the model `{model}`"),
                var: key_var.clone(),
            };
            self.config_value(file, e, true, &holds)
        });
        let temperature = self.float_setting(&s, "temperature");
        let max_tokens = self.int_setting(&s, "max_tokens");
        let timeout_ms = self.duration_setting(&s, "timeout");
        let retries = self.int_setting(&s, "retries");
        let max_reply_bytes = self.size_setting(&s, "max_reply_bytes");
        if max_reply_bytes == Some(0)
            && let Some(e) = s.expr("max_reply_bytes")
        {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    e.span,
                    "`max_reply_bytes` of 0 refuses every reply",
                )
                .label("expected a size of at least 1 byte")
                .help("leave it out for the default (8mb), or give the largest reply expected, e.g. `max_reply_bytes = 16mb`"),
            );
        }
        let replies = self.string_setting(&s, "replies").map(|(p, span)| {
            let path = join_rel(&self.base_dir(f), &p);
            self.check_path_exists(file, span, &path, PathKind::File, "the replies file");
            path
        });
        if provider == "scripted" && replies.is_none() && !s.has("replies") {
            self.missing_setting(
                file,
                decl.name.span,
                &format!("the scripted model `{}`", decl.name.name),
                "replies",
                "name the file of canned replies: `replies = \"replies.json\"`",
            );
        }
        let extra = match s.get("extra") {
            Some(setting) => match &setting.value {
                SettingValue::Expr(e) => match literal_json(e) {
                    Some(v @ serde_json::Value::Object(_)) => v,
                    _ => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_LITERAL_TYPE,
                                file,
                                e.span,
                                "`extra` takes a record of literal values",
                            )
                            .label("expected `{ top_p: 0.9 }`"),
                        );
                        serde_json::Value::Null
                    }
                },
                SettingValue::Block(b) => {
                    let mut map = serde_json::Map::new();
                    for x in &b.settings {
                        if let SettingValue::Expr(e) = &x.value
                            && let Some(v) = literal_json(e)
                        {
                            map.insert(x.name.name.clone(), v);
                        }
                    }
                    serde_json::Value::Object(map)
                }
            },
            None => serde_json::Value::Null,
        };
        let m = &mut self.hir.models[id as usize];
        m.provider = provider;
        m.model_name = model_name;
        m.base_url = base_url;
        m.api_key = api_key;
        m.temperature = temperature;
        m.max_tokens = max_tokens;
        m.timeout_ms = timeout_ms;
        m.retries = retries;
        m.max_reply_bytes = max_reply_bytes;
        m.replies = replies;
        m.extra = extra;
    }

    fn check_link(&mut self, f: usize, id: LinkId, decl: &ast::LinkDecl) {
        let file = self.files[f].id;
        let ty = self.resolve_type(f, &decl.ty);
        let template = self.uri_template_at(
            file,
            &decl.template.value,
            decl.template.span,
            Some(&decl.template),
        );
        let mut matchable = false;
        if let Some(t) = &template {
            match t.check_matchable() {
                Ok(()) => matchable = true,
                Err(problem) => {
                    self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_URI_TEMPLATE,
                            file,
                            decl.template.source_span(problem.start, problem.end),
                            format!(
                                "the template of link kind \"{}\" cannot be matched: {}",
                                decl.kind.value,
                                problem.message()
                            ),
                        )
                        .label("cannot be matched")
                        .help(problem.help()),
                    );
                }
            }
        }
        let link = &mut self.hir.links[id as usize];
        link.ty = ty;
        link.matchable = matchable;
        if let Some(t) = template {
            link.template = t;
        }
    }

    /// Parses a URI template, reporting P0302 at the string (or at the offending byte).
    pub(crate) fn uri_template_at(
        &mut self,
        file: FileId,
        text: &str,
        span: Span,
        lit: Option<&ast::StrLit>,
    ) -> Option<UriTemplate> {
        match uri::parse(text) {
            Ok(t) => Some(t),
            Err(e) => {
                let at = match (e.offset, lit) {
                    (Some(o), Some(l)) => {
                        let o = pipec_base::source::floor_char_boundary(text, o);
                        let end = o + text[o..].chars().next().map_or(0, char::len_utf8);
                        l.source_span(o, end)
                    }
                    _ => span,
                };
                self.diags.push(
                    Diagnostic::new(&r::INVALID_URI_TEMPLATE, file, at, format!("invalid URI template: {}", e.message))
                        .label("here")
                        .help("URI templates follow RFC 6570: `mcp://crm/deals/{deal_id}`, `file:///docs/{+path}`"),
                );
                None
            }
        }
    }

    fn check_input(&mut self, f: usize, id: InputId, decl: &ast::InputDecl) {
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

    /// Checks that a literal value fits a type, reporting P0203 at the literal.
    pub(crate) fn check_literal_fits(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        value: &serde_json::Value,
        expected: &Ty,
        target: Target<'_>,
    ) {
        if let Err(why) = literal_fits(&self.hir, value, expected) {
            let help = self.literal_help(value, expected, target);
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    e.span,
                    format!(
                        "this value does not fit `{}`: {why}",
                        ty::display(&self.hir, expected)
                    ),
                )
                .label(format!("expected {}", ty::display(&self.hir, expected)))
                .maybe_help(help),
            );
        }
    }

    fn check_tool(&mut self, f: usize, id: ToolId, decl: &ast::ToolDecl, span: Span) {
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
        }
        let tool = &mut self.hir.tools[id as usize];
        tool.params = params;
        tool.returns = returns;
        tool.returns_declared = returns_declared;
        tool.server = server;
    }

    fn check_reader_signature(
        &mut self,
        file: FileId,
        decl: &ast::ToolDecl,
        params: &[ToolParam],
        t: &UriTemplate,
        lit: Option<&ast::StrLit>,
    ) {
        for v in t.variables() {
            if !params.iter().any(|p| p.name == v.name) {
                let at = lit.map_or(decl.name.span, |l| l.source_span(v.start, v.end));
                self.diags.push(
                    Diagnostic::new(
                        &r::READER_SIGNATURE_MISMATCH,
                        file,
                        at,
                        format!(
                            "the URI variable `{}` is not a parameter of the reader `{}`",
                            v.name, decl.name.name
                        ),
                    )
                    .label("no parameter for it")
                    .help(format!("add the parameter `{}: string`", v.name)),
                );
            }
        }
        for p in params {
            if !t.variables().any(|v| v.name == p.name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::READER_SIGNATURE_MISMATCH,
                        file,
                        p.span,
                        format!(
                            "the parameter `{}` is not a variable of the reader's URI template",
                            p.name
                        ),
                    )
                    .label("not in the URI")
                    .help("a reader's parameters are exactly its URI template's variables"),
                );
            }
            if !ty::is_uri_scalar(&self.hir, &p.ty) {
                self.diags.push(
                    Diagnostic::new(
                        &r::TYPE_MISMATCH,
                        file,
                        p.span,
                        format!(
                            "a URI variable must be a string, number or boolean, not `{}`",
                            ty::display(&self.hir, &p.ty)
                        ),
                    )
                    .label("cannot be written into a URI"),
                );
            }
        }
    }

    /// Resolves a server name (possibly namespaced) in the scope of file `f`.
    pub(crate) fn lookup_server(&mut self, f: usize, name: &ast::Ident) -> Option<ServerId> {
        let file = self.files[f].id;
        match self.scopes[f].values.get(&name.name) {
            Some(DeclRef::Server(id)) => {
                self.hir.used.insert(DeclRef::Server(*id));
                Some(*id)
            }
            None if self.scopes[f].is_poisoned("value", &name.name) => None,
            other => {
                let servers: Vec<&str> = self.scopes[f]
                    .values
                    .iter()
                    .filter(|(_, v)| matches!(v, DeclRef::Server(_)))
                    .map(|(k, _)| k.as_str())
                    .collect();
                let msg = if other.is_some() {
                    format!("`{}` is not a server", name.name)
                } else {
                    format!("unknown server `{}`", name.name)
                };
                let near = names::suggestion(&name.name, servers);
                self.diags.push(
                    Diagnostic::new(&r::UNKNOWN_NAME, file, name.span, msg)
                        .label("not a declared server")
                        .help(format!(
                            "declare it: `server {} {{ command = \"...\" }}`",
                            name.name
                        ))
                        .did_you_mean(&self.db, file, name.span, &name.name, near.as_ref()),
                );
                None
            }
        }
    }

    /// Two link kinds whose templates recognise the same URI make lifting ambiguous.
    fn check_link_overlaps(&mut self) {
        let n = self.hir.links.len();
        for a in 0..n {
            for b in a + 1..n {
                let (la, lb) = (&self.hir.links[a], &self.hir.links[b]);
                if !la.matchable
                    || !lb.matchable
                    || !self.hir.is_root_file(la.info.file) && !self.hir.is_root_file(lb.info.file)
                {
                    continue;
                }
                let overlap = ["x", "x/y"].iter().any(|v| {
                    lb.template.match_uri(&la.template.sample(v)).is_some()
                        || la.template.match_uri(&lb.template.sample(v)).is_some()
                });
                if overlap {
                    let (file, span) = (lb.info.file, lb.info.name_span);
                    let (ofile, ospan) = (la.info.file, la.info.name_span);
                    let msg = format!(
                        "the link kinds \"{}\" and \"{}\" match the same URIs",
                        la.kind, lb.kind
                    );
                    self.diags.push(
                        Diagnostic::new(&r::OVERLAPPING_LINK_TEMPLATES, file, span, msg)
                            .label("overlaps")
                            .secondary(ofile, ospan, "with this kind")
                            .help("make the templates differ in their literal text, so every link has one kind"),
                    );
                }
            }
        }
    }

    pub(crate) fn check_serve(&mut self, root: usize) {
        let file = self.files[root].id;
        let items: Vec<ast::Item> = self.files[root]
            .ast
            .items
            .iter()
            .filter(|i| matches!(i.kind, ItemKind::Serve(_)))
            .cloned()
            .collect();
        let mut seen_block: Option<Span> = None;
        for item in &items {
            let ItemKind::Serve(serve) = &item.kind else {
                continue;
            };
            if let Some(first) = seen_block {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        item.span,
                        "a file has one `serve` block",
                    )
                    .label("second block")
                    .secondary(file, first, "first block"),
                );
                continue;
            }
            seen_block = Some(item.span);
            for entry in &serve.entries {
                self.check_serve_entry(root, entry);
            }
            self.check_serve_overlaps(file, &serve.entries);
        }
    }

    /// P0815 for a served template that answers the URI of a fixed resource (which is
    /// served instead) or a URI an earlier template answers (which serves it).
    fn check_serve_overlaps(&mut self, file: FileId, entries: &[ast::ServeEntry]) {
        let (resources, templates): (Vec<&ast::ServeEntry>, Vec<&ast::ServeEntry>) = entries
            .iter()
            .partition(|e| e.kind != ast::ServeEntryKind::Template);
        let parsed: Vec<(&ast::ServeEntry, UriTemplate)> = templates
            .into_iter()
            .filter_map(|e| uri::parse(&e.uri.value).ok().map(|t| (e, t)))
            .collect();
        let uris: Vec<&str> = resources.iter().map(|r| r.uri.value.as_str()).collect();
        let refs: Vec<&UriTemplate> = parsed.iter().map(|(_, t)| t).collect();
        for overlap in uri::served_overlaps(&uris, &refs) {
            let d = match overlap {
                uri::ServedOverlap::Resource { template, resource } => {
                    let (t, r) = (&parsed[template].0.uri, &resources[resource].uri);
                    Diagnostic::new(&r::OVERLAPPING_SERVED_URIS, file, t.span, format!("the template `{}` matches the URI of the resource `{}`, which is served instead", t.value, r.value))
                        .label("matches a fixed resource's URI")
                        .secondary(file, r.span, "this resource")
                }
                uri::ServedOverlap::Templates {
                    earlier,
                    later,
                    uri,
                } => {
                    let (e, l) = (&parsed[earlier].0.uri, &parsed[later].0.uri);
                    Diagnostic::new(&r::OVERLAPPING_SERVED_URIS, file, l.span, format!("the templates `{}` and `{}` both match `{uri}`; the first one written serves it", e.value, l.value))
                        .label("overlaps an earlier template")
                        .secondary(file, e.span, "which serves the URIs both match")
                }
            };
            self.diags.push(
                d.help("give the entries different literal text, so every URI has one entry"),
            );
        }
    }

    fn check_serve_entry(&mut self, root: usize, entry: &ast::ServeEntry) {
        let file = self.files[root].id;
        let template = entry.kind == ast::ServeEntryKind::Template;
        let allowed: &[&str] = if template {
            &[
                "name",
                "title",
                "description",
                "mime_type",
                "root",
                "backend",
                "render",
                "annotations",
                "icons",
            ]
        } else {
            &[
                "name",
                "title",
                "description",
                "mime_type",
                "text",
                "blob",
                "annotations",
                "icons",
            ]
        };
        let what = if template {
            "a served template"
        } else {
            "a served resource"
        };
        let s = self.settings(file, &entry.body, allowed, what);
        let tpl = self.uri_template_at(file, &entry.uri.value, entry.uri.span, Some(&entry.uri));
        if !template && tpl.as_ref().is_some_and(|t| t.has_expressions()) {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_URI_TEMPLATE,
                    file,
                    entry.uri.span,
                    "a served resource has a fixed URI",
                )
                .label("holds a template expression")
                .help("declare it as `template \"...\" { ... }`"),
            );
        }
        let name = self.string_setting(&s, "name").map(|x| x.0);
        if name.is_none() && !s.has("name") {
            self.missing_setting(
                file,
                entry.uri.span,
                what,
                "name",
                "give it a name clients show: `name = \"...\"`",
            );
        }
        let text = self.string_setting(&s, "text").map(|x| x.0);
        let root_dir = self.string_setting(&s, "root").map(|(p, span)| {
            let dir = join_rel(&self.base_dir(root), &p);
            self.check_path_exists(file, span, &dir, PathKind::Folder, "the served folder");
            dir
        });
        let backend = self.string_setting(&s, "backend").map(|x| x.0);
        let render = self.string_setting(&s, "render").map(|x| x.0);
        if template {
            let sources = [s.has("root"), s.has("backend"), s.has("render")]
                .iter()
                .filter(|x| **x)
                .count();
            if sources != 1 {
                self.diags.push(
                    Diagnostic::new(&r::MISSING_SETTING, file, entry.uri.span, "a served template needs exactly one of `root`, `backend` or `render`")
                        .label(if sources == 0 { "says nowhere to read from" } else { "says more than one place to read from" })
                        .help("`root = \"./docs\"` serves files, `backend = \"http://...\"` proxies, `render = \"...\"` renders text from the URI variables"),
                );
            }
            if let (Some(t), Some(r)) = (&tpl, &render) {
                let vars: Vec<String> = t.variables().map(|v| v.name.clone()).collect();
                self.check_render_template(file, &entry.body, r, &vars);
            }
        } else if s.has("text") && s.has("blob") {
            self.diags.push(
                Diagnostic::new(
                    &r::MISSING_SETTING,
                    file,
                    entry.uri.span,
                    "a served resource needs one of `text` and `blob`, not both",
                )
                .label("has two contents")
                .help("keep `text` for text, `blob` (base64) for bytes"),
            );
        } else if text.is_none() && !s.has("text") && !s.has("blob") {
            self.missing_setting(
                file,
                entry.uri.span,
                what,
                "text",
                "give its content: `text = \"...\"`, or `blob = \"...\"` (base64) for bytes",
            );
        }
        let blob =
            self.string_setting(&s, "blob")
                .and_then(|(b, span)| match pipec_base::base64::decode(&b) {
                    Ok(_) => Some(b),
                    Err(why) => {
                        self.diags.push(
                            Diagnostic::new(
                                &r::INVALID_LITERAL_TYPE,
                                file,
                                span,
                                format!("a `blob` is base64: {why}"),
                            )
                            .label("not base64")
                            .help("encode the bytes with `base64 -w0 FILE`"),
                        );
                        None
                    }
                });
        let icons = match s.get("icons") {
            Some(setting) => self.serve_icons(file, setting),
            None => Vec::new(),
        };
        let mut last_modified = None;
        let mut audience = Vec::new();
        let mut priority = None;
        if let Some(setting) = s.get("annotations") {
            let entries: Vec<(String, ast::Expr)> = match &setting.value {
                SettingValue::Block(b) => b
                    .settings
                    .iter()
                    .filter_map(|x| match &x.value {
                        SettingValue::Expr(e) => Some((x.name.name.clone(), e.clone())),
                        SettingValue::Block(_) => None,
                    })
                    .collect(),
                SettingValue::Expr(e) => match &e.kind {
                    ExprKind::Record(en) => en
                        .iter()
                        .map(|x| (x.key.name.clone(), x.value.clone()))
                        .collect(),
                    _ => Vec::new(),
                },
            };
            for (key, value) in entries {
                match (key.as_str(), literal_json(&value)) {
                    ("audience", Some(serde_json::Value::Array(items))) => {
                        for item in items {
                            match item.as_str() {
                                Some(a @ ("user" | "assistant")) => audience.push(a.to_string()),
                                _ => self.diags.push(
                                    Diagnostic::new(
                                        &r::INVALID_LITERAL_TYPE,
                                        file,
                                        value.span,
                                        "an audience is \"user\" or \"assistant\"",
                                    )
                                    .label("not an audience"),
                                ),
                            }
                        }
                    }
                    ("priority", Some(v))
                        if v.as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)) =>
                    {
                        priority = v.as_f64()
                    }
                    ("last_modified", Some(serde_json::Value::String(t))) => {
                        last_modified = Some(t)
                    }
                    ("last_modified", _) => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            value.span,
                            "`last_modified` takes an ISO 8601 time as a string, such as \"2026-12-01T10:00:00Z\"",
                        )
                        .label("not a string"),
                    ),
                    ("audience" | "priority", _) => self.diags.push(
                        Diagnostic::new(
                            &r::INVALID_LITERAL_TYPE,
                            file,
                            value.span,
                            format!(
                                "`{key}` takes {}",
                                if key == "audience" {
                                    "a list of \"user\" and \"assistant\""
                                } else {
                                    "a number from 0 to 1"
                                }
                            ),
                        )
                        .label("not a value it takes"),
                    ),
                    _ => self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_SETTING,
                            file,
                            value.span,
                            format!("annotations have no `{key}`"),
                        )
                        .label("unknown annotation")
                        .help("annotations take `audience`, `priority` and `last_modified`"),
                    ),
                }
            }
        }
        let def = ServeEntryDef {
            template,
            uri: entry.uri.value.clone(),
            span: entry.span,
            name,
            title: self.string_setting(&s, "title").map(|x| x.0),
            description: self.string_setting(&s, "description").map(|x| x.0),
            mime_type: self.string_setting(&s, "mime_type").map(|x| x.0),
            text,
            root: root_dir,
            backend,
            render,
            audience,
            priority,
            last_modified,
            blob,
            icons,
        };
        self.hir.serve.push(def);
    }

    /// The `icons` of a serve entry: a list of `{ src, mime_type, sizes }` records.
    fn serve_icons(&mut self, file: FileId, setting: &ast::Setting) -> Vec<ServeIcon> {
        let SettingValue::Expr(e) = &setting.value else {
            return Vec::new();
        };
        let bad = |checker: &mut Self, why: &str| {
            checker.diags.push(
                Diagnostic::new(&r::INVALID_LITERAL_TYPE, file, e.span, format!("`icons` {why}"))
                    .label("not an icon list")
                    .help("write `icons = [{ src: \"https://.../icon.png\", mime_type: \"image/png\", sizes: [\"48x48\"] }]`"),
            );
        };
        let Some(serde_json::Value::Array(items)) = literal_json(e) else {
            bad(self, "is a list of records");
            return Vec::new();
        };
        let mut icons = Vec::new();
        for item in items {
            let Some(obj) = item.as_object() else {
                bad(self, "holds records");
                continue;
            };
            if let Some(k) = obj
                .keys()
                .find(|k| !["src", "mime_type", "sizes"].contains(&k.as_str()))
            {
                bad(
                    self,
                    &format!("records take `src`, `mime_type` and `sizes`, not `{k}`"),
                );
                continue;
            }
            let Some(src) = obj.get("src").and_then(|v| v.as_str()) else {
                bad(self, "records need `src`, the icon's URI");
                continue;
            };
            let sizes: Option<Vec<String>> = match obj.get("sizes") {
                None => Some(Vec::new()),
                Some(serde_json::Value::Array(v)) => {
                    v.iter().map(|x| x.as_str().map(str::to_string)).collect()
                }
                Some(_) => None,
            };
            let Some(sizes) = sizes else {
                bad(self, "`sizes` is a list of strings such as \"48x48\"");
                continue;
            };
            icons.push(ServeIcon {
                src: src.to_string(),
                mime_type: obj
                    .get("mime_type")
                    .and_then(|v| v.as_str())
                    .map(str::to_string),
                sizes,
            });
        }
        icons
    }
}

/// Checks a JSON literal against a type.
pub(crate) fn literal_fits(
    env: &Hir,
    value: &serde_json::Value,
    expected: &Ty,
) -> Result<(), String> {
    use serde_json::Value;
    let t = ty::resolve(env, expected);
    let shown = || ty::display(env, expected);
    match (value, t) {
        (_, Ty::Json | Ty::Error) => Ok(()),
        (Value::Null, Ty::Optional(_)) => Ok(()),
        (Value::Null, _) => Err(format!("`null` does not fit `{}`", shown())),
        (v, Ty::Optional(inner)) => literal_fits(env, v, inner),
        (Value::String(_), Ty::String) => Ok(()),
        (Value::Bool(_), Ty::Bool) => Ok(()),
        (Value::Number(n), Ty::Int) if n.is_i64() || n.is_u64() => Ok(()),
        (Value::Number(_), Ty::Float) => Ok(()),
        (Value::Array(items), Ty::List(inner)) => {
            for item in items {
                literal_fits(env, item, inner)?;
            }
            Ok(())
        }
        (Value::Object(map), Ty::Map(inner)) => {
            for v in map.values() {
                literal_fits(env, v, inner)?;
            }
            Ok(())
        }
        (Value::String(s), _) if ty::as_literals(env, t).is_some() => {
            let lits = ty::as_literals(env, t).map(|l| l.as_slice()).unwrap_or(&[]);
            if lits.contains(s) {
                Ok(())
            } else {
                let shown: Vec<String> = lits.iter().map(|l| format!("\"{l}\"")).collect();
                Err(format!("\"{s}\" is not one of {}", shown.join(", ")))
            }
        }
        (Value::Object(map), _) if ty::as_record(env, t).is_some() => {
            let rec = ty::as_record(env, t)
                .map(|r| r.fields.clone())
                .unwrap_or_default();
            for (k, v) in map {
                match rec.iter().find(|f| &f.name == k) {
                    Some(field) => {
                        literal_fits(env, v, &field.ty).map_err(|e| format!("field `{k}`: {e}"))?
                    }
                    None => return Err(format!("`{}` has no field `{k}`", shown())),
                }
            }
            for field in &rec {
                if !field.ty.is_optional() && !map.contains_key(&field.name) {
                    return Err(format!("the field `{}` is missing", field.name));
                }
            }
            Ok(())
        }
        (v, _) => Err(format!("{} does not fit `{}`", describe_json(v), shown())),
    }
}

fn describe_json(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "`null`",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(n) if n.is_f64() => "a float",
        serde_json::Value::Number(_) => "an int",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a record",
    }
}

/// `base/rel`, normalised, as a string with `/` separators; absolute paths stay.
pub(crate) fn join_rel(base: &str, rel: &str) -> String {
    if rel.starts_with('/') || base.is_empty() {
        return pipec_base::source::normalize_path(Path::new(rel))
            .to_string_lossy()
            .replace('\\', "/");
    }
    pipec_base::source::normalize_path(&Path::new(base).join(rel))
        .to_string_lossy()
        .replace('\\', "/")
}

/// The relative path from `from` to `to` (both absolute and normalised).
fn relative_path(from: &Path, to: &Path) -> String {
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = std::path::PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out.to_string_lossy().replace('\\', "/")
}
