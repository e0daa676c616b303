//! The dependency graph: edges from bindings, cycles, a topological order, ancestor
//! sets, the producer of every link binding, and which nodes a `when` can skip.

use super::Checker;
use super::hir::*;
use pipec_diagnostic::Diagnostic;
use pipec_diagnostic::rules as r;

/// Ancestor sets as bit rows, one per node, over a chosen set of columns (the nodes
/// whose ancestry matters: link producers, gates), so the cost is nodes × columns / 64.
pub struct Ancestors {
    words: usize,
    bits: Vec<u64>,
    /// Column of each node, or `u32::MAX` for nodes not tracked.
    column: Vec<u32>,
}

impl Ancestors {
    /// Computes, along a topological order, which of `columns` are ancestors of each node.
    pub fn compute(hir: &Hir, columns: &[NodeId]) -> Ancestors {
        let n = hir.nodes.len();
        let mut column = vec![u32::MAX; n];
        for (i, c) in columns.iter().enumerate() {
            if let Some(slot) = column.get_mut(*c as usize) {
                *slot = i as u32;
            }
        }
        let words = columns.len().div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        for &id in &hir.order {
            let row = id as usize * words;
            for &dep in &hir.nodes[id as usize].deps {
                let drow = dep as usize * words;
                for w in 0..words {
                    bits[row + w] |= bits[drow + w];
                }
                let c = column[dep as usize];
                if c != u32::MAX {
                    bits[row + c as usize / 64] |= 1 << (c % 64);
                }
            }
        }
        Ancestors {
            words,
            bits,
            column,
        }
    }

    /// Whether `a` (one of the columns) is a strict ancestor of `node`.
    pub fn is_ancestor(&self, a: NodeId, node: NodeId) -> bool {
        let Some(&c) = self.column.get(a as usize) else {
            return false;
        };
        if c == u32::MAX {
            return false;
        }
        let i = node as usize * self.words + c as usize / 64;
        self.bits.get(i).is_some_and(|w| w & (1 << (c % 64)) != 0)
    }
}

/// The nodes a source reads (not counting link producers, which come from ancestors).
pub fn source_deps(src: &Source, out: &mut Vec<NodeId>) {
    match &src.kind {
        SourceKind::Node { node, .. } => out.push(*node),
        SourceKind::Join(sides) | SourceKind::List(sides) => {
            sides.iter().for_each(|s| source_deps(s, out))
        }
        SourceKind::Record(fields) => fields.iter().for_each(|(_, s)| source_deps(s, out)),
        SourceKind::Each { inner, .. } => source_deps(inner, out),
        SourceKind::Link(l) => {
            if let Some((n, _)) = l.from {
                out.push(n);
            }
            if let Some(p) = l.producer {
                out.push(p);
            }
        }
        _ => {}
    }
}

