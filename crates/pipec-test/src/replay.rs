//! `pipec replay`: a stored thread run again into a new one under a plan (its own, or an
//! edited one), every call answered by what the thread recorded (`Runner::replaying`),
//! and the two compared node by node: which values differ, which nodes now run or are
//! skipped, and which nodes that call something changed in the pipeline, so that their
//! recorded results may no longer hold. The new thread lives in a store of its own, so
//! no `resume` or worker of the user's store ever runs it for real.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use pipec_mcp::{McpError, RequestOptions, ResourceContent, ToolInfo, ToolResult};
use pipec_plan::{Body, Plan};
use pipec_runtime::llm::{Model, ModelError, ModelFuture, ModelRequest};
use pipec_runtime::show::{NodeView, Stored};
use pipec_runtime::{Outcome, Recorded, RunOptions, Runner, ServerFuture, Servers};
use pipec_store::{Store, fingerprint_key};

/// What to replay, and under which plan.
pub struct Replay {
    /// The store that holds the recorded thread; it is only read.
    pub store: Arc<dyn Store>,
    /// The store the replay runs in (a throwaway one).
    pub into: Arc<dyn Store>,
    /// The thread to replay (its id or a unique prefix).
    pub thread: String,
    /// The plan to replay it under, with its project root and source.
    pub plan: Plan,
    pub root: PathBuf,
    pub source: String,
    /// Replay from this node: the nodes it does not reach keep their recorded values.
    pub from: Option<String>,
}

/// The replay and how it compares with the recorded thread.
#[derive(Debug, Serialize)]
pub struct ReplayReport {
    pub format_version: u32,
    /// The recorded thread.
    pub thread: String,
    /// The new thread the replay ran.
    pub replay: String,
    /// The store the replay ran in, as its runner names it (`pipec show REPLAY --store`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub store: String,
    pub status: String,
    /// Why the replay failed, when it did (`R0415` for a call it has no result for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every node of either plan, in the order of the plan replayed.
    pub nodes: Vec<NodeChange>,
    /// How many nodes differ (any change other than `same`).
    pub differ: usize,
}

