//! The help lines of values that do not fit their type (P0201 type-mismatch, P0203
//! invalid-literal-type, P0204 optional-into-required): what to write instead, with the
//! names and the sources as the file has them.

use serde_json::Value;

use super::Checker;
use super::decls::literal_fits;
use super::hir::Hir;
use super::ty::{self, Ty};
use pipec_base::names;
use pipec_base::source::{FileId, Span};

/// What a value that does not fit is bound to, so that the help can name it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target<'a> {
    /// The whole source of the parameter of this name (`name: T = source`).
    Param(&'a str),
    /// The whole source of the output of this name.
    Output(&'a str),
    /// The default of the input of this name.
    Input(&'a str),
    /// The declared output of a node whose `call` returns something else.
    CallResult,
    /// Part of a value (a record field, a list item, a side of `??`, a body expression):
    /// nothing on the spot to declare differently.
    Part,
}

/// Source text longer than this is not quoted in a help line.
const QUOTE_LIMIT: usize = 60;

impl Checker<'_> {
    /// The text at `span` as written, when it is short enough to quote in a help line.
    pub(crate) fn written(&self, file: FileId, span: Span) -> Option<String> {
        let text = self.db.get(file).slice(span).trim();
        (!text.is_empty() && text.len() <= QUOTE_LIMIT && !text.contains('\n'))
            .then(|| text.to_string())
    }

    /// The text at `span`, or `x` when it is too long to quote.
    fn written_or_x(&self, file: FileId, span: Span) -> String {
        self.written(file, span).unwrap_or_else(|| "x".to_string())
    }

    /// P0201: what to write when the value at `span`, of type `found`, does not fit
    /// `expected`.
    pub(crate) fn mismatch_help(
        &self,
        file: FileId,
        span: Span,
        found: &Ty,
        expected: &Ty,
        target: Target<'_>,
    ) -> Option<String> {
        let src = self.written(file, span);
        let shown_found = ty::display(&self.hir, found);
        let shown_expected = ty::display(&self.hir, expected);
        // A list of what is wanted: run once per item, or take the whole list.
        if let (Ty::List(elem), Target::Param(name), Some(src)) =
            (ty::resolve(&self.hir, found.strip_optional()), target, &src)
            && ty::fits(&self.hir, elem, expected).is_ok()
        {
            return Some(format!(
                "to run once per item, fan out: `{name}: {shown_expected} = each({src})`; to take the whole list, declare `{name}: {shown_found}`"
            ));
        }
        // A record with fields that fit: one of them was probably meant.
        if let (Some(rec), Some(src)) = (ty::as_record(&self.hir, found.strip_optional()), &src) {
            let mut fitting: Vec<&str> = rec
                .fields
                .iter()
                .filter(|f| ty::fits(&self.hir, &f.ty, expected).is_ok())
                .map(|f| f.name.as_str())
                .collect();
            // A field named like the parameter is the one meant.
            if let Target::Param(name) = target
                && fitting.contains(&name)
            {
                fitting = vec![name];
            }
            let fitting: Vec<String> = fitting.iter().map(|f| format!("`{src}.{f}`")).collect();
            match fitting.as_slice() {
                [] => {}
                [one] => return Some(format!("did you mean its field {one}?")),
                some if some.len() <= 4 => {
                    return Some(format!("use one of its fields: {}", some.join(", ")));
                }
                _ => {}
            }
        }
        match target {
            Target::Param(name) => Some(format!(
                "declare `{name}: {shown_found}` to take it as it is, or bind a `{shown_expected}`"
            )),
            Target::Output(name) => Some(format!(
                "declare `output {name}: {shown_found}`, or leave the type out to output it as it is"
            )),
            Target::CallResult => Some(format!(
                "declare the node `-> {shown_found}`, or leave the type out: the node then returns what the tool returns"
            )),
            Target::Input(_) | Target::Part => None,
        }
    }

    /// P0204: what to write when the value at `span` may be missing and `expected` is
    /// required.
    pub(crate) fn optional_help(
        &self,
        file: FileId,
        span: Span,
        expected: &Ty,
        target: Target<'_>,
    ) -> String {
        let src = self.written_or_x(file, span);
        let give = match default_example(&self.hir, expected) {
            Some(d) => format!("give a default: `{src} ?? {d}`"),
            None => format!("give a default with `??` (`{src} ?? ...`)"),
        };
        let shown = ty::display(&self.hir, expected);
        let declare = match target {
            Target::Param(name) => format!("declare `{name}: {shown}?`"),
            Target::Output(name) => format!("declare `output {name}: {shown}?`"),
            Target::Input(name) => format!("declare `input {name}: {shown}?`"),
            Target::CallResult => format!("declare the node `-> {shown}?`"),
            Target::Part => format!("make the target optional (`{shown}?`)"),
        };
        format!("{give}, or {declare}")
    }

    /// A default that fits the optional value at `span`, written after `??`.
    pub(crate) fn default_help(&self, file: FileId, span: Span, inner: &Ty, what: &str) -> String {
        let src = self.written_or_x(file, span);
        match default_example(&self.hir, inner) {
            Some(d) => format!("{what}: `{src} ?? {d}`"),
            None => format!("{what} with `??`"),
        }
    }

    /// P0203: what to write instead of a literal `value` that does not fit `expected`.
    pub(crate) fn literal_help(
        &self,
        value: &Value,
        expected: &Ty,
        target: Target<'_>,
    ) -> Option<String> {
        let shown = ty::display(&self.hir, expected);
        if let Some(fixed) = literal_fix(&self.hir, value, expected)
            && literal_fits(&self.hir, &fixed, expected).is_ok()
        {
            let lit = pipe_literal(&fixed);
            if lit.len() <= QUOTE_LIMIT {
                return Some(match target {
                    Target::Input(name) => format!("write `input {name}: {shown} = {lit}`"),
                    Target::Param(name) => format!("write `{name}: {shown} = {lit}`"),
                    _ => format!("write `{lit}`"),
                });
            }
        }
        // Otherwise say what the first part that does not fit takes.
        let (path, inner) = first_misfit(&self.hir, value, expected)?;
        let inner_shown = ty::display(&self.hir, &inner);
        let example = default_example(&self.hir, &inner)
            .map(|e| format!(", such as `{e}`"))
            .unwrap_or_default();
        Some(match (path.is_empty(), target) {
            (true, Target::Input(name) | Target::Param(name)) => {
                format!("`{name}` takes a `{inner_shown}`{example}")
            }
            (true, _) => format!("write a `{inner_shown}`{example}"),
            (false, _) => format!("`{path}` takes a `{inner_shown}`{example}"),
        })
    }

    /// P0203: a string compared with, or given for, a closed set of strings it is not in.
    pub(crate) fn member_help(&self, s: &str, members: &[String], other: Option<String>) -> String {
        if let Some(h) = names::did_you_mean(s, members.iter().map(String::as_str)) {
            return h;
        }
        let first = members.first().map(String::as_str).unwrap_or_default();
        match other {
            Some(other) => format!("compare with one of its values: `{other} == \"{first}\"`"),
            None => format!("write one of its values, such as `\"{first}\"`"),
        }
    }
}

/// A value of `ty` to show in a help line, when a short one exists.
pub(crate) fn default_example(env: &Hir, t: &Ty) -> Option<String> {
    if let Some(members) = ty::as_literals(env, t) {
        return members.first().map(|m| format!("\"{m}\""));
    }
    Some(
        match ty::resolve(env, t) {
            Ty::String => "\"\"",
            Ty::Int => "0",
            Ty::Float => "0.0",
            Ty::Bool => "false",
            Ty::List(_) => "[]",
            Ty::Map(_) => "{}",
            Ty::Duration => "30s",
            Ty::Optional(_) | Ty::Null | Ty::Json => "null",
            _ => return None,
        }
        .to_string(),
    )
}

/// The literal a user probably meant: a quoted number or boolean unquoted, a number or
/// boolean quoted where a string is wanted, the closest member of a closed set of strings,
/// recursively inside lists and records.
fn literal_fix(env: &Hir, value: &Value, expected: &Ty) -> Option<Value> {
    if literal_fits(env, value, expected).is_ok() {
        return Some(value.clone());
    }
    if let (Value::String(s), Some(members)) = (value, ty::as_literals(env, expected)) {
        return names::suggest(s, members.iter().map(String::as_str)).map(Value::String);
    }
    if let Some(rec) = ty::as_record(env, expected)
        && let Value::Object(map) = value
    {
        let mut out = serde_json::Map::new();
        for (k, v) in map {
            let field = rec.field(k)?;
            out.insert(k.clone(), literal_fix(env, v, &field.ty)?);
        }
        return Some(Value::Object(out));
    }
    match (value, ty::resolve(env, expected)) {
        (v, Ty::Optional(inner)) => literal_fix(env, v, inner),
        (Value::String(s), Ty::Int) => s.trim().parse::<i64>().ok().map(Value::from),
        (Value::String(s), Ty::Float) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        (Value::String(s), Ty::Bool) => match s.trim() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        (Value::Number(n), Ty::String) => Some(Value::String(n.to_string())),
        (Value::Bool(b), Ty::String) => Some(Value::String(b.to_string())),
        (Value::Array(items), Ty::List(inner)) => items
            .iter()
            .map(|i| literal_fix(env, i, inner))
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        _ => None,
    }
}

/// The path (`approved`, `notes[]`) to the first part of `value` that does not fit, and
/// the type that part should have.
fn first_misfit(env: &Hir, value: &Value, expected: &Ty) -> Option<(String, Ty)> {
    if literal_fits(env, value, expected).is_ok() {
        return None;
    }
    if let (Some(rec), Value::Object(map)) = (ty::as_record(env, expected), value) {
        for (k, v) in map {
            let Some(field) = rec.field(k) else {
                continue;
            };
            if let Some((path, t)) = first_misfit(env, v, &field.ty) {
                let path = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{k}.{path}")
                };
                return Some((path, t));
            }
        }
        return Some((String::new(), expected.clone()));
    }
    match (value, ty::resolve(env, expected)) {
        (Value::Null, _) => Some((String::new(), expected.clone())),
        (v, Ty::Optional(inner)) => first_misfit(env, v, inner),
        (Value::Array(items), Ty::List(inner)) => items.iter().find_map(|i| {
            first_misfit(env, i, inner).map(|(p, t)| {
                let p = if p.is_empty() {
                    "[]".to_string()
                } else {
                    format!("[].{p}")
                };
                (p, t)
            })
        }),
        _ => Some((String::new(), expected.clone())),
    }
}

/// A JSON value written as a `.pipe` literal: records with bare field names.
fn pipe_literal(v: &Value) -> String {
    match v {
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}: {}", pipe_literal(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(pipe_literal).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}
