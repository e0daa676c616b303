//! Types as the checker sees them, and structural assignability.
//!
//! A value fits a type when it has every required field with a fitting type; extra
//! fields are allowed when reading. Record *literals* are checked exactly elsewhere
//! (`expr.rs`), because there an extra field is a typo.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::Arc;

pub type TypeId = u32;

#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    String,
    Int,
    Float,
    Bool,
    Bytes,
    Json,
    Duration,
    /// The type of the literal `null`.
    Null,
    Named(TypeId),
    Record(Arc<RecordTy>),
    List(Box<Ty>),
    Optional(Box<Ty>),
    /// A closed set of strings: a literal union or an enum's variants.
    Literals(Arc<Vec<String>>),
    Map(Box<Ty>),
    Ref(Box<Ty>),
    /// The type of something already reported as wrong; fits everything, silently.
    Error,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordTy {
    pub fields: Vec<FieldTy>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FieldTy {
    pub name: String,
    pub ty: Ty,
    pub doc: Option<String>,
}

impl RecordTy {
    pub fn field(&self, name: &str) -> Option<&FieldTy> {
        self.fields.iter().find(|f| f.name == name)
    }
}

impl Ty {
    pub fn optional(self) -> Ty {
        match self {
            Ty::Optional(_) | Ty::Error | Ty::Null => self,
            other => Ty::Optional(Box::new(other)),
        }
    }

    pub fn list(self) -> Ty {
        Ty::List(Box::new(self))
    }

    pub fn is_optional(&self) -> bool {
        matches!(self, Ty::Optional(_) | Ty::Null)
    }

    /// `T` for `T?`, else itself.
    pub fn strip_optional(&self) -> &Ty {
        match self {
            Ty::Optional(inner) => inner,
            other => other,
        }
    }
}

/// A named type: a record, an alias, or an enum.
#[derive(Clone, Debug)]
pub enum TypeBody {
    Record(Arc<RecordTy>),
    Alias(Ty),
    Enum(Arc<Vec<String>>, Vec<Option<String>>),
}

/// What the type checker needs to know about named types.
pub trait TypeEnv {
    fn type_name(&self, id: TypeId) -> &str;
    fn type_body(&self, id: TypeId) -> &TypeBody;
}

/// Why a value does not fit: the first difference, with the path to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// `.emails[].subject`, or empty at the top.
    pub path: String,
    pub expected: String,
    pub found: String,
    /// The difference is only that the value may be missing (`T?` into `T`).
    pub optional_only: bool,
}

impl Mismatch {
    pub fn describe(&self) -> String {
        if self.path.is_empty() {
            format!("expected {}, found {}", self.expected, self.found)
        } else {
            format!(
                "field `{}`: expected {}, found {}",
                self.path.trim_start_matches('.'),
                self.expected,
                self.found
            )
        }
    }
}

/// Expands aliases (not records) so that structure can be compared.
pub fn resolve<'a>(env: &'a dyn TypeEnv, ty: &'a Ty) -> &'a Ty {
    let mut cur = ty;
    for _ in 0..64 {
        match cur {
            Ty::Named(id) => match env.type_body(*id) {
                TypeBody::Alias(inner) => cur = inner,
                _ => return cur,
            },
            _ => return cur,
        }
    }
    &Ty::Error
}

/// The record behind a type, if it is one (through aliases and names).
pub fn as_record<'a>(env: &'a dyn TypeEnv, ty: &'a Ty) -> Option<&'a Arc<RecordTy>> {
    match resolve(env, ty) {
        Ty::Named(id) => match env.type_body(*id) {
            TypeBody::Record(r) => Some(r),
            _ => None,
        },
        Ty::Record(r) => Some(r),
        _ => None,
    }
}

/// The literal set behind a type (enum or literal union), if it is one.
pub fn as_literals<'a>(env: &'a dyn TypeEnv, ty: &'a Ty) -> Option<&'a Arc<Vec<String>>> {
    match resolve(env, ty) {
        Ty::Named(id) => match env.type_body(*id) {
            TypeBody::Enum(v, _) => Some(v),
            _ => None,
        },
        Ty::Literals(v) => Some(v),
        _ => None,
    }
}

pub fn fits(env: &dyn TypeEnv, src: &Ty, dst: &Ty) -> Result<(), Mismatch> {
    let mut seen = HashSet::new();
    fits_at(env, src, dst, &mut String::new(), &mut seen, 0)
}

fn mismatch(env: &dyn TypeEnv, path: &str, src: &Ty, dst: &Ty) -> Mismatch {
    Mismatch {
        path: path.to_string(),
        expected: display(env, dst),
        found: display(env, src),
        optional_only: false,
    }
}

