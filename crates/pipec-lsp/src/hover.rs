//! Hover: what the checker knows about the name under the cursor (a parameter's type and
//! source, a node's signature, a type's fields and docs, a tool's annotations and links,
//! a link kind's template, a template variable's type), and the explanation of a
//! diagnostic's code where one is reported.

use lsp_types::{Hover, HoverContents, HoverParams, MarkupContent, MarkupKind};
use serde_json::Value;

use super::documents;
use super::index::{Sym, field_of};
use super::server::{Answer, Failure, known_path};
use super::templates;
use super::workspace::{Snapshot, Workspace};
use pipec_check::hir::{Body, DeclRef, Hir, SourceKind};
use pipec_check::ty::{Ty, TypeBody, display};

pub(crate) fn hover(ws: &mut Workspace, p: HoverParams) -> Answer {
    let uri = &p.text_document_position_params.text_document.uri;
    let path = known_path(ws, uri)?;
    let Some((snap, file)) = ws.snapshot_for(&path) else {
        return Ok(Value::Null);
    };
    let text = &snap.analysis.db.get(file).text;
    let offset = documents::offset(text, p.text_document_position_params.position);
    let mut parts: Vec<String> = Vec::new();
    let mut range = None;
    if let Some(occ) = snap.index().at(file, offset) {
        parts.push(describe(snap, &occ.sym));
        range = Some(documents::range(text, occ.span));
    } else if let Some((span, path_words)) = templates::path_at(text, offset)
        && let Some(ty_text) = templates::variable_hover(snap, &path, &path_words)
    {
        parts.push(ty_text);
        range = Some(documents::range(text, span));
    }
    for d in &snap.analysis.diagnostics {
        let Some(l) = &d.primary else { continue };
        if l.file == file
            && l.span.start <= offset
            && offset <= l.span.end
            && let Some(doc) = super::diagnostics::explanation(d.rule.code)
        {
            parts.push(doc);
        }
    }
    if parts.is_empty() {
        return Ok(Value::Null);
    }
    let hover = Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: parts.join("\n\n---\n\n"),
        }),
        range,
    };
    serde_json::to_value(hover).map_err(|e| Failure::invalid(e.to_string()))
}

fn code(text: &str) -> String {
    format!("```pipe\n{text}\n```")
}

fn with_doc(mut s: String, doc: &Option<String>) -> String {
    if let Some(d) = doc {
        s.push_str("\n\n");
        s.push_str(d);
    }
    s
}

/// The hover text of a symbol.
pub(crate) fn describe(snap: &Snapshot, sym: &Sym) -> String {
    let hir = &snap.analysis.hir;
    match sym {
        Sym::Decl(d) => describe_decl(snap, *d),
        Sym::Field(t, name) => {
            let ty = &hir.types[*t as usize];
            let field = match &ty.body {
                TypeBody::Record(r) => r.field(name),
                _ => None,
            };
            match field {
                Some(f) => with_doc(
                    code(&format!(
                        "{}.{}: {}",
                        ty.info.display,
                        f.name,
                        display(hir, &f.ty)
                    )),
                    &f.doc,
                ),
                None => code(&format!("{}.{name}", ty.info.display)),
            }
        }
        Sym::Param(n, i) => {
            let node = hir.node(*n);
            let p = &node.params[*i];
            let source_text = snap
                .analysis
                .db
                .get(node.info.file)
                .slice(p.source.span)
                .to_string();
            let mut s = code(&format!(
                "{}: {} = {}",
                p.name,
                display(hir, &p.ty),
                source_text
            ));
            s.push_str(&format!(
                "\n\nparameter of `{}`; {}",
                node.info.display,
                source_words(hir, &p.source.kind)
            ));
            with_doc(s, &p.doc)
        }
        Sym::File(path) => format!("`{}`", path.display()),
    }
}

fn source_words(hir: &Hir, kind: &SourceKind) -> String {
    match kind {
        SourceKind::Input { input, .. } => {
            format!("from the input `{}`", hir.inputs[*input as usize].info.name)
        }
        SourceKind::Node { node, .. } => {
            format!("from the output of `{}`", hir.node(*node).info.display)
        }
        SourceKind::Join(_) => "the first of several sources that has a value (`??`)".into(),
        SourceKind::Const(_) => "a constant".into(),
        SourceKind::Record(_) => "a record built from sources".into(),
        SourceKind::List(_) => "a list built from sources".into(),
        SourceKind::Env { var, .. } => format!("from the environment variable `{var}`"),
        SourceKind::Secret { var } => format!("the secret `{var}` (never stored)"),
        SourceKind::Resource(r) => format!("the resource `{}`", r.uri.text),
        SourceKind::Link(l) => format!(
            "{} of link kind `{}`",
            if l.many {
                "the resources"
            } else {
                "the resource"
            },
            hir.links[l.link as usize].kind
        ),
        SourceKind::Each { inner, .. } => {
            format!(
                "one item at a time (`each`), {}",
                source_words(hir, &inner.kind)
            )
        }
        SourceKind::Error => "a source with an error".into(),
    }
}

