//! Values as an attempt holds them, and the outputs it hands over.
//!
//! A node's value is a JSON tree, except the list of an `each` node whose items ran as
//! tasks: that list is held as its items' JSON text, one compact text an item. A
//! `serde_json` object is a B-tree node of eleven slots however few fields it has, so a
//! fan-out of 20,000 three-field records held as trees takes ~16 MB, and as text ~1.6 MB.
//! The list becomes a tree only when something reads into it (a downstream node, an
//! output made of more than the node); an output that is the node whole keeps the text,
//! and is written out from it an item at a time ([`Outputs`]'s `Serialize`).

use std::collections::BTreeMap;

use serde::ser::{Error as _, Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use crate::secrets::Scrubber;

/// A finished node's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeValue {
    Tree(Value),
    /// A list, each element kept as its compact JSON text (written by `serde_json` from
    /// a value, so it reads back as that value).
    List(Box<[Box<str>]>),
}

impl NodeValue {
    /// The value as a tree (a list's elements parsed).
    pub(crate) fn to_value(&self) -> Value {
        match self {
            NodeValue::Tree(v) => v.clone(),
            NodeValue::List(items) => Value::Array(items.iter().map(|t| parsed(t)).collect()),
        }
    }

    pub(crate) fn into_value(self) -> Value {
        match self {
            NodeValue::Tree(v) => v,
            list => list.to_value(),
        }
    }

    fn scrub(&mut self, scrubber: &Scrubber) {
        match self {
            NodeValue::Tree(v) => scrubber.scrub_value(v),
            NodeValue::List(items) if !scrubber.is_empty() => {
                for text in items.iter_mut() {
                    let mut v = parsed(text);
                    scrubber.scrub_value(&mut v);
                    *text = text_of(&v);
                }
            }
            NodeValue::List(_) => {}
        }
    }
}

impl From<Value> for NodeValue {
    fn from(v: Value) -> NodeValue {
        NodeValue::Tree(v)
    }
}

impl Serialize for NodeValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            NodeValue::Tree(v) => v.serialize(s),
            // One element's tree at a time: the list is never whole as a tree.
            NodeValue::List(items) => s.collect_seq(items.iter().map(|t| Element(t))),
        }
    }
}

/// One element of a held list, parsed when it is written.
struct Element<'a>(&'a str);

impl Serialize for Element<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v: Value = serde_json::from_str(self.0).map_err(S::Error::custom)?;
        v.serialize(s)
    }
}

/// The compact JSON text of a value.
pub(crate) fn text_of(v: &Value) -> Box<str> {
    // A `Value` always serializes (its map keys are strings).
    serde_json::to_string(v)
        .unwrap_or_default()
        .into_boxed_str()
}

/// A held element's value. The text was written by `serde_json` from a value; were it
/// ever not JSON, the element reads as null rather than stopping the run.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// A completed run's outputs, by name. Written out (`Serialize`) they are the JSON
/// object of the outputs; an output that is an `each` node's list whole is written from
/// its items' text without becoming a tree. [`Outputs::to_value`] is the object as a
/// tree.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    by_name: BTreeMap<String, NodeValue>,
}

impl Outputs {
    pub(crate) fn insert(&mut self, name: String, value: NodeValue) {
        self.by_name.insert(name, value);
    }

    /// The outputs as a JSON object.
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.by_name
                .iter()
                .map(|(k, v)| (k.clone(), v.to_value()))
                .collect(),
        )
    }

    pub fn into_value(self) -> Value {
        Value::Object(
            self.by_name
                .into_iter()
                .map(|(k, v)| (k, v.into_value()))
                .collect(),
        )
    }

    /// The output `name`'s value.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.by_name.get(name).map(NodeValue::to_value)
    }

    /// Replaces every secret the scrubber knows in the outputs' strings.
    pub(crate) fn scrub(&mut self, scrubber: &Scrubber) {
        for v in self.by_name.values_mut() {
            v.scrub(scrubber);
        }
    }
}

/// Outputs as a JSON object holds them (a stored thread's, or computed from its rows);
/// anything but an object has no outputs.
impl From<Value> for Outputs {
    fn from(v: Value) -> Outputs {
        match v {
            Value::Object(map) => Outputs::from(map),
            _ => Outputs::default(),
        }
    }
}

impl From<Map<String, Value>> for Outputs {
    fn from(map: Map<String, Value>) -> Outputs {
        Outputs {
            by_name: map
                .into_iter()
                .map(|(k, v)| (k, NodeValue::Tree(v)))
                .collect(),
        }
    }
}

impl PartialEq for Outputs {
    fn eq(&self, other: &Outputs) -> bool {
        self.to_value() == other.to_value()
    }
}

/// The outputs' JSON object, compact (`{:#}`: pretty), as `serde_json::Value` shows.
impl std::fmt::Display for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = if f.alternate() {
            serde_json::to_string_pretty(self)
        } else {
            serde_json::to_string(self)
        };
        f.write_str(&text.map_err(|_| std::fmt::Error)?)
    }
}

/// Equal to the JSON object of the same outputs.
impl PartialEq<Value> for Outputs {
    fn eq(&self, other: &Value) -> bool {
        self.to_value() == *other
    }
}

impl Serialize for Outputs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.by_name.len()))?;
        for (k, v) in &self.by_name {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a panic is the assertion")]
mod tests {
    use super::*;
    use serde_json::json;

    fn list_of(values: Vec<Value>) -> NodeValue {
        NodeValue::List(values.iter().map(text_of).collect())
    }

    fn deals(n: usize) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"deal_id": format!("D{i}"), "name": "Ünïcode \"quoted\"", "amount": i * 1000, "ratio": 0.1 + i as f64}))
            .collect()
    }

    #[test]
    fn a_held_list_reads_and_writes_as_the_tree_it_was_made_from() {
        let values = deals(3);
        let held = list_of(values.clone());
        assert_eq!(held.to_value(), Value::Array(values.clone()));
        let mut outputs = Outputs::default();
        outputs.insert("deals".into(), held);
        outputs.insert("count".into(), NodeValue::Tree(json!(3)));
        let tree = json!({"deals": values, "count": 3});
        assert_eq!(outputs.to_value(), tree);
        assert_eq!(outputs.get("deals"), Some(tree["deals"].clone()));
        // Written out, compact and pretty, it is the tree's text byte for byte.
        assert_eq!(
            serde_json::to_string(&outputs).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(
            serde_json::to_string_pretty(&outputs).unwrap(),
            serde_json::to_string_pretty(&tree).unwrap()
        );
        assert_eq!(outputs.to_string(), tree.to_string());
        assert_eq!(format!("{outputs:#}"), format!("{tree:#}"));
        assert_eq!(outputs.clone().into_value(), tree);
        assert_eq!(Outputs::from(tree.clone()), outputs);
    }

    #[test]
    fn a_held_list_is_scrubbed_of_secrets_like_a_tree() {
        let mut scrubber = Scrubber::default();
        scrubber.add("TOKEN", "sk-live-0123456789abcdef");
        let values = vec![
            json!({"note": "key sk-live-0123456789abcdef here"}),
            json!("clean"),
        ];
        let mut outputs = Outputs::default();
        outputs.insert("items".into(), list_of(values));
        outputs.scrub(&scrubber);
        let text = serde_json::to_string(&outputs).unwrap();
        assert!(!text.contains("sk-live-0123456789abcdef"), "{text}");
        assert!(text.contains("TOKEN"), "{text}");
        assert_eq!(outputs.get("items").unwrap()[1], json!("clean"));
    }
}