fn fits_at(
    env: &dyn TypeEnv,
    src: &Ty,
    dst: &Ty,
    path: &mut String,
    seen: &mut HashSet<(TypeId, TypeId)>,
    depth: usize,
) -> Result<(), Mismatch> {
    if depth > 48 {
        return Ok(());
    }
    if let (Ty::Named(a), Ty::Named(b)) = (src, dst)
        && (a == b || !seen.insert((*a, *b)))
    {
        return Ok(());
    }
    let s = resolve(env, src);
    let d = resolve(env, dst);
    match (s, d) {
        (Ty::Error, _) | (_, Ty::Error) | (_, Ty::Json) => Ok(()),
        // Unknown structure flows anywhere; values are validated when they arrive.
        (Ty::Json, _) => Ok(()),
        (Ty::Null, Ty::Optional(_)) => Ok(()),
        (Ty::Optional(a), Ty::Optional(b)) => fits_at(env, a, b, path, seen, depth + 1),
        (Ty::Optional(_) | Ty::Null, other) => {
            let inner_ok = match s {
                Ty::Optional(a) => fits_at(env, a, other, path, seen, depth + 1).is_ok(),
                _ => false,
            };
            let mut m = mismatch(env, path, src, dst);
            m.optional_only = inner_ok;
            Err(m)
        }
        (other, Ty::Optional(b)) => fits_at(env, other, b, path, seen, depth + 1),
        (Ty::Ref(a), Ty::Ref(b)) => fits_at(env, a, b, path, seen, depth + 1),
        // A reference is fetched where a value is wanted.
        (Ty::Ref(a), other) => fits_at(env, a, other, path, seen, depth + 1),
        (Ty::String, Ty::String)
        | (Ty::Int, Ty::Int)
        | (Ty::Int, Ty::Float)
        | (Ty::Float, Ty::Float)
        | (Ty::Bool, Ty::Bool)
        | (Ty::Bytes, Ty::Bytes)
        | (Ty::Duration, Ty::Duration) => Ok(()),
        (Ty::List(a), Ty::List(b)) => {
            let len = path.len();
            path.push_str("[]");
            let r = fits_at(env, a, b, path, seen, depth + 1);
            path.truncate(len);
            r
        }
        (Ty::Map(a), Ty::Map(b)) => fits_at(env, a, b, path, seen, depth + 1),
        _ => {
            // Named records, enums and literal sets need their bodies.
            let sl = as_literals(env, s);
            let dl = as_literals(env, d);
            match (sl, dl, d) {
                (Some(_), None, Ty::String) => return Ok(()),
                (Some(a), Some(b), _) => {
                    return match a.iter().find(|x| !b.contains(x)) {
                        None => Ok(()),
                        Some(extra) => Err(Mismatch {
                            path: path.clone(),
                            expected: display(env, dst),
                            found: format!("{} (which allows \"{extra}\")", display(env, src)),
                            optional_only: false,
                        }),
                    };
                }
                _ => {}
            }
            let sr = as_record(env, s);
            let dr = as_record(env, d);
            match (sr, dr) {
                (Some(a), Some(b)) => {
                    for field in &b.fields {
                        let len = path.len();
                        path.push('.');
                        path.push_str(&field.name);
                        let r = match a.field(&field.name) {
                            Some(have) => fits_at(env, &have.ty, &field.ty, path, seen, depth + 1),
                            None if field.ty.is_optional() => Ok(()),
                            None => Err(Mismatch {
                                path: path.clone(),
                                expected: display(env, &field.ty),
                                found: "nothing (the field is missing)".into(),
                                optional_only: false,
                            }),
                        };
                        path.truncate(len);
                        r?;
                    }
                    Ok(())
                }
                (Some(a), None) => match d {
                    Ty::Map(v) => {
                        for field in &a.fields {
                            let len = path.len();
                            path.push('.');
                            path.push_str(&field.name);
                            let r = fits_at(env, &field.ty, v, path, seen, depth + 1);
                            path.truncate(len);
                            r?;
                        }
                        Ok(())
                    }
                    _ => Err(mismatch(env, path, src, dst)),
                },
                _ => Err(mismatch(env, path, src, dst)),
            }
        }
    }
}

/// How a type is written in `.pipe` source.
pub fn display(env: &dyn TypeEnv, ty: &Ty) -> String {
    let mut s = String::new();
    write_ty(env, ty, &mut s, 0);
    s
}

