//! P0602 act-without-effects.

crate::declare_rule! {
    /// ## What it catches
    /// An `act` whose tools (or whose `call`) are all read-only.
    ///
    /// ## Why it matters
    /// `act` marks where effects happen; readers look for it to see what a pipeline changes. An
    /// `act` that changes nothing is a false alarm, and it often means a mutating tool was
    /// declared `read_only = true` by mistake. An `agent` runs the same read-only loop.
    ///
    /// ## Example
    /// ```pipe
    /// act research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, read_emails]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, read_emails]
    /// }
    /// ```
    pub static ACT_WITHOUT_EFFECTS = {
        code: "P0602",
        name: "act-without-effects",
        severity: Warning,
        summary: "an act whose tools are all read-only",
    };
}
