//! Which resource a binding names, decided when its node enters and before anything is
//! read: a URI binding expands its template (RFC 6570) from the node's other parameters;
//! a link binding takes the links of its kind from its producer's manifest (and `where:`
//! picks among several). Both become references (`ResourceRef` values) in the node's
//! parameters; hydration then fetches those the node declares a content type for.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::RuntimeError;
use crate::eval::{self, Env};
use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Node, Param, Source};
use pipec_store::{ResourceRef, StoredError, ids};

fn fail(node: &Node, param: &str, rule: &'static Rule, message: String) -> StoredError {
    RuntimeError::new(
        rule,
        format!("the parameter `{param}` of `{}`: {message}", node.name),
    )
    .stored(Some(&node.name))
}

/// The value a template variable takes from the node's parameters (`{file.path}` reads
/// a field): strings as they are, numbers and booleans as JSON writes them.
fn lookup(params: &BTreeMap<String, Value>, name: &str) -> Option<String> {
    let mut parts = name.split('.');
    let mut v = params.get(parts.next()?)?.clone();
    for p in parts {
        v = v.get(p)?.clone();
    }
    match v {
        Value::String(s) => Some(s),
        Value::Null => None,
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        other => Some(other.to_string()),
    }
}

/// The links of a kind in a producer's manifest, in call order.
pub(crate) fn links_of(env: &dyn Env, producer: &str, kind: &str) -> Vec<ResourceRef> {
    env.manifest(producer)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.kind.as_deref() == Some(kind))
        .collect()
}

/// The links a link binding takes from its producer's manifest, in call order: those of
/// its kind that its `where:` keeps (the values evaluated over the node's parameters),
/// each carrying the binding's `max_bytes` (for a `ref<T>` fetched downstream). `None`
/// for a source that is not a link binding.
fn matching_links(
    node: &Node,
    param: &str,
    source: &Source,
    params: &BTreeMap<String, Value>,
    env: &dyn Env,
) -> Result<Option<Vec<ResourceRef>>, StoredError> {
    let Source::Link {
        link_kind,
        producer,
        where_,
        max_bytes,
        ..
    } = source
    else {
        return Ok(None);
    };
    let mut links = links_of(env, producer, link_kind);
    for (var, e) in where_ {
        let want = eval::expr(params, e)
            .map_err(|e| fail(node, param, e.rule(), format!("`where: {var}`: {e}")))?;
        let want = match want {
            Value::String(s) => s,
            other => other.to_string(),
        };
        links.retain(|r| r.captures.get(var) == Some(&want));
    }
    for r in &mut links {
        r.max_bytes = *max_bytes;
    }
    Ok(Some(links))
}

/// The items of an `each(resources(ref: ...))` parameter: one reference per link, each
/// fetched by its own item (within the binding's `max_bytes`). `where:` sees the node's
/// other parameters. `None` for an `each` over anything but links.
pub(crate) fn each_links(
    node: &Node,
    param: &Param,
    params: &BTreeMap<String, Value>,
    env: &dyn Env,
) -> Result<Option<Vec<Value>>, StoredError> {
    let Source::Each { list, .. } = &param.source else {
        return Ok(None);
    };
    let links = matching_links(node, &param.name, list, params, env)?;
    Ok(links.map(|links| links.iter().map(ResourceRef::to_value).collect()))
}

/// Fills the node's resource and link parameters with references.
pub(crate) fn resolve(
    node: &Node,
    params: &mut BTreeMap<String, Value>,
    env: &dyn Env,
) -> Result<(), StoredError> {
    for p in &node.params {
        let value = match &p.source {
            Source::Resource {
                uri,
                server,
                max_bytes,
                ..
            } => {
                let template = pipec_base::uri::parse(uri).map_err(|e| {
                    fail(
                        node,
                        &p.name,
                        &codes::PLAN_INVALID,
                        format!("`{uri}`: {}", e.message),
                    )
                })?;
                let expanded = template.expand(&|v| lookup(params, v)).map_err(|e| {
                    fail(
                        node,
                        &p.name,
                        &codes::EVALUATION_FAILED,
                        format!("the URI `{uri}` cannot be expanded: {e}"),
                    )
                })?;
                ResourceRef {
                    uri: expanded,
                    server: server.clone(),
                    kind: None,
                    captures: Default::default(),
                    name: String::new(),
                    mime: None,
                    size: None,
                    producing_call: None,
                    origin: None,
                    produced_ms: ids::now_ms(),
                    max_bytes: *max_bytes,
                    embedded: None,
                }
                .to_value()
            }
            Source::Link {
                link_kind,
                many,
                producer,
                where_,
                ..
            } => {
                let links =
                    matching_links(node, &p.name, &p.source, params, env)?.unwrap_or_default();
                if *many {
                    Value::Array(links.iter().map(ResourceRef::to_value).collect())
                } else {
                    match links.as_slice() {
                        [one] => one.to_value(),
                        // An optional parameter whose link is not there receives null.
                        [] if p.optional => Value::Null,
                        [] => {
                            return Err(fail(
                                node,
                                &p.name,
                                &codes::RESOURCE_NOT_FOUND,
                                format!(
                                    "`{producer}` returned no `{link_kind}` link{}",
                                    if where_.is_empty() {
                                        String::new()
                                    } else {
                                        " that matches its `where:`".into()
                                    }
                                ),
                            ));
                        }
                        several => {
                            let uris: Vec<&str> =
                                several.iter().take(5).map(|r| r.uri.as_str()).collect();
                            return Err(fail(
                                node,
                                &p.name,
                                &codes::AMBIGUOUS_LINK,
                                format!(
                                    "`{producer}` returned {} `{link_kind}` links ({}); say which with `where:`, or bind them all with `resources(ref: ...)`",
                                    several.len(),
                                    uris.join(", ")
                                ),
                            ));
                        }
                    }
                }
            }
            _ => continue,
        };
        params.insert(p.name.clone(), value);
    }
    Ok(())
}
