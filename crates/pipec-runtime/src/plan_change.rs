//! A thread and the plan it is resumed with. A thread runs only its own pipeline: the
//! pipeline is identified by its name (the `.pipe` file's name without the extension,
//! the plan's `name`), and a plan of another name is refused (`R0407`), as is one whose
//! inputs no longer fit the thread's stored inputs or that lost a gate the thread waits
//! at. Within the same pipeline, a finished node whose fingerprint changed is refused
//! (`R0401`) unless kept (`--keep`), computed again (`--rerun-from`) or renamed.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::error::RuntimeError;
use super::options::RunOptions;
use super::validate::{Mode, Validators};
use pipec_diagnostic as codes;
use pipec_plan::{NodeKind, Plan};
use pipec_store::{GateState, NodeState, ThreadState, fingerprint_key};

/// The named nodes and everything downstream of them.
pub(crate) fn dependents(plan: &Plan, roots: &[String]) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = roots.iter().cloned().collect();
    // Nodes are in topological order: one pass finds every dependent.
    for node in &plan.nodes {
        if node.deps.iter().any(|d| set.contains(d)) {
            set.insert(node.name.clone());
        }
    }
    set
}

fn foreign(message: String, help: &str) -> RuntimeError {
    RuntimeError::new(&codes::FOREIGN_PLAN, message).help(help)
}

/// Checks that `plan` is the thread's pipeline and fits its stored state; returns the
/// thread's inputs as the plan reads them (defaults of inputs added since filled in).
pub(crate) fn check_identity(
    plan: &Plan,
    state: &ThreadState,
    renames: &[(String, String)],
    validators: &Validators,
) -> Result<Value, RuntimeError> {
    let Some(thread) = &state.thread else {
        return Err(RuntimeError::new(
            &codes::THREAD_NOT_FOUND,
            "the thread has no record",
        ));
    };
    if thread.pipeline != plan.name {
        return Err(foreign(
            format!(
                "thread {} runs the pipeline `{}`, and this plan is `{}`",
                thread.id, thread.pipeline, plan.name
            ),
            "a thread runs only its own pipeline; start a new thread of this one with `pipec run`",
        ));
    }
    let stored = thread.inputs.as_object().cloned().unwrap_or_default();
    let mut inputs = Map::new();
    for name in stored.keys() {
        if !plan.inputs.iter().any(|i| &i.name == name) {
            return Err(foreign(
                format!(
                    "the thread has the input `{name}`, which this version of `{}` does not declare",
                    plan.name
                ),
                "inputs cannot be removed under a thread; start a new thread with `pipec run`",
            ));
        }
    }
    for input in &plan.inputs {
        let value = match stored.get(&input.name) {
            Some(v) => v.clone(),
            None => match &input.default {
                Some(d) => d.clone(),
                None if input.optional => Value::Null,
                None => {
                    return Err(foreign(
                        format!(
                            "this version of `{}` needs the input `{}` ({}), which the thread does not have",
                            plan.name, input.name, input.type_name
                        ),
                        "give the new input a default, or start a new thread with `pipec run`",
                    ));
                }
            },
        };
        if let Err(e) = validators.check(&input.schema, &value, Mode::Open) {
            return Err(foreign(
                format!(
                    "the thread's input `{}` does not fit its new type `{}`: {e}",
                    input.name, input.type_name
                ),
                "an input's type cannot change under a thread; start a new thread with `pipec run`",
            ));
        }
        inputs.insert(input.name.clone(), value);
    }
    for (name, gate) in &state.gates {
        if gate.state != GateState::Pending {
            continue;
        }
        let current = renames
            .iter()
            .find(|(old, _)| old == name)
            .map_or(name.as_str(), |(_, new)| new.as_str());
        let is_gate = plan.node(current).is_some_and(|n| n.kind == NodeKind::Gate);
        // A call's approval gate belongs to its loop node, which must still ask for it.
        let owner = renames
            .iter()
            .find(|(old, _)| old == &gate.node)
            .map_or(gate.node.as_str(), |(_, new)| new.as_str());
        let is_approval = plan.node(owner).is_some_and(
            |n| matches!(&n.body, pipec_plan::Body::Model { approve, .. } if !approve.is_empty()),
        );
        // A server's question during a call belongs to the node that makes the call,
        // which must still call a server that asks.
        let is_question = gate.ask.is_some()
            && plan.node(owner).is_some_and(|n| {
                let tools: Vec<&String> = match &n.body {
                    pipec_plan::Body::Call { tool, .. } => vec![tool],
                    pipec_plan::Body::Model { tools, .. } => tools.iter().collect(),
                    _ => Vec::new(),
                };
                tools.into_iter().any(|t| {
                    plan.tools.iter().any(|d| {
                        &d.name == t && crate::executor::questions::asks_people(plan, &d.server)
                    })
                })
            });
        // A reply of the client's model belongs to the node that asks a model of the
        // client's.
        let is_model_reply = matches!(crate::ClientAsk::of(gate), Some(crate::ClientAsk::Model(_)))
            && plan.node(owner).is_some_and(|n| {
                matches!(&n.body, pipec_plan::Body::Model { model, .. }
                    if plan.models.iter().any(|m| &m.name == model && m.provider == "client"))
            });
        if !is_gate && !is_approval && !is_question && !is_model_reply {
            return Err(foreign(
                format!(
                    "the thread waits at the gate `{name}`, which this version of `{}` does not have",
                    plan.name
                ),
                "answer it with the version the thread started with, or rename it with `--rename old=new`",
            ));
        }
    }
    Ok(Value::Object(inputs))
}

