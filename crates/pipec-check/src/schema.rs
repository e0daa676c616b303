//! Types as JSON Schema (2020-12). Named types become `$defs` entries referred to by
//! `$ref`; doc comments become `description`s, which reach models in structured-output
//! requests. Records are open here (extra fields are allowed when reading); the runtime
//! closes them where model output is validated.

use serde_json::{Map, Value, json};

use crate::hir::Hir;
use crate::ty::{Ty, TypeBody};

pub fn type_schema(hir: &Hir, ty: &Ty) -> Value {
    match ty {
        Ty::String => json!({ "type": "string" }),
        Ty::Int => json!({ "type": "integer" }),
        Ty::Float => json!({ "type": "number" }),
        Ty::Bool => json!({ "type": "boolean" }),
        Ty::Bytes => json!({ "type": "string", "contentEncoding": "base64" }),
        Ty::Json | Ty::Error => json!({}),
        Ty::Duration => json!({ "type": "integer", "description": "a duration in milliseconds" }),
        Ty::Null => json!({ "type": "null" }),
        Ty::Named(id) => json!({ "$ref": format!("#/$defs/{}", def_name(hir, *id)) }),
        Ty::Record(r) => record_schema(hir, &r.fields),
        Ty::List(inner) => json!({ "type": "array", "items": type_schema(hir, inner) }),
        Ty::Optional(inner) => json!({ "anyOf": [type_schema(hir, inner), { "type": "null" }] }),
        Ty::Literals(values) => json!({ "type": "string", "enum": values.as_slice() }),
        Ty::Map(inner) => {
            json!({ "type": "object", "additionalProperties": type_schema(hir, inner) })
        }
        Ty::Ref(inner) => json!({
            "type": "object",
            "description": "a reference to a resource, not its content",
            "properties": { "uri": { "type": "string" } },
            "required": ["uri"],
            "x-pipec-ref": type_schema(hir, inner)
        }),
    }
}

fn record_schema(hir: &Hir, fields: &[crate::ty::FieldTy]) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for f in fields {
        let mut s = type_schema(hir, &f.ty);
        if let (Some(doc), Some(obj)) = (&f.doc, s.as_object_mut()) {
            if obj.contains_key("$ref") {
                // Siblings of `$ref` are allowed in 2020-12, but wrap for older readers.
                s = json!({ "allOf": [s], "description": doc });
            } else {
                obj.insert("description".into(), Value::String(doc.clone()));
            }
        }
        if !f.ty.is_optional() {
            required.push(Value::String(f.name.clone()));
        }
        props.insert(f.name.clone(), s);
    }
    json!({ "type": "object", "properties": props, "required": required })
}

/// The `$defs` key of a named type.
pub fn def_name(hir: &Hir, id: u32) -> String {
    hir.types
        .get(id as usize)
        .map_or_else(|| "unknown".into(), |t| t.key.clone())
}

/// The schema of a named type's definition.
pub fn def_schema(hir: &Hir, id: u32) -> Value {
    let Some(def) = hir.types.get(id as usize) else {
        return json!({});
    };
    let mut s = match &def.body {
        TypeBody::Record(r) => record_schema(hir, &r.fields),
        TypeBody::Alias(t) => type_schema(hir, t),
        TypeBody::Enum(values, docs) => {
            if docs.iter().any(Option::is_some) {
                let one_of: Vec<Value> = values
                    .iter()
                    .zip(docs)
                    .map(|(v, d)| match d {
                        Some(d) => json!({ "const": v, "description": d }),
                        None => json!({ "const": v }),
                    })
                    .collect();
                json!({ "type": "string", "oneOf": one_of })
            } else {
                json!({ "type": "string", "enum": values.as_slice() })
            }
        }
    };
    if let (Some(doc), Some(obj)) = (&def.info.doc, s.as_object_mut()) {
        obj.insert("description".into(), Value::String(doc.clone()));
    }
    s
}
