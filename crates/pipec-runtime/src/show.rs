//! A thread as `pipec show --json` prints it: a versioned document ([`ThreadView`]) built
//! here, from the thread's rows and events, so the command line only prints it. Every
//! field is described in docs/show-json.md, and tests/common/show_shape.rs declares them
//! a second time, so a field added or renamed without both fails the tests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use pipec_store::{
    AttemptRec, CallRec, Event, GateState, HealRec, Holder, ItemRec, NodeState, RecordedEvent,
    ResourceRef, StoredError, ThreadRec, ThreadState,
};

/// The version of the [`ThreadView`] format. Raised when a field is removed, renamed or
/// changes meaning; a field added leaves it as it is.
pub const SHOW_FORMAT_VERSION: u32 = 1;

/// One thread: its record, nodes, gates, the resources it read and the links it healed;
/// with `--internal` the journal, items, manifests and attempts as stored, and with
/// `--events` its events.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThreadView {
    /// [`SHOW_FORMAT_VERSION`].
    pub format_version: u32,
    pub thread: String,
    pub pipeline: String,
    /// The thread's status, or `stale`: running, but no process holds it.
    pub status: String,
    /// The `.pipe` or plan file the thread was started from.
    pub source: String,
    pub plan_hash: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub inputs: Value,
    /// `env(...)` values read when the thread started.
    pub config: BTreeMap<String, String>,
    /// `--model NAME=...` overrides the thread started with.
    pub model_overrides: BTreeMap<String, String>,
    /// A completed thread's outputs, computed from its node rows.
    pub outputs: Option<Value>,
    pub error: Option<StoredError>,
    /// The process that holds the thread while it runs.
    pub holder: Option<Holder>,
    /// How many attempts (processes) have worked on it.
    pub attempts: u32,
    pub nodes: Vec<NodeView>,
    pub gates: Vec<GateView>,
    pub resources: Vec<ResourceReads>,
    pub heals: Vec<HealView>,
    /// The thread's model calls, all attempts together: tokens, time and cost.
    pub usage: UsageView,
    /// The same, per attempt (those that called a model), in order.
    pub usage_by_attempt: Vec<AttemptUsage>,
    /// `--internal`: every stored link, by the node (and item) whose tool calls returned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifests: Option<Vec<ManifestEntry>>,
    /// `--internal`: the journal of calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Vec<CallView>>,
    /// `--internal`: the item rows of `each` nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Vec<ItemView>>,
    /// `--internal`: one record per attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_log: Option<Vec<AttemptRec>>,
    /// `--events`: the stored events from `--since`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<RecordedEvent>>,
}

/// A node's row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeView {
    pub node: String,
    pub state: NodeState,
    /// Raised each time the node is run again on changed inputs or plan.
    pub generation: u32,
    /// Tries used so far.
    pub tries: u32,
    /// Attempts that died while the node ran.
    pub crash_count: u32,
    /// From its start to its end (0 while it runs).
    pub ms: u64,
    /// An `each` node's item count.
    pub items: Option<u32>,
    pub value: Option<Value>,
    pub error: Option<StoredError>,
    /// A node that called a model: its calls' tokens, time and cost, over every
    /// generation, item and attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageView>,
}

/// Model calls summed: from their `model_turn` events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageView {
    pub model_calls: u64,
    /// Input tokens, the cached ones among them.
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Of `tokens_in`, those read from the provider's prompt cache.
    pub tokens_cached: u64,
    /// The models' answering time, call after call.
    pub model_ms: u64,
    /// US dollars, of the calls whose model's prices are known.
    pub cost_usd: f64,
    /// Calls left out of `cost_usd`: their model declares no prices and is not in the
    /// built-in table.
    pub unpriced_calls: u64,
}

/// One attempt's model calls.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttemptUsage {
    pub attempt: u32,
    #[serde(flatten)]
    pub usage: UsageView,
}

