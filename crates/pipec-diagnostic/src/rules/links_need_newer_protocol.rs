//! P0704 links-need-newer-protocol (`pipec check --online`).

crate::declare_rule! {
    /// ## What it catches
    /// With `pipec check --online`: a tool that declares `links = [...]` on a server
    /// whose session negotiated an MCP protocol older than 2025-06-18, the first
    /// version with `resource_link` content in tool results.
    ///
    /// ## Why it matters
    /// A server speaking an older protocol cannot return links, so every
    /// `resource(ref: ...)` that waits for one of its links finds none at run time
    /// (R0105 resource-not-found), and `pipec check` alone cannot know the server's
    /// version.
    ///
    /// ## Example
    /// A server that speaks 2025-03-26:
    /// ```pipe
    /// tool get_deal(deal_id: string) -> Deal from legacy_crm {
    ///   read_only = true
    ///   links = ["activity-history"]
    /// }
    /// ```
    /// Read the resource by its URI instead, with the tool's result at hand:
    /// ```pipe
    /// node activity(
    ///   deal: Deal = lookup,
    ///   log: ActivityLog = resource("mcp://crm/deals/{deal.deal_id}/activity", max_bytes: 50kb),
    /// ) -> ActivityLog {
    ///   return = log
    /// }
    /// ```
    /// or move the server to MCP 2025-06-18 or later.
    pub static LINKS_NEED_NEWER_PROTOCOL = {
        code: "P0704",
        name: "links-need-newer-protocol",
        severity: Warning,
        summary: "a tool declaring links on a server whose protocol cannot return them",
    };
}
