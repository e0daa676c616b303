//! Self-healing: a link whose read the server answered with an error (whatever the code,
//! since servers differ) or with no contents may have expired. If the call that produced
//! it is idempotent, it is replayed with its recorded arguments — journaled as a call of
//! its own — and the new link of the same kind and the same captured variables replaces
//! the dead one. The heal is recorded in its own table, never by rewriting the
//! producer's row; one heal at a time per reference. A producer that may not be called
//! again is `R0103`; a replay that fails, or gives no such link, is `R0102` with both
//! causes. Transport failures and timeouts are never taken for expiry. A link whose
//! stored URI lost a secret to the scrubber is re-derived the same way, unread.

use serde_json::{Map, Value};

use super::Reader;
use crate::error::RuntimeError;
use crate::error::TryError;
use crate::journal;
use crate::progress::Step;
use crate::resources::{manifest, results};
use crate::secrets::Scrubber;
use pipec_diagnostic as codes;
use pipec_mcp::RequestOptions;
use pipec_store::{CallKey, CallKind, CallRec, CallState, Event, HealRec, ResourceRef, Write, ids};

/// Heal replays are numbered in the journal from here, within their node's step, so
/// they never share a key with the step's own calls.
pub(crate) const HEAL_CALL_BASE: u32 = 1 << 20;

/// The `_meta` key of the idempotency key sent with every tool call.
pub(crate) const IDEMPOTENCY_META: &str = "pipec/idempotency-key";

/// Why a read failed.
pub(crate) enum Failure {
    /// It cannot be fixed by a replay: the error to report.
    Fatal(TryError),
    /// The server answered as if the link were dead: its answer.
    Dead(String),
}

/// Whether a JSON-RPC error code may mean a dead link. Protocol errors (the request was
/// malformed or the method unknown) and version mismatches never do.
pub(crate) fn may_mean_expired(code: i64) -> bool {
    !matches!(code, -32700 | -32600 | -32601 | -32022..=-32020)
}