impl UsageView {
    fn add(&mut self, event: &Event) {
        let Event::ModelTurn {
            tokens_in,
            tokens_out,
            tokens_cached,
            ms,
            cost_usd,
            ..
        } = event
        else {
            return;
        };
        self.model_calls += 1;
        self.tokens_in += tokens_in;
        self.tokens_out += tokens_out;
        self.tokens_cached += tokens_cached;
        self.model_ms += ms;
        match cost_usd {
            // Summed in nano-dollars' steps: float noise stays out of the sum.
            Some(c) => self.cost_usd = ((self.cost_usd + c) * 1e9).round() / 1e9,
            None => self.unpriced_calls += 1,
        }
    }

    /// The model calls of `events`, all of them.
    pub fn of(events: &[RecordedEvent]) -> UsageView {
        let mut u = UsageView::default();
        for e in events {
            u.add(&e.event);
        }
        u
    }
}

/// A page of threads (`pipec runs`, the inspector's list), each with its model calls'
/// usage read from its events.
pub async fn listed(
    store: &dyn pipec_store::Store,
    query: pipec_store::ListQuery,
) -> Result<Vec<(pipec_store::ThreadSummary, UsageView)>, pipec_store::StoreError> {
    let page = store.list(query).await?;
    let mut rows = Vec::with_capacity(page.len());
    for t in page {
        let usage = UsageView::of(&store.events(&t.id, 0).await?);
        rows.push((t, usage));
    }
    Ok(rows)
}

/// A listed thread as `pipec runs --json` writes it: its summary and its `usage`.
pub fn listed_json(thread: &pipec_store::ThreadSummary, usage: &UsageView) -> Value {
    let mut row = serde_json::to_value(thread).unwrap_or_default();
    row["usage"] = serde_json::to_value(usage).unwrap_or_default();
    row
}

/// The model calls of `events` per node, and per attempt (an attempt's events follow its
/// `attempt_started`, or the thread's creation).
pub fn usages(events: &[RecordedEvent]) -> (BTreeMap<String, UsageView>, Vec<AttemptUsage>) {
    let mut nodes: BTreeMap<String, UsageView> = BTreeMap::new();
    let mut attempts: Vec<AttemptUsage> = Vec::new();
    let mut attempt = 0;
    for e in events {
        match &e.event {
            Event::ThreadCreated { attempt: a } | Event::AttemptStarted { attempt: a } => {
                attempt = *a;
            }
            Event::ModelTurn { node, .. } => {
                nodes.entry(node.clone()).or_default().add(&e.event);
                match attempts.last_mut() {
                    Some(last) if last.attempt == attempt => last.usage.add(&e.event),
                    _ => {
                        let mut usage = UsageView::default();
                        usage.add(&e.event);
                        attempts.push(AttemptUsage { attempt, usage });
                    }
                }
            }
            _ => {}
        }
    }
    (nodes, attempts)
}

/// A gate's row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GateView {
    pub gate: String,
    pub state: GateState,
    pub message: String,
    /// The JSON Schema an answer must fit.
    pub schema: Value,
    pub deadline_ms: Option<u64>,
    pub answer: Option<Value>,
    /// `cli`, `mcp`, `pre-answer`, `timeout` or `api`.
    pub answered_by: Option<String>,
    /// For a turn of a client's model (`provider = "client"`), the request to answer:
    /// `sampling/createMessage` params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
}

/// The reads of one resource over the thread's life, from its `resource_read` events.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResourceReads {
    pub server: String,
    pub uri: String,
    pub fetches: u64,
    pub cache_hits: u64,
    /// The size of the last fetch.
    pub bytes: u64,
    /// The nodes that read it, in the order they first did.
    pub by: Vec<String>,
}

/// The latest heal of a link.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HealView {
    /// The node whose tool call returned the link, and the link's place among its links.
    pub producer: String,
    pub generation: u32,
    pub item: u32,
    pub index: u32,
    pub record: HealRec,
}