/// Finished nodes whose definition changed: refused unless kept or rerun (a kept result
/// must fit its node's new type). Returns the changed nodes.
pub(crate) fn changed_nodes(
    plan: &Plan,
    state: &ThreadState,
    opts: &RunOptions,
    validators: &Validators,
) -> Result<Vec<String>, RuntimeError> {
    let renamed: HashMap<&str, &str> = opts
        .renames
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut changed = Vec::new();
    for (name, rec) in &state.nodes {
        if !matches!(rec.state, NodeState::Done | NodeState::Skipped) {
            continue;
        }
        let current = renamed.get(name.as_str()).copied().unwrap_or(name.as_str());
        match plan.node(current) {
            Some(n) if fingerprint_key(&n.fingerprint) == fingerprint_key(&rec.fingerprint) => {}
            Some(_) => changed.push(current.to_string()),
            None => {}
        }
    }
    let rerun = dependents(plan, &opts.rerun_from);
    // A renamed node's fingerprint differs by its name alone; the rename says it is the
    // same node, so its result is kept as `--keep` keeps one.
    let kept = |n: &String| opts.keep.contains(n) || opts.renamed_from(n).is_some();
    let unresolved: Vec<&String> = changed
        .iter()
        .filter(|n| !kept(n) && !rerun.contains(*n))
        .collect();
    if let Some(first) = unresolved.first() {
        let list: Vec<String> = unresolved.iter().map(|n| format!("`{n}`")).collect();
        return Err(RuntimeError::new(
            &codes::PLAN_CHANGED,
            format!("the plan changed under finished nodes: {}", list.join(", ")),
        )
        .help(format!(
            "resume with `--rerun-from {first}` to compute them again (with what depends on them), or `--keep {first}` to keep the old result"
        )));
    }
    for name in changed.iter().filter(|n| kept(n) && !rerun.contains(*n)) {
        let old = renamed
            .iter()
            .find(|(_, new)| **new == name.as_str())
            .map_or(name.as_str(), |(old, _)| *old);
        if let (Some(v), Some(node)) = (state.value_of(old), plan.node(name))
            && let Err(e) = validators.check(&node.output, &v, Mode::Open)
        {
            return Err(RuntimeError::new(
                &codes::PLAN_CHANGED,
                format!(
                    "the kept result of `{name}` does not fit its new type `{}`: {e}",
                    node.output_type
                ),
            )
            .help(format!("compute it again with `--rerun-from {name}`")));
        }
    }
    Ok(changed)
}
