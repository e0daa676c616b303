//! `pipec budget FILE [--json]`: the worst-case prompt of every model node, part by part,
//! against its model's context window, and what a call costs at best and at worst. The
//! figures are the checker's (`pipec_check::budget`), the same that P0408 reports from.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::check::budget::{Fits, NodeBudget, Origin, budgets};
use crate::source::FsLoader;
use pipec_base::numbers::thousands;
use pipec_syntax::literal::size_text;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The .pipe file whose model nodes to size
    file: PathBuf,
    /// Print the budgets as JSON
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: Args) -> u8 {
    if !args.file.is_file() {
        super::err(&format!(
            "error: cannot read `{}`: no such file",
            args.file.display()
        ));
        return EXIT_USAGE;
    }
    let name = args.file.to_string_lossy().into_owned();
    let analysis = crate::analyze(&FsLoader, &args.file, &name);
    if analysis.has_errors() {
        super::common::print_errors(&analysis);
        return EXIT_FINDINGS;
    }
    let all = budgets(&analysis.hir);
    if args.json {
        let doc = json!({
            "budget_version": 1,
            "file": name,
            "nodes": all.iter().map(node_json).collect::<Vec<_>>(),
        });
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
    } else if all.is_empty() {
        super::out(&format!(
            "{name}: no `think`, `agent` or `act` node calls a model\n"
        ));
    } else {
        let tables: Vec<String> = all.iter().map(table).collect();
        super::out(&tables.join("\n"));
    }
    if all.iter().any(|b| b.fits() == Fits::No) {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    }
}

fn origin(o: Origin) -> &'static str {
    match o {
        Origin::Declared => "declared",
        Origin::Table => "table",
    }
}

fn tokenizer(b: &NodeBudget) -> String {
    format!(
        "{}{}",
        b.tokenizer.encoding.name(),
        if b.tokenizer.exact { "" } else { " (estimate)" }
    )
}

