//! P0502 unused-node.

crate::declare_rule! {
    /// ## What it catches
    /// A node whose output no parameter reads and no output prints. `act` nodes are exempt, since
    /// their effect is the point; gates have their own rule, P0504 gate-without-consumer.
    ///
    /// ## Why it matters
    /// The node still runs, with its model calls, tool calls and fetches, and its result is
    /// thrown away. Usually an `output` is missing, or a downstream parameter is bound to the
    /// wrong node.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    ///
    /// output brief: Brief? = consume
    /// ```
    pub static UNUSED_NODE = {
        code: "P0502",
        name: "unused-node",
        severity: Warning,
        summary: "a node whose output nothing uses",
    };
}
