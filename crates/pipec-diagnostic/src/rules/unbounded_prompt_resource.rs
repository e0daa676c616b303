//! P0306 unbounded-prompt-resource.

crate::declare_rule! {
    /// ## What it catches
    /// Content that reaches a model with no size cap: a `resource(...)` parameter of a `think`,
    /// `agent` or `act` without `max_bytes`, a `resources(...)` one without `max_total`, or a
    /// reader without `max_bytes` given to an agent.
    ///
    /// ## Why it matters
    /// The server decides a resource's size at run time. One large file can overflow the
    /// model's context or cost far more than expected. `max_bytes` is checked before the content
    /// is parsed and fails the node with a clear error (R0101 resource-too-large).
    ///
    /// ## Example
    /// ```pipe
    /// agent research(
    ///   deal_id: string = input.deal_id,
    ///   dossier: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity"),
    /// ) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// agent research(
    ///   deal_id: string = input.deal_id,
    ///   dossier: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity", max_bytes: 50kb),
    /// ) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// For a list, cap the whole: `resources(ref: "ticket", max_bytes: 20kb, max_total: 1mb)`.
    pub static UNBOUNDED_PROMPT_RESOURCE = {
        code: "P0306",
        name: "unbounded-prompt-resource",
        severity: Warning,
        summary: "a resource that reaches a model without a size cap",
    };
}
