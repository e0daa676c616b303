//! What a test's conditions read ([`pipec_plan::testing::SCOPE`]), made from the stopped
//! thread, and why a condition does not hold.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use pipec_plan::testing::EVENT_KINDS;
use pipec_plan::{Expr, Plan, ToolKind};
use pipec_runtime::eval;
use pipec_runtime::show::ThreadView;
use pipec_store::{CallKind, RecordedEvent};

/// `output`, `node`, `state`, `calls`, `arguments`, `events` and `thread`; `sent` holds
/// the tool calls that reached a server, in order, by the declared names; `events` the
/// thread's recorded events.
pub(crate) fn of(
    plan: &Plan,
    view: &ThreadView,
    sent: &[(String, Value)],
    events: &[RecordedEvent],
) -> BTreeMap<String, Value> {
    let mut output: Map<String, Value> = plan
        .outputs
        .iter()
        .map(|o| (o.name.clone(), Value::Null))
        .collect();
    if let Some(Value::Object(o)) = &view.outputs {
        output.extend(o.clone());
    }
    let mut node = Map::new();
    let mut state = Map::new();
    for n in &plan.nodes {
        node.insert(n.name.clone(), Value::Null);
        state.insert(n.name.clone(), json!("pending"));
    }
    for n in &view.nodes {
        node.insert(n.node.clone(), n.value.clone().unwrap_or(Value::Null));
        state.insert(
            n.node.clone(),
            serde_json::to_value(n.state).unwrap_or(Value::Null),
        );
    }
    // A tool's calls are those that reached its server (a `call` node's, a loop's, a
    // heal's replay alike); a reader's, the reads a loop's model made through it, which
    // the journal holds.
    let mut calls: Map<String, Value> = plan
        .tools
        .iter()
        .map(|t| (t.name.clone(), json!(0)))
        .collect();
    let mut arguments: Map<String, Value> = plan
        .tools
        .iter()
        .filter(|t| t.kind == ToolKind::Tool)
        .map(|t| (t.name.clone(), json!([])))
        .collect();
    let mut count = |name: &str| {
        let n = calls.get(name).and_then(Value::as_u64).unwrap_or(0);
        calls.insert(name.to_string(), json!(n + 1));
    };
    for (tool, args) in sent {
        count(tool);
        if let Some(Value::Array(list)) = arguments.get_mut(tool) {
            list.push(args.clone());
        }
    }
    for c in view.calls.iter().flatten() {
        if c.record.kind == CallKind::Read {
            count(&c.record.target);
        }
    }
    let u = &view.usage;
    let thread = json!({
        "status": view.status,
        "heals": view.heals.len(),
        "attempts": view.attempts,
        "model_calls": u.model_calls,
        "tokens_in": u.tokens_in,
        "tokens_out": u.tokens_out,
        "cost_usd": u.cost_usd,
    });
    BTreeMap::from([
        ("output".to_string(), Value::Object(output)),
        ("node".to_string(), Value::Object(node)),
        ("state".to_string(), Value::Object(state)),
        ("calls".to_string(), Value::Object(nested(calls))),
        ("arguments".to_string(), Value::Object(nested(arguments))),
        ("events".to_string(), Value::Object(event_counts(events))),
        ("thread".to_string(), thread),
    ])
}

/// How many events of each kind the thread recorded.
fn event_counts(events: &[RecordedEvent]) -> Map<String, Value> {
    let mut counts: Map<String, Value> = EVENT_KINDS
        .iter()
        .map(|k| (k.to_string(), json!(0)))
        .collect();
    for e in events {
        let n = counts
            .get(e.event.kind())
            .and_then(Value::as_u64)
            .unwrap_or(0);
        counts.insert(e.event.kind().to_string(), json!(n + 1));
    }
    counts
}

/// Tools by the names the plan gives them, an imported library's `ns.tool` as `ns` →
/// `tool`, as the checker types them.
fn nested(by_name: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, v) in by_name {
        match name.split_once('.') {
            Some((ns, rest)) => {
                if let Value::Object(space) = out
                    .entry(ns.to_string())
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    space.insert(rest.to_string(), v);
                }
            }
            None => {
                out.insert(name, v);
            }
        }
    }
    out
}

/// Why `e` does not hold, or `None` when it does. A comparison shows both sides, and a
/// diff of them when they are long.
pub(crate) fn unmet(params: &BTreeMap<String, Value>, e: &Expr) -> Option<String> {
    match eval::expr(params, e) {
        Ok(Value::Bool(true)) => None,
        Ok(other) => Some(match e {
            Expr::Binary {
                operator,
                left,
                right,
            } if ["==", "!=", "<", "<=", ">", ">="].contains(&operator.as_str()) => {
                let l = eval::expr(params, left).unwrap_or(Value::Null);
                let r = eval::expr(params, right).unwrap_or(Value::Null);
                compared(operator, &l, &r)
            }
            _ => format!("it is {}", shown(&other)),
        }),
        Err(err) => Some(format!("it could not be evaluated: {err:?}")),
    }
}

fn compared(operator: &str, l: &Value, r: &Value) -> String {
    let (ls, rs) = match (l, r) {
        // Two strings compare as the texts they are.
        (Value::String(a), Value::String(b)) if a.len() + b.len() > 120 => (a.clone(), b.clone()),
        _ => (pretty(l), pretty(r)),
    };
    if operator == "==" && (ls.contains('\n') || rs.contains('\n') || ls.len() + rs.len() > 120) {
        return format!(
            "the two sides differ (- expected, + got):\n{}",
            crate::text::line_diff(&rs, &ls)
        );
    }
    format!("the left side is {}, the right side {}", shown(l), shown(r))
}

/// A value on one line when it is short, else pretty JSON.
fn shown(v: &Value) -> String {
    let one = v.to_string();
    if one.len() <= 80 { one } else { pretty(v) }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::EVENT_KINDS;

    /// `events` offers every kind the store records: the kinds `Event::kind` names, read
    /// from its source, are the list the checker types `events` by.
    #[test]
    fn every_event_kind_the_store_records_is_counted() {
        let source = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../pipec-store/src/event.rs"),
        )
        .expect("the store's events");
        let body = source
            .split("pub fn kind(&self)")
            .nth(1)
            .and_then(|rest| rest.split("\n    }\n").next())
            .expect("Event::kind");
        let kinds: Vec<&str> = body
            .lines()
            .filter_map(|l| l.split("=> \"").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert!(kinds.len() > 20, "{kinds:?}");
        assert_eq!(kinds, EVENT_KINDS, "pipec_plan::testing::EVENT_KINDS");
    }
}