/// One node, before and after.
#[derive(Debug, Serialize)]
pub struct NodeChange {
    pub node: String,
    /// `same`; `differs` (its value); `state` (it ran and now does not, or the other way);
    /// `changed` (it calls something and its definition changed: its recorded result was
    /// used, and may not be what it gives now); `inputs` (it calls something and a node
    /// it reads changed: the same); `added` or `removed` (in one plan only).
    pub change: String,
    /// Whether its value was computed by the replay (else taken from the record).
    pub computed: bool,
    pub was: Option<String>,
    pub now: Option<String>,
    /// A line diff of the two values (`-` recorded, `+` replayed) when they differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// Replays the thread and compares.
pub async fn replay(r: Replay) -> Result<ReplayReport, String> {
    let state = r
        .store
        .load(&r.thread)
        .await
        .map_err(|e| format!("cannot read the thread {}: {e}", r.thread))?;
    let Some(rec) = state.thread.clone() else {
        return Err(format!("there is no thread {}", r.thread));
    };
    let recorded = Recorded::of(&state, &r.plan, r.from.as_deref());
    // The recorded thread's answers, given again to the gates the plan still has.
    let answers: Vec<(String, Value)> = state
        .gates
        .iter()
        .filter(|(g, _)| r.plan.node(g).is_some())
        .filter_map(|(g, rec)| Some((g.clone(), rec.answer.clone()?)))
        .collect();
    let config = rec.config.clone();
    let secrets = pipec_runtime::secret_names(&r.plan);
    let mut runner = Runner::with_store(r.plan.clone(), r.into.clone())
        .project_root(&r.root)
        .source(&r.source)
        .replaying(recorded)
        // The thread's own configuration; a secret is never sent anywhere in a replay,
        // so a stand-in does for it.
        .environment(move |k| {
            config
                .get(k)
                .cloned()
                .or_else(|| secrets.contains(k).then(|| "replayed".to_string()))
        })
        .servers(Arc::new(NoCalls {
            plan: Arc::new(r.plan.clone()),
        }));
    for m in &r.plan.models {
        runner = runner.model(&m.name, NoCalls::model());
    }
    let opts = RunOptions {
        pre_answers: answers,
        ..Default::default()
    };
    let outcome = runner
        .start_with(rec.inputs.clone(), opts)
        .await
        .map_err(|e| format!("the replay was refused: {e}"))?;
    let new = outcome.thread().to_string();
    let before = Stored::load(&*r.store, &rec.id)
        .await
        .map_err(|e| e.to_string())?
        .view(false, None)
        .ok_or("the recorded thread has no record")?;
    let after = Stored::load(&*r.into, &new)
        .await
        .map_err(|e| e.to_string())?
        .view(false, None)
        .ok_or("the replay left no thread")?;
    let old_plan = pipec_runtime::stored_plan(&*r.store, &rec)
        .await
        .map_err(|e| e.to_string())?;
    let nodes = compare(&old_plan, &r.plan, &before.nodes, &after.nodes, &state);
    let differ = nodes.iter().filter(|n| n.change != "same").count();
    let status = match &outcome {
        Outcome::Paused { .. } => "paused",
        _ => after.status.as_str(),
    };
    Ok(ReplayReport {
        format_version: 1,
        thread: rec.id,
        replay: new,
        store: String::new(),
        status: status.to_string(),
        error: after.error.as_ref().map(crate::text::coded),
        nodes,
        differ,
    })
}

fn compare(
    old_plan: &Plan,
    plan: &Plan,
    before: &[NodeView],
    after: &[NodeView],
    state: &pipec_store::ThreadState,
) -> Vec<NodeChange> {
    let find = |views: &[NodeView], name: &str| views.iter().find(|v| v.node == name).cloned();
    let shown = |v: &Option<NodeView>| v.as_ref().map(|v| format!("{:?}", v.state).to_lowercase());
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    // The nodes that changed so far: nodes come in the order they depend on each other,
    // so a recorded node downstream of one is known when it is reached.
    let mut touched: BTreeSet<String> = BTreeSet::new();
    for node in &plan.nodes {
        seen.insert(node.name.clone());
        let was = find(before, &node.name);
        let now = find(after, &node.name);
        let computed = computed_by_the_scheduler(node);
        let in_old = old_plan.node(&node.name).is_some();
        let redefined = state
            .nodes
            .get(&node.name)
            .is_some_and(|r| fingerprint_key(&r.fingerprint) != fingerprint_key(&node.fingerprint));
        let (change, diff) = if !in_old {
            ("added", None)
        } else if shown(&was) != shown(&now) {
            ("state", None)
        } else {
            let a = was.as_ref().and_then(|v| v.value.clone());
            let b = now.as_ref().and_then(|v| v.value.clone());
            if a != b {
                ("differs", Some(line_diff(&a, &b)))
            } else if redefined && !computed {
                ("changed", None)
            } else if !computed && node.deps.iter().any(|d| touched.contains(d)) {
                ("inputs", None)
            } else {
                ("same", None)
            }
        };
        if change != "same" {
            touched.insert(node.name.clone());
        }
        out.push(NodeChange {
            node: node.name.clone(),
            change: change.to_string(),
            computed,
            was: shown(&was),
            now: shown(&now),
            diff,
        });
    }
    for node in old_plan.nodes.iter().filter(|n| !seen.contains(&n.name)) {
        out.push(NodeChange {
            node: node.name.clone(),
            change: "removed".into(),
            computed: false,
            was: shown(&find(before, &node.name)),
            now: None,
            diff: None,
        });
    }
    out
}

/// Whether a replay computes the node (a gate, a `return` that reads no resource) rather
/// than taking its recorded result.
fn computed_by_the_scheduler(node: &pipec_plan::Node) -> bool {
    match node.body {
        Body::Gate { .. } => true,
        Body::Return { .. } => !node
            .params
            .iter()
            .any(|p| pipec_runtime::eval::is_resource(&p.source) && !p.keep_ref),
        _ => false,
    }
}

fn line_diff(a: &Option<Value>, b: &Option<Value>) -> String {
    let pretty = |v: &Option<Value>| match v {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_default(),
        None => "null".into(),
    };
    crate::text::line_diff(&pretty(a), &pretty(b))
}

/// What stands for the models and servers in a replay: nothing runs that would call
/// them, and the tools a run checks at its start are the declared ones.
struct NoCalls {
    plan: Arc<Plan>,
}

impl NoCalls {
    fn model() -> NoModel {
        NoModel
    }

    fn refused(server: &str) -> McpError {
        McpError::NoAnswer {
            server: server.to_string(),
            message: "a replay calls nothing".into(),
        }
    }
}

struct NoModel;

impl Model for NoModel {
    fn complete<'a>(&'a self, _request: &'a ModelRequest) -> ModelFuture<'a> {
        Box::pin(async { Err(ModelError::Fatal("a replay calls no model".into())) })
    }
}

impl Servers for NoCalls {
    fn call_tool<'a>(
        &'a self,
        server: &'a str,
        _tool: &'a str,
        _arguments: Map<String, Value>,
        _meta: Map<String, Value>,
        _options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult> {
        Box::pin(async move { Err(Self::refused(server)) })
    }

    fn read<'a>(
        &'a self,
        server: &'a str,
        _uri: &'a str,
        _options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>> {
        Box::pin(async move { Err(Self::refused(server)) })
    }

    fn list_tools<'a>(&'a self, server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>> {
        Box::pin(async move { Ok(crate::tape::declared_listing(&self.plan, server)) })
    }
}
