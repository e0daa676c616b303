//! P0601 effect-in-agent.

crate::declare_rule! {
    /// ## What it catches
    /// An `agent` whose `tools` include a tool that is not read-only. A tool is
    /// `read_only = false` unless it says otherwise; readers are always read-only.
    ///
    /// ## Why it matters
    /// Only `act` nodes may cause effects: they journal every call, take `limits` and
    /// `approve`, and on resume never silently repeat a non-idempotent call. An agent does none
    /// of that, so a mutating tool in its loop could act twice or unchecked.
    ///
    /// ## Example
    /// ```pipe
    /// tool add_note(deal_id: string, text: string) -> Note from crm // read_only defaults to false
    ///
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, add_note]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// tool add_note(deal_id: string, text: string) -> Note from crm
    ///
    /// act research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, add_note]
    ///   approve = [add_note]
    /// }
    /// ```
    /// If the tool only reads, declare it `read_only = true` instead.
    pub static EFFECT_IN_AGENT = {
        code: "P0601",
        name: "effect-in-agent",
        severity: Error,
        summary: "an agent given a tool that may cause effects",
    };
}
