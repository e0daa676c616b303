//! Names that nodes use for other declarations: nodes (`after`, `from`), tools and
//! models, each reported with "did you mean" when unknown.

use crate::Checker;
use crate::hir::*;
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;

impl Checker<'_> {
    pub(crate) fn lookup_node(
        &mut self,
        file: FileId,
        path: &[String],
        span: Span,
        what: &str,
    ) -> Option<NodeId> {
        let root = self.files.iter().position(|f| f.is_root).unwrap_or(0);
        if let [name] = path
            && let Some(DeclRef::Node(id)) = self.scopes[root].values.get(name)
        {
            return Some(*id);
        }
        if self.poisoned(root, "value", path) {
            return None;
        }
        let joined = path.join(".");
        let near = names::suggestion(&joined, self.hir.nodes.iter().map(|n| n.info.name.as_str()));
        self.diags.push(
            Diagnostic::new(
                &r::UNKNOWN_NAME,
                file,
                span,
                format!("`{joined}` is not a node"),
            )
            .label(format!("`{what}` names nodes"))
            .did_you_mean(&self.db, file, span, &joined, near.as_ref()),
        );
        None
    }

    pub(super) fn lookup_value(&mut self, f: usize, path: &[String]) -> Option<DeclRef> {
        match path {
            [name] => self.scopes[f].values.get(name).copied(),
            [ns, name] => {
                let target = *self.scopes[f].namespaces.get(ns)?;
                self.own[target].values.get(name).copied()
            }
            _ => None,
        }
    }

    pub(super) fn value_candidates(
        &self,
        f: usize,
        pred: impl Fn(&DeclRef) -> bool,
    ) -> Vec<String> {
        let mut out: Vec<String> = self.scopes[f]
            .values
            .iter()
            .filter(|(_, v)| pred(v))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, target) in &self.scopes[f].namespaces {
            out.extend(
                self.own[*target]
                    .values
                    .iter()
                    .filter(|(_, v)| pred(v))
                    .map(|(k, _)| format!("{ns}.{k}")),
            );
        }
        out.sort();
        out
    }

    pub(crate) fn lookup_tool(&mut self, f: usize, path: &[String], span: Span) -> Option<ToolId> {
        let file = self.files[f].id;
        match self.lookup_value(f, path) {
            Some(DeclRef::Tool(id)) => {
                self.hir.used.insert(DeclRef::Tool(id));
                Some(id)
            }
            None if self.poisoned(f, "value", path) => None,
            found => {
                let joined = path.join(".");
                let candidates = self.value_candidates(f, |v| matches!(v, DeclRef::Tool(_)));
                let near = names::suggestion(&joined, candidates.iter().map(String::as_str));
                let msg = if found.is_some() {
                    format!("`{joined}` is not a tool or reader")
                } else {
                    format!("unknown tool `{joined}`")
                };
                self.diags.push(
                    Diagnostic::new(&r::UNKNOWN_NAME, file, span, msg)
                        .label("not a declared tool")
                        .help(format!("declare it: `tool {joined}(...) -> T from server`"))
                        .did_you_mean(&self.db, file, span, &joined, near.as_ref()),
                );
                None
            }
        }
    }

    pub(crate) fn lookup_model(
        &mut self,
        f: usize,
        path: &[String],
        span: Span,
    ) -> Option<ModelId> {
        let file = self.files[f].id;
        match self.lookup_value(f, path) {
            Some(DeclRef::Model(id)) => {
                self.hir.used.insert(DeclRef::Model(id));
                Some(id)
            }
            None if self.poisoned(f, "value", path) => None,
            found => {
                let joined = path.join(".");
                let candidates = self.value_candidates(f, |v| matches!(v, DeclRef::Model(_)));
                let near = names::suggestion(&joined, candidates.iter().map(String::as_str));
                let msg = if found.is_some() {
                    format!("`{joined}` is not a model")
                } else {
                    format!("unknown model `{joined}`")
                };
                self.diags.push(
                    Diagnostic::new(&r::UNKNOWN_NAME, file, span, msg)
                        .label("not a declared model")
                        .help(format!("declare it: `model {joined} {{ provider = \"openai\" name = \"...\" }}`"))
                        .did_you_mean(&self.db, file, span, &joined, near.as_ref()),
                );
                None
            }
        }
    }
}
