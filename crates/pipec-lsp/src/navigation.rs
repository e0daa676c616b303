//! Go to definition, find references and rename, over every open program that contains
//! the file: a declaration in an imported file is found from each pipeline that imports it.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use lsp_types::{
    GotoDefinitionParams, Location, PrepareRenameResponse, Range, ReferenceParams, RenameParams,
    TextDocumentPositionParams, TextEdit, Url, WorkspaceEdit,
};
use serde_json::Value;

use super::documents::{self, path_uri};
use super::index::Sym;
use super::server::{Answer, Failure, known_path};
use super::workspace::{Snapshot, Workspace};
use pipec_base::source::{FileId, Span};
use pipec_check::hir::DeclRef;
use pipec_check::ty::TypeBody;

fn to_value(v: impl serde::Serialize) -> Answer {
    serde_json::to_value(v).map_err(|e| Failure::invalid(e.to_string()))
}

/// The symbol under the cursor, with the program it was found in.
fn symbol_at<'w>(
    ws: &'w Workspace,
    p: &TextDocumentPositionParams,
) -> Result<Option<(&'w Snapshot, FileId, Sym, Span)>, Failure> {
    let path = known_path(ws, &p.text_document.uri)?;
    let Some((snap, file)) = ws.snapshot_for(&path) else {
        return Ok(None);
    };
    let text = &snap.analysis.db.get(file).text;
    let offset = documents::offset(text, p.position);
    Ok(snap
        .index()
        .at(file, offset)
        .map(|o| (snap, file, o.sym.clone(), o.span)))
}

fn location(snap: &Snapshot, file: FileId, span: Span) -> Option<Location> {
    let f = snap.analysis.db.get(file);
    Some(Location::new(
        path_uri(&f.path)?,
        documents::range(&f.text, span),
    ))
}

/// Where a symbol is declared: its file's path and the span of its name.
fn declaration(snap: &Snapshot, sym: &Sym) -> Option<(PathBuf, Span)> {
    let occ = snap.index().of(sym).find(|o| o.is_def)?;
    Some((snap.analysis.db.get(occ.file).path.clone(), occ.span))
}

pub(crate) fn definition(ws: &mut Workspace, p: GotoDefinitionParams) -> Answer {
    let Some((snap, _, sym, _)) = symbol_at(ws, &p.text_document_position_params)? else {
        return Ok(Value::Null);
    };
    if let Sym::File(path) = &sym {
        let Some(uri) = path_uri(path) else {
            return Ok(Value::Null);
        };
        return to_value(Location::new(uri, Range::default()));
    }
    let locations: Vec<Location> = snap
        .index()
        .of(&sym)
        .filter(|o| o.is_def)
        .filter_map(|o| location(snap, o.file, o.span))
        .collect();
    match locations.len() {
        0 => Ok(Value::Null),
        1 => to_value(&locations[0]),
        _ => to_value(locations),
    }
}

/// Every place the symbol is written, in every program containing its declaration.
fn all_occurrences(ws: &Workspace, snap: &Snapshot, sym: &Sym) -> Vec<(PathBuf, Location)> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut collect = |s: &Snapshot, sym: &Sym, out: &mut Vec<(PathBuf, Location)>| {
        for o in s.index().of(sym) {
            let path = s.analysis.db.get(o.file).path.clone();
            if seen.insert((path.clone(), o.span))
                && let Some(l) = location(s, o.file, o.span)
            {
                out.push((path, l));
            }
        }
    };
    collect(snap, sym, &mut out);
    if let Some((def_path, def_span)) = declaration(snap, sym) {
        for (other, file) in ws.snapshots_containing(&def_path) {
            let same = other
                .index()
                .in_file(file)
                .find(|o| o.is_def && o.span == def_span)
                .map(|o| o.sym.clone());
            if let Some(same) = same {
                collect(other, &same, &mut out);
            }
        }
    }
    out
}