fn write_ty(env: &dyn TypeEnv, ty: &Ty, out: &mut String, depth: usize) {
    if depth > 6 {
        out.push_str("...");
        return;
    }
    match ty {
        Ty::String => out.push_str("string"),
        Ty::Int => out.push_str("int"),
        Ty::Float => out.push_str("float"),
        Ty::Bool => out.push_str("bool"),
        Ty::Bytes => out.push_str("bytes"),
        Ty::Json => out.push_str("json"),
        Ty::Duration => out.push_str("duration"),
        Ty::Null => out.push_str("null"),
        Ty::Error => out.push_str("{unknown}"),
        Ty::Named(id) => out.push_str(env.type_name(*id)),
        Ty::Record(r) => {
            out.push_str("{ ");
            for (i, f) in r.fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{}: ", f.name);
                write_ty(env, &f.ty, out, depth + 1);
            }
            out.push_str(" }");
        }
        Ty::List(inner) => {
            let wrap = matches!(**inner, Ty::Optional(_) | Ty::Literals(_));
            if wrap {
                out.push('(');
            }
            write_ty(env, inner, out, depth + 1);
            if wrap {
                out.push(')');
            }
            out.push_str("[]");
        }
        Ty::Optional(inner) => {
            let wrap = matches!(**inner, Ty::Literals(_));
            if wrap {
                out.push('(');
            }
            write_ty(env, inner, out, depth + 1);
            if wrap {
                out.push(')');
            }
            out.push('?');
        }
        Ty::Literals(values) => {
            for (i, v) in values.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                let _ = write!(out, "{v:?}");
            }
        }
        Ty::Map(inner) => {
            out.push_str("map<");
            write_ty(env, inner, out, depth + 1);
            out.push('>');
        }
        Ty::Ref(inner) => {
            out.push_str("ref<");
            write_ty(env, inner, out, depth + 1);
            out.push('>');
        }
    }
}

/// Whether a parameter of this type keeps references rather than content: `ref<T>`, or a
/// list of them (`ref<T>[]`, what `resources(ref: ...)` keeps), optional or not.
pub fn keeps_refs(env: &dyn TypeEnv, ty: &Ty) -> bool {
    match resolve(env, ty.strip_optional()) {
        Ty::Ref(_) => true,
        Ty::List(inner) => matches!(resolve(env, inner.strip_optional()), Ty::Ref(_)),
        _ => false,
    }
}

/// Whether a type is a scalar that can be written into a URI template.
pub fn is_uri_scalar(env: &dyn TypeEnv, ty: &Ty) -> bool {
    match resolve(env, ty.strip_optional()) {
        Ty::String | Ty::Int | Ty::Float | Ty::Bool | Ty::Json | Ty::Error | Ty::Literals(_) => {
            true
        }
        Ty::List(inner) => is_uri_scalar(env, inner),
        other => as_literals(env, other).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Env(Vec<(String, TypeBody)>);
    impl TypeEnv for Env {
        fn type_name(&self, id: TypeId) -> &str {
            &self.0[id as usize].0
        }
        fn type_body(&self, id: TypeId) -> &TypeBody {
            &self.0[id as usize].1
        }
    }

    fn rec(fields: &[(&str, Ty)]) -> Ty {
        Ty::Record(Arc::new(RecordTy {
            fields: fields
                .iter()
                .map(|(n, t)| FieldTy {
                    name: n.to_string(),
                    ty: t.clone(),
                    doc: None,
                })
                .collect(),
        }))
    }

    #[test]
    fn structural_records_allow_extra_fields() {
        let env = Env(vec![]);
        let big = rec(&[("a", Ty::Int), ("b", Ty::String)]);
        let small = rec(&[("a", Ty::Float)]);
        assert!(fits(&env, &big, &small).is_ok());
        let m = fits(&env, &small, &big).expect_err("a narrower record does not fit");
        assert_eq!(m.path, ".a");
    }

    #[test]
    fn optional_into_required_is_flagged() {
        let env = Env(vec![]);
        let m = fits(&env, &Ty::Int.optional(), &Ty::Int).expect_err("optional into required");
        assert!(m.optional_only);
        assert!(fits(&env, &Ty::Int, &Ty::Int.optional()).is_ok());
        assert!(fits(&env, &Ty::Null, &Ty::Int.optional()).is_ok());
    }

    #[test]
    fn literal_sets_are_subsets() {
        let env = Env(vec![]);
        let ab = Ty::Literals(Arc::new(vec!["a".into(), "b".into()]));
        let abc = Ty::Literals(Arc::new(vec!["a".into(), "b".into(), "c".into()]));
        assert!(fits(&env, &ab, &abc).is_ok());
        assert!(fits(&env, &abc, &ab).is_err());
        assert!(fits(&env, &ab, &Ty::String).is_ok());
        assert!(fits(&env, &Ty::String, &ab).is_err());
    }

    #[test]
    fn recursive_types_terminate() {
        let env = Env(vec![(
            "Tree".into(),
            TypeBody::Record(Arc::new(RecordTy {
                fields: vec![FieldTy {
                    name: "children".into(),
                    ty: Ty::Named(0).list(),
                    doc: None,
                }],
            })),
        )]);
        assert!(fits(&env, &Ty::Named(0), &Ty::Named(0)).is_ok());
        let other = rec(&[("children", Ty::Named(0).list())]);
        assert!(fits(&env, &other, &Ty::Named(0)).is_ok());
    }
}
