//! The pass that reports P0408 prompt-exceeds-context.

use crate::budget::{Fits, NodeBudget, Origin, Precision, Shared, node_budget};
use crate::lint::LintContext;
use pipec_base::numbers::thousands;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules::PROMPT_EXCEEDS_CONTEXT;
use pipec_syntax::literal::size_text;

/// The inputs a message names, largest first.
const NAMED_INPUTS: usize = 3;

pub(crate) fn check(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    // A value whose type or cap did not check has no size to speak of.
    if cx.has_errors {
        return;
    }
    let hir = cx.hir;
    let shared = Shared::new(hir);
    for id in 0..hir.nodes.len() as u32 {
        // A byte is at least a token: a node whose bytes fit needs no tokenizer (most
        // nodes, and every node of a model whose window nobody knows).
        let Some(rough) = node_budget(hir, &shared, id, Precision::Bytes) else {
            continue;
        };
        if matches!(rough.fits(), Fits::Unknown | Fits::Yes | Fits::Unbounded) {
            continue;
        }
        let Some(b) = node_budget(hir, &shared, id, Precision::Tokens) else {
            continue;
        };
        if b.fits() == Fits::No {
            out.push(diagnostic(&b));
        }
    }
}

fn diagnostic(b: &NodeBudget) -> Diagnostic {
    let (window, origin) = b.window.unwrap_or((0, Origin::Declared));
    let model = match &b.model_name {
        Some(name) => format!("`{}` ({name})", b.model),
        None => format!("`{}`", b.model),
    };
    let whose = match origin {
        Origin::Declared => "its `context_window`",
        Origin::Table => "pipec's table",
    };
    let estimate = if b.tokenizer.exact { "" } else { "about " };
    let prompt = format!("{estimate}{} tokens", thousands(b.prompt()));
    let message = match b.reply {
        Some((n, origin)) => format!(
            "the worst-case prompt of `{}` ({prompt}) and {} ({} tokens) do not fit the {}-token window of {model}",
            b.name,
            match origin {
                Origin::Declared => "its reply's `max_tokens`",
                Origin::Table => "the longest reply the model may write",
            },
            thousands(n),
            thousands(window),
        ),
        None => format!(
            "the worst-case prompt of `{}` ({prompt}) does not fit the {}-token window of {model}",
            b.name,
            thousands(window),
        ),
    };
    let mut d =
        Diagnostic::new(&PROMPT_EXCEEDS_CONTEXT, b.file, b.name_span, message).label(format!(
            "{estimate}{} of {} tokens ({whose})",
            thousands(b.worst()),
            thousands(window)
        ));
    let mut largest: Vec<_> = b.inputs.iter().filter(|i| i.tokens > 0).collect();
    largest.sort_by(|a, b| b.tokens.cmp(&a.tokens).then(a.name.cmp(&b.name)));
    let total = b.worst().max(1);
    for input in largest.iter().take(NAMED_INPUTS) {
        let cap = input
            .cap_bytes
            .map(|c| format!(", capped at {}", size_text(c)))
            .unwrap_or_default();
        d = d.secondary(
            b.file,
            input.span,
            format!(
                "`{}`: up to {estimate}{} tokens ({}%{cap})",
                input.name,
                thousands(input.tokens),
                (u128::from(input.tokens) * 100 / u128::from(total))
            ),
        );
    }
    let unbounded: Vec<String> = b
        .inputs
        .iter()
        .flat_map(|i| i.unbounded.iter().map(|p| format!("`{p}`")))
        .collect();
    if !unbounded.is_empty() {
        d = d.note(format!(
            "{} no bound and {} counted as empty here: the prompt can be larger still",
            if unbounded.len() == 1 {
                format!("{} has", unbounded[0])
            } else {
                format!("{} have", unbounded.join(", "))
            },
            if unbounded.len() == 1 { "is" } else { "are" }
        ));
    }
    let what = match largest.first() {
        Some(top) if top.cap_bytes.is_some() => format!(
            "lower the cap of `{}` (`max_bytes`, or `max_total` for a list of linked resources), ",
            top.name
        ),
        _ => String::new(),
    };
    d.help(format!(
        "{what}split the work over several nodes, or use a model with a larger window; `pipec budget` shows every part"
    ))
}