/// One node as a table of its parts.
fn table(b: &NodeBudget) -> String {
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let mut row = |what: &str, n: String, note: String| rows.push((what.to_string(), n, note));
    row(
        "template",
        thousands(b.template),
        "its text, fixed-width values, one item of each loop, chat format".into(),
    );
    if b.output_schema > 0 {
        row(
            "output_schema",
            thousands(b.output_schema),
            "as the template prints it".into(),
        );
    }
    if b.reply_format > 0 {
        row(
            "reply format",
            thousands(b.reply_format),
            "the output's schema, sent with the request".into(),
        );
    }
    if b.tool_count > 0 {
        row(
            &format!("tools ({})", b.tool_count),
            thousands(b.tools),
            "their schemas, sent with every call".into(),
        );
    }
    for input in &b.inputs {
        let bound = input
            .cap_bytes
            .map(|c| format!("capped at {}", size_text(c)));
        match (input.tokens, input.unbounded.is_empty()) {
            (n, true) => row(
                &format!("input {}", input.name),
                thousands(n),
                bound.unwrap_or_default(),
            ),
            (0, false) => row(
                &format!("input {}", input.name),
                "unbounded".into(),
                format!("no bound: {}", input.unbounded.join(", ")),
            ),
            (n, false) => row(
                &format!("input {}", input.name),
                format!("{} + unbounded", thousands(n)),
                format!("no bound: {}", input.unbounded.join(", ")),
            ),
        }
    }
    for what in &b.opaque {
        row(
            "template part",
            "unbounded".into(),
            format!("pipec cannot size {what}"),
        );
    }
    match b.reply {
        Some((n, Origin::Declared)) => row("reply", thousands(n), "max_tokens".into()),
        Some((n, Origin::Table)) => row(
            "reply",
            thousands(n),
            format!(
                "the model's largest reply (table of {})",
                crate::plan::windows::TABLE_DATE
            ),
        ),
        None => row(
            "reply",
            "unknown".into(),
            "no max_tokens, and a model pipec's table does not know".into(),
        ),
    }
    row(
        "worst case",
        thousands(b.worst()),
        if b.is_bounded() {
            String::new()
        } else {
            "and what has no bound".into()
        },
    );
    match b.window {
        Some((n, Origin::Declared)) => row("window", thousands(n), "context_window".into()),
        Some((n, Origin::Table)) => row(
            "window",
            thousands(n),
            format!("table of {}", crate::plan::windows::TABLE_DATE),
        ),
        None => row(
            "window",
            "unknown".into(),
            "declare `context_window` on the model".into(),
        ),
    }
    let over = b.worst().saturating_sub(b.window.map_or(0, |w| w.0));
    let fits_note = match b.fits() {
        Fits::No => format!("{} tokens over", thousands(over)),
        Fits::Unbounded => "what is bounded fits; the rest has no bound".into(),
        Fits::Unknown => "the window is unknown".into(),
        Fits::Yes => String::new(),
    };
    row("fits", b.fits().as_str().into(), fits_note);
    let calls = match (b.calls, b.kind) {
        (Some(1), pipec_syntax::ast::NodeKind::Think) => "a call".to_string(),
        (Some(1), _) => "a call; a tool loop calls once per turn".to_string(),
        (Some(n), _) => format!("a call; up to {n} calls, one per item"),
        (None, _) => "a call; one per item, with no `max:`".to_string(),
    };
    let priced = match b.prices {
        Some((_, Origin::Declared)) => "declared prices",
        Some((_, Origin::Table)) => "table prices",
        None => "no prices declared, and a model pipec's table does not know",
    };
    match b.cost_per_call() {
        None => row("cost", "unknown".into(), priced.into()),
        Some((best, worst)) => {
            row(
                "cost, best",
                dollars(best),
                format!("{calls}: the template alone, no reply ({priced})"),
            );
            if b.is_bounded() && b.reply.is_some() {
                row(
                    "cost, worst",
                    dollars(worst),
                    format!("{calls}: the worst case, the whole reply"),
                );
            } else {
                row(
                    "cost, worst",
                    format!("{} +", dollars(worst)),
                    "what is bounded, and more with what has no bound".into(),
                );
            }
        }
    }

    let width = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let num = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let model = match &b.model_name {
        Some(n) => format!("{} ({n})", b.model),
        None => b.model.clone(),
    };
    let mut text = format!(
        "{} ({}): model {model}, tokenizer {}\n",
        b.name,
        b.kind.keyword(),
        tokenizer(b)
    );
    for (what, n, note) in rows {
        let line = format!("  {what:<width$}  {n:>num$}  {note}");
        text.push_str(line.trim_end());
        text.push('\n');
    }
    if b.inputs
        .iter()
        .any(|i| i.cap_bytes.is_some() && i.tokens > 0)
    {
        text.push_str(&format!(
            "  (a capped input is counted as prose, {:.1} bytes a token)\n",
            b.prose_bytes_per_token
        ));
    }
    text
}

fn dollars(d: f64) -> String {
    if d >= 1.0 {
        format!("${d:.2}")
    } else if d >= 0.01 {
        format!("${d:.4}")
    } else {
        format!("${d:.6}")
    }
}

fn node_json(b: &NodeBudget) -> Value {
    json!({
        "node": b.name,
        "kind": b.kind.keyword(),
        "model": b.model,
        "model_name": b.model_name,
        "tokenizer": { "name": b.tokenizer.encoding.name(), "exact": b.tokenizer.exact },
        "template": b.template,
        "output_schema": b.output_schema,
        "reply_format": b.reply_format,
        "tools": { "count": b.tool_count, "tokens": b.tools },
        "inputs": b.inputs.iter().map(|i| json!({
            "name": i.name,
            "tokens": i.tokens,
            "max_bytes": i.cap_bytes,
            "unbounded": i.unbounded,
        })).collect::<Vec<_>>(),
        "unsizable": b.opaque,
        "reply": b.reply.map(|(n, o)| json!({ "tokens": n, "from": origin(o) })),
        "prompt": b.prompt(),
        "worst_case": b.worst(),
        "bounded": b.is_bounded(),
        "window": b.window.map(|(n, o)| json!({ "tokens": n, "from": origin(o) })),
        "fits": b.fits().as_str(),
        "calls": b.calls,
        "prose_bytes_per_token": (b.prose_bytes_per_token * 100.0).round() / 100.0,
        "cost_per_call": b.cost_per_call().map(|(best, worst)| json!({
            "best": best,
            "worst": worst,
            "worst_is_bounded": b.is_bounded() && b.reply.is_some(),
            "prices": b.prices.map(|(_, o)| origin(o)),
        })),
    })
}
