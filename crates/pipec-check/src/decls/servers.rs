//! Server declarations: how a server is started (`command`, `args`, `env`, `cwd`) or
//! reached (`url`, `headers`), its timeouts and resources, and lookups of a server by name.

use super::Holds;
use crate::Checker;
use crate::credentials::is_credential_header;
use crate::hir::*;
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_base::uri;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, ExprKind, SettingValue};

pub(crate) fn empty_server(info: DeclInfo) -> ServerDef {
    ServerDef {
        info,
        command: None,
        args: Vec::new(),
        env: Vec::new(),
        cwd: None,
        url: None,
        headers: Vec::new(),
        oauth: None,
        elicitation: pipec_plan::Elicitation::Decline,
        sampling: None,
        resources: Vec::new(),
        startup_timeout_ms: None,
        timeout_ms: None,
        base_dir: String::new(),
    }
}

const SERVER_SETTINGS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "oauth",
    "elicitation",
    "sampling",
    "resources",
    "startup_timeout",
    "timeout",
];

const ELICITATION_VALUES: &str = "\"ask\" (a person answers at a gate), \"decline\" (the default), \"defaults\" (the form's own defaults), or a record of the answer: `{ confirm: true }`";

const OAUTH_SETTINGS: &[&str] = &[
    "client_id",
    "client_secret",
    "grant",
    "client_metadata_url",
    "scopes",
];

