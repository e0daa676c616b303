//! Prompt templates (`.jinja` files under `prompts/`): which nodes render a template, and
//! the variables (their parameters) and fields a template can use.

use std::path::Path;

use super::hover::path_type;
use super::index::Sym;
use super::workspace::Snapshot;
use pipec_base::source::{Span, normalize_path};
use pipec_check::hir::{Body, NodeId, Template};
use pipec_check::ty::display;

/// The nodes whose prompt or message is the template at `path` or includes it.
pub(crate) fn nodes_using(snap: &Snapshot, path: &Path) -> Vec<NodeId> {
    let hir = &snap.analysis.hir;
    let prompts = hir.project_root.join("prompts");
    let uses = |t: &Template| {
        t.sources
            .iter()
            .any(|(name, _)| normalize_path(&prompts.join(name)) == path)
    };
    let mut nodes: Vec<NodeId> = hir
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| match &n.body {
            Body::Model { prompt, .. } => uses(prompt),
            Body::Gate {
                message: Some(m), ..
            } => uses(m),
            _ => false,
        })
        .map(|(i, _)| i as NodeId)
        .collect();
    // A template that does not parse leaves its node without a body; the node that
    // names it in `file("...")` still renders it.
    let sym = Sym::File(path.to_path_buf());
    for occ in snap.index().of(&sym) {
        if let Some(i) = hir
            .nodes
            .iter()
            .position(|n| n.info.file == occ.file && n.info.span.contains(occ.span))
            && !nodes.contains(&(i as NodeId))
        {
            nodes.push(i as NodeId);
        }
    }
    nodes
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The dotted name under the cursor (`ticket.title`), up to the end of the word the
/// cursor is in, and the span of that last word.
pub(crate) fn path_at(text: &str, offset: u32) -> Option<(Span, Vec<String>)> {
    let offset = pipec_base::source::floor_char_boundary(text, offset as usize);
    let start = text[..offset]
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c) || *c == '.')
        .last()
        .map_or(offset, |(i, _)| i);
    let end = text[offset..]
        .char_indices()
        .find(|(_, c)| !is_word(*c))
        .map_or(text.len(), |(i, _)| offset + i);
    let written = &text[start..end];
    if written.is_empty() || written.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let words: Vec<String> = written.split('.').map(str::to_string).collect();
    let last_len = words.last().map_or(0, String::len);
    if last_len == 0 {
        return None;
    }
    Some((Span::new((end - last_len) as u32, end as u32), words))
}

/// The type of a template variable (or a field path below one), per node that renders
/// the template.
pub(crate) fn variable_hover(snap: &Snapshot, path: &Path, words: &[String]) -> Option<String> {
    let hir = &snap.analysis.hir;
    let (head, rest) = words.split_first()?;
    let mut lines = Vec::new();
    for n in nodes_using(snap, path) {
        let node = hir.node(n);
        let Some(p) = node.params.iter().find(|p| &p.name == head) else {
            continue;
        };
        let Some(ty) = path_type(hir, &p.ty, rest) else {
            continue;
        };
        let mut line = format!(
            "```pipe\n{}: {}\n```\n\nparameter `{}` of `{}`",
            words.join("."),
            display(hir, &ty),
            p.name,
            node.info.display
        );
        if let Some(doc) = &p.doc
            && rest.is_empty()
        {
            line.push_str(&format!("\n\n{doc}"));
        }
        lines.push(line);
    }
    (!lines.is_empty()).then(|| lines.join("\n\n"))
}
