//! P0101 unknown-name.

crate::declare_rule! {
    /// ## What it catches
    /// A reference to a type, node, input, server, model, link kind, tool or reader that is not
    /// declared, or, in a body (`when`, `return`, `call` arguments), a name that is not one of the
    /// node's own parameters. The help suggests the closest declared name.
    ///
    /// ## Why it matters
    /// A misspelt name would otherwise fail only when the run reaches it, perhaps after paid
    /// model calls or a person's approval. Bodies see only their node's parameters so that every
    /// edge of the graph is a binding in a signature.
    ///
    /// ## Example
    /// ```pipe
    /// gate review(summary: DealSummary = reserch) -> Approval {
    ///   message = "Approve the research on {{ summary.deal_id }}?"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// gate review(summary: DealSummary = research) -> Approval {
    ///   message = "Approve the research on {{ summary.deal_id }}?"
    /// }
    /// ```
    /// To read another node in a body, bind it to a parameter first (`summary: DealSummary =
    /// research`), then use the parameter (`summary.headline`).
    pub static UNKNOWN_NAME = {
        code: "P0101",
        name: "unknown-name",
        severity: Error,
        summary: "a name that refers to no declaration",
    };
}
