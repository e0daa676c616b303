//! Which server a resource URI is read from.

use crate::check::Checker;
use crate::check::hir::*;
use crate::diagnostic::Diagnostic;
use crate::rules as r;
use crate::source::{FileId, Span};
use crate::syntax::ast::{self};
use crate::uri::UriTemplate;

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
            None => {
                let why = if visible.is_empty() {
                    "no server is declared".to_string()
                } else if claimed.len() > 1 {
                    "several servers claim it".to_string()
                } else {
                    "no server claims it and there are several".to_string()
                };
                self.diags.push(
                    Diagnostic::new(&r::UNROUTABLE_RESOURCE, file, span, format!("cannot tell which server serves `{}`: {why}", t.text))
                        .label("no server for this URI")
                        .help("use `mcp://SERVER/...`, list the URI pattern in a server's `resources`, or say `server: name`"),
                );
                None
            }
        }
    }
}
