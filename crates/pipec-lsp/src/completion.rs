//! Completion: node and input names in sources, fields after `.`, link kinds in `ref:`
//! and `links = [...]`, tools in `tools = [...]`, the settings a node kind takes, type
//! names, and template variables in `.jinja` files.
//!
//! Where the cursor is comes from the text around it rather than the syntax tree, since
//! the declaration being typed usually does not parse yet; what can go there comes from
//! the last check.

use std::path::Path;

use lsp_types::{CompletionItem, CompletionItemKind, CompletionParams, CompletionResponse};
use serde_json::Value;

use super::documents;
use super::documents::OverlayLoader;
use super::index::fields_of;
use super::server::{Answer, Failure, known_path};
use super::templates;
use super::workspace::{Snapshot, Workspace};
use pipec_base::source::{FileId, Loader, normalize_path};
use pipec_check::hir::{Hir, NodeId};
use pipec_check::ty::{Ty, display};
use pipec_syntax::ast::NodeKind;

pub(crate) fn completion(ws: &mut Workspace, p: CompletionParams) -> Answer {
    let path = known_path(ws, &p.text_document_position.text_document.uri)?;
    let Some((snap, file)) = ws.snapshot_for(&path) else {
        return Ok(Value::Null);
    };
    let text = &snap.analysis.db.get(file).text;
    let offset = documents::offset(text, p.text_document_position.position) as usize;
    let items = if path.extension().is_some_and(|e| e != "pipe") {
        template_items(snap, &path, text, offset)
    } else {
        let hir = &snap.analysis.hir;
        // The node being typed usually does not parse, so the last check does not have
        // it: check once more with a placeholder name at the cursor, as if the user had
        // finished the word.
        let needs_patch = enclosing_item(text, offset).is_some_and(|(kw, name, _)| {
            NodeKind::from_keyword(&kw).is_some() && node_named(hir, file, &name).is_none()
        });
        let patched = needs_patch
            .then(|| patched_analysis(ws, snap, &path, text, offset))
            .flatten();
        match &patched {
            Some((analysis, pfile)) => pipe_items(&analysis.hir, *pfile, text, offset),
            None => pipe_items(hir, file, text, offset),
        }
    };
    serde_json::to_value(CompletionResponse::Array(items))
        .map_err(|e| Failure::invalid(e.to_string()))
}

fn item(label: &str, kind: CompletionItemKind, detail: impl Into<String>) -> CompletionItem {
    let detail = detail.into();
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: (!detail.is_empty()).then_some(detail),
        ..CompletionItem::default()
    }
}

fn field_items(hir: &Hir, ty: &Ty) -> Vec<CompletionItem> {
    fields_of(hir, ty)
        .iter()
        .map(|f| {
            let mut i = item(&f.name, CompletionItemKind::FIELD, display(hir, &f.ty));
            if let Some(doc) = &f.doc {
                i.documentation = Some(lsp_types::Documentation::String(doc.clone()));
            }
            i
        })
        .collect()
}

/// `a.b.` or `a.b.pa` just before the cursor: the complete words before the last dot.
fn dotted_prefix(before: &str) -> Option<Vec<String>> {
    let tail: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let (head, _partial) = tail.rsplit_once('.')?;
    if head.is_empty() {
        return None;
    }
    Some(head.split('.').map(str::to_string).collect())
}

fn template_items(snap: &Snapshot, path: &Path, text: &str, offset: usize) -> Vec<CompletionItem> {
    let hir = &snap.analysis.hir;
    let before = &text[..offset];
    let nodes = templates::nodes_using(snap, path);
    let mut items: Vec<CompletionItem> = Vec::new();
    let mut push = |i: CompletionItem| {
        if !items.iter().any(|o| o.label == i.label) {
            items.push(i);
        }
    };
    if let Some(words) = dotted_prefix(before) {
        for n in &nodes {
            let node = hir.node(*n);
            let Some(p) = node.params.iter().find(|p| p.name == words[0]) else {
                continue;
            };
            if let Some(ty) = super::hover::path_type(hir, &p.ty, &words[1..]) {
                for i in field_items(hir, &ty) {
                    push(i);
                }
            }
        }
    } else {
        for n in &nodes {
            let node = hir.node(*n);
            for p in &node.params {
                push(item(
                    &p.name,
                    CompletionItemKind::VARIABLE,
                    format!(
                        "{} (parameter of `{}`)",
                        display(hir, &p.ty),
                        node.info.display
                    ),
                ));
            }
        }
    }
    items
}

