//! P0305 ambiguous-link-producer.

crate::declare_rule! {
    /// ## What it catches
    /// `resource(ref: "K")` or `resources(ref: "K")` where several ancestors of the node can
    /// produce links of kind K and no `from:` says which one to read.
    ///
    /// ## Why it matters
    /// Which node's link is read would depend on what happened to run, and the content could
    /// come from the wrong step. `from: node` picks the producer and adds the edge.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   first: DealSummary = research,
    ///   second: DealSummary = recheck,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   first: DealSummary = research,
    ///   second: DealSummary = recheck,
    ///   history: EmailPage = resource(ref: "email-history", from: recheck, max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    pub static AMBIGUOUS_LINK_PRODUCER = {
        code: "P0305",
        name: "ambiguous-link-producer",
        severity: Error,
        summary: "a link read from one of several producers without saying which",
    };
}
