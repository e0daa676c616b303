//! P0106 nodes-in-library.

crate::declare_rule! {
    /// ## What it catches
    /// An imported file that declares nodes (`node`, `think`, `agent`, `act`, `gate`), inputs or
    /// outputs.
    ///
    /// ## Why it matters
    /// An import brings in types, enums, servers, models, link kinds, tools and readers only. A
    /// node in a library would either vanish without a word or join every importer's graph
    /// unseen; keeping nodes, inputs and outputs in the pipeline file keeps its whole graph in one
    /// place.
    ///
    /// ## Example
    /// ```pipe
    /// // shared/crm.pipe, imported by deal_research.pipe
    /// type Deal {
    ///   deal_id: string
    ///   name: string
    /// }
    ///
    /// input deal_id: string
    /// ```
    /// Write it as:
    /// ```pipe
    /// // shared/crm.pipe
    /// type Deal {
    ///   deal_id: string
    ///   name: string
    /// }
    /// ```
    /// and declare `input deal_id: string` in the pipeline that imports the library.
    pub static NODES_IN_LIBRARY = {
        code: "P0106",
        name: "nodes-in-library",
        severity: Error,
        summary: "an imported file that declares nodes, inputs or outputs",
    };
}
