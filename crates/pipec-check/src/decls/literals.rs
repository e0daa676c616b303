//! JSON literals checked against a type: defaults, constants and answers.

use crate::Checker;
use crate::hir::*;
use crate::mismatch::Target;
use crate::ty::{self, Ty};
use pipec_base::source::FileId;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast;

impl Checker<'_> {
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
