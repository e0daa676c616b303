//! Nodes: first every node's signature and body (a body sees only its node's
//! parameters), then the source of every parameter (a source sees only nodes and
//! `input.`), so that every node's output type is known before any source reads it.
//!
//! `signature.rs` parameters and the declared output; `body.rs` settings and the ways a
//! `node` computes (`return`, `exec`, `host`), `call.rs` tool calls, `model.rs` the
//! model nodes; `lookup.rs` names of nodes, tools and models; `sources.rs` parameter
//! sources; `resources.rs` resource and link bindings; `routing.rs` which server
//! serves a URI.

pub(crate) mod body;
mod call;
mod lookup;
mod model;
mod resources;
mod routing;
mod signature;
mod sources;

pub(crate) use sources::SourceCtx;

use super::Checker;
use super::hir::*;
use super::ty::Ty;
use pipec_syntax::ast::{self, ItemKind};

pub(crate) fn empty_node(info: DeclInfo, decl: &ast::NodeDecl) -> NodeDef {
    NodeDef {
        info,
        kind: decl.kind,
        kind_span: decl.kind_span,
        params: Vec::new(),
        output: Ty::Error,
        output_span: decl.name.span,
        output_declared: decl.returns.is_some(),
        body: Body::Invalid,
        when: None,
        after: Vec::new(),
        timeout_ms: None,
        retries: None,
        backoff_ms: None,
        concurrency: None,
        drop_failed_items: false,
        gate_timeout_ms: None,
        each: None,
        deps: Vec::new(),
        skippable: false,
        body_span: decl.body.span,
    }
}

impl Checker<'_> {
    pub(crate) fn check_nodes(&mut self, root: usize) {
        let nodes: Vec<(NodeId, usize)> = self
            .decl_items
            .iter()
            .filter_map(|(d, f, i)| match d {
                DeclRef::Node(id) if *f == root => Some((*id, *i)),
                _ => None,
            })
            .collect();
        // Signatures and bodies first: a body sees only its own parameters, so every
        // node's output type is known before any source refers to it.
        // The syntax tree is moved out while nodes are checked (nothing below reads it
        // through `self`), which saves cloning every declaration.
        let items = std::mem::take(&mut self.files[root].ast.items);
        for (id, i) in &nodes {
            if let Some(ItemKind::Node(decl)) = items.get(*i).map(|it| &it.kind) {
                self.check_node_signature(root, *id, decl);
                self.check_node_body(root, *id, decl);
            }
        }
        for (id, i) in &nodes {
            if let Some(ItemKind::Node(decl)) = items.get(*i).map(|it| &it.kind) {
                self.check_node_sources(root, *id, decl);
            }
        }
        self.files[root].ast.items = items;
    }
}