/// The top-level declaration the cursor is in: its keyword, name and start.
fn enclosing_item(text: &str, offset: usize) -> Option<(String, String, usize)> {
    let mut line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    loop {
        let line = &text[line_start..];
        let first = line
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .next()?;
        if !first.is_empty() && !line.starts_with(char::is_whitespace) {
            let rest = line[first.len()..].trim_start();
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            return Some((first.to_string(), name, line_start));
        }
        if line_start == 0 {
            return None;
        }
        line_start = text[..line_start - 1].rfind('\n').map_or(0, |i| i + 1);
    }
}

/// Open parentheses, braces and brackets between `from` and `to`, strings and comments
/// skipped.
fn depths(text: &str, from: usize, to: usize) -> (i32, i32, i32) {
    let (mut paren, mut brace, mut bracket) = (0, 0, 0);
    let mut in_str = false;
    let mut chars = text[from..to].chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '(' => paren += 1,
            ')' => paren -= 1,
            '{' => brace += 1,
            '}' => brace -= 1,
            '[' => bracket += 1,
            ']' => bracket -= 1,
            _ => {}
        }
    }
    (paren, brace, bracket)
}

fn node_named(hir: &Hir, file: FileId, name: &str) -> Option<NodeId> {
    hir.nodes
        .iter()
        .position(|n| n.info.file == file && n.info.name == name)
        .map(|i| i as NodeId)
}

/// The placeholder completion checks with.
const PLACEHOLDER: &str = "pipec_completion_placeholder";

/// The program checked again with the placeholder inserted at the cursor.
fn patched_analysis(
    ws: &Workspace,
    snap: &Snapshot,
    path: &Path,
    text: &str,
    offset: usize,
) -> Option<(pipec_check::Analysis, FileId)> {
    let root = snap.analysis.db.get(snap.analysis.hir.root?).path.clone();
    let mut patched = text.to_string();
    patched.insert_str(offset, PLACEHOLDER);
    let loader = PatchedLoader {
        inner: OverlayLoader {
            documents: &ws.documents,
        },
        path,
        text: &patched,
    };
    let analysis = pipec_check::analyze(&loader, &root, &root.display().to_string());
    let file = analysis.db.find(path)?;
    Some((analysis, file))
}

struct PatchedLoader<'a> {
    inner: OverlayLoader<'a>,
    path: &'a Path,
    text: &'a str,
}

impl Loader for PatchedLoader<'_> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        if normalize_path(path) == self.path {
            return Ok(self.text.to_string());
        }
        self.inner.read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        normalize_path(path) == self.path || self.inner.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn absolute(&self, path: &Path) -> std::path::PathBuf {
        self.inner.absolute(path)
    }
}

