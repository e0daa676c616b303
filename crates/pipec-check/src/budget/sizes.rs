//! How large a parameter's value can be, from what the checker knows of it: the byte cap
//! its source sets (`max_bytes`, `max_total`, a constant), the fewest bytes a value of a
//! type takes as JSON (so how many items a capped list can hold), the widest text a value
//! of a fixed-width type prints as, and the length of a list an `each` node makes.

use crate::hir::{Hir, NodeDef, ParamDef, PathSeg, SourceKind};
use crate::ty::{self, Ty, TypeBody, TypeEnv};

/// Beyond this depth a type is not followed further (types may refer to themselves).
const DEPTH: usize = 32;

/// The most bytes of JSON the parameter's value can hold, when its source caps it: a
/// resource's `max_bytes`, a list of linked resources' `max_total`, a constant's own size.
pub(crate) fn byte_cap(p: &ParamDef) -> Option<u64> {
    source_cap(&p.source.kind)
}

fn source_cap(kind: &SourceKind) -> Option<u64> {
    match kind {
        SourceKind::Resource(r) => r.max_bytes,
        SourceKind::Link(l) if l.many => l.max_total,
        SourceKind::Link(l) => l.max_bytes,
        // Per item: each linked resource within its own `max_bytes`.
        SourceKind::Each { inner, .. } => match &inner.kind {
            SourceKind::Link(l) => l.max_bytes,
            _ => None,
        },
        SourceKind::Const(v) => Some(serde_json::to_string(v).map_or(0, |s| s.len() as u64)),
        // Either side may be the one that arrives.
        SourceKind::Join(sides) => sides
            .iter()
            .map(|s| source_cap(&s.kind))
            .try_fold(0, |most, cap| cap.map(|c| most.max(c))),
        _ => None,
    }
}

