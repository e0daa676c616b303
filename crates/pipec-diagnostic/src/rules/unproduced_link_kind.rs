//! P0304 unproduced-link-kind.

crate::declare_rule! {
    /// ## What it catches
    /// `resource(ref: "K")` or `resources(ref: "K")` where no ancestor of the node can produce a
    /// link of kind K: no upstream `agent` or `act` has a tool whose `links` list K, and no
    /// upstream `call` node calls one. A `from:` that names a node which cannot produce K is
    /// caught too.
    ///
    /// ## Why it matters
    /// Links exist only once a tool has returned them, so the producer must run first. Without
    /// one the read would fail on every run (R0105 resource-not-found), after everything
    /// upstream had already run.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   deal_id: string = input.deal_id,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   summary: DealSummary = research, // research's tools list "email-history"
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// If a tool's results do carry such links, list the kind in its `links`.
    pub static UNPRODUCED_LINK_KIND = {
        code: "P0304",
        name: "unproduced-link-kind",
        severity: Error,
        summary: "a link kind that no ancestor can produce",
    };
}