fn pipe_items(hir: &Hir, file: FileId, text: &str, offset: usize) -> Vec<CompletionItem> {
    let before = &text[..offset];
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let item_at = enclosing_item(text, offset);

    // Inside a string: a link kind after `ref:` or in `links = [...]`.
    let quotes = line.matches('"').count();
    if quotes % 2 == 1 {
        let open = line.rfind('"').unwrap_or(0);
        let lead = line[..open].trim_end();
        let in_links = item_at.as_ref().is_some_and(|(_, _, start)| {
            let region = &text[*start..offset];
            region
                .rfind("links")
                .is_some_and(|i| !region[i..].contains(']'))
        });
        if lead.ends_with("ref:") || in_links {
            return hir
                .links
                .iter()
                .map(|l| {
                    item(
                        &l.kind,
                        CompletionItemKind::ENUM_MEMBER,
                        display(hir, &l.ty),
                    )
                })
                .collect();
        }
        return Vec::new();
    }

    let Some((keyword, name, start)) = item_at else {
        return keyword_items();
    };
    let (paren, brace, bracket) = depths(text, start, offset);
    let kind = NodeKind::from_keyword(&keyword);
    let node = kind.and_then(|_| node_named(hir, file, &name));
    let in_params = kind.is_some() && paren > 0 && brace == 0;
    let in_body = kind.is_some() && paren == 0 && brace > 0;

    // `tools = [a, b, |`
    if in_body && bracket > 0 {
        let region = &text[start..offset];
        if region
            .rfind("tools")
            .is_some_and(|i| !region[i..].contains(']'))
        {
            return hir
                .tools
                .iter()
                .filter(|t| !t.is_reader || kind != Some(NodeKind::Act))
                .map(|t| {
                    item(
                        &t.info.display,
                        CompletionItemKind::FUNCTION,
                        if t.is_reader { "reader" } else { "tool" },
                    )
                })
                .collect();
        }
    }

    // After a dot: fields of what the path before it names.
    if let Some(words) = dotted_prefix(before) {
        let head_ty: Option<(Ty, usize)> = if in_body {
            node.and_then(|n| {
                let p = hir.node(n).params.iter().find(|p| p.name == words[0])?;
                Some((p.ty.clone(), 1))
            })
        } else if words[0] == "input" {
            if words.len() == 1 {
                return hir
                    .inputs
                    .iter()
                    .map(|i| {
                        item(
                            &i.info.name,
                            CompletionItemKind::VARIABLE,
                            display(hir, &i.ty),
                        )
                    })
                    .collect();
            }
            hir.inputs
                .iter()
                .find(|i| i.info.name == words[1])
                .map(|i| (i.ty.clone(), 2))
        } else {
            hir.nodes
                .iter()
                .find(|n| n.info.display == words[0] || n.info.name == words[0])
                .map(|n| (n.value_ty(), 1))
        };
        let Some((ty, used)) = head_ty else {
            return Vec::new();
        };
        return match super::hover::path_type(hir, &ty, &words[used..]) {
            Some(ty) => field_items(hir, &ty),
            None => Vec::new(),
        };
    }

    // The segment of a parameter list or record being typed: `name: Type = source`.
    let segment_start = before.rfind(['(', ',', '{', '\n']).map_or(0, |i| i + 1);
    let segment = &before[segment_start..];
    let after_arrow = line.contains("->") && !line[line.rfind("->").unwrap_or(0)..].contains('{');
    let is_type_decl = keyword == "type" || keyword == "tool" || keyword == "reader";
    if after_arrow
        || ((in_params || is_type_decl) && segment.contains(':') && !segment.contains('='))
    {
        return type_items(hir);
    }
    if in_params && segment.contains('=') {
        let mut items: Vec<CompletionItem> = hir
            .nodes
            .iter()
            .filter(|n| Some(n.info.name.as_str()) != Some(name.as_str()))
            .map(|n| {
                item(
                    &n.info.display,
                    CompletionItemKind::FUNCTION,
                    format!("{} -> {}", n.kind.keyword(), display(hir, &n.value_ty())),
                )
            })
            .collect();
        items.extend(hir.inputs.iter().map(|i| {
            let mut it = item(
                &format!("input.{}", i.info.name),
                CompletionItemKind::VARIABLE,
                display(hir, &i.ty),
            );
            it.filter_text = Some(format!("input.{}", i.info.name));
            it
        }));
        for f in ["each", "resource", "resources", "env", "secret"] {
            items.push(item(f, CompletionItemKind::KEYWORD, "source"));
        }
        return items;
    }
    if in_body && let Some(kind) = kind {
        let key_start = line.trim_start();
        if !key_start.contains('=') {
            return pipec_check::node_settings(kind)
                .into_iter()
                .map(|s| {
                    item(
                        s,
                        CompletionItemKind::PROPERTY,
                        format!("setting of `{}`", kind.keyword()),
                    )
                })
                .collect();
        }
        let key = key_start.split('=').next().unwrap_or("").trim();
        if key == "model" {
            return hir
                .models
                .iter()
                .map(|m| item(&m.info.display, CompletionItemKind::VARIABLE, "model"))
                .collect();
        }
        if let Some(n) = node {
            return hir
                .node(n)
                .params
                .iter()
                .map(|p| item(&p.name, CompletionItemKind::VARIABLE, display(hir, &p.ty)))
                .collect();
        }
    }
    Vec::new()
}

fn type_items(hir: &Hir) -> Vec<CompletionItem> {
    let mut items: Vec<CompletionItem> = [
        "string", "int", "float", "bool", "bytes", "json", "duration", "ref", "map",
    ]
    .iter()
    .map(|t| item(t, CompletionItemKind::KEYWORD, "built-in type"))
    .collect();
    items.extend(hir.types.iter().map(|t| {
        item(
            &t.info.display,
            CompletionItemKind::STRUCT,
            t.info.doc.clone().unwrap_or_default(),
        )
    }));
    items
}

fn keyword_items() -> Vec<CompletionItem> {
    [
        "import", "type", "enum", "input", "output", "server", "model", "link", "tool", "reader",
        "node", "think", "agent", "act", "gate", "serve",
    ]
    .iter()
    .map(|k| item(k, CompletionItemKind::KEYWORD, "declaration"))
    .collect()
}
