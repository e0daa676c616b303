//! P0309 link-type-mismatch.

crate::declare_rule! {
    /// ## What it catches
    /// A `resource(ref: "K")` parameter whose type does not fit the type declared for kind K
    /// (`link "K": T = ...`), or a `resources(ref: "K")` parameter that is not a list of it.
    ///
    /// ## Why it matters
    /// The kind's type is the one statement of what a link of that kind holds; every binding
    /// that reads the kind must agree with it, or the content would fail to parse at run time.
    ///
    /// ## Example
    /// ```pipe
    /// link "email-history": EmailPage = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
    ///
    /// think consume(
    ///   summary: DealSummary = research,
    ///   history: ActivityLog = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// link "email-history": EmailPage = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
    ///
    /// think consume(
    ///   summary: DealSummary = research,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    pub static LINK_TYPE_MISMATCH = {
        code: "P0309",
        name: "link-type-mismatch",
        severity: Error,
        summary: "a link binding whose type does not fit the link kind's type",
    };
}
