//! Whether a value of one type can be sent where a schema takes another, by the kinds of
//! JSON value each allows (`string`, `integer`, `object`, ...): what `check --online` and
//! the start of a run hold a declared tool parameter against the server's listing, and
//! what a host function's types are held to when it is registered.
//! Both sides are read with [`crate::read`], the model `tools pull` writes types from.

use std::collections::BTreeSet;

use pipec_base::identifiers::Taken;
use serde_json::Value;

use crate::read::{Direction, PipeType, Shape, Types};

/// The kinds of JSON value a type allows, by their JSON Schema names; `None` when it
/// allows any value.
pub fn kinds(ty: &PipeType) -> Option<BTreeSet<&'static str>> {
    let one = |kind| BTreeSet::from([kind]);
    let mut out = match &ty.shape {
        Shape::String | Shape::Bytes | Shape::Literals(_) => one("string"),
        Shape::Int => one("integer"),
        Shape::Float => one("number"),
        Shape::Bool => one("boolean"),
        Shape::Record(_) | Shape::Map(_) => one("object"),
        Shape::List(_) => one("array"),
        Shape::Json => return None,
        Shape::Either(branches) => {
            let mut all = BTreeSet::new();
            for branch in branches {
                all.extend(kinds(branch)?);
            }
            all
        }
    };
    if ty.optional {
        out.insert("null");
    }
    Some(out)
}

/// The type of a schema a value is sent to, its `$ref`s pointing into `root`: records
/// are read for their kind, and named nowhere.
pub fn sent_type(schema: &Value, root: &Value) -> PipeType {
    let mut taken = Taken::default();
    Types::new(&mut taken).type_of(schema, root, "Sent", Direction::Input)
}

/// Whether every value of kinds `declared` is one of kinds `offered` (`null` aside,
/// which an optional parameter leaves out; an `integer` is a `number`). A side that
/// allows any value fits.
pub fn fits(
    declared: Option<&BTreeSet<&'static str>>,
    offered: Option<&BTreeSet<&'static str>>,
) -> bool {
    let (Some(declared), Some(offered)) = (declared, offered) else {
        return true;
    };
    declared.iter().all(|d| {
        *d == "null" || offered.contains(d) || (*d == "integer" && offered.contains("number"))
    })
}

/// Whether some value is of kinds `a` and of kinds `b` alike (an `integer` and a
/// `number` meet): what a host function and the node that calls it must share.
pub fn overlap(a: &BTreeSet<&'static str>, b: &BTreeSet<&'static str>) -> bool {
    let numeric = |k: &str| k == "integer" || k == "number";
    a.iter()
        .any(|k| b.contains(k) || (numeric(k) && b.iter().any(|other| numeric(other))))
}

/// Kinds in words: `integer or null`.
pub fn kind_names(kinds: &BTreeSet<&'static str>) -> String {
    kinds.iter().copied().collect::<Vec<_>>().join(" or ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kinds_of(schema: Value) -> Option<BTreeSet<&'static str>> {
        kinds(&sent_type(&schema, &schema))
    }

    fn set(names: &[&'static str]) -> Option<BTreeSet<&'static str>> {
        Some(names.iter().copied().collect())
    }

    #[test]
    fn kinds_as_the_reader_sees_them() {
        assert_eq!(kinds_of(json!({"type": "string"})), set(&["string"]));
        assert_eq!(
            kinds_of(json!({"type": ["integer", "null"]})),
            set(&["integer", "null"])
        );
        assert_eq!(
            kinds_of(json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})),
            set(&["integer", "null", "string"])
        );
        assert_eq!(
            kinds_of(json!({"type": ["string", "object"]})),
            set(&["object", "string"])
        );
        assert_eq!(kinds_of(json!({"enum": ["a", "b"]})), set(&["string"]));
        assert_eq!(
            kinds_of(json!({"properties": {"a": {"type": "string"}}})),
            set(&["object"])
        );
        assert_eq!(kinds_of(json!({"anyOf": [{"type": "string"}, {}]})), None);
        assert_eq!(kinds_of(json!({})), None);
        let root = json!({"$defs": {"Id": {"type": "integer"}}});
        assert_eq!(
            kinds(&sent_type(&json!({"$ref": "#/$defs/Id"}), &root)),
            set(&["integer"])
        );
    }

    #[test]
    fn an_integer_fits_a_number_and_null_fits_anything() {
        let fit = |d: &[&'static str], o: &[&'static str]| fits(set(d).as_ref(), set(o).as_ref());
        assert!(fit(&["integer"], &["number"]));
        assert!(!fit(&["number"], &["integer"]));
        assert!(fit(&["string", "null"], &["string"]));
        assert!(!fit(&["string"], &["integer"]));
        assert!(fits(None, set(&["integer"]).as_ref()));
        assert!(fits(set(&["string"]).as_ref(), None));
        let meet = |a: &[&'static str], b: &[&'static str]| {
            overlap(&a.iter().copied().collect(), &b.iter().copied().collect())
        };
        assert!(meet(&["number"], &["integer", "null"]));
        assert!(meet(&["string", "null"], &["integer", "null"]));
        assert!(!meet(&["string"], &["object"]));
    }
}