/// A stored link and the node (and item) whose tool calls returned it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ManifestEntry {
    pub node: String,
    pub item: Option<u32>,
    pub link: ResourceRef,
}

/// A journal row, by its key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CallView {
    /// `node:gG:iI:sS:cC`.
    pub call: String,
    pub generation: u32,
    pub record: CallRec,
}

/// An item row of an `each` node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ItemView {
    pub node: String,
    pub generation: u32,
    pub item: u32,
    pub record: ItemRec,
}

/// What goes into a [`ThreadView`] besides the thread's rows.
pub struct ViewOptions {
    /// Running, but held by no process.
    pub stale: bool,
    /// The outputs of a completed thread.
    pub outputs: Option<Value>,
    /// The journal, items, manifests and attempts.
    pub internal: bool,
    /// The events to include, if any.
    pub events: Option<Vec<RecordedEvent>>,
}

impl ThreadView {
    /// The view of `thread`, whose rows are `state` and whose whole event log is
    /// `all_events` (the resources read are counted from it).
    pub fn new(
        thread: &ThreadRec,
        state: &ThreadState,
        all_events: &[RecordedEvent],
        options: ViewOptions,
    ) -> ThreadView {
        let internal = options.internal;
        let (mut node_usage, usage_by_attempt) = usages(all_events);
        ThreadView {
            format_version: SHOW_FORMAT_VERSION,
            thread: thread.id.to_string(),
            pipeline: thread.pipeline.clone(),
            status: if options.stale {
                "stale".into()
            } else {
                thread.status.as_str().into()
            },
            source: thread.source.clone(),
            plan_hash: thread.plan_hash.clone(),
            created_ms: thread.created_ms,
            updated_ms: thread.updated_ms,
            inputs: thread.inputs.clone(),
            config: thread.config.clone(),
            model_overrides: thread.model_overrides.clone(),
            outputs: options.outputs,
            error: thread.error.clone(),
            holder: thread.holder.clone(),
            attempts: thread.attempts,
            nodes: state
                .nodes
                .iter()
                .map(|(name, n)| NodeView {
                    node: name.clone(),
                    state: n.state,
                    generation: n.generation,
                    tries: n.tries,
                    crash_count: n.crash_count,
                    ms: n.finished_ms.saturating_sub(n.started_ms),
                    items: n.items,
                    value: state.value_of(name),
                    error: n.error.clone(),
                    usage: node_usage.remove(name),
                })
                .collect(),
            gates: state
                .gates
                .iter()
                .map(|(name, g)| GateView {
                    gate: name.clone(),
                    state: g.state,
                    message: g.message.clone(),
                    schema: g.schema.clone(),
                    deadline_ms: g.deadline_ms,
                    answer: g.answer.clone(),
                    answered_by: g.answered_by.clone(),
                    request: crate::ClientAsk::of(g).and_then(|a| a.request().cloned()),
                })
                .collect(),
            resources: resource_reads(all_events),
            usage: UsageView::of(all_events),
            usage_by_attempt,
            heals: state
                .heals
                .iter()
                .map(|(o, h)| HealView {
                    producer: o.node.clone(),
                    generation: o.generation,
                    item: o.item,
                    index: o.index,
                    record: h.clone(),
                })
                .collect(),
            manifests: internal.then(|| manifests(state)),
            calls: internal.then(|| {
                state
                    .calls
                    .iter()
                    .map(|(k, c)| CallView {
                        call: k.display(),
                        generation: k.generation,
                        record: c.clone(),
                    })
                    .collect()
            }),
            items: internal.then(|| {
                state
                    .items
                    .iter()
                    .map(|((n, g, i), r)| ItemView {
                        node: n.clone(),
                        generation: *g,
                        item: *i,
                        record: r.clone(),
                    })
                    .collect()
            }),
            attempt_log: internal.then(|| state.attempts.clone()),
            events: options.events,
        }
    }
}

