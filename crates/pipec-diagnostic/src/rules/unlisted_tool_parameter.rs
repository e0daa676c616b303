//! P0702 unlisted-tool-parameter (`pipec check --online`).

crate::declare_rule! {
    /// ## What it catches
    /// With `pipec check --online`: a tool parameter whose wire name is not among the
    /// `properties` of the server's input schema, where that schema takes parameters
    /// it does not list (it has no `"additionalProperties": false`). A closed schema
    /// makes the same parameter error R0502 mcp-tool-mismatch, which a run refuses.
    ///
    /// ## Why it matters
    /// Many servers drop arguments they do not know without a word, so a misspelt
    /// parameter is a value that never arrives: the call runs with the server's
    /// default, or fails for a missing argument that was in fact given.
    ///
    /// ## Example
    /// The server lists `deal_id`:
    /// ```pipe
    /// tool get_deal(dael_id: string) -> Deal from crm {
    ///   read_only = true
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// tool get_deal(deal_id: string) -> Deal from crm {
    ///   read_only = true
    /// }
    /// ```
    /// or keep a local name with `dael_id: string as "deal_id"`.
    pub static UNLISTED_TOOL_PARAMETER = {
        code: "P0702",
        name: "unlisted-tool-parameter",
        severity: Warning,
        summary: "a tool parameter the server's input schema does not list",
    };
}
