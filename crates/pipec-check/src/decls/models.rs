//! Model declarations: the provider, its settings, and the scripted replies of a test model.

use super::{Holds, join_rel};
use crate::Checker;
use crate::hir::*;
use crate::paths::PathKind;
use crate::settings::literal_json;
use pipec_base::names;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, SettingValue};

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
        prices: None,
        context_window: None,
    }
}

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
    "prices",
    "context_window",
];

/// The settings of a model's `prices` block, in US dollars per million tokens.
const PRICE_SETTINGS: &[&str] = &["input", "output", "cached_input"];

const PROVIDERS: &[&str] = &["openai", "scripted", "client"];

/// What a model of the calling client (`provider = "client"`) takes: its name is a hint to
/// the client, the rest bound each request.
const CLIENT_SETTINGS: &[&str] = &["provider", "name", "temperature", "max_tokens"];

impl Checker<'_> {
    pub(super) fn check_model(&mut self, f: usize, id: ModelId, decl: &ast::BlockDecl) {
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
                        .help("providers are \"openai\" (any OpenAI-compatible API), \"scripted\" (canned replies) and \"client\" (the calling client's model)")
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
        if provider == "client" {
            // The client's model has no endpoint, key or replies of pipec's.
            for setting in &decl.body.settings {
                let name = setting.name.name.as_str();
                if MODEL_SETTINGS.contains(&name) && !CLIENT_SETTINGS.contains(&name) {
                    self.diags.push(
                        Diagnostic::new(
                            &r::UNKNOWN_SETTING,
                            file,
                            setting.name.span,
                            format!("`{name}` is not a setting of the calling client's model"),
                        )
                        .label("the client's model is asked through the client")
                        .help("a model with `provider = \"client\"` takes `name` (a hint to the client), `temperature` and `max_tokens`"),
                    );
                }
            }
        }
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
        let context_window = self.count_setting(&s, "context_window");
        if context_window == Some(0)
            && let Some(e) = s.expr("context_window")
        {
            self.diags.push(
                Diagnostic::new(
                    &r::INVALID_LITERAL_TYPE,
                    file,
                    e.span,
                    "a `context_window` of 0 tokens holds no prompt",
                )
                .label("expected the model's window in tokens")
                .help("give the window the provider publishes for the model, e.g. `context_window = 128000`, or leave it out for pipec's table"),
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
        let prices = match s.get("prices").map(|p| &p.value) {
            Some(SettingValue::Block(b)) => self.model_prices(file, model, b),
            Some(SettingValue::Expr(e)) => {
                if !matches!(e.kind, ast::ExprKind::Error) {
                    self.wrong_value(
                        file,
                        e.span,
                        "prices",
                        "a block: `prices { input = 2.50, output = 10.00 }`",
                    );
                }
                None
            }
            None => None,
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
        m.prices = prices;
        m.context_window = context_window.filter(|w| *w > 0);
    }

    /// A model's `prices` block: `input` and `output` (and `cached_input`), US dollars per
    /// million tokens, none negative.
    fn model_prices(
        &mut self,
        file: pipec_base::source::FileId,
        model: &str,
        block: &ast::Block,
    ) -> Option<pipec_plan::prices::Prices> {
        let s = self.settings(file, block, PRICE_SETTINGS, "a `prices` block");
        let mut price = |name: &str| -> Option<f64> {
            let v = self.float_setting(&s, name)?;
            if v < 0.0 || !v.is_finite() {
                let span = s.expr(name).map_or(block.span, |e| e.span);
                self.diags.push(
                    Diagnostic::new(
                        &r::INVALID_LITERAL_TYPE,
                        file,
                        span,
                        format!("the price `{name}` of the model `{model}` is negative"),
                    )
                    .label("expected US dollars per million tokens, 0 or more"),
                );
                return None;
            }
            Some(v)
        };
        let input = price("input");
        let output = price("output");
        let cached_input = price("cached_input");
        for (name, given) in [("input", input), ("output", output)] {
            if given.is_none() && !s.has(name) {
                self.missing_setting(
                    file,
                    block.span,
                    &format!("the `prices` block of the model `{model}`"),
                    name,
                    "give both in US dollars per million tokens: `prices { input = 2.50, output = 10.00 }`",
                );
            }
        }
        Some(pipec_plan::prices::Prices {
            input: input?,
            output: output?,
            cached_input,
        })
    }
}
