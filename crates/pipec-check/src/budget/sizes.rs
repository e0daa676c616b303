//! How large a parameter's value can be, from what the checker knows of it: the byte cap
//! its source sets (`max_bytes`, `max_total`, a constant), the fewest bytes a value of a
//! type takes as JSON (so how many items a capped list can hold), the widest text a value
//! of a fixed-width type prints as, and the length of a list an `each` node makes.

use crate::hir::{Hir, NodeDef, ParamDef, PathSeg, SourceKind};
use std::collections::HashMap;

use crate::ty::{self, Ty, TypeBody, TypeEnv, TypeId};

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
    min_bytes(hir, t, 0, &mut HashMap::new())
}

/// Each named type is measured once: a type used by many fields of many types would
/// otherwise be walked once per path to it, which grows exponentially with depth.
fn min_bytes(hir: &Hir, t: &Ty, depth: usize, seen: &mut HashMap<TypeId, u64>) -> u64 {
    if depth > DEPTH {
        return 2;
    }
    match t {
        Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(_) | Ty::Ref(_) => 2,
        Ty::Int | Ty::Float | Ty::Duration | Ty::Json | Ty::Error => 1,
        Ty::Bool | Ty::Null | Ty::Optional(_) => 4,
        Ty::Literals(vs) => shortest(vs),
        Ty::Record(r) => record_bytes(hir, &r.fields, depth, seen),
        Ty::Named(id) => {
            if let Some(known) = seen.get(id) {
                return *known;
            }
            // A type that requires itself has no finite value; the placeholder ends it.
            seen.insert(*id, 2);
            let n = match hir.type_body(*id) {
                TypeBody::Record(r) => record_bytes(hir, &r.fields, depth, seen),
                TypeBody::Alias(inner) => min_bytes(hir, inner, depth + 1, seen),
                TypeBody::Enum(vs, _) => shortest(vs),
            };
            seen.insert(*id, n);
            n
        }
    }
}

fn shortest(variants: &[String]) -> u64 {
    variants
        .iter()
        .map(|v| v.len() as u64 + 2)
        .min()
        .unwrap_or(2)
}

fn record_bytes(
    hir: &Hir,
    fields: &[crate::ty::FieldTy],
    depth: usize,
    seen: &mut HashMap<TypeId, u64>,
) -> u64 {
    let mut total: u64 = 2; // `{` `}`
    for (i, f) in fields.iter().filter(|f| !f.ty.is_optional()).enumerate() {
        // `"name":value`, and a comma before every field but the first.
        let field =
            (f.name.len() as u64 + 3).saturating_add(min_bytes(hir, &f.ty, depth + 1, seen));
        total = total.saturating_add(field).saturating_add(u64::from(i > 0));
    }
    total
}

/// The widest text a value of `ty` prints as in a template, when its type fixes that:
/// numbers, booleans, a closed set of strings, `none`, and records of only those.
/// Strings, lists, maps and `json` have no width of their own (their source bounds them,
/// or nothing does).
pub(crate) fn widest_text(hir: &Hir, t: &Ty) -> Option<String> {
    let mut parts = WIDEST_PARTS;
    widest(hir, t, 0, &mut parts).map(|v| render(&v))
}

/// The most values a widest rendering is built of: a record of records of numbers can be
/// exponentially large in its depth, and one that large is no fixed width worth printing.
const WIDEST_PARTS: usize = 4096;

/// How many more bytes of JSON the widest value of a fixed-width type takes than its
/// smallest: what printing it at its widest costs a byte cap.
pub(crate) fn widest_extra_bytes(hir: &Hir, t: &Ty) -> u64 {
    let mut parts = WIDEST_PARTS;
    let widest = widest(hir, t, 0, &mut parts)
        .and_then(|v| serde_json::to_string(&v).ok())
        .map_or(0, |s| s.len() as u64);
    widest.saturating_sub(min_json_bytes(hir, t))
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

fn widest(hir: &Hir, t: &Ty, depth: usize, parts: &mut usize) -> Option<serde_json::Value> {
    use serde_json::Value;
    if depth > DEPTH || *parts == 0 {
        return None;
    }
    *parts -= 1;
    match ty::resolve(hir, t) {
        Ty::Int | Ty::Duration => Some(Value::from(i64::MIN)),
        Ty::Float => Some(serde_json::json!(-f64::MAX)),
        Ty::Bool => Some(Value::Bool(false)),
        Ty::Null => Some(Value::Null),
        Ty::Literals(vs) => longest(vs),
        Ty::Optional(inner) => {
            let some = widest(hir, inner, depth + 1, parts)?;
            // Absent, it prints `none`.
            Some(if render(&some).len() >= 4 {
                some
            } else {
                Value::Null
            })
        }
        Ty::Record(r) => widest_record(hir, &r.fields, depth, parts),
        Ty::Named(id) => match hir.type_body(*id) {
            TypeBody::Record(r) => widest_record(hir, &r.fields, depth, parts),
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
    parts: &mut usize,
) -> Option<serde_json::Value> {
    let mut map = serde_json::Map::new();
    for f in fields {
        map.insert(f.name.clone(), widest(hir, &f.ty, depth + 1, parts)?);
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
    fn a_wide_deep_type_is_measured_once_per_name_and_never_printed_whole() {
        // Ten levels of four fields each of the level below: 4^10 paths to the bottom.
        let mut src = String::from("type T0 { n: int }\n");
        for i in 1..=10 {
            let below = i - 1;
            src.push_str(&format!(
                "type T{i} {{ a: T{below}, b: T{below}, c: T{below}, d: T{below} }}\n"
            ));
        }
        src.push_str("input x: T10\n");
        let hir = crate::check(
            &pipec_base::source::MemoryLoader::new().with("t.pipe", &src),
            std::path::Path::new("t.pipe"),
            "t.pipe",
        )
        .hir;
        let top = hir.inputs[0].ty.clone();
        // Each level: braces, four `"a":` keys and three commas around four of the level below.
        assert!(min_json_bytes(&hir, &top) > 4u64.pow(10));
        assert_eq!(widest_text(&hir, &top), None);
    }

    #[test]
    fn numbers_print_at_their_widest() {
        assert_eq!(widest_int(), "-9223372036854775808");
        let float = widest_float();
        // minijinja prints a float in full, never with an exponent.
        assert!(float.len() > 300, "{float}");
        assert!(!float.contains('e'));
    }
}
