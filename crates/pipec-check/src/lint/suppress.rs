//! `// pipec: allow(rule-name)` comments: a warning is silenced for the declaration (or
//! parameter, field, setting) that starts on the next line of code. An allow that
//! silences nothing is reported, so stale ones do not pile up.

use crate::SyntaxFile;
use pipec_base::names;
use pipec_base::source::{FileId, SourceDb, Span};
use pipec_diagnostic::rules::{ALL_RULES, UNUSED_FAMILY, UNUSED_SUPPRESSION, find_rule};
use pipec_diagnostic::{Applicability, Diagnostic, Edit, Fix, Severity};
use pipec_syntax::ast::{self, ItemKind, SettingValue};
use pipec_syntax::lexer::CommentKind;

struct Allow {
    file: FileId,
    comment: Span,
    /// The edit that removes this name from its comment (or the comment, if it is the
    /// only name).
    removal: Option<Edit>,
    rule: &'static pipec_diagnostic::Rule,
    /// The element it covers.
    target: Span,
    used: bool,
}

/// Removes silenced diagnostics and reports allows that silenced nothing.
/// With `has_errors`, warnings of the "unused" family are not reported (see `analyze`),
/// so allows for them are not reported as silencing nothing either.
pub fn apply_suppressions(
    syntax: &[SyntaxFile],
    db: &SourceDb,
    diags: &mut Vec<Diagnostic>,
    has_errors: bool,
) {
    let mut allows: Vec<Allow> = Vec::new();
    let mut extra: Vec<Diagnostic> = Vec::new();
    for file in syntax {
        let src = db.get(file.file);
        let mut elements: Vec<Span> = Vec::new();
        for item in &file.ast.items {
            collect_elements(item, &mut elements);
        }
        for c in &file.comments {
            if c.kind != CommentKind::Line {
                continue;
            }
            let Some(names) = parse_allow(&c.text) else {
                continue;
            };
            let entries = allow_entries(src.slice(c.span))
                .filter(|e| e.len() == names.len())
                .unwrap_or_default();
            // The first line of code after the comment.
            let mut line = src.line_of(c.span.start) + 1;
            let target_start = loop {
                let Some(span) = src.line_span(line) else {
                    break None;
                };
                let text = src.slice(span).trim();
                if text.is_empty() || text.starts_with("//") {
                    line += 1;
                    continue;
                }
                break Some(
                    span.start
                        + (src.slice(span).len() - src.slice(span).trim_start().len()) as u32,
                );
            };
            let target = target_start.and_then(|start| {
                elements
                    .iter()
                    .filter(|e| e.start == start)
                    .max_by_key(|e| e.len())
                    .copied()
            });
            for (index, name) in names.into_iter().enumerate() {
                let entry = entries.get(index).map(|e| e.shift(c.span.start));
                let removal = removal_edit(file.file, src, c, &entries, index);
                let rule = find_rule(&name);
                let problem = match (rule, target) {
                    (None, _) => {
                        let near = names::suggestion(&name, ALL_RULES.iter().map(|r| r.name));
                        let mut d = Diagnostic::new(&UNUSED_SUPPRESSION, file.file, c.span, format!("`{name}` names no rule"))
                            .label("silences nothing");
                        if let Some(entry) = entry {
                            d = d.did_you_mean(db, file.file, entry, &name, near.as_ref());
                        }
                        extra.push(d);
                        None
                    }
                    (Some(r), _) if r.severity == Severity::Error => Some((
                        format!("`{}` is an error and cannot be silenced", r.name),
                        Some("fix the problem instead; only warnings can be allowed".to_string()),
                    )),
                    (Some(_), None) => Some((
                        "this allow is not above a declaration".to_string(),
                        Some("put it on the line right above the declaration, parameter, field or setting it is for".to_string()),
                    )),
                    (Some(r), Some(t)) => {
                        allows.push(Allow { file: file.file, comment: c.span, removal, rule: r, target: t, used: false });
                        None
                    }
                };
                if let Some((msg, help)) = problem {
                    extra.push(
                        Diagnostic::new(&UNUSED_SUPPRESSION, file.file, c.span, msg)
                            .label("silences nothing")
                            .maybe_help(help),
                    );
                }
            }
        }
    }
    diags.retain(|d| {
        let Some(p) = &d.primary else { return true };
        let mut keep = true;
        for a in allows.iter_mut() {
            if a.file == p.file
                && a.rule.code == d.rule.code
                && a.target.contains(p.span)
                && d.severity == Severity::Warning
            {
                a.used = true;
                keep = false;
            }
        }
        keep
    });
    for a in allows
        .iter()
        .filter(|a| !a.used)
        .filter(|a| !(has_errors && UNUSED_FAMILY.contains(&a.rule.code)))
    {
        let mut d = Diagnostic::new(
            &UNUSED_SUPPRESSION,
            a.file,
            a.comment,
            format!("`allow({})` silences nothing here", a.rule.name),
        )
        .label("nothing to silence")
        .help("remove the comment");
        if let Some(edit) = &a.removal {
            // A comment that silences nothing does nothing: removing it changes no meaning.
            d = d.fix(Fix {
                title: format!("remove `allow({})`", a.rule.name),
                applicability: Applicability::Safe,
                edits: vec![edit.clone()],
            });
        }
        extra.push(d);
    }
    diags.extend(extra);
}