impl Checker<'_> {
    pub(crate) fn build_graph(&mut self) {
        let n = self.hir.nodes.len();
        for id in 0..n {
            let node = &self.hir.nodes[id];
            let mut deps = Vec::new();
            for p in &node.params {
                source_deps(&p.source, &mut deps);
            }
            deps.extend(node.after.iter().map(|(a, _)| *a));
            deps.sort_unstable();
            deps.dedup();
            self.hir.nodes[id].deps = deps;
        }
        if !self.topo_order() {
            return;
        }
        self.resolve_link_producers();
        // Producers found without `from:` are ancestors already, so the order holds.
        for id in 0..n {
            let mut deps = std::mem::take(&mut self.hir.nodes[id].deps);
            for p in &self.hir.nodes[id].params {
                source_deps(&p.source, &mut deps);
            }
            deps.sort_unstable();
            deps.dedup();
            self.hir.nodes[id].deps = deps;
        }
        self.compute_skippable();
    }

    /// Kahn's algorithm; on a cycle, reports each cycle once and leaves `order` empty.
    fn topo_order(&mut self) -> bool {
        let n = self.hir.nodes.len();
        let mut indegree = vec![0usize; n];
        let mut dependents: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for (id, node) in self.hir.nodes.iter().enumerate() {
            for &d in &node.deps {
                indegree[id] += 1;
                dependents[d as usize].push(id as NodeId);
            }
        }
        let mut ready: Vec<NodeId> = (0..n as NodeId)
            .filter(|i| indegree[*i as usize] == 0)
            .collect();
        ready.reverse();
        let mut order = Vec::with_capacity(n);
        while let Some(id) = ready.pop() {
            order.push(id);
            for &d in dependents[id as usize].iter().rev() {
                indegree[d as usize] -= 1;
                if indegree[d as usize] == 0 {
                    ready.push(d);
                }
            }
        }
        if order.len() == n {
            self.hir.order = order;
            return true;
        }
        self.report_cycles(&indegree);
        false
    }

    fn report_cycles(&mut self, indegree: &[usize]) {
        // Nodes left with indegree > 0 are on a cycle or behind one; walk back from each
        // along dependencies that are also left, until a node repeats.
        let left: Vec<bool> = indegree.iter().map(|d| *d > 0).collect();
        let mut reported = vec![false; left.len()];
        for start in 0..left.len() {
            if !left[start] || reported[start] {
                continue;
            }
            let mut path: Vec<NodeId> = vec![start as NodeId];
            let mut cur = start as NodeId;
            while let Some(&next) = self.hir.nodes[cur as usize]
                .deps
                .iter()
                .find(|d| left[**d as usize])
            {
                if let Some(pos) = path.iter().position(|p| *p == next) {
                    let cycle: Vec<NodeId> = path[pos..].to_vec();
                    if cycle.iter().any(|c| reported[*c as usize]) {
                        break;
                    }
                    for c in &cycle {
                        reported[*c as usize] = true;
                    }
                    self.report_cycle(&cycle);
                    break;
                }
                path.push(next);
                cur = next;
            }
        }
    }

    /// `cycle` lists nodes each depending on the next; the last depends on the first.
    fn report_cycle(&mut self, cycle: &[NodeId]) {
        let mut order: Vec<NodeId> = cycle.to_vec();
        order.reverse(); // now each node feeds the next
        let names: Vec<String> = order
            .iter()
            .map(|n| self.hir.nodes[*n as usize].info.name.clone())
            .collect();
        let mut shown = names.join(" → ");
        shown.push_str(" → ");
        shown.push_str(&names[0]);
        let first = &self.hir.nodes[order[0] as usize].info;
        let mut d = Diagnostic::new(
            &r::CYCLE,
            first.file,
            first.name_span,
            format!("dependency cycle: {shown}"),
        )
        .label("part of the cycle")
        .help("a node cannot depend on its own output; break the cycle by removing one binding");
        for w in order.windows(2).chain(std::iter::once(
            [order[order.len() - 1], order[0]].as_slice(),
        )) {
            let (from, to) = (w[0], w[1]);
            let target = &self.hir.nodes[to as usize];
            let span = target
                .params
                .iter()
                .find(|p| {
                    let mut deps = Vec::new();
                    source_deps(&p.source, &mut deps);
                    deps.contains(&from)
                })
                .map(|p| p.source.span)
                .or_else(|| {
                    target
                        .after
                        .iter()
                        .find(|(a, _)| *a == from)
                        .map(|(_, s)| *s)
                });
            if let Some(span) = span {
                let fname = self.hir.nodes[from as usize].info.name.clone();
                let verb = if target.after.iter().any(|(a, _)| *a == from)
                    && !target.params.iter().any(|p| {
                        let mut deps = Vec::new();
                        source_deps(&p.source, &mut deps);
                        deps.contains(&from)
                    }) {
                    "waits for"
                } else {
                    "reads"
                };
                d = d.secondary(
                    target.info.file,
                    span,
                    format!("`{}` {verb} `{fname}` here", target.info.name),
                );
            }
        }
        self.diags.push(d);
    }

    /// Every `resource(ref: K)` binding takes its link from the one ancestor that can
    /// produce kind K, or from the node `from:` names.
    fn resolve_link_producers(&mut self) {
        // Which nodes can produce each kind, computed once.
        let mut producers: Vec<Vec<NodeId>> = vec![Vec::new(); self.hir.links.len()];
        let mut columns = Vec::new();
        for (i, n) in self.hir.nodes.iter().enumerate() {
            let kinds = self.hir.produced_links(n);
            if !kinds.is_empty() {
                columns.push(i as NodeId);
            }
            for k in kinds {
                producers[k as usize].push(i as NodeId);
            }
        }
        let anc = &Ancestors::compute(&self.hir, &columns);
        for id in 0..self.hir.nodes.len() {
            let node_id = id as NodeId;
            for pi in 0..self.hir.nodes[id].params.len() {
                let binding = match &self.hir.nodes[id].params[pi].source.kind {
                    SourceKind::Link(l) => Some((l, self.hir.nodes[id].params[pi].source.span)),
                    SourceKind::Each { inner, .. } => match &inner.kind {
                        SourceKind::Link(l) => Some((l, inner.span)),
                        _ => None,
                    },
                    _ => None,
                };
                let Some((l, span)) = binding else {
                    continue;
                };
                // A `from:` that names no node is reported where it is written; guessing a
                // producer instead would suggest the `from:` the binding already has.
                if l.from_written && l.from.is_none() {
                    continue;
                }
                let (link, from) = (l.link, l.from);
                let producer =
                    self.link_producer(node_id, link, from, span, anc, &producers[link as usize]);
                let param = &mut self.hir.nodes[id].params[pi];
                match &mut param.source.kind {
                    SourceKind::Link(l) => l.producer = producer,
                    SourceKind::Each { inner, .. } => {
                        if let SourceKind::Link(l) = &mut inner.kind {
                            l.producer = producer;
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn link_producer(
        &mut self,
        node: NodeId,
        link: LinkId,
        from: Option<(NodeId, pipec_base::source::Span)>,
        span: pipec_base::source::Span,
        anc: &Ancestors,
        producers: &[NodeId],
    ) -> Option<NodeId> {
        let file = self.hir.nodes[node as usize].info.file;
        let kind = self.link_as_written(link);
        let name = self.hir.nodes[node as usize].info.name.clone();
        // A declaration that did not parse may be the tool or node that produces the
        // kind: what it would have declared is unknown, so nothing is reported about it.
        let root = self.files.iter().position(|f| f.is_root).unwrap_or(0);
        let unknowable = self.scopes[root]
            .poisoned
            .iter()
            .any(|p| p.starts_with("value:"));
        if let Some((f, fspan)) = from {
            let produces = producers.contains(&f);
            if !produces {
                if unknowable {
                    return None;
                }
                let fname = self.hir.nodes[f as usize].info.name.clone();
                let label = if self.called_tools(f).is_empty() {
                    "it calls no tools"
                } else {
                    "none of its tools lists this kind"
                };
                let help = self.unproduced_help(node, link, Some(f), producers);
                self.diags.push(
                    Diagnostic::new(
                        &r::UNPRODUCED_LINK_KIND,
                        file,
                        fspan,
                        format!("`{fname}` cannot produce links of kind \"{kind}\""),
                    )
                    .label(label)
                    .help(help),
                );
                return None;
            }
            return Some(f);
        }
        let candidates: Vec<NodeId> = producers
            .iter()
            .copied()
            .filter(|c| *c != node && anc.is_ancestor(*c, node))
            .collect();
        match candidates.as_slice() {
            [one] => Some(*one),
            [] if unknowable => None,
            [] => {
                let help = self.unproduced_help(node, link, None, producers);
                self.diags.push(
                    Diagnostic::new(
                        &r::UNPRODUCED_LINK_KIND,
                        file,
                        span,
                        format!("no upstream node of `{name}` produces links of kind \"{kind}\""),
                    )
                    .label("nothing upstream produces this kind")
                    .help(help),
                );
                None
            }
            many => {
                let names: Vec<String> = many
                    .iter()
                    .map(|c| format!("`{}`", self.hir.nodes[*c as usize].info.name))
                    .collect();
                let mut d = Diagnostic::new(
                    &r::AMBIGUOUS_LINK_PRODUCER,
                    file,
                    span,
                    format!(
                        "several upstream nodes produce links of kind \"{kind}\": {}",
                        names.join(", ")
                    ),
                )
                .label("which one?")
                .help(format!(
                    "pick one with `from: {}`",
                    names[0].trim_matches('`')
                ));
                for c in many {
                    let info = &self.hir.nodes[*c as usize].info;
                    d = d.secondary(info.file, info.name_span, "produces it");
                }
                self.diags.push(d);
                None
            }
        }
    }

    /// A node is skippable when its own `when` can skip it, or when a required binding
    /// comes from a skippable node. Optional parameters and joins absorb skips.
    fn compute_skippable(&mut self) {
        for &id in &self.hir.order.clone() {
            let node = &self.hir.nodes[id as usize];
            // `when` on an `each` node drops items; the node still gives a list.
            let mut skippable = node.when.is_some() && node.each.is_none();
            for p in &node.params {
                let src_skips = source_skippable(&self.hir, &p.source);
                if src_skips && (p.is_each() || !p.ty.is_optional()) {
                    skippable = true;
                }
            }
            self.hir.nodes[id as usize].skippable = skippable;
        }
    }
}

/// Whether a source can be skipped (it has no value).
pub fn source_skippable(hir: &Hir, src: &Source) -> bool {
    match &src.kind {
        SourceKind::Node { node, .. } => hir.nodes[*node as usize].skippable,
        SourceKind::Join(sides) => sides.iter().all(|s| source_skippable(hir, s)),
        SourceKind::Record(fields) => fields.iter().any(|(_, s)| source_skippable(hir, s)),
        SourceKind::List(items) => items.iter().any(|s| source_skippable(hir, s)),
        SourceKind::Each { inner, .. } => source_skippable(hir, inner),
        _ => false,
    }
}
