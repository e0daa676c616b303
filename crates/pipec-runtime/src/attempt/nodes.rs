//! The one owner of each node's state during an attempt: its slot (what the scheduler
//! knows), its stored row, its generation, when it started, and how it failed. Every
//! change of a node's state goes through a method here, which writes the row, the event
//! and the progress line together, so they cannot disagree.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::context::scrub_error;
use crate::eval::Slot as SourceSlot;
use crate::progress::{Progress, Step};
use crate::secrets::Scrubber;
use crate::value::NodeValue;
use pipec_plan::{Node, Plan};
use pipec_store::{Event, NodeRec, NodeState, ResourceRef, StoredError, Write, ids};

/// Where a finished node's value is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueAt {
    /// In its row.
    Row,
    /// In its row, and it is the list of an `each` computed whole (a pure node).
    RowOfItems(u32),
    /// In its item rows (an `each` node that ran as a task); its row counts them.
    Items(u32),
    /// In its gate row (a gate's answer).
    Gate,
}

/// What the scheduler knows about a node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Slot {
    Pending,
    Running,
    Done(NodeValue),
    Skipped,
    Failed,
    /// A gate waiting for its answer.
    Waiting,
}

pub(crate) struct NodeTable {
    plan: Arc<Plan>,
    index: HashMap<String, usize>,
    slots: Vec<Slot>,
    rows: Vec<Option<NodeRec>>,
    /// Each finished node's manifest (an `each` node's is its items', in item order,
    /// and lives in their rows).
    manifests: Vec<Vec<ResourceRef>>,
    started: Vec<Option<Instant>>,
    /// The first failure of this attempt (it fails the thread).
    failure: Option<StoredError>,
    /// Effects whose outcome is unknown (they block the thread).
    unknown: Vec<StoredError>,
    progress: Option<Arc<dyn Progress>>,
    scrubber: Scrubber,
}

impl NodeTable {
    /// A table with no rows, before recovery has run.
    pub(crate) fn empty(plan: Arc<Plan>) -> NodeTable {
        NodeTable::new(plan, &BTreeMap::new(), None, Scrubber::default())
    }

    /// The table of a plan, every node pending; `rows` are the stored rows by name.
    pub(crate) fn new(
        plan: Arc<Plan>,
        rows: &BTreeMap<String, NodeRec>,
        progress: Option<Arc<dyn Progress>>,
        scrubber: Scrubber,
    ) -> NodeTable {
        let index: HashMap<String, usize> = plan
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        let n = plan.nodes.len();
        let rows = plan
            .nodes
            .iter()
            .map(|p| rows.get(&p.name).cloned())
            .collect();
        NodeTable {
            plan,
            index,
            slots: vec![Slot::Pending; n],
            rows,
            manifests: vec![Vec::new(); n],
            started: vec![None; n],
            failure: None,
            unknown: Vec::new(),
            progress,
            scrubber,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn node(&self, i: usize) -> &Node {
        &self.plan.nodes[i]
    }

    pub(crate) fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    pub(crate) fn row(&self, i: usize) -> Option<&NodeRec> {
        self.rows[i].as_ref()
    }

    pub(crate) fn generation(&self, i: usize) -> u32 {
        self.rows[i].as_ref().map_or(0, |r| r.generation)
    }

    /// Sets a slot as recovery restored it.
    pub(crate) fn restore(&mut self, i: usize, slot: Slot) {
        self.slots[i] = slot;
    }

    /// Sets a finished node's manifest as the stored rows hold it.
    pub(crate) fn restore_manifest(&mut self, i: usize, manifest: Vec<ResourceRef>) {
        self.manifests[i] = manifest;
    }

    /// The links a finished node's tool calls returned.
    pub(crate) fn manifest_of(&self, name: &str) -> Option<Vec<ResourceRef>> {
        let i = *self.index.get(name)?;
        matches!(self.slots[i], Slot::Done(_)).then(|| self.manifests[i].clone())
    }

    /// What a source reads of the node `name`: its value, or that it was skipped.
    pub(crate) fn source_slot(&self, name: &str) -> Option<SourceSlot> {
        match self.index.get(name).map(|i| &self.slots[*i]) {
            Some(Slot::Done(v)) => Some(SourceSlot::Value(v.to_value())),
            Some(Slot::Skipped) => Some(SourceSlot::Skipped),
            _ => None,
        }
    }

    /// Takes a done node's value out of the table (the attempt is ending and hands it
    /// over); the node reads as not finished after.
    pub(crate) fn take_value(&mut self, name: &str) -> Option<NodeValue> {
        let i = *self.index.get(name)?;
        match std::mem::replace(&mut self.slots[i], Slot::Running) {
            Slot::Done(v) => Some(v),
            other => {
                self.slots[i] = other;
                None
            }
        }
    }

    /// Every dependency committed (done or skipped).
    pub(crate) fn ready(&self, i: usize) -> bool {
        self.plan.nodes[i].deps.iter().all(|d| {
            matches!(
                self.index.get(d).map(|j| &self.slots[*j]),
                Some(Slot::Done(_) | Slot::Skipped)
            )
        })
    }

    pub(crate) fn first_failure(&self) -> Option<&StoredError> {
        self.failure.as_ref()
    }

    pub(crate) fn set_failure(&mut self, mut error: StoredError) {
        scrub_error(&self.scrubber, &mut error);
        self.failure.get_or_insert(error);
    }

    pub(crate) fn unknown(&self) -> &[StoredError] {
        &self.unknown
    }

    pub(crate) fn take_unknown(&mut self) -> Vec<StoredError> {
        std::mem::take(&mut self.unknown)
    }

    /// Whether the attempt must stop starting work: a failure or an unknown effect.
    pub(crate) fn stopping(&self) -> bool {
        self.failure.is_some() || !self.unknown.is_empty()
    }

    pub(crate) fn all_settled(&self) -> bool {
        self.slots
            .iter()
            .all(|s| matches!(s, Slot::Done(_) | Slot::Skipped))
    }

    pub(crate) fn with_slot(&self, wanted: fn(&Slot) -> bool) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|i| wanted(&self.slots[*i]))
            .collect()
    }

