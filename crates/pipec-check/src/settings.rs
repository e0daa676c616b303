//! Reading the settings of a block (`server`, `model`, `tool`, node bodies, serve
//! entries): unknown and repeated settings, and typed access to literal values.

use std::collections::HashMap;

use super::Checker;
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self, Block, ExprKind, Setting, SettingValue};

/// The settings of one block, by name.
pub(crate) struct Settings<'a> {
    pub file: FileId,
    pub map: HashMap<&'a str, &'a Setting>,
}

impl<'a> Settings<'a> {
    pub(crate) fn get(&self, name: &str) -> Option<&'a Setting> {
        self.map.get(name).copied()
    }

    pub(crate) fn expr(&self, name: &str) -> Option<&'a ast::Expr> {
        match &self.get(name)?.value {
            SettingValue::Expr(e) => Some(e),
            SettingValue::Block(_) => None,
        }
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }
}

impl Checker<'_> {
    /// Collects a block's settings, reporting those `what` does not take and repeats.
    pub(crate) fn settings<'a>(
        &mut self,
        file: FileId,
        block: &'a Block,
        allowed: &[&str],
        what: &str,
    ) -> Settings<'a> {
        let mut map: HashMap<&'a str, &'a Setting> = HashMap::new();
        for s in &block.settings {
            let name = s.name.name.as_str();
            if !allowed.contains(&name) {
                let near = names::suggestion(name, allowed.iter().copied());
                self.diags.push(
                    Diagnostic::new(
                        &r::UNKNOWN_SETTING,
                        file,
                        s.name.span,
                        format!("{what} has no setting `{name}`"),
                    )
                    .label("unknown setting")
                    .help(format!("{what} takes {}", list_words(allowed)))
                    .did_you_mean(
                        &self.db,
                        file,
                        s.name.span,
                        name,
                        near.as_ref(),
                    ),
                );
                continue;
            }
            if let Some(first) = map.get(name) {
                self.diags.push(
                    Diagnostic::new(
                        &r::DUPLICATE_DECLARATION,
                        file,
                        s.name.span,
                        format!("`{name}` is set twice"),
                    )
                    .label("set again here")
                    .secondary(file, first.name.span, "first set here"),
                );
                continue;
            }
            map.insert(name, s);
        }
        Settings { file, map }
    }

    pub(crate) fn missing_setting(
        &mut self,
        file: FileId,
        at: Span,
        what: &str,
        name: &str,
        help: &str,
    ) {
        self.diags.push(
            Diagnostic::new(
                &r::MISSING_SETTING,
                file,
                at,
                format!("{what} needs `{name}`"),
            )
            .label(format!("`{name}` is missing"))
            .help(help.to_string()),
        );
    }

    pub(crate) fn wrong_value(&mut self, file: FileId, span: Span, name: &str, wanted: &str) {
        self.diags.push(
            Diagnostic::new(
                &r::INVALID_LITERAL_TYPE,
                file,
                span,
                format!("`{name}` takes {wanted}"),
            )
            .label(format!("expected {wanted}")),
        );
    }

    pub(crate) fn expr_of<'a>(
        &mut self,
        s: &Settings<'a>,
        name: &str,
        wanted: &str,
    ) -> Option<&'a ast::Expr> {
        let setting = s.get(name)?;
        match &setting.value {
            SettingValue::Expr(e) if matches!(e.kind, ExprKind::Error) => None,
            SettingValue::Expr(e) => Some(e),
            SettingValue::Block(b) => {
                self.wrong_value(s.file, b.span, name, wanted);
                None
            }
        }
    }

    pub(crate) fn string_setting(
        &mut self,
        s: &Settings<'_>,
        name: &str,
    ) -> Option<(String, Span)> {
        let e = self.expr_of(s, name, "a string")?;
        self.string_value(s.file, e, name, "a string")
    }

    pub(crate) fn bool_setting(&mut self, s: &Settings<'_>, name: &str) -> Option<(bool, Span)> {
        let e = self.expr_of(s, name, "`true` or `false`")?;
        self.bool_value(s.file, e, name)
    }

    /// A whole number (or a size, which is a number of bytes) that is not negative.
    pub(crate) fn count_setting(&mut self, s: &Settings<'_>, name: &str) -> Option<u64> {
        let e = self.expr_of(s, name, "a whole number")?;
        self.count_value(s.file, e, name)
    }

    pub(crate) fn int_setting(&mut self, s: &Settings<'_>, name: &str) -> Option<i64> {
        let e = self.expr_of(s, name, "a whole number")?;
        self.int_value(s.file, e, name)
    }

    pub(crate) fn float_setting(&mut self, s: &Settings<'_>, name: &str) -> Option<f64> {
        let e = self.expr_of(s, name, "a number")?;
        self.float_value(s.file, e, name)
    }

    pub(crate) fn size_setting(&mut self, s: &Settings<'_>, name: &str) -> Option<u64> {
        let e = self.expr_of(s, name, "a size such as `100kb`")?;
        self.size_value(s.file, e, name)
    }

    pub(crate) fn duration_setting(&mut self, s: &Settings<'_>, name: &str) -> Option<u64> {
        let e = self.expr_of(s, name, "a duration such as `30s`")?;
        self.duration_value(s.file, e, name)
    }

    /// A list of string literals, each with its span.
    pub(crate) fn strings_setting(
        &mut self,
        s: &Settings<'_>,
        name: &str,
    ) -> Option<Vec<(String, Span)>> {
        let e = self.expr_of(s, name, "a list of strings")?;
        self.strings_value(s.file, e, name)
    }

    /// A list of names (`[get_deal, tracker.search]`), each as its path and span.
    pub(crate) fn names_setting(
        &mut self,
        s: &Settings<'_>,
        name: &str,
    ) -> Option<Vec<(Vec<String>, Span)>> {
        let e = self.expr_of(s, name, "a list of names")?;
        self.names_value(s.file, e, name)
    }

    /// A name (`model = fast`).
    pub(crate) fn name_setting(
        &mut self,
        s: &Settings<'_>,
        name: &str,
    ) -> Option<(Vec<String>, Span)> {
        let e = self.expr_of(s, name, "a name")?;
        self.name_value(s.file, e, name, "a name")
    }

    // The same readings for a value that is not a setting of a block (the named arguments
    // of `resource(...)`, for one). `name` is what the value is called in messages; an
    // expression that failed to parse is already reported and reads as nothing.

    /// A string literal; `wanted` says what it should be (`"a string"`).
    pub(crate) fn string_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
        wanted: &str,
    ) -> Option<(String, Span)> {
        match &e.kind {
            ExprKind::Str(lit) => Some((lit.value.clone(), lit.span)),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, wanted);
                None
            }
        }
    }

    pub(crate) fn bool_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
    ) -> Option<(bool, Span)> {
        match &e.kind {
            ExprKind::Bool(b) => Some((*b, e.span)),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "`true` or `false`");
                None
            }
        }
    }

    /// A whole number (or a size, which is a number of bytes) that is not negative.
    pub(crate) fn count_value(&mut self, file: FileId, e: &ast::Expr, name: &str) -> Option<u64> {
        match &e.kind {
            ExprKind::Int(v) if *v >= 0 => Some(*v as u64),
            ExprKind::Size(v, _) => Some(*v),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "a whole number");
                None
            }
        }
    }

    pub(crate) fn int_value(&mut self, file: FileId, e: &ast::Expr, name: &str) -> Option<i64> {
        match &e.kind {
            ExprKind::Int(v) => Some(*v),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "a whole number");
                None
            }
        }
    }

    pub(crate) fn float_value(&mut self, file: FileId, e: &ast::Expr, name: &str) -> Option<f64> {
        match &e.kind {
            ExprKind::Int(v) => Some(*v as f64),
            ExprKind::Float(v) => Some(*v),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "a number");
                None
            }
        }
    }

    /// A size (`100kb`) or a number of bytes that is not negative.
    pub(crate) fn size_value(&mut self, file: FileId, e: &ast::Expr, name: &str) -> Option<u64> {
        match &e.kind {
            ExprKind::Size(v, _) => Some(*v),
            ExprKind::Int(v) if *v >= 0 => Some(*v as u64),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "a size such as `100kb`");
                None
            }
        }
    }

    pub(crate) fn duration_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
    ) -> Option<u64> {
        match &e.kind {
            ExprKind::Duration(v, _) => Some(*v),
            ExprKind::Error => None,
            _ => {
                self.wrong_value(file, e.span, name, "a duration such as `30s`");
                None
            }
        }
    }

    /// A list of string literals, each with its span.
    pub(crate) fn strings_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
    ) -> Option<Vec<(String, Span)>> {
        let ExprKind::List(items) = &e.kind else {
            if !matches!(e.kind, ExprKind::Error) {
                self.wrong_value(file, e.span, name, "a list of strings");
            }
            return None;
        };
        let mut out = Vec::new();
        for item in items {
            match &item.kind {
                ExprKind::Str(lit) => out.push((lit.value.clone(), lit.span)),
                ExprKind::Error => {}
                _ => self.wrong_value(file, item.span, name, "a list of strings"),
            }
        }
        Some(out)
    }

    /// A list of names, each as its path and span.
    pub(crate) fn names_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
    ) -> Option<Vec<(Vec<String>, Span)>> {
        let ExprKind::List(items) = &e.kind else {
            if !matches!(e.kind, ExprKind::Error) {
                self.wrong_value(file, e.span, name, "a list of names");
            }
            return None;
        };
        let mut out = Vec::new();
        for item in items {
            match item.as_path() {
                Some(path) => out.push((path.iter().map(|i| i.name.clone()).collect(), item.span)),
                None => self.wrong_value(file, item.span, name, "a list of names"),
            }
        }
        Some(out)
    }

    /// A name or a dotted path (`fast`, `tracker.search`); `wanted` says what it should
    /// name (`"a name"`).
    pub(crate) fn name_value(
        &mut self,
        file: FileId,
        e: &ast::Expr,
        name: &str,
        wanted: &str,
    ) -> Option<(Vec<String>, Span)> {
        match e.as_path() {
            Some(path) => Some((path.iter().map(|i| i.name.clone()).collect(), e.span)),
            None if matches!(e.kind, ExprKind::Error) => None,
            None => {
                self.wrong_value(file, e.span, name, wanted);
                None
            }
        }
    }
}

pub(crate) fn list_words(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.as_slice() {
        [] => "no settings".into(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A literal expression as JSON, if it is one (records and lists of literals included).
pub(crate) fn literal_json(e: &ast::Expr) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match &e.kind {
        ExprKind::Str(s) => Value::String(s.value.clone()),
        ExprKind::Int(v) => Value::from(*v),
        ExprKind::Float(v) => serde_json::Number::from_f64(*v).map(Value::Number)?,
        ExprKind::Size(v, _) => Value::from(*v),
        ExprKind::Bool(b) => Value::Bool(*b),
        ExprKind::Null => Value::Null,
        ExprKind::List(items) => {
            Value::Array(items.iter().map(literal_json).collect::<Option<_>>()?)
        }
        ExprKind::Record(entries) => Value::Object(
            entries
                .iter()
                .map(|en| Some((en.key.name.clone(), literal_json(&en.value)?)))
                .collect::<Option<_>>()?,
        ),
        ExprKind::Paren(inner) => literal_json(inner)?,
        _ => return None,
    })
}
