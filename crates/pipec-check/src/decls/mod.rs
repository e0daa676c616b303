//! Checking the declarations that are not nodes, one file per kind: servers, the values
//! they and models are configured with, models, link kinds, tools, readers, inputs,
//! literals checked against a type, and the `serve` block. This file resolves them in
//! order (tools after the servers and link kinds they name) and joins project paths.

mod config_values;
mod inputs;
mod links;
mod literals;
mod models;
mod readers;
mod serve;
mod serve_prompts;
mod serve_tool;
mod servers;
mod tools;

pub(crate) use config_values::Holds;
pub(crate) use links::empty_link;
pub(crate) use literals::literal_fits;
pub(crate) use models::empty_model;
pub(crate) use servers::empty_server;
pub(crate) use tools::empty_tool;

use std::path::Path;

use super::Checker;
use super::hir::*;
use pipec_syntax::ast::ItemKind;

impl Checker<'_> {
    /// The folder of a file, relative to the project root ("" for the root itself).
    pub(crate) fn base_dir(&self, f: usize) -> String {
        let dir = &self.files[f].dir;
        match dir.strip_prefix(&self.hir.project_root) {
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => relative_path(&self.hir.project_root, dir),
        }
    }

    pub(crate) fn resolve_decls(&mut self) {
        for (d, f, i) in self.decl_items.clone() {
            if matches!(d, DeclRef::Node(_) | DeclRef::Type(_) | DeclRef::Tool(_)) {
                continue;
            }
            let item = self.item(f, i).clone();
            match (d, &item.kind) {
                (DeclRef::Server(id), ItemKind::Server(s)) => self.check_server(f, id, s),
                (DeclRef::Model(id), ItemKind::Model(m)) => self.check_model(f, id, m),
                (DeclRef::Link(id), ItemKind::Link(l)) => self.check_link(f, id, l),
                (DeclRef::Input(id), ItemKind::Input(inp)) => self.check_input(f, id, inp),
                _ => {}
            }
        }
        // Tools refer to servers and link kinds, so they come after them.
        for (d, f, i) in self.decl_items.clone() {
            if !matches!(d, DeclRef::Tool(_)) {
                continue;
            }
            let item = self.item(f, i).clone();
            if let (DeclRef::Tool(id), ItemKind::Tool(t) | ItemKind::Reader(t)) = (d, &item.kind) {
                self.check_tool(f, id, t, item.span);
            }
        }
        self.check_link_overlaps();
    }
}

/// `base/rel`, normalised, as a string with `/` separators; absolute paths stay.
pub(crate) fn join_rel(base: &str, rel: &str) -> String {
    if rel.starts_with('/') || base.is_empty() {
        return pipec_base::source::normalize_path(Path::new(rel))
            .to_string_lossy()
            .replace('\\', "/");
    }
    pipec_base::source::normalize_path(&Path::new(base).join(rel))
        .to_string_lossy()
        .replace('\\', "/")
}

/// The relative path from `from` to `to` (both absolute and normalised).
fn relative_path(from: &Path, to: &Path) -> String {
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = std::path::PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out.to_string_lossy().replace('\\', "/")
}