fn describe_decl(snap: &Snapshot, d: DeclRef) -> String {
    let hir = &snap.analysis.hir;
    match d {
        DeclRef::Type(t) => {
            let ty = &hir.types[t as usize];
            let mut s = match &ty.body {
                TypeBody::Record(r) => {
                    let mut s = format!("type {} {{\n", ty.info.display);
                    for f in &r.fields {
                        if let Some(doc) = &f.doc {
                            for line in doc.lines() {
                                s.push_str(&format!("  /// {line}\n"));
                            }
                        }
                        s.push_str(&format!("  {}: {}\n", f.name, display(hir, &f.ty)));
                    }
                    s.push('}');
                    code(&s)
                }
                TypeBody::Alias(inner) => code(&format!(
                    "type {} = {}",
                    ty.info.display,
                    display(hir, inner)
                )),
                TypeBody::Enum(variants, _) => code(&format!(
                    "enum {} {{ {} }}",
                    ty.info.display,
                    variants.join(", ")
                )),
            };
            if let Some(doc) = &ty.info.doc {
                s = format!("{s}\n\n{doc}");
            }
            s
        }
        DeclRef::Node(n) => {
            let node = hir.node(n);
            let params: Vec<String> = node
                .params
                .iter()
                .map(|p| format!("{}: {}", p.name, display(hir, &p.ty)))
                .collect();
            let mut s = code(&format!(
                "{} {}({}) -> {}",
                node.kind.keyword(),
                node.info.display,
                params.join(", "),
                display(hir, &node.output)
            ));
            let what = match &node.body {
                Body::Return(_) => "computes its output from its parameters",
                Body::Call { .. } => "calls a tool",
                Body::Exec { .. } => "runs a command",
                Body::Host { .. } => "calls a host function",
                Body::Model { .. } => "asks a model",
                Body::Gate { ask: Some(_), .. } => "waits for the client's roots",
                Body::Gate { .. } => "waits for a person's answer",
                Body::Invalid => "has a body with an error",
            };
            s.push_str(&format!(
                "\n\n{} {what}{}",
                pipec_check::hir::describe_node(node.kind, &node.info.display),
                if node.each.is_some() {
                    ", once per item"
                } else {
                    ""
                }
            ));
            with_doc(s, &node.info.doc)
        }
        DeclRef::Tool(t) => {
            let tool = hir.tool(t);
            let params: Vec<String> = tool
                .params
                .iter()
                .map(|p| format!("{}: {}", p.name, display(hir, &p.ty)))
                .collect();
            let server = tool
                .server
                .map(|s| hir.servers[s as usize].info.display.clone())
                .unwrap_or_default();
            let mut s = code(&format!(
                "{} {}({}) -> {} from {server}",
                if tool.is_reader { "reader" } else { "tool" },
                tool.info.display,
                params.join(", "),
                display(hir, &tool.returns)
            ));
            let mut notes = Vec::new();
            if tool.read_only {
                notes.push("read-only");
            }
            if tool.idempotent {
                notes.push("idempotent");
            }
            if tool.destructive {
                notes.push("destructive");
            }
            if !notes.is_empty() {
                s.push_str(&format!("\n\nannotations: {}", notes.join(", ")));
            }
            if !tool.links.is_empty() {
                let kinds: Vec<String> = tool
                    .links
                    .iter()
                    .map(|(l, _)| format!("`{}`", hir.links[*l as usize].kind))
                    .collect();
                s.push_str(&format!("\n\nlinks: {}", kinds.join(", ")));
            }
            if let Some(uri) = &tool.uri {
                s.push_str(&format!("\n\nreads `{}`", uri.text));
            }
            with_doc(s, &tool.info.doc)
        }
        DeclRef::Link(l) => {
            let link = &hir.links[l as usize];
            with_doc(
                code(&format!(
                    "link \"{}\": {} = \"{}\"",
                    link.kind,
                    display(hir, &link.ty),
                    link.template.text
                )),
                &link.info.doc,
            )
        }
        DeclRef::Input(i) => {
            let input = &hir.inputs[i as usize];
            let default = input
                .default
                .as_ref()
                .map(|v| format!(" = {v}"))
                .unwrap_or_default();
            with_doc(
                code(&format!(
                    "input {}: {}{default}",
                    input.info.name,
                    display(hir, &input.ty)
                )),
                &input.info.doc,
            )
        }
        DeclRef::Server(s) => {
            let server = &hir.servers[s as usize];
            let how = match (&server.command, &server.url) {
                (Some(c), _) => format!(
                    "runs `{c} {}`",
                    server
                        .args
                        .iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                (None, Some(u)) => format!("at `{u}`"),
                _ => String::new(),
            };
            with_doc(
                code(&format!("server {}", server.info.display)) + &format!("\n\n{how}"),
                &server.info.doc,
            )
        }
        DeclRef::Model(m) => {
            let model = &hir.models[m as usize];
            let name = model
                .model_name
                .as_ref()
                .map(|n| format!(" `{n}`"))
                .unwrap_or_default();
            with_doc(
                code(&format!("model {}", model.info.display))
                    + &format!("\n\nprovider `{}`{name}", model.provider),
                &model.info.doc,
            )
        }
    }
}

/// The type of a path of fields below a type, for template variables.
pub(crate) fn path_type(hir: &Hir, ty: &Ty, rest: &[String]) -> Option<Ty> {
    let mut ty = ty.clone();
    for seg in rest {
        ty = field_of(hir, &ty, seg)?.1;
    }
    Some(ty)
}
