//! Types as JSON Schema (2020-12), built with `pipec-schema`'s constructors. Named types
//! become `$defs` entries referred to by `$ref`; doc comments become `description`s,
//! which reach models in structured-output requests. Records are open here (extra fields
//! are allowed when reading); the runtime closes them where model output is validated.

use pipec_schema::build;
use serde_json::{Value, json};

use crate::hir::Hir;
use crate::ty::{Ty, TypeBody};

pub(crate) fn type_schema(hir: &Hir, ty: &Ty) -> Value {
    match ty {
        Ty::String => build::kind("string"),
        Ty::Int => build::kind("integer"),
        Ty::Float => build::kind("number"),
        Ty::Bool => build::kind("boolean"),
        Ty::Bytes => build::bytes(),
        Ty::Json | Ty::Error => build::any(),
        Ty::Duration => build::described(build::kind("integer"), "a duration in milliseconds"),
        Ty::Null => build::kind("null"),
        Ty::Named(id) => build::reference(&def_name(hir, *id)),
        Ty::Record(r) => record_schema(hir, &r.fields),
        Ty::List(inner) => build::list(type_schema(hir, inner)),
        Ty::Optional(inner) => build::nullable(type_schema(hir, inner)),
        Ty::Literals(values) => build::literals(values),
        Ty::Map(inner) => build::map(type_schema(hir, inner)),
        // A `ref<T>` is sent as its URI; the type of what it refers to rides along in
        // pipec's own keyword.
        Ty::Ref(inner) => json!({
            "type": "object",
            "description": "a reference to a resource, not its content",
            "properties": { "uri": build::kind("string") },
            "required": ["uri"],
            "x-pipec-ref": type_schema(hir, inner)
        }),
    }
}

fn record_schema(hir: &Hir, fields: &[crate::ty::FieldTy]) -> Value {
    let properties = fields.iter().map(|f| {
        let schema = type_schema(hir, &f.ty);
        let schema = match &f.doc {
            Some(doc) => build::described(schema, doc),
            None => schema,
        };
        (f.name.clone(), schema)
    });
    let required = fields
        .iter()
        .filter(|f| !f.ty.is_optional())
        .map(|f| f.name.clone());
    build::record(properties, required)
}

/// The `$defs` key of a named type.
pub(crate) fn def_name(hir: &Hir, id: u32) -> String {
    hir.types
        .get(id as usize)
        .map_or_else(|| "unknown".into(), |t| t.key.clone())
}

/// The schema of a named type's definition.
pub(crate) fn def_schema(hir: &Hir, id: u32) -> Value {
    let Some(def) = hir.types.get(id as usize) else {
        return build::any();
    };
    let mut s = match &def.body {
        TypeBody::Record(r) => record_schema(hir, &r.fields),
        TypeBody::Alias(t) => type_schema(hir, t),
        TypeBody::Enum(values, docs) => {
            if docs.iter().any(Option::is_some) {
                build::described_literals(values, docs)
            } else {
                build::literals(values)
            }
        }
    };
    // A definition's doc sits beside whatever it is, a `$ref` too.
    if let (Some(doc), Some(obj)) = (&def.info.doc, s.as_object_mut()) {
        obj.insert("description".into(), Value::String(doc.clone()));
    }
    s
}