/// How many items the list a parameter binds can have, when something bounds it: the
/// output of an `each` node with `max:` (bound whole, without a path into it).
pub(crate) fn list_length(hir: &Hir, p: &ParamDef) -> Option<u64> {
    match &p.source.kind {
        SourceKind::Node { node, path } if path.iter().all(|s| matches!(s, PathSeg::Field(_))) => {
            let n: &NodeDef = hir.node(*node);
            let i = n.each?;
            match (&n.params.get(i)?.source.kind, path.is_empty()) {
                (SourceKind::Each { max: Some(max), .. }, true) => Some(*max),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The fewest bytes a value of `ty` takes as JSON: a record's required fields with their
/// names, `""` for a string, `0` for a number. Optional fields may be left out.
pub(crate) fn min_json_bytes(hir: &Hir, t: &Ty) -> u64 {
    min_bytes(hir, t, 0)
}

fn min_bytes(hir: &Hir, t: &Ty, depth: usize) -> u64 {
    if depth > DEPTH {
        return 2;
    }
    match t {
        Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(_) | Ty::Ref(_) => 2,
        Ty::Int | Ty::Float | Ty::Duration | Ty::Json | Ty::Error => 1,
        Ty::Bool | Ty::Null | Ty::Optional(_) => 4,
        Ty::Literals(vs) => shortest(vs),
        Ty::Record(r) => record_bytes(hir, &r.fields, depth),
        Ty::Named(id) => match hir.type_body(*id) {
            TypeBody::Record(r) => record_bytes(hir, &r.fields, depth),
            TypeBody::Alias(inner) => min_bytes(hir, inner, depth + 1),
            TypeBody::Enum(vs, _) => shortest(vs),
        },
    }
}

fn shortest(variants: &[String]) -> u64 {
    variants
        .iter()
        .map(|v| v.len() as u64 + 2)
        .min()
        .unwrap_or(2)
}

fn record_bytes(hir: &Hir, fields: &[crate::ty::FieldTy], depth: usize) -> u64 {
    let required: Vec<u64> = fields
        .iter()
        .filter(|f| !f.ty.is_optional())
        .map(|f| f.name.len() as u64 + 3 + min_bytes(hir, &f.ty, depth + 1))
        .collect();
    // `{` `}`, `"name":value` for each, and the commas between them.
    2 + required.iter().sum::<u64>() + required.len().saturating_sub(1) as u64
}

/// The widest text a value of `ty` prints as in a template, when its type fixes that:
/// numbers, booleans, a closed set of strings, `none`, and records of only those.
/// Strings, lists, maps and `json` have no width of their own (their source bounds them,
/// or nothing does).
pub(crate) fn widest_text(hir: &Hir, t: &Ty) -> Option<String> {
    widest(hir, t, 0).map(|v| render(&v))
}

/// The widest whole number and the widest number a template prints.
pub(crate) fn widest_int() -> String {
    render(&serde_json::json!(i64::MIN))
}

pub(crate) fn widest_float() -> String {
    render(&serde_json::json!(-f64::MAX))
}

/// How minijinja prints a value: what the runtime's rendering would write.
fn render(v: &serde_json::Value) -> String {
    let env = minijinja::Environment::new();
    env.render_str(
        "{{ v }}",
        minijinja::value::Serde(serde_json::json!({ "v": v })),
    )
    .unwrap_or_default()
}

fn widest(hir: &Hir, t: &Ty, depth: usize) -> Option<serde_json::Value> {
    use serde_json::Value;
    if depth > DEPTH {
        return None;
    }
    match ty::resolve(hir, t) {
        Ty::Int | Ty::Duration => Some(Value::from(i64::MIN)),
        Ty::Float => Some(serde_json::json!(-f64::MAX)),
        Ty::Bool => Some(Value::Bool(false)),
        Ty::Null => Some(Value::Null),
        Ty::Literals(vs) => longest(vs),
        Ty::Optional(inner) => {
            let some = widest(hir, inner, depth + 1)?;
            // Absent, it prints `none`.
            Some(if render(&some).len() >= 4 {
                some
            } else {
                Value::Null
            })
        }
        Ty::Record(r) => widest_record(hir, &r.fields, depth),
        Ty::Named(id) => match hir.type_body(*id) {
            TypeBody::Record(r) => widest_record(hir, &r.fields, depth),
            TypeBody::Enum(vs, _) => longest(vs),
            TypeBody::Alias(_) => None,
        },
        _ => None,
    }
}

fn longest(variants: &[String]) -> Option<serde_json::Value> {
    variants
        .iter()
        .max_by_key(|v| v.len())
        .map(|v| serde_json::Value::String(v.clone()))
}

fn widest_record(
    hir: &Hir,
    fields: &[crate::ty::FieldTy],
    depth: usize,
) -> Option<serde_json::Value> {
    let mut map = serde_json::Map::new();
    for f in fields {
        map.insert(f.name.clone(), widest(hir, &f.ty, depth + 1)?);
    }
    Some(serde_json::Value::Object(map))
}

/// The type of an item of a list (or of a map's values), for a loop over it.
pub(crate) fn item_type(hir: &Hir, t: &Ty) -> Ty {
    match ty::resolve(hir, t.strip_optional()) {
        Ty::List(inner) | Ty::Map(inner) => (**inner).clone(),
        _ => Ty::Json,
    }
}

/// The type of the field `name` of a value of `t` (`json` when unknown).
pub(crate) fn field_type(hir: &Hir, t: &Ty, name: &str) -> Ty {
    let inner = ty::resolve(hir, t.strip_optional());
    if let Ty::Map(v) = inner {
        return (**v).clone();
    }
    ty::as_record(hir, inner)
        .and_then(|r| r.field(name))
        .map_or(Ty::Json, |f| f.ty.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_at_their_widest() {
        assert_eq!(widest_int(), "-9223372036854775808");
        let float = widest_float();
        // minijinja prints a float in full, never with an exponent.
        assert!(float.len() > 300, "{float}");
        assert!(!float.contains('e'));
    }
}
