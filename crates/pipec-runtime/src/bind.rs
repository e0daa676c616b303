//! Entering a node: binding its parameters from committed values, then deciding whether
//! it runs. Every node kind enters the same way, here: a required parameter whose source
//! was skipped skips the node; a binding that fails fails it; an `each` list fans out
//! (within its `max:`); otherwise `when` decides. Per-item `when` is [`when_holds`].

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::RuntimeError;
use super::eval::{self, Env, Slot};
use super::resources::resolve;
use pipec_diagnostic as codes;
use pipec_plan::{Node, Source};
use pipec_store::StoredError;

/// A node's bound parameters.
pub(crate) type Params = BTreeMap<String, Value>;

/// How a node enters.
pub(crate) enum Entry {
    /// Skipped: a required input was skipped, its `each` list is missing, or `when` is
    /// false.
    Skip,
    Fail(StoredError),
    /// Runs once with these parameters.
    Run(Params),
    /// Runs once per item: `base` plus the `each` parameter `name` set to the item.
    /// `when` is decided per item.
    Each {
        name: String,
        base: Params,
        items: Vec<Value>,
    },
}

fn failure(node: &Node, rule: &'static pipec_diagnostic::Rule, message: String) -> Entry {
    Entry::Fail(RuntimeError::new(rule, message).stored(Some(&node.name)))
}

/// Binds a node's parameters and decides how it enters. Resource and link bindings
/// become references (`resources::resolve`) once the other parameters are bound, per
/// item under `each`; a `when` that reads a resource is decided when the node starts,
/// after those resources are fetched.
pub(crate) fn enter(node: &Node, env: &dyn Env) -> Entry {
    let mut params = Params::new();
    let mut each = None;
    let mut each_of_links = None;
    for p in &node.params {
        let is_each = node.each.as_deref() == Some(p.name.as_str());
        if !is_each && matches!(p.source, Source::Resource { .. } | Source::Link { .. }) {
            continue;
        }
        // An `each` over links fans out over references, taken from the producer's
        // manifest once the other parameters (which its `where:` reads) are bound.
        if is_each && eval::is_resource(&p.source) {
            each_of_links = Some(p);
            continue;
        }
        let slot = match eval::source(env, &p.source, &p.schema) {
            Ok(slot) => slot,
            Err(e) => {
                return failure(
                    node,
                    e.rule(),
                    format!("the parameter `{}` of `{}`: {e}", p.name, node.name),
                );
            }
        };
        match slot {
            Slot::Skipped if p.optional && !is_each => {
                params.insert(p.name.clone(), Value::Null);
            }
            Slot::Skipped => return Entry::Skip,
            Slot::Value(v) if is_each => match v {
                Value::Array(items) => each = Some((p.name.clone(), items)),
                Value::Null => return Entry::Skip,
                other => {
                    return failure(
                        node,
                        &codes::EVALUATION_FAILED,
                        format!("`each` of `{}` needs a list, and got {other}", node.name),
                    );
                }
            },
            Slot::Value(v) => {
                params.insert(p.name.clone(), v);
            }
        }
    }
    if let Some(p) = each_of_links {
        match resolve::each_links(node, p, &params, env) {
            Ok(Some(items)) => each = Some((p.name.clone(), items)),
            Ok(None) => {
                return failure(
                    node,
                    &codes::EVALUATION_FAILED,
                    format!(
                        "`each` of `{}` reads a resource by URI, which is not a list",
                        node.name
                    ),
                );
            }
            Err(e) => return Entry::Fail(e),
        }
    }
    if let Some((name, items)) = each {
        if let Some(max) = each_max(node)
            && items.len() as u64 > max
        {
            return failure(
                node,
                &codes::FAN_OUT_TOO_LARGE,
                format!(
                    "`{}` fans out over {} items, more than its `max` of {max}",
                    node.name,
                    items.len()
                ),
            );
        }
        return Entry::Each {
            name,
            base: params,
            items,
        };
    }
    if let Err(e) = resolve::resolve(node, &mut params, env) {
        return Entry::Fail(e);
    }
    match when_holds(node, &params) {
        Ok(true) => Entry::Run(params),
        Ok(false) => Entry::Skip,
        Err(e) => Entry::Fail(e),
    }
}

/// The parameters of one item of an `each` node, its resource bindings resolved.
pub(crate) fn item_params(
    node: &Node,
    env: &dyn Env,
    base: &Params,
    name: &str,
    item: Value,
) -> Result<Params, StoredError> {
    let mut params = base.clone();
    params.insert(name.to_string(), item);
    resolve::resolve(node, &mut params, env)?;
    Ok(params)
}

/// Whether `when` waits for resources: it reads one, so it is decided when the node
/// starts, once those are fetched.
pub(crate) fn when_reads_resources(node: &Node) -> bool {
    node.when.is_some() && !node.when_reads.is_empty()
}

/// Whether the node's `when` holds for these parameters (no `when`: it does). A `when`
/// that reads resources holds here; it is decided again once they are fetched.
pub(crate) fn when_holds(node: &Node, params: &Params) -> Result<bool, StoredError> {
    if when_reads_resources(node) {
        return Ok(true);
    }
    when_decides(node, params)
}

/// The node's `when` over parameters that hold everything it reads.
pub(crate) fn when_decides(node: &Node, params: &Params) -> Result<bool, StoredError> {
    let Some(w) = &node.when else {
        return Ok(true);
    };
    match eval::expr(params, w) {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(Value::Null) => Ok(false),
        Ok(other) => Err(RuntimeError::new(
            &codes::EVALUATION_FAILED,
            format!("`when` of `{}` gave {other}, not true or false", node.name),
        )
        .stored(Some(&node.name))),
        Err(e) => Err(
            RuntimeError::new(e.rule(), format!("`when` of `{}`: {e}", node.name))
                .stored(Some(&node.name)),
        ),
    }
}

/// The `max:` of a node's `each` source.
fn each_max(node: &Node) -> Option<u64> {
    let name = node.each.as_deref()?;
    node.params
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| match &p.source {
            Source::Each { max, .. } => *max,
            _ => None,
        })
}