/// Where each name of an allow comment is, relative to the comment's start (the comment
/// text from its slashes on).
fn allow_entries(comment: &str) -> Option<Vec<Span>> {
    let open = comment.find("allow")? + "allow".len();
    let open = open + comment[open..].find('(')? + 1;
    let close = open + comment[open..].find(')')?;
    let mut out = Vec::new();
    let mut at = open;
    for part in comment[open..close].split(',') {
        let lead = part.len() - part.trim_start().len();
        let name = part.trim();
        if !name.is_empty() {
            let start = (at + lead) as u32;
            out.push(Span::new(start, start + name.len() as u32));
        }
        at += part.len() + 1;
    }
    Some(out)
}

/// The edit that takes the `index`th name out of an allow comment: with its comma when
/// others remain, or the whole comment (and its line, when it has one of its own).
fn removal_edit(
    file: FileId,
    src: &pipec_base::source::SourceFile,
    c: &pipec_syntax::lexer::Comment,
    entries: &[Span],
    index: usize,
) -> Option<Edit> {
    let entry = *entries.get(index)?;
    let span = if entries.len() > 1 {
        let rel = if let Some(next) = entries.get(index + 1) {
            Span::new(entry.start, next.start)
        } else {
            Span::new(entries[index - 1].end, entry.end)
        };
        rel.shift(c.span.start)
    } else if c.own_line {
        let line = src.line_of(c.span.start);
        let start = src.line_span(line)?.start;
        let end = match src.line_span(line + 1) {
            Some(next) => next.start,
            None => c.span.end,
        };
        Span::new(start, end)
    } else {
        // After code on the same line: the comment and the blanks before it.
        let before = &src.text[..c.span.start as usize];
        let start = before.trim_end_matches([' ', '\t']).len() as u32;
        Span::new(start, c.span.end)
    };
    Some(Edit {
        file,
        span,
        replacement: String::new(),
    })
}

/// `pipec: allow(a, b)` → `[a, b]`.
fn parse_allow(text: &str) -> Option<Vec<String>> {
    let rest = text.trim().strip_prefix("pipec:")?.trim_start();
    let inner = rest.strip_prefix("allow")?.trim_start().strip_prefix('(')?;
    let inner = &inner[..inner.find(')')?];
    Some(
        inner
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

fn collect_elements(item: &ast::Item, out: &mut Vec<Span>) {
    out.push(item.doc.as_ref().map_or(item.span, |_| item.span));
    let block = |b: &ast::Block, out: &mut Vec<Span>| block_elements(b, out);
    match &item.kind {
        ItemKind::Type(t) => {
            if let ast::TypeDeclBody::Record(r) = &t.body {
                out.extend(r.fields.iter().map(|f| f.span));
            }
        }
        ItemKind::Enum(e) => out.extend(e.variants.iter().map(|v| v.span)),
        ItemKind::Server(b) | ItemKind::Model(b) | ItemKind::Test(b) => block(&b.body, out),
        ItemKind::Tool(t) | ItemKind::Reader(t) => {
            out.extend(t.params.params.iter().map(|p| p.span));
            if let Some(b) = &t.body {
                block(b, out);
            }
        }
        ItemKind::Node(n) => {
            out.extend(n.params.params.iter().map(|p| p.span));
            block(&n.body, out);
        }
        ItemKind::Serve(s) => {
            for e in &s.entries {
                out.push(e.span);
                block(&e.body, out);
            }
            for p in &s.prompts {
                out.push(p.span);
                out.extend(p.params.params.iter().map(|p| p.span));
                block(&p.body, out);
            }
            for t in &s.tools {
                out.push(t.span);
                block(&t.body, out);
            }
        }
        _ => {}
    }
}

fn block_elements(b: &ast::Block, out: &mut Vec<Span>) {
    for s in &b.settings {
        out.push(s.span);
        if let SettingValue::Block(inner) = &s.value {
            block_elements(inner, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_allow;

    #[test]
    fn allow_comments() {
        assert_eq!(
            parse_allow(" pipec: allow(unused-node, P0403)"),
            Some(vec!["unused-node".into(), "P0403".into()])
        );
        assert_eq!(parse_allow("pipec:allow( x )"), Some(vec!["x".into()]));
        assert_eq!(parse_allow("a normal comment"), None);
    }
}
