//! Resource references as the store keeps them: a `resource_link` lifted out of a tool
//! result (with the call that produced it, so a dead one can be re-derived), where it
//! sits in its producer's manifest, and the heals that replaced a dead one. A link holds
//! no bytes: it is a URI and what is needed to find or rebuild it. The content a result
//! carried in place (an embedded resource, an image, an audio clip) is kept with its
//! entry, since no server can give it again; the tool's `max_result_bytes` bounds it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The field that marks a JSON value as a reference (a `ref<T>` value), so a node that
/// declares the content type for it knows to fetch it.
pub const REF_MARKER: &str = "pipec_ref";

/// A reference to a resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceRef {
    pub uri: String,
    /// The server it is read from: the one that produced it, or the one its URI routes to.
    pub server: String,
    /// The link kind whose template matched (or whose name the link gave).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The variables the kind's template captured from the URI (for `where:`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub captures: BTreeMap<String, String>,
    /// The link's `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// The size the server announced (a hint: it is checked again while reading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The tool call whose result carried the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producing_call: Option<ProducingCall>,
    /// Where the link sits in its producer's manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<RefOrigin>,
    /// When the link was produced.
    #[serde(default)]
    pub produced_ms: u64,
    /// The `max_bytes` of the binding that kept this reference (`ref<T>`): the node that
    /// declares its content type downstream reads it within that cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// What the result carried in place of a link: an embedded resource's content (read
    /// from here, without a round trip to the server), or an image or audio block, which
    /// has no URI and is kept, never bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedded: Option<Embedded>,
}

/// Content a tool result carried in place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Embedded {
    /// The block's type: `resource`, `image` or `audio`.
    pub block: String,
    /// The content as text, when the server sent it as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The content as bytes, in base64, when the server sent it as a blob or as media.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// The tool call that returned a link: replayed, with the same arguments, to re-derive it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProducingCall {
    /// The tool as the plan names it.
    pub tool: String,
    /// The arguments as sent, secrets as placeholders.
    pub args: Value,
    pub read_only: bool,
    pub idempotent: bool,
    /// The journal key of the call (`node:gG:iI:sS:cC`).
    pub call: String,
}

/// A link's place: the node (generation, item) whose manifest holds it, and its index
/// there, in call order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RefOrigin {
    pub node: String,
    pub generation: u32,
    pub item: u32,
    pub index: u32,
}

/// The latest heal of a reference: the replay that produced a new link of the same kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HealRec {
    /// How many times the reference was healed.
    pub number: u32,
    /// The URI that failed.
    pub from_uri: String,
    /// The reference that replaced it.
    pub to: ResourceRef,
    /// The journal key of the replay.
    pub replay_call: String,
    /// The node whose read failed and healed it.
    pub by_node: String,
    /// Why the reference was taken for dead (what the failed read answered).
    pub cause: String,
    pub at_ms: u64,
}

impl ResourceRef {
    /// The reference as a value that flows to other nodes (`ref<T>`).
    pub fn to_value(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(o) = &mut v {
            o.insert(REF_MARKER.into(), Value::from(1));
        }
        v
    }

    /// The reference a value holds, if it is one.
    pub fn from_value(v: &Value) -> Option<ResourceRef> {
        let o = v.as_object()?;
        o.get(REF_MARKER)?;
        let mut o = o.clone();
        o.remove(REF_MARKER);
        serde_json::from_value(Value::Object(o)).ok()
    }

    /// Whether a value is a reference.
    pub fn is_ref(v: &Value) -> bool {
        v.as_object().is_some_and(|o| o.contains_key(REF_MARKER))
    }

    /// What a model sees of it.
    pub fn for_model(&self) -> Value {
        serde_json::json!({
            "uri": self.uri,
            "name": self.name,
            "kind": self.kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_survives_the_trip_through_a_value_and_plain_values_are_not_references() {
        let r = ResourceRef {
            uri: "mcp://crm/deals/D1/activity".into(),
            server: "crm".into(),
            kind: Some("activity-history".into()),
            captures: [("deal_id".to_string(), "D1".to_string())].into(),
            name: "D1-activity".into(),
            mime: Some("application/json".into()),
            size: Some(10),
            producing_call: None,
            origin: Some(RefOrigin {
                node: "research".into(),
                generation: 0,
                item: 0,
                index: 1,
            }),
            produced_ms: 5,
            max_bytes: Some(20_000),
            embedded: Some(Embedded {
                block: "resource".into(),
                text: Some("{}".into()),
                blob: None,
            }),
        };
        let v = r.to_value();
        assert!(ResourceRef::is_ref(&v));
        assert_eq!(ResourceRef::from_value(&v), Some(r));
        let plain = serde_json::json!({ "uri": "mcp://x/y" });
        assert!(!ResourceRef::is_ref(&plain));
        assert_eq!(ResourceRef::from_value(&plain), None);
    }
}