/// A thread as stored: its rows, its whole event log and the plan it runs (when it can be
/// read; `plan_error` says why not), what [`ThreadView`] and `pipec show` are made of.
pub struct Stored {
    pub state: ThreadState,
    pub events: Vec<RecordedEvent>,
    pub plan: Option<pipec_plan::Plan>,
    pub plan_error: Option<crate::RuntimeError>,
    /// Running, but held by no process.
    pub stale: bool,
}

impl Stored {
    /// Reads `thread` from `store`.
    pub async fn load(
        store: &dyn pipec_store::Store,
        thread: &str,
    ) -> Result<Stored, crate::RuntimeError> {
        let state = store.load(thread).await?;
        let Some(rec) = &state.thread else {
            return Err(crate::RuntimeError::new(
                &pipec_diagnostic::STORE_UNREADABLE,
                format!("thread {thread} has rows but no record"),
            ));
        };
        let events = store.events(&rec.id, 0).await?;
        let (plan, plan_error) = match crate::stored_plan(store, rec).await {
            Ok(plan) => (Some(plan), None),
            Err(e) => (None, Some(e)),
        };
        let stale = rec.status == pipec_store::Status::Running && !store.is_held(&rec.id);
        Ok(Stored {
            state,
            events,
            plan,
            plan_error,
            stale,
        })
    }

    /// A completed thread's outputs, computed from its node rows.
    pub fn outputs(&self) -> Option<Value> {
        match (&self.plan, &self.state.thread) {
            (Some(p), Some(t)) if t.status == pipec_store::Status::Completed => {
                crate::eval::outputs_of(p, &self.state).ok()
            }
            _ => None,
        }
    }

    /// The thread's view, with the journal and the other rows as stored when `internal`,
    /// and `events` when given.
    pub fn view(&self, internal: bool, events: Option<Vec<RecordedEvent>>) -> Option<ThreadView> {
        let t = self.state.thread.as_ref()?;
        Some(ThreadView::new(
            t,
            &self.state,
            &self.events,
            ViewOptions {
                stale: self.stale,
                outputs: self.outputs(),
                internal,
                events,
            },
        ))
    }
}

/// Fetches and cache hits per URI, from a thread's `resource_read` events, in the order
/// the URIs were first read.
pub fn resource_reads(events: &[RecordedEvent]) -> Vec<ResourceReads> {
    let mut out: Vec<ResourceReads> = Vec::new();
    for e in events {
        let Event::ResourceRead {
            node,
            server,
            uri,
            bytes,
            cached,
            ..
        } = &e.event
        else {
            continue;
        };
        let i = match out
            .iter()
            .position(|r| &r.uri == uri && &r.server == server)
        {
            Some(i) => i,
            None => {
                out.push(ResourceReads {
                    server: server.clone(),
                    uri: uri.clone(),
                    fetches: 0,
                    cache_hits: 0,
                    bytes: 0,
                    by: Vec::new(),
                });
                out.len() - 1
            }
        };
        let r = &mut out[i];
        if *cached {
            r.cache_hits += 1;
        } else {
            r.fetches += 1;
            r.bytes = *bytes;
        }
        if !r.by.contains(node) {
            r.by.push(node.clone());
        }
    }
    out
}

/// Every stored link: the node (and item) whose tool calls returned it, in call order.
pub fn manifests(state: &ThreadState) -> Vec<ManifestEntry> {
    let mut out = Vec::new();
    for (name, n) in &state.nodes {
        for r in &n.manifest {
            out.push(ManifestEntry {
                node: name.clone(),
                item: None,
                link: r.clone(),
            });
        }
    }
    for ((name, g, i), r) in &state.items {
        if state.nodes.get(name).is_some_and(|n| n.generation == *g) {
            for link in &r.manifest {
                out.push(ManifestEntry {
                    node: name.clone(),
                    item: Some(*i),
                    link: link.clone(),
                });
            }
        }
    }
    out
}