impl Checker<'_> {
    pub(super) fn check_server(&mut self, f: usize, id: ServerId, decl: &ast::BlockDecl) {
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
        let oauth = s
            .get("oauth")
            .and_then(|setting| self.check_oauth(file, setting, server_name, &headers));
        if s.has("oauth") && url.is_none() && !s.has("url") {
            self.missing_setting(
                file,
                decl.name.span,
                &format!("the server `{server_name}` with `oauth`"),
                "url",
                "OAuth is for servers reached over HTTP: give it a `url`, or remove `oauth`",
            );
        }
        let elicitation = self
            .expr_of(&s, "elicitation", ELICITATION_VALUES)
            .map(|e| self.check_elicitation(file, e))
            .unwrap_or_default();
        let sampling = self
            .name_setting(&s, "sampling")
            .and_then(|(path, span)| self.lookup_model(f, &path, span));
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
        server.oauth = oauth;
        server.elicitation = elicitation;
        server.sampling = sampling;
        server.resources = resources;
        server.startup_timeout_ms = startup_timeout_ms;
        server.timeout_ms = timeout_ms;
        server.base_dir = base_dir;
    }

    /// A server's `elicitation`: `"decline"`, `"ask"`, `"defaults"`, or a record of
    /// the fields to answer every form with (strings, numbers, booleans, lists of
    /// strings: what a form's fields take).
    fn check_elicitation(&mut self, file: FileId, e: &ast::Expr) -> pipec_plan::Elicitation {
        use pipec_plan::Elicitation;
        const EXPECTED: &str = ELICITATION_VALUES;
        match &e.kind {
            ExprKind::Str(lit) => match lit.value.as_str() {
                "decline" => Elicitation::Decline,
                "ask" => Elicitation::Ask,
                "defaults" => Elicitation::Defaults,
                _ => {
                    self.wrong_value(file, lit.span, "elicitation", EXPECTED);
                    Elicitation::Decline
                }
            },
            ExprKind::Record(entries) => {
                let mut answer = std::collections::BTreeMap::new();
                for entry in entries {
                    let value = crate::settings::literal_json(&entry.value);
                    let fits = match &value {
                        Some(serde_json::Value::Array(items)) => {
                            items.iter().all(|i| i.is_string())
                        }
                        Some(v) => v.is_string() || v.is_number() || v.is_boolean(),
                        None => false,
                    };
                    match value {
                        Some(v) if fits => {
                            answer.insert(entry.key.name.clone(), v);
                        }
                        _ => self.wrong_value(
                            file,
                            entry.value.span,
                            &format!("elicitation.{}", entry.key.name),
                            "what a form's field holds: a string, a number, a boolean or a list of strings",
                        ),
                    }
                }
                Elicitation::Answer(answer)
            }
            ExprKind::Error => Elicitation::Decline,
            _ => {
                self.wrong_value(file, e.span, "elicitation", EXPECTED);
                Elicitation::Decline
            }
        }
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

    /// A server's `oauth` block: a client registered beforehand (`client_id`, with a
    /// `client_secret` that is always a `secret()`), the `grant`, the client ID metadata
    /// document's URL, the first `scopes`. An `Authorization` header beside it would send
    /// two sets of credentials.
    fn check_oauth(
        &mut self,
        file: FileId,
        setting: &ast::Setting,
        server: &str,
        headers: &[(String, ConfigValue)],
    ) -> Option<OAuthDef> {
        let SettingValue::Block(block) = &setting.value else {
            self.wrong_value(
                file,
                setting.name.span,
                "oauth",
                "a block: `oauth { client_id = \"...\" }`, or `oauth {}`",
            );
            return None;
        };
        let s = self.settings(file, block, OAUTH_SETTINGS, "`oauth`");
        if let Some((header, _)) = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        {
            self.diags.push(
                Diagnostic::new(
                    &r::DUPLICATE_DECLARATION,
                    file,
                    setting.name.span,
                    format!(
                        "the server `{server}` is given credentials twice: the header `{header}` and `oauth`"
                    ),
                )
                .label("OAuth sends its own `Authorization` header")
                .help("keep one: `oauth` for a server that authorizes with OAuth, the header for a fixed token"),
            );
        }
        let client_id = s
            .expr("client_id")
            .and_then(|e| self.server_string(file, e, "client_id"))
            .map(|x| x.0);
        let var = names::env_var_name(&format!("{server} client secret"));
        let client_secret = s.expr("client_secret").and_then(|e| {
            self.config_value(
                file,
                e,
                true,
                &Holds::Credential {
                    what: format!("the OAuth `client_secret` of the server `{server}`"),
                    var,
                },
            )
        });
        let grant = match self.string_setting(&s, "grant") {
            None => pipec_plan::OAuthGrant::AuthorizationCode,
            Some((text, span)) => match text.as_str() {
                "authorization_code" => pipec_plan::OAuthGrant::AuthorizationCode,
                "client_credentials" => pipec_plan::OAuthGrant::ClientCredentials,
                _ => {
                    self.wrong_value(
                        file,
                        span,
                        "grant",
                        "\"authorization_code\" (a person logs in with `pipec mcp login`) or \"client_credentials\" (the client acts as itself)",
                    );
                    pipec_plan::OAuthGrant::AuthorizationCode
                }
            },
        };
        let what = format!("the `oauth` of the server `{server}`");
        if client_secret.is_some() && !s.has("client_id") {
            self.missing_setting(
                file,
                setting.name.span,
                &format!("{what}, with a `client_secret`,"),
                "client_id",
                "a client secret belongs to a client registered beforehand: give its `client_id`",
            );
        }
        if grant == pipec_plan::OAuthGrant::ClientCredentials {
            for needed in ["client_id", "client_secret"] {
                if !s.has(needed) {
                    self.missing_setting(
                        file,
                        setting.name.span,
                        &format!("{what}, with `grant = \"client_credentials\"`,"),
                        needed,
                        "the client-credentials grant authenticates a client registered beforehand: give its `client_id` and `client_secret`",
                    );
                }
            }
        }
        let client_metadata_url = self.string_setting(&s, "client_metadata_url").and_then(
            |(text, span)| match text
                .strip_prefix("https://")
                .and_then(|rest| rest.split_once('/'))
            {
                Some((host, path)) if !host.is_empty() && !path.is_empty() => Some(text),
                _ => {
                    self.wrong_value(
                        file,
                        span,
                        "client_metadata_url",
                        "an https URL with a path (where the client ID metadata document is served)",
                    );
                    None
                }
            },
        );
        let scopes = self
            .strings_setting(&s, "scopes")
            .unwrap_or_default()
            .into_iter()
            .map(|(scope, _)| scope)
            .collect();
        Some(OAuthDef {
            client_id,
            client_secret,
            grant,
            client_metadata_url,
            scopes,
        })
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
}