pub(crate) fn references(ws: &mut Workspace, p: ReferenceParams) -> Answer {
    let Some((snap, _, sym, _)) = symbol_at(ws, &p.text_document_position)? else {
        return Ok(Value::Null);
    };
    let include_decl = p.context.include_declaration;
    let def = declaration(snap, &sym);
    let locations: Vec<Location> = all_occurrences(ws, snap, &sym)
        .into_iter()
        .filter(|(path, l)| {
            include_decl
                || !def.as_ref().is_some_and(|(dp, ds)| {
                    dp == path && {
                        let f = snap.file(dp);
                        f.is_some_and(|f| {
                            documents::range(&snap.analysis.db.get(f).text, *ds) == l.range
                        })
                    }
                })
        })
        .map(|(_, l)| l)
        .collect();
    to_value(locations)
}

pub(crate) fn prepare_rename(ws: &mut Workspace, p: TextDocumentPositionParams) -> Answer {
    let Some((snap, file, sym, span)) = symbol_at(ws, &p)? else {
        return Err(Failure::refused("there is no name here to rename"));
    };
    renamable(&sym)?;
    let text = &snap.analysis.db.get(file).text;
    let range = documents::range(text, span);
    to_value(PrepareRenameResponse::RangeWithPlaceholder {
        range,
        placeholder: text[span.start as usize..span.end as usize].to_string(),
    })
}

fn renamable(sym: &Sym) -> Result<(), Failure> {
    match sym {
        Sym::File(_) => Err(Failure::refused(
            "a file is renamed in the file system: rename it there, then edit the path",
        )),
        _ => Ok(()),
    }
}

pub(crate) fn rename(ws: &mut Workspace, p: RenameParams) -> Answer {
    let Some((snap, _, sym, _)) = symbol_at(ws, &p.text_document_position)? else {
        return Err(Failure::refused("there is no name here to rename"));
    };
    renamable(&sym)?;
    let new = p.new_name.trim();
    check_new_name(snap, &sym, new)?;
    let mut changes: HashMap<Url, Vec<TextEdit>> = HashMap::new();
    for (_, l) in all_occurrences(ws, snap, &sym) {
        changes.entry(l.uri).or_default().push(TextEdit {
            range: l.range,
            new_text: new.to_string(),
        });
    }
    to_value(WorkspaceEdit {
        changes: Some(changes),
        ..WorkspaceEdit::default()
    })
}

pub(crate) use pipec_base::identifiers::is_identifier;

const RESERVED: &[&str] = &[
    "input", "output", "node", "think", "agent", "act", "gate", "type", "enum", "import", "server",
    "model", "link", "tool", "reader", "serve", "true", "false", "null",
];
const BUILTIN_TYPES: &[&str] = &[
    "string", "int", "float", "bool", "bytes", "json", "duration", "ref", "map",
];

