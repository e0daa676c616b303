//! What to write when no node can produce the links a binding reads (the help of P0304):
//! the node that does produce them, the tool that returns them, or the tools that may,
//! each named as the pipeline file must write it (`crm.get_deal` through
//! `import "crm.pipe" as crm`).

use super::Checker;
use super::hir::*;
use pipec_syntax::ast::NodeKind;

/// At most this many names in one help line.
const MAX_NAMES: usize = 3;

impl Checker<'_> {
    /// How the pipeline file writes a tool's name, if it sees the tool: `get_deal`, or
    /// `ns.get_deal` for one of a namespaced import.
    fn tool_as_written(&self, tool: ToolId) -> Option<String> {
        let root = self.files.iter().position(|f| f.is_root).unwrap_or(0);
        let want = DeclRef::Tool(tool);
        let plain = self.scopes[root]
            .values
            .iter()
            .filter(|(_, v)| **v == want)
            .map(|(name, _)| name.clone())
            .min();
        plain.or_else(|| {
            self.scopes[root]
                .namespaces
                .iter()
                .flat_map(|(ns, target)| {
                    self.own[*target]
                        .values
                        .iter()
                        .filter(|(_, v)| **v == want)
                        .map(move |(name, _)| format!("{ns}.{name}"))
                })
                .min()
        })
    }

    /// How the pipeline file writes a link kind: `email-history`, or `ns.email-history`
    /// for one of a namespaced import.
    pub(super) fn link_as_written(&self, link: LinkId) -> String {
        let root = self.files.iter().position(|f| f.is_root).unwrap_or(0);
        let plain = self.scopes[root]
            .links
            .iter()
            .filter(|(_, l)| **l == link)
            .map(|(kind, _)| kind.clone())
            .min();
        plain
            .or_else(|| {
                self.scopes[root]
                    .namespaces
                    .iter()
                    .flat_map(|(ns, target)| {
                        self.own[*target]
                            .links
                            .iter()
                            .filter(|(_, l)| **l == link)
                            .map(move |(kind, _)| format!("{ns}.{kind}"))
                    })
                    .min()
            })
            .unwrap_or_else(|| self.hir.links[link as usize].kind.clone())
    }

    /// The tools (not readers) a node calls: its `call`, or the `tools` of its loop.
    pub(super) fn called_tools(&self, node: NodeId) -> Vec<ToolId> {
        let tools = match &self.hir.nodes[node as usize].body {
            Body::Call { tool, .. } => vec![*tool],
            Body::Model { tools, .. } if self.hir.nodes[node as usize].kind != NodeKind::Think => {
                tools.clone()
            }
            _ => Vec::new(),
        };
        tools
            .into_iter()
            .filter(|t| !self.hir.tool(*t).is_reader)
            .collect()
    }

    /// The names, as written, of the tools among `tools` that the pipeline file sees;
    /// those of the server the link kind names (`mcp://crm/...`) first, when there are
    /// any, since they are the ones that can return its links.
    fn written_tools(&self, link: LinkId, tools: &[ToolId]) -> Vec<String> {
        let server = self.hir.links[link as usize]
            .template
            .mcp_authority()
            .map(str::to_string);
        let on_server: Vec<ToolId> = tools
            .iter()
            .copied()
            .filter(|t| {
                let tool = self.hir.tool(*t);
                tool.server.is_some_and(|s| {
                    Some(&self.hir.servers[s as usize].info.name) == server.as_ref()
                })
            })
            .collect();
        let chosen = if on_server.is_empty() {
            tools
        } else {
            &on_server
        };
        let mut names: Vec<String> = chosen
            .iter()
            .filter_map(|t| self.tool_as_written(*t))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The tools, as written, whose `links` list the kind.
    fn tools_listing(&self, link: LinkId) -> Vec<String> {
        let listing: Vec<ToolId> = (0..self.hir.tools.len() as ToolId)
            .filter(|t| {
                let tool = self.hir.tool(*t);
                !tool.is_reader && tool.links.iter().any(|(k, _)| *k == link)
            })
            .collect();
        self.written_tools(link, &listing)
    }

    /// The nodes `node` depends on, directly or not, in the order written.
    fn upstream_of(&self, node: NodeId) -> Vec<NodeId> {
        let mut seen = vec![false; self.hir.nodes.len()];
        let mut stack = self.hir.nodes[node as usize].deps.clone();
        while let Some(n) = stack.pop() {
            if let Some(slot) = seen.get_mut(n as usize)
                && !*slot
            {
                *slot = true;
                stack.extend(self.hir.nodes[n as usize].deps.iter().copied());
            }
        }
        (0..self.hir.nodes.len() as NodeId)
            .filter(|n| seen[*n as usize] && *n != node)
            .collect()
    }

    /// The help of P0304 for a binding of `node` that reads links of `link`: from `from`
    /// when it names a node (which cannot produce them), else from its upstream nodes
    /// (none of which can). `producers` are the nodes that can, anywhere.
    pub(super) fn unproduced_help(
        &self,
        node: NodeId,
        link: LinkId,
        from: Option<NodeId>,
        producers: &[NodeId],
    ) -> String {
        let kind = &self.hir.links[link as usize].kind;
        let name_of = |n: NodeId| self.hir.nodes[n as usize].info.name.clone();
        let listing = self.tools_listing(link);
        let others: Vec<String> = producers
            .iter()
            .filter(|p| Some(**p) != from && **p != node)
            .map(|p| name_of(*p))
            .collect();
        if let Some(f) = from {
            let fname = name_of(f);
            if let Some(first) = others.first() {
                return format!("{} can produce it: say `from: {first}`", quoted_or(&others));
            }
            let is_loop = matches!(
                self.hir.nodes[f as usize].kind,
                NodeKind::Agent | NodeKind::Act
            );
            let calls = self.called_tools(f);
            if let (true, Some(tool)) = (is_loop, listing.first()) {
                return format!("`{tool}` returns such links: add it to the `tools` of `{fname}`");
            }
            if !calls.is_empty() {
                let tools = self.written_tools(link, &calls);
                if !tools.is_empty() {
                    return format!(
                        "if {} returns such links, add \"{kind}\" to its `links`",
                        quoted_or(&tools)
                    );
                }
            }
            return match listing.first() {
                Some(tool) => format!(
                    "`{fname}` calls no tool that returns such links; `{tool}` does: name in `from:` a node that calls it"
                ),
                None => format!(
                    "`{fname}` calls no tool that returns such links: add \"{kind}\" to the `links` of a tool that returns them, and call that tool in `{fname}`"
                ),
            };
        }
        let node_name = name_of(node);
        if let Some(first) = others.first() {
            let runs = if others.len() == 1 { "runs" } else { "run" };
            return format!(
                "{} can produce it but {runs} independently of `{node_name}`; say `from: {first}` to make it an upstream node",
                quoted_and(&others)
            );
        }
        let upstream = self.upstream_of(node);
        if let Some(tool) = listing.first() {
            let loops: Vec<String> = upstream
                .iter()
                .filter(|n| {
                    matches!(
                        self.hir.nodes[**n as usize].kind,
                        NodeKind::Agent | NodeKind::Act
                    )
                })
                .map(|n| name_of(*n))
                .collect();
            return match loops.first() {
                Some(agent) => format!(
                    "`{tool}` returns such links: add it to the `tools` of `{agent}`, or call it in another node upstream of `{node_name}`"
                ),
                None => format!(
                    "`{tool}` returns such links, and no node upstream of `{node_name}` calls it: call it in one (`call = {tool}(...)`, or in the `tools` of an `agent`)"
                ),
            };
        }
        let mut called: Vec<(ToolId, NodeId)> = Vec::new();
        for n in &upstream {
            for t in self.called_tools(*n) {
                if !called.iter().any(|(c, _)| *c == t) {
                    called.push((t, *n));
                }
            }
        }
        let tools: Vec<ToolId> = called.iter().map(|(t, _)| *t).collect();
        let written = self.written_tools(link, &tools);
        match written.as_slice() {
            [] => {}
            [one] => {
                let caller = called
                    .iter()
                    .find(|(t, _)| self.tool_as_written(*t).as_ref() == Some(one))
                    .map(|(_, n)| name_of(*n))
                    .unwrap_or_default();
                return format!(
                    "no tool lists \"{kind}\" in its `links`; `{caller}` upstream calls `{one}`: if it returns such links, add \"{kind}\" to its `links`"
                );
            }
            many => {
                return format!(
                    "no tool lists \"{kind}\" in its `links`; the tools called upstream are {}: add \"{kind}\" to the `links` of the one that returns such links",
                    quoted_and(many)
                );
            }
        }
        format!(
            "no node can produce it: add \"{kind}\" to the `links` of a tool that returns such links, and call that tool upstream"
        )
    }
}

/// `` `a` ``, `` `a` or `b` ``, `` `a`, `b` or `c` `` (at most [`MAX_NAMES`]).
fn quoted_or(names: &[String]) -> String {
    joined(names, "or")
}

fn quoted_and(names: &[String]) -> String {
    joined(names, "and")
}

fn joined(names: &[String], word: &str) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(MAX_NAMES)
        .map(|n| format!("`{n}`"))
        .collect();
    match shown.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} {word} {last}", rest.join(", ")),
    }
}
