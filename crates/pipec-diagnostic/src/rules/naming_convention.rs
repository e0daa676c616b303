//! P0109 naming-convention.

crate::declare_rule! {
    /// ## What it catches
    /// A type or enum whose name is not CamelCase (`type deal_digest`), or a node, parameter,
    /// input, output, server, model, tool or reader whose name is not snake_case
    /// (`node dealDigest`). Tool parameters are exempt: they carry the server's own names.
    ///
    /// ## Why it matters
    /// One convention lets a reader tell a type from a value at a glance
    /// (`summary: DealSummary = research`), and keeps files and prompt variables alike across
    /// projects. A tool parameter may keep the server's spelling (`pullNumber`), or map it to a
    /// local name with `pull_number: int as "pullNumber"`.
    ///
    /// ## Example
    /// ```pipe
    /// type deal_digest {
    ///   deal_id: string
    ///   events: int
    /// }
    ///
    /// node dealDigest(deal_id: string = input.deal_id) -> deal_digest {
    ///   return = { deal_id: deal_id, events: 0 }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// type DealDigest {
    ///   deal_id: string
    ///   events: int
    /// }
    ///
    /// node deal_digest(deal_id: string = input.deal_id) -> DealDigest {
    ///   return = { deal_id: deal_id, events: 0 }
    /// }
    /// ```
    pub static NAMING_CONVENTION = {
        code: "P0109",
        name: "naming-convention",
        severity: Warning,
        summary: "a name that breaks the CamelCase or snake_case convention",
    };
}