/// Refuses a new name that is not a name, or that something the renamed thing sits
/// beside already has.
fn check_new_name(snap: &Snapshot, sym: &Sym, new: &str) -> Result<(), Failure> {
    let hir = &snap.analysis.hir;
    if let Sym::Decl(DeclRef::Link(l)) = sym {
        if new.is_empty() || new.contains(['"', '\\']) || new.chars().any(char::is_whitespace) {
            return Err(Failure::refused(format!(
                "`{new}` is not a link kind: use letters, digits, `-` or `_`"
            )));
        }
        if let Some(other) = hir
            .links
            .iter()
            .enumerate()
            .find(|(i, k)| *i as u32 != *l && k.kind == new)
        {
            return Err(clash(
                snap,
                new,
                "link kind",
                other.1.info.file,
                other.1.info.name_span,
            ));
        }
        return Ok(());
    }
    if !is_identifier(new) {
        return Err(Failure::refused(format!(
            "`{new}` is not a valid name: start with a letter or `_`, then letters, digits or `_`"
        )));
    }
    if RESERVED.contains(&new) {
        return Err(Failure::refused(format!(
            "`{new}` is a keyword of .pipe files"
        )));
    }
    match sym {
        Sym::Decl(DeclRef::Type(t)) => {
            if BUILTIN_TYPES.contains(&new) {
                return Err(Failure::refused(format!("`{new}` is a built-in type")));
            }
            let me = &hir.types[*t as usize].info;
            if let Some(o) = hir.types.iter().enumerate().find(|(i, o)| {
                *i as u32 != *t
                    && (o.info.name == new && o.info.file == me.file || o.info.display == new)
            }) {
                return Err(clash(snap, new, "type", o.1.info.file, o.1.info.name_span));
            }
        }
        Sym::Decl(DeclRef::Input(i)) => {
            if let Some(o) = hir
                .inputs
                .iter()
                .enumerate()
                .find(|(j, o)| *j as u32 != *i && o.info.name == new)
            {
                return Err(clash(snap, new, "input", o.1.info.file, o.1.info.name_span));
            }
        }
        Sym::Decl(d) => {
            let me = decl_info(snap, *d);
            for other in value_decls(snap) {
                if other.0 != *d
                    && (other.1.name == new && other.1.file == me.file || other.1.display == new)
                {
                    return Err(clash(
                        snap,
                        new,
                        "declaration",
                        other.1.file,
                        other.1.name_span,
                    ));
                }
            }
        }
        Sym::Field(t, old) => {
            if let TypeBody::Record(r) = &hir.types[*t as usize].body
                && r.fields.iter().any(|f| f.name == new && &f.name != old)
            {
                return Err(Failure::refused(format!(
                    "`{}` already has a field `{new}`",
                    hir.types[*t as usize].info.display
                )));
            }
        }
        Sym::Param(n, i) => {
            let node = hir.node(*n);
            if let Some(o) = node
                .params
                .iter()
                .enumerate()
                .find(|(j, p)| j != i && p.name == new)
            {
                return Err(clash(snap, new, "parameter", node.info.file, o.1.name_span));
            }
        }
        Sym::File(_) => {}
    }
    Ok(())
}

fn clash(snap: &Snapshot, new: &str, what: &str, file: FileId, span: Span) -> Failure {
    let f = snap.analysis.db.get(file);
    let (line, col) = f.line_col(span.start);
    Failure::refused(format!(
        "cannot rename to `{new}`: a {what} of that name is declared at {}:{line}:{col}",
        f.name
    ))
}

fn decl_info(snap: &Snapshot, d: DeclRef) -> &pipec_check::hir::DeclInfo {
    let hir = &snap.analysis.hir;
    match d {
        DeclRef::Type(i) => &hir.types[i as usize].info,
        DeclRef::Server(i) => &hir.servers[i as usize].info,
        DeclRef::Model(i) => &hir.models[i as usize].info,
        DeclRef::Link(i) => &hir.links[i as usize].info,
        DeclRef::Tool(i) => &hir.tools[i as usize].info,
        DeclRef::Input(i) => &hir.inputs[i as usize].info,
        DeclRef::Node(i) => &hir.nodes[i as usize].info,
    }
}

/// Servers, models, tools and nodes: the declarations that share one namespace.
fn value_decls(snap: &Snapshot) -> Vec<(DeclRef, &pipec_check::hir::DeclInfo)> {
    let hir = &snap.analysis.hir;
    let mut out = Vec::new();
    out.extend(
        hir.servers
            .iter()
            .enumerate()
            .map(|(i, s)| (DeclRef::Server(i as u32), &s.info)),
    );
    out.extend(
        hir.models
            .iter()
            .enumerate()
            .map(|(i, s)| (DeclRef::Model(i as u32), &s.info)),
    );
    out.extend(
        hir.tools
            .iter()
            .enumerate()
            .map(|(i, s)| (DeclRef::Tool(i as u32), &s.info)),
    );
    out.extend(
        hir.nodes
            .iter()
            .enumerate()
            .map(|(i, s)| (DeclRef::Node(i as u32), &s.info)),
    );
    out
}
