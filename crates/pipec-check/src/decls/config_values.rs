//! Configuration values: a literal, `env("NAME")` or `secret("NAME")`, and the
//! credentials among them that must be read with `secret()` (P0605, P0606).

use crate::Checker;
use crate::credentials::{is_credential_name, url_user_part};
use crate::hir::*;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::rules as r;
use pipec_diagnostic::{Applicability, Diagnostic, Edit, Fix};
use pipec_syntax::ast::{self, ExprKind};

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

impl Checker<'_> {
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
    pub(super) fn credentials_in_url(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        what: &str,
        help: &str,
    ) {
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
                        self.wrong_config_value(file, e.span);
                        None
                    }
                }
            }
            ExprKind::Error => None,
            _ => {
                self.wrong_config_value(file, e.span);
                None
            }
        }
    }

    /// P0203 for a setting that is none of a string, `env()` and `secret()`.
    fn wrong_config_value(&mut self, file: FileId, span: Span) {
        self.diags.push(
            Diagnostic::new(
                &r::INVALID_LITERAL_TYPE,
                file,
                span,
                "expected a string, `env(\"NAME\")` or `secret(\"NAME\")`",
            )
            .label("not a value this setting takes"),
        );
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
}