    /// The row a node's new state is written as: tries, crashes and its start kept.
    fn row_for(&self, i: usize, state: NodeState, value: Option<Value>) -> NodeRec {
        let node = &self.plan.nodes[i];
        let old = self.rows[i].as_ref();
        NodeRec {
            generation: self.generation(i),
            fingerprint: node.fingerprint.clone(),
            state,
            value,
            error: None,
            tries: old.map_or(0, |o| o.tries),
            crash_count: old.map_or(0, |o| o.crash_count),
            next_retry_ms: None,
            started_ms: old.map_or(0, |o| o.started_ms),
            finished_ms: ids::now_ms(),
            items: None,
            manifest: Vec::new(),
        }
    }

    fn put(&mut self, i: usize, rec: NodeRec, out: &mut Vec<Write>) {
        out.push(Write::Node(self.plan.nodes[i].name.clone(), rec.clone()));
        self.rows[i] = Some(rec);
    }

    /// The node starts as a task (`items` for `each`): its `running` row and event.
    pub(crate) fn start(&mut self, i: usize, items: Option<u32>, out: &mut Vec<Write>) {
        let old = self.rows[i].as_ref();
        let mut rec = self.row_for(i, NodeState::Running, None);
        rec.started_ms = ids::now_ms();
        rec.finished_ms = 0;
        rec.next_retry_ms = old.and_then(|o| o.next_retry_ms);
        rec.items = items;
        self.put(i, rec, out);
        out.push(Write::Event(Event::NodeStarted {
            node: self.plan.nodes[i].name.clone(),
            items,
        }));
        self.slots[i] = Slot::Running;
        self.started[i] = Some(Instant::now());
    }

    /// The row a task wrote for its node behind the table (a retry's), so that the
    /// table's next row keeps what it says (tries, the retry's error).
    pub(crate) fn adopt(&mut self, i: usize, row: Option<NodeRec>) {
        if let Some(row) = row {
            self.rows[i] = Some(row);
        }
    }

    /// The node's task is under way (the scheduler spawned it).
    pub(crate) fn mark_running(&mut self, i: usize) {
        self.slots[i] = Slot::Running;
        self.started[i].get_or_insert_with(Instant::now);
    }

    /// The node finished with `value`, stored where `at` says: an `each` node's list is
    /// in its item rows and a gate's answer in its gate row, their rows only say so.
    /// Its manifest goes into its row, except an `each` node's (its items hold theirs).
    pub(crate) fn finish(
        &mut self,
        i: usize,
        value: NodeValue,
        at: ValueAt,
        manifest: Vec<ResourceRef>,
        out: &mut Vec<Write>,
    ) {
        let (stored, items) = match at {
            ValueAt::Row => (Some(value.to_value()), None),
            ValueAt::RowOfItems(n) => (Some(value.to_value()), Some(n)),
            ValueAt::Items(n) => (None, Some(n)),
            ValueAt::Gate => (None, None),
        };
        let mut rec = self.row_for(i, NodeState::Done, stored);
        rec.items = items;
        if !matches!(at, ValueAt::Items(_)) {
            rec.manifest = manifest.clone();
        }
        self.manifests[i] = manifest;
        self.put(i, rec, out);
        let ms = self.started[i].map(|t| t.elapsed().as_millis() as u64);
        out.push(Write::Event(Event::NodeFinished {
            node: self.plan.nodes[i].name.clone(),
            ms,
        }));
        self.slots[i] = Slot::Done(value);
    }