/// Puts the attempt's secrets back where the stored arguments hold placeholders.
fn with_secrets(v: &Value, secrets: &std::collections::BTreeMap<String, String>) -> Value {
    match v {
        Value::Object(o) => {
            if o.len() == 1
                && let Some(Value::String(name)) = o.get("$secret")
                && let Some(s) = secrets.get(name)
            {
                return Value::String(s.clone());
            }
            Value::Object(
                o.iter()
                    .map(|(k, v)| (k.clone(), with_secrets(v, secrets)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| with_secrets(v, secrets)).collect()),
        other => other.clone(),
    }
}

/// Whether a new link captured what the dead one did. A dead link read back from the
/// store has its secrets scrubbed, so both sides are compared scrubbed.
fn same_captures(scrubber: &Scrubber, new: &ResourceRef, dead: &ResourceRef) -> bool {
    new.captures.len() == dead.captures.len()
        && new
            .captures
            .iter()
            .zip(&dead.captures)
            .all(|((k, v), (dk, dv))| k == dk && scrubber.scrub(v) == scrubber.scrub(dv))
}

/// Re-derives a dead link; returns the reference to read instead. `cause` says why it
/// is taken for dead, as a clause ("the server answered `...`").
pub(crate) async fn heal(
    reader: &mut Reader<'_>,
    param: &str,
    dead: &ResourceRef,
    cause: &str,
) -> Result<ResourceRef, TryError> {
    let shared = reader.shared;
    let node = reader.node;
    let fatal = |rule, message: String| {
        TryError::Fatal(
            RuntimeError::new(
                rule,
                shared.scrubber.scrub(&format!(
                    "the parameter `{param}` of `{}`: {message}",
                    node.name
                )),
            )
            .stored(Some(&node.name)),
        )
    };
    let (Some(origin), Some(call)) = (&dead.origin, &dead.producing_call) else {
        return Err(fatal(
            &codes::RESOURCE_NOT_FOUND,
            format!("{} cannot be read ({cause})", dead.uri),
        ));
    };
    if !call.idempotent {
        let e = RuntimeError::new(
            &codes::NON_IDEMPOTENT_REPLAY,
            shared.scrubber.scrub(&format!(
                "the parameter `{param}` of `{}`: the link {} is dead ({cause}), and it came from `{}`, which is neither read-only nor idempotent, so pipec does not call it again to re-derive it",
                node.name, dead.uri, call.tool
            )),
        )
        .help(format!(
            "if calling `{}` again with the same arguments is safe, declare it `idempotent = true` (or `read_only = true`) and resume",
            call.tool
        ));
        return Err(TryError::Fatal(e.stored(Some(&node.name))));
    }
    let resources = &shared.resources;
    // One heal at a time per reference; a task that waited finds the heal done.
    let seen = resources.heal_of(origin).map(|h| h.number);
    let lock = {
        let mut map = resources.healing.lock().await;
        map.entry(origin.clone()).or_default().clone()
    };
    let _held: tokio::sync::MutexGuard<'_, ()> = lock.lock().await;
    if let Some(h) = resources.heal_of(origin)
        && Some(h.number) != seen
    {
        return Ok(h.to);
    }
    let Some(tool) = shared.plan.tools.iter().find(|t| t.name == call.tool) else {
        return Err(fatal(
            &codes::RESOURCE_EXPIRED,
            format!(
                "the link {} is dead ({cause}), and the tool `{}` that produced it is no longer declared",
                dead.uri, call.tool
            ),
        ));
    };
    let n = resources
        .replays
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let key = CallKey {
        node: node.name.clone(),
        generation: reader.generation,
        item: reader.item,
        seq: reader.step,
        call: HEAL_CALL_BASE + n,
    };
    let number = resources.heal_of(origin).map_or(1, |h| h.number + 1);
    let idem_key = journal::idempotency_key(
        &Default::default(),
        &shared.thread_id,
        &CallKey {
            node: format!("heal/{}/{}", origin.node, origin.index),
            generation: origin.generation,
            item: origin.item,
            seq: number,
            call: 0,
        },
        true,
    );
    let args = match with_secrets(&call.args, &resources.secrets) {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    let mut meta = Map::new();
    meta.insert(IDEMPOTENCY_META.into(), Value::String(idem_key.clone()));
    let options = RequestOptions {
        timeout: tool.timeout_ms.map(std::time::Duration::from_millis),
        limit: Some(
            tool.max_result_bytes
                .unwrap_or(results::DEFAULT_MAX_RESULT_BYTES) as usize,
        ),
        task: tool.task != pipec_plan::ToolTask::Forbidden,
    };
    let started_ms = ids::now_ms();
    let replayed = resources
        .servers
        .replay(&tool.server, &tool.wire_name, args, meta, options)
        .await;
    let rec = |state, result: Option<Value>, error: Option<String>| CallRec {
        kind: CallKind::Tool,
        target: tool.name.clone(),
        args: Some(call.args.clone()),
        args_hash: journal::args_hash(&call.args),
        idempotent: true,
        idem_key: idem_key.clone(),
        state,
        result,
        error,
        attempt: shared.attempt_no,
        started_ms,
        finished_ms: ids::now_ms(),
        decision: None,
        watched_by: None,
        task: None,
    };
    let both = |second: String| {
        fatal(
            &codes::RESOURCE_EXPIRED,
            format!(
                "the link {} is dead ({cause}), and re-deriving it by calling `{}` again failed: {second}",
                dead.uri, tool.name
            ),
        )
    };
    let result = match replayed {
        Ok(r) => r,
        Err(e) => {
            let message = shared.scrubber.scrub(&e.to_string());
            // The failed replay's row goes with the unit's end (the try fails here).
            reader.writes.push(Write::Call(
                key,
                rec(CallState::ToolError, None, Some(message.clone())),
            ));
            return Err(both(message));
        }
    };
    let links = manifest::lift(&shared.plan, tool, &result, &call.args, &key.display());
    let found = match (&links, result.is_error) {
        (_, true) => Err(format!(
            "it answered with an error: {}",
            results::text_of(&result)
        )),
        (Err(m), _) => Err(format!("it returned {m}")),
        (Ok(refs), _) => refs
            .iter()
            .find(|r| r.kind == dead.kind && same_captures(&shared.scrubber, r, dead))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "it returned no {} link{}",
                    dead.kind
                        .as_deref()
                        .map_or("such".to_string(), |k| format!("`{k}`")),
                    if dead.captures.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " for {}",
                            dead.captures
                                .iter()
                                .map(|(k, v)| format!("{k} = `{v}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                )
            }),
    };
    let for_model: Vec<Value> = links
        .as_ref()
        .map(|refs| refs.iter().map(ResourceRef::for_model).collect())
        .unwrap_or_default();
    let summary = results::summary(&result, &for_model);
    let mut new = match found {
        Ok(r) => r,
        Err(why) => {
            reader.writes.push(Write::Call(
                key,
                rec(CallState::ToolError, Some(summary), Some(why.clone())),
            ));
            return Err(both(why));
        }
    };
    // The heal stands in for the original link: same place, same producing call.
    new.origin = Some(origin.clone());
    new.producing_call = Some(call.clone());
    let heal = HealRec {
        number,
        from_uri: dead.uri.clone(),
        to: new.clone(),
        replay_call: key.display(),
        by_node: node.name.clone(),
        cause: cause.to_string(),
        at_ms: ids::now_ms(),
    };
    shared
        .commit(vec![
            Write::Call(key.clone(), rec(CallState::Ok, Some(summary), None)),
            Write::Heal(origin.clone(), heal.clone()),
            Write::Event(Event::LinkHealed {
                node: node.name.clone(),
                kind: dead.kind.clone(),
                tool: tool.name.clone(),
                from_uri: dead.uri.clone(),
                to_uri: new.uri.clone(),
                call: key.display(),
            }),
        ])
        .await
        .map_err(|e| TryError::Fatal(e.stored(Some(&node.name))))?;
    resources.record_heal(origin.clone(), heal);
    if let Some(p) = &shared.progress {
        p.step(Step::Healed {
            node: &node.name,
            kind: dead.kind.as_deref().unwrap_or(""),
            tool: &tool.name,
            uri: &new.uri,
        });
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_errors_are_never_taken_for_a_dead_link() {
        for code in [-32700, -32600, -32601, -32020, -32021, -32022] {
            assert!(!may_mean_expired(code), "{code}");
        }
        // What servers answer for a missing resource: FastMCP 0, rmcp's -32002, the
        // 2026-07-28 -32602, an internal -32603.
        for code in [0, -32002, -32602, -32603, -32000] {
            assert!(may_mean_expired(code), "{code}");
        }
    }

    #[test]
    fn placeholders_take_the_secrets_back_for_a_replay() {
        let secrets = [("TOKEN".to_string(), "s3cret".to_string())].into();
        let args = serde_json::json!({ "id": "D1", "token": { "$secret": "TOKEN" }, "other": { "$secret": "NOPE" } });
        assert_eq!(
            with_secrets(&args, &secrets),
            serde_json::json!({ "id": "D1", "token": "s3cret", "other": { "$secret": "NOPE" } })
        );
    }
}
