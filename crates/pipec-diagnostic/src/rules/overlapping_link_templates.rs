//! P0311 overlapping-link-templates.

crate::declare_rule! {
    /// ## What it catches
    /// Two link kinds whose templates can both match one URI, such as `mcp://crm/deals/{deal_id}`
    /// and `mcp://crm/{table}/{id}`.
    ///
    /// ## Why it matters
    /// pipec recognises the kind of a link a tool returns by matching its URI against the
    /// templates. A URI that two templates match could be of either kind, so
    /// `resource(ref: ...)` could read a link as the wrong type.
    ///
    /// ## Example
    /// ```pipe
    /// link "deal": Deal = "mcp://crm/deals/{deal_id}"
    /// link "record": json = "mcp://crm/{table}/{id}"
    /// ```
    /// Write it as:
    /// ```pipe
    /// link "deal": Deal = "mcp://crm/deals/{deal_id}"
    /// link "record": json = "mcp://crm/records/{table}/{id}"
    /// ```
    pub static OVERLAPPING_LINK_TEMPLATES = {
        code: "P0311",
        name: "overlapping-link-templates",
        severity: Warning,
        summary: "two link kinds whose templates match the same URI",
    };
}