    pub(crate) fn skip(&mut self, i: usize, out: &mut Vec<Write>) {
        let rec = self.row_for(i, NodeState::Skipped, None);
        self.put(i, rec, out);
        let name = self.plan.nodes[i].name.clone();
        out.push(Write::Event(Event::NodeSkipped { node: name.clone() }));
        self.slots[i] = Slot::Skipped;
        if let Some(p) = &self.progress {
            p.step(Step::Skipped { node: &name });
        }
    }

    /// The node failed; the first failure of the attempt fails the thread.
    pub(crate) fn fail(&mut self, i: usize, error: StoredError, out: &mut Vec<Write>) {
        self.fail_as(i, error, None, out);
    }

    /// An `each` node failed because `failed` of its `total` items did: the same rows
    /// and events as any failure, but progress counts the items instead of repeating
    /// the failures it showed as they happened.
    pub(crate) fn fail_items(
        &mut self,
        i: usize,
        error: StoredError,
        failed: u32,
        total: u32,
        out: &mut Vec<Write>,
    ) {
        self.fail_as(i, error, Some((failed, total)), out);
    }

    fn fail_as(
        &mut self,
        i: usize,
        mut error: StoredError,
        items: Option<(u32, u32)>,
        out: &mut Vec<Write>,
    ) {
        scrub_error(&self.scrubber, &mut error);
        let mut rec = self.row_for(i, NodeState::Failed, None);
        rec.error = Some(error.clone());
        self.put(i, rec, out);
        let name = self.plan.nodes[i].name.clone();
        out.push(Write::Event(Event::NodeFailed {
            node: name.clone(),
            code: error.code.clone(),
            message: error.message.clone(),
        }));
        self.slots[i] = Slot::Failed;
        if let Some(p) = &self.progress {
            p.step(match items {
                Some((failed, total)) => Step::ItemsFailed {
                    node: &name,
                    failed,
                    total,
                },
                None => Step::Failed {
                    node: &name,
                    item: None,
                    message: &error.message,
                },
            });
        }
        self.failure.get_or_insert(error);
    }

    /// An effect of the node may or may not have happened: it stops, and the thread
    /// blocks until a person decides. Its row says it failed with that error, so that
    /// it is not taken for a node that was running when its process died.
    pub(crate) fn block(
        &mut self,
        i: usize,
        mut error: StoredError,
        call: Option<String>,
        out: &mut Vec<Write>,
    ) {
        scrub_error(&self.scrubber, &mut error);
        let mut rec = self.row_for(i, NodeState::Failed, None);
        rec.error = Some(error.clone());
        self.put(i, rec, out);
        out.push(Write::Event(Event::CallUnknown {
            node: self.plan.nodes[i].name.clone(),
            call,
            message: error.message.clone(),
        }));
        self.slots[i] = Slot::Failed;
        self.unknown.push(error);
    }

    /// A node's call waits at its approval gate. Its row says it is under way but was
    /// not started by a process (no start time), so a resume does not take the wait for
    /// a crash.
    pub(crate) fn wait_for_approval(&mut self, i: usize, out: &mut Vec<Write>) {
        let mut rec = self.row_for(i, NodeState::Running, None);
        rec.started_ms = 0;
        rec.finished_ms = 0;
        self.put(i, rec, out);
        self.slots[i] = Slot::Waiting;
        if let Some(p) = &self.progress {
            p.step(Step::Waiting {
                gate: &self.plan.nodes[i].name,
            });
        }
    }

    /// A gate waits for its answer.
    pub(crate) fn wait(&mut self, i: usize) {
        self.slots[i] = Slot::Waiting;
        if let Some(p) = &self.progress {
            p.step(Step::Waiting {
                gate: &self.plan.nodes[i].name,
            });
        }
    }

    /// Names of nodes that can never run (pending with nothing running).
    pub(crate) fn stuck(&self) -> Vec<String> {
        self.with_slot(|s| *s == Slot::Pending)
            .into_iter()
            .map(|i| self.plan.nodes[i].name.clone())
            .collect()
    }
}
