//! `pipec show THREAD`: status, nodes with their state and timing, pending gates, the
//! error of a failed node, the resources read (fetches and cache hits per URI) and the
//! links healed; `--internal` adds the journal, the manifests (the links tool calls
//! returned) and attempts; `--events` the stored event history. `--json` prints the
//! runtime's `ThreadView` (docs/show-json.md); this file loads the thread and writes the
//! text.

use std::path::PathBuf;

use serde_json::Value;

use super::common;
use super::runs::fmt_time;
use crate::runtime::show;
use crate::store::{Event, GateState, ItemState, NodeState};
use pipec_base::numbers::thousands;

#[derive(clap::Args)]
pub(super) struct Args {
    thread: String,
    #[arg(long)]
    store: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// Also the journal of calls, the items and the attempts
    #[arg(long)]
    internal: bool,
    /// The stored events, from `--since`
    #[arg(long)]
    events: bool,
    #[arg(long, default_value_t = 0)]
    since: u64,
}

pub(super) fn run(args: Args) -> u8 {
    let store_path = common::store_path(&args.store, &common::default_root());
    let (rt, store) = match common::runtime_and_store_to_read(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let stored = match rt.block_on(show::Stored::load(&*store, &args.thread)) {
        Ok(stored) => stored,
        Err(e) => {
            common::print_error(&e);
            return super::EXIT_FINDINGS;
        }
    };
    if let Some(e) = &stored.plan_error {
        super::err(&format!("warning[{}]: {}", e.code, e.message));
    }
    let Some(t) = &stored.state.thread else {
        return super::EXIT_FINDINGS;
    };
    let (state, all, plan) = (&stored.state, &stored.events, &stored.plan);
    let reads = show::resource_reads(all);
    let mut events: Vec<_> = if args.events {
        all.iter()
            .filter(|e| e.seq >= args.since)
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let order: Vec<String> = plan
        .as_ref()
        .map(|p| p.nodes.iter().map(|n| n.name.clone()).collect())
        .unwrap_or_default();
    // Outputs are not stored; they are computed from the node rows.
    let outputs = stored.outputs();
    // The events as the live stream sent them: `thread_completed` with the outputs.
    for e in &mut events {
        if let (Some(o), Event::ThreadCompleted { outputs: slot }) = (&outputs, &mut e.event) {
            *slot = Some(o.clone());
        }
    }
    let stale = stored.stale;
    if args.events && !args.json {
        for e in &events {
            super::out(&format!(
                "{}\n",
                serde_json::to_string(e).unwrap_or_default()
            ));
        }
        return super::EXIT_OK;
    }
    if args.json {
        let view = stored.view(args.internal, args.events.then_some(events));
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&view).unwrap_or_default()
        ));
        return super::EXIT_OK;
    }
    let mut s = String::new();
    s.push_str(&format!(
        "thread    {}\npipeline  {}\nstatus    {}{}\n",
        t.id,
        t.pipeline,
        if stale {
            "stale (running, but no process holds it)"
        } else {
            t.status.as_str()
        },
        t.holder
            .as_ref()
            .filter(|_| !stale)
            .map(|h| format!(" (process {} on {})", h.pid, h.host))
            .unwrap_or_default()
    ));
    s.push_str(&format!(
        "created   {} UTC\nupdated   {} UTC\nattempts  {}\nsource    {}\n",
        fmt_time(t.created_ms),
        fmt_time(t.updated_ms),
        t.attempts,
        t.source
    ));
    s.push_str(&format!(
        "inputs    {}\n",
        serde_json::to_string(&t.inputs).unwrap_or_default()
    ));
    if !t.model_overrides.is_empty() {
        s.push_str(&format!(
            "models    {}\n",
            t.model_overrides
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let (node_usage, _) = show::usages(all);
    let total = show::UsageView::of(all);
    s.push_str("\nnodes\n");
    let mut rows: Vec<(&String, &crate::store::NodeRec)> = state.nodes.iter().collect();
    rows.sort_by_key(|(name, _)| order.iter().position(|o| o == *name).unwrap_or(usize::MAX));
    for (name, n) in rows {
        let state_word = match n.state {
            NodeState::Done => "done",
            NodeState::Skipped => "skipped",
            NodeState::Failed => "failed",
            NodeState::Running => "running",
        };
        let ms = if n.finished_ms > n.started_ms && n.started_ms > 0 {
            format!("{}ms", n.finished_ms - n.started_ms)
        } else {
            String::new()
        };
        let extra = [
            n.items.map(|i| format!("{i} items")),
            (n.tries > 0).then(|| format!("{} retries", n.tries)),
            (n.crash_count > 0).then(|| format!("{} crashes", n.crash_count)),
            (n.generation > 0).then(|| format!("generation {}", n.generation)),
            node_usage.get(name.as_str()).map(usage_text),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
        s.push_str(&format!("  {name:<24} {state_word:<8} {ms:>8}  {extra}\n"));
        if let Some(e) = &n.error
            && n.state == NodeState::Failed
        {
            s.push_str(&format!("      error[{}]: {}\n", e.code, e.message));
        }
        // Items left out of an `each` list, and why.
        for ((_, _, item), r) in state.items.iter().filter(|((node, g, _), r)| {
            node == name && *g == n.generation && r.state == ItemState::Dropped
        }) {
            match &r.error {
                Some(e) => s.push_str(&format!(
                    "      item {item} dropped: error[{}]: {}\n",
                    e.code, e.message
                )),
                None => s.push_str(&format!("      item {item} dropped\n")),
            }
        }
    }
    if total.model_calls > 0 {
        s.push_str(&format!("\nusage     {}\n", usage_text(&total)));
    }
    let pending: Vec<_> = state
        .gates
        .iter()
        .filter(|(_, g)| g.state == GateState::Pending)
        .collect();
    if !pending.is_empty() {
        s.push_str("\npending gates\n");
        for (name, g) in &pending {
            s.push_str(&format!("  {name}: {}\n", g.message));
            if let Some(request) =
                crate::runtime::ClientAsk::of(g).and_then(|a| a.request().cloned())
            {
                s.push_str(&request_text(&request));
            }
            let defs = g.schema.get("$defs").cloned().unwrap_or(Value::Null);
            let ex = crate::schema::example(&g.schema, &defs);
            s.push_str(&format!(
                "    pipec answer {} {name}='{}'\n",
                t.id,
                serde_json::to_string(&ex).unwrap_or_default()
            ));
        }
    }
    let answered: Vec<_> = state
        .gates
        .iter()
        .filter(|(_, g)| g.state == GateState::Answered)
        .collect();
    if !answered.is_empty() {
        s.push_str("\nanswered gates\n");
        for (name, g) in answered {
            s.push_str(&format!(
                "  {name}: {} (by {})\n",
                serde_json::to_string(&g.answer).unwrap_or_default(),
                g.answered_by.clone().unwrap_or_default()
            ));
        }
    }
    if !reads.is_empty() {
        s.push_str("\nresources read\n");
        for r in &reads {
            s.push_str(&format!(
                "  {}  {} fetch{}, {} cache hit{}, {} (by {})\n",
                r.uri,
                r.fetches,
                if r.fetches == 1 { "" } else { "es" },
                r.cache_hits,
                if r.cache_hits == 1 { "" } else { "s" },
                crate::runtime::progress::human_bytes(r.bytes),
                r.by.join(", ")
            ));
        }
    }
    if !state.heals.is_empty() {
        s.push_str("\nlinks healed\n");
        for (o, h) in &state.heals {
            s.push_str(&format!(
                "  {}[{}] {}: {} -> {} (by `{}` replaying {}, {} time{}; it had answered {})\n",
                o.node,
                o.index,
                h.to.kind.as_deref().unwrap_or("link"),
                h.from_uri,
                h.to.uri,
                h.by_node,
                h.replay_call,
                h.number,
                if h.number == 1 { "" } else { "s" },
                h.cause
            ));
        }
    }
    if let Some(e) = &t.error {
        s.push_str(&format!("\nerror[{}]: {}\n", e.code, e.message));
        if let Some(h) = &e.help {
            s.push_str(&format!("  help: {h}\n"));
        }
    }
    if let Some(o) = &outputs {
        s.push_str(&format!(
            "\noutputs\n{}\n",
            serde_json::to_string_pretty(o).unwrap_or_default()
        ));
    }
    if args.internal {
        s.push_str("\njournal\n");
        for (k, c) in &state.calls {
            s.push_str(&format!(
                "  {:<28} {:<10} {} {} args {}{}\n",
                k.display(),
                c.state.as_str(),
                c.kind,
                c.target,
                c.args_hash,
                c.decision
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ));
        }
        let links = show::manifests(state);
        if !links.is_empty() {
            s.push_str("\nmanifests (links, and content the tool calls returned in place)\n");
            for show::ManifestEntry {
                node,
                item,
                link: r,
            } in links
            {
                let at = match item {
                    Some(i) => format!("{node}[{i}]"),
                    None => node,
                };
                let made = r
                    .producing_call
                    .as_ref()
                    .map(|c| {
                        format!(
                            " from {} {} ({}{})",
                            c.tool,
                            serde_json::to_string(&c.args).unwrap_or_default(),
                            c.call,
                            if c.read_only {
                                ", read-only"
                            } else if c.idempotent {
                                ", idempotent"
                            } else {
                                ""
                            }
                        )
                    })
                    .unwrap_or_default();
                // Content carried in place: its MIME type and size, never its bytes
                // (`--json` has them). An image or audio block has no URI and no kind.
                let mime = r.mime.as_deref().unwrap_or("no MIME type");
                let size = crate::runtime::progress::human_bytes(r.size.unwrap_or(0));
                let (kind, what) = match &r.embedded {
                    Some(e) if r.uri.is_empty() => (
                        format!("({})", e.block),
                        format!("{mime}, {size}, in place"),
                    ),
                    Some(_) => (
                        r.kind.clone().unwrap_or_else(|| "(no kind)".into()),
                        format!("{} (embedded: {mime}, {size})", r.uri),
                    ),
                    None => (
                        r.kind.clone().unwrap_or_else(|| "(no kind)".into()),
                        r.uri.clone(),
                    ),
                };
                s.push_str(&format!("  {at:<16} {kind:<18} {what}{made}\n"));
            }
        }
        if !state.items.is_empty() {
            s.push_str("\nitems\n");
            for ((n, g, i), r) in &state.items {
                let state = serde_json::to_value(r.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                s.push_str(&format!("  {n}[{i}] gen {g}: {state}\n"));
            }
        }
        s.push_str("\nattempts\n");
        for a in &state.attempts {
            s.push_str(&format!(
                "  #{} pid {} on {} from {} {}\n",
                a.number,
                a.pid,
                a.host,
                fmt_time(a.started_ms),
                a.end
                    .clone()
                    .unwrap_or_else(|| "(did not end cleanly)".into())
            ));
        }
    }
    super::out(&s);
    super::EXIT_OK
}

/// A client model's request as a person reads it: the system prompt and each message,
/// by role, indented under its gate.
/// Model calls in a line: "2 model calls, 1,200 in (300 cached) / 80 out tokens, 1.4s,
/// $0.0042" (the models' time, call after call).
pub(super) fn usage_text(u: &show::UsageView) -> String {
    let cached = if u.tokens_cached > 0 {
        format!(" ({} cached)", thousands(u.tokens_cached))
    } else {
        String::new()
    };
    format!(
        "{} model call{}, {} in{cached} / {} out tokens, {}, {}",
        u.model_calls,
        if u.model_calls == 1 { "" } else { "s" },
        thousands(u.tokens_in),
        thousands(u.tokens_out),
        if u.model_ms < 1000 {
            format!("{}ms", u.model_ms)
        } else {
            format!("{:.1}s", u.model_ms as f64 / 1000.0)
        },
        cost_text(u)
    )
}

/// A cost in US dollars ("$0.0042"), and the calls left out of it.
pub(super) fn cost_text(u: &show::UsageView) -> String {
    let priced = u.model_calls - u.unpriced_calls.min(u.model_calls);
    let dollars = if u.cost_usd >= 1.0 {
        format!("${:.2}", u.cost_usd)
    } else {
        format!("${:.4}", u.cost_usd)
    };
    match (priced, u.unpriced_calls) {
        (_, 0) => dollars,
        (0, _) => "cost unknown (no prices)".into(),
        (_, n) => format!(
            "{dollars} + {n} unpriced call{}",
            if n == 1 { "" } else { "s" }
        ),
    }
}

fn request_text(request: &Value) -> String {
    let mut s = String::new();
    let mut said = |role: &str, text: &str| {
        s.push_str(&format!("    {role}:\n"));
        for line in text.lines() {
            s.push_str(&format!("      {line}\n"));
        }
    };
    if let Some(system) = request.get("systemPrompt").and_then(Value::as_str) {
        said("system", system);
    }
    for m in request["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("user");
        said(role, m["content"]["text"].as_str().unwrap_or_default());
    }
    s
}
