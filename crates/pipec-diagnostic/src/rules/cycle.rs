//! P0501 cycle.

crate::declare_rule! {
    /// ## What it catches
    /// Nodes that depend on each other in a loop, through bindings, joins, `from:` or `after`.
    /// The message lists the nodes of the cycle in order.
    ///
    /// ## Why it matters
    /// A run goes in dependency order, and a cycle has no first node. Repetition has other
    /// forms: `each` for the items of a list, an agent's tool loop for repeated model turns.
    ///
    /// ## Example
    /// ```pipe
    /// think draft(review: Review = critique) -> Draft {
    ///   model = fast
    ///   prompt = file("draft/write")
    /// }
    ///
    /// think critique(draft: Draft = draft) -> Review {
    ///   model = fast
    ///   prompt = file("draft/critique")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think draft(deal_id: string = input.deal_id) -> Draft {
    ///   model = fast
    ///   prompt = file("draft/write")
    /// }
    ///
    /// think critique(draft: Draft = draft) -> Review {
    ///   model = fast
    ///   prompt = file("draft/critique")
    /// }
    ///
    /// think revise(draft: Draft = draft, review: Review = critique) -> Draft {
    ///   model = fast
    ///   prompt = file("draft/revise")
    /// }
    /// ```
    pub static CYCLE = {
        code: "P0501",
        name: "cycle",
        severity: Error,
        summary: "nodes that depend on each other in a loop",
    };
}
