//! P0503 unused-declaration.

crate::declare_rule! {
    /// ## What it catches
    /// A type, enum, server, model, link kind, tool, reader or input of the checked file that
    /// nothing uses. Imported declarations are never reported, and a library file checked on its
    /// own gets no such warnings: its declarations are for its importers.
    ///
    /// ## Why it matters
    /// A dead declaration misleads readers into thinking it matters. An unused tool is often one
    /// left out of an agent's `tools`, and an unused input must still be given on every run
    /// that has no default for it.
    ///
    /// ## Example
    /// ```pipe
    /// tool search_deals(query: string) -> Deal[] from crm {
    ///   read_only = true
    /// }
    ///
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// tool search_deals(query: string) -> Deal[] from crm {
    ///   read_only = true
    /// }
    ///
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal, search_deals]
    /// }
    /// ```
    /// or delete the declaration.
    pub static UNUSED_DECLARATION = {
        code: "P0503",
        name: "unused-declaration",
        severity: Warning,
        summary: "a declaration of this file that nothing uses",
    };
}
