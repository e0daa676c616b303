//! Which server a resource URI is read from.

use crate::Checker;
use crate::hir::*;
use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_base::uri::UriTemplate;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;
use pipec_syntax::ast::{self};

impl Checker<'_> {
    /// The servers file `f` sees, computed once per file.
    pub(super) fn visible_servers(&mut self, f: usize) -> Vec<ServerId> {
        if let Some(v) = self.server_cache.get(&f) {
            return v.clone();
        }
        let mut v: Vec<ServerId> = self.scopes[f]
            .values
            .values()
            .filter_map(|d| match d {
                DeclRef::Server(s) => Some(*s),
                _ => None,
            })
            .collect();
        v.sort();
        self.server_cache.insert(f, v.clone());
        v
    }

    /// Whether file `f` sees a server declaration that did not parse.
    fn broken_server_visible(&self, f: usize) -> bool {
        !self.scopes[f].poisoned.is_empty()
            && self.scopes[f]
                .poisoned
                .iter()
                .any(|p| p.starts_with("server:"))
    }

    /// The server a resource URI goes to.
    pub(super) fn route(
        &mut self,
        f: usize,
        file: FileId,
        t: &UriTemplate,
        explicit: Option<&ast::Ident>,
        span: Span,
    ) -> Option<ServerId> {
        if let Some(name) = explicit {
            return self.lookup_server(f, name);
        }
        let visible = self.visible_servers(f);
        if let Some(authority) = t.mcp_authority()
            && let Some(DeclRef::Server(s)) = self.scopes[f].values.get(authority).copied()
        {
            self.hir.used.insert(DeclRef::Server(s));
            return Some(s);
        }
        let prefix = t.literal_prefix();
        let claimed: Vec<ServerId> = visible
            .iter()
            .copied()
            .filter(|s| {
                self.hir.servers[*s as usize].resources.iter().any(|p| {
                    if p.has_expressions() {
                        prefix.starts_with(p.literal_prefix())
                    } else {
                        p.text == t.text
                    }
                })
            })
            .collect();
        let pick = match (claimed.as_slice(), visible.as_slice()) {
            ([one], _) => Some(*one),
            ([], [only]) => Some(*only),
            _ => None,
        };
        match pick {
            Some(s) => {
                self.hir.used.insert(DeclRef::Server(s));
                Some(s)
            }
            // A server that did not parse may be the one that serves it: what it would
            // have claimed is unknown, so nothing is reported.
            None if self.broken_server_visible(f) => None,
            None => {
                let why = if visible.is_empty() {
                    "no server is declared".to_string()
                } else if claimed.len() > 1 {
                    "several servers claim it".to_string()
                } else {
                    "no server claims it and there are several".to_string()
                };
                let mut d = Diagnostic::new(&r::UNROUTABLE_RESOURCE, file, span, format!("cannot tell which server serves `{}`: {why}", t.text))
                    .label("no server for this URI")
                    .help("use `mcp://SERVER/...`, list the URI pattern in a server's `resources`, or say `server: name`");
                // `mcp://NAME/` that names no server: a misspelt server, most likely.
                if let Some(authority) = t.mcp_authority()
                    && let Some(at) = self
                        .db
                        .get(file)
                        .slice(span)
                        .find(&format!("mcp://{authority}"))
                {
                    let start = span.start + at as u32 + "mcp://".len() as u32;
                    let authority_span = Span::new(start, start + authority.len() as u32);
                    let names: Vec<&str> = visible
                        .iter()
                        .map(|s| self.hir.servers[*s as usize].info.name.as_str())
                        .collect();
                    let near = names::suggestion(authority, names);
                    d = d.did_you_mean(&self.db, file, authority_span, authority, near.as_ref());
                }
                self.diags.push(d);
                None
            }
        }
    }
}
