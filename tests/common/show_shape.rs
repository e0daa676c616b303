//! The `pipec show --json` format and the rows of `pipec runs --json`, declared a second
//! time (docs/show-json.md describes them). Every `show --json` a test reads through [`parse_show`] must fit it, so a field
//! added, removed or renamed in `pipec::runtime::show` without updating this and the
//! document fails the tests that read one: a run paused at a gate and answered, a failed
//! run, a link healed (tests/mcp_scenario.rs). The records of `--internal` and `--events`
//! are the store's own and are declared only by their place here.

#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The version these declarations describe.
pub const SHOW_FORMAT_VERSION: u32 = 1;

/// `show --json` text as its declared shape; panics, naming the field, when it does not fit.
pub fn parse_show(text: &str) -> ShowShape {
    let shape: ShowShape = match serde_json::from_str(text) {
        Ok(shape) => shape,
        Err(e) => panic!(
            "`pipec show --json` no longer fits tests/common/show_shape.rs and docs/show-json.md: {e}\n{text}"
        ),
    };
    assert_eq!(shape.format_version, SHOW_FORMAT_VERSION, "{text}");
    shape
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowShape {
    pub format_version: u32,
    pub thread: String,
    pub pipeline: String,
    pub status: String,
    pub source: String,
    pub plan_hash: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub inputs: Value,
    pub config: BTreeMap<String, String>,
    pub model_overrides: BTreeMap<String, String>,
    pub outputs: Option<Value>,
    pub error: Option<ErrorShape>,
    pub holder: Option<HolderShape>,
    pub attempts: u32,
    pub nodes: Vec<NodeShape>,
    pub gates: Vec<GateShape>,
    pub resources: Vec<ReadsShape>,
    pub heals: Vec<HealShape>,
    pub usage: UsageShape,
    pub usage_by_attempt: Vec<AttemptUsageShape>,
    #[serde(default)]
    pub manifests: Option<Vec<ManifestShape>>,
    #[serde(default)]
    pub calls: Option<Vec<CallShape>>,
    #[serde(default)]
    pub items: Option<Vec<ItemShape>>,
    #[serde(default)]
    pub attempt_log: Option<Vec<Value>>,
    #[serde(default)]
    pub events: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorShape {
    pub code: String,
    pub name: String,
    pub message: String,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub help: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HolderShape {
    pub run_id: String,
    pub pid: u32,
    pub host: String,
    pub since_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeShape {
    pub node: String,
    /// `running`, `done`, `skipped` or `failed`.
    pub state: String,
    pub generation: u32,
    pub tries: u32,
    pub crash_count: u32,
    pub ms: u64,
    pub items: Option<u32>,
    pub value: Option<Value>,
    pub error: Option<ErrorShape>,
    /// A node that called a model (left out otherwise).
    #[serde(default)]
    pub usage: Option<UsageShape>,
}

/// Model calls summed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageShape {
    pub model_calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_cached: u64,
    pub model_ms: u64,
    pub cost_usd: f64,
    pub unpriced_calls: u64,
}

/// One attempt's model calls: its number and the sums.
#[derive(Debug, Deserialize)]
pub struct AttemptUsageShape {
    pub attempt: u32,
    #[serde(flatten)]
    pub usage: UsageShape,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateShape {
    pub gate: String,
    /// `pending` or `answered`.
    pub state: String,
    pub message: String,
    pub schema: Value,
    pub deadline_ms: Option<u64>,
    pub answer: Option<Value>,
    pub answered_by: Option<String>,
    /// A client model's turn: `sampling/createMessage` params (left out otherwise).
    #[serde(default)]
    pub request: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadsShape {
    pub server: String,
    pub uri: String,
    pub fetches: u64,
    pub cache_hits: u64,
    pub bytes: u64,
    pub by: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealShape {
    pub producer: String,
    pub generation: u32,
    pub item: u32,
    pub index: u32,
    pub record: HealRecordShape,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealRecordShape {
    pub number: u32,
    pub from_uri: String,
    pub to: LinkShape,
    pub replay_call: String,
    pub by_node: String,
    pub cause: String,
    pub at_ms: u64,
}

/// A link, as a heal's `to` and a manifest's `link`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkShape {
    pub uri: String,
    pub server: String,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub captures: BTreeMap<String, String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub mime: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub producing_call: Option<ProducingCallShape>,
    #[serde(default)]
    pub origin: Option<OriginShape>,
    #[serde(default)]
    pub produced_ms: u64,
    #[serde(default)]
    pub max_bytes: Option<u64>,
    #[serde(default)]
    pub embedded: Option<EmbeddedShape>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProducingCallShape {
    pub tool: String,
    pub args: Value,
    pub read_only: bool,
    pub idempotent: bool,
    pub call: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginShape {
    pub node: String,
    pub generation: u32,
    pub item: u32,
    pub index: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedShape {
    pub block: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub blob: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestShape {
    pub node: String,
    pub item: Option<u32>,
    pub link: LinkShape,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallShape {
    pub call: String,
    pub generation: u32,
    /// The journal row as stored.
    pub record: Value,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ItemShape {
    pub node: String,
    pub generation: u32,
    pub item: u32,
    /// The item row as stored.
    pub record: Value,
}

/// `pipec runs --json` text as its declared rows; panics, naming the field, when it does
/// not fit.
pub fn parse_runs(text: &str) -> Vec<RunShape> {
    match serde_json::from_str(text) {
        Ok(rows) => rows,
        Err(e) => panic!(
            "`pipec runs --json` no longer fits tests/common/show_shape.rs and docs/show-json.md: {e}\n{text}"
        ),
    }
}

/// A row of `pipec runs --json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunShape {
    pub id: String,
    pub pipeline: String,
    pub status: String,
    pub stale: bool,
    #[serde(default)]
    pub holder: Option<HolderShape>,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// The thread's model calls.
    pub usage: UsageShape,
}
