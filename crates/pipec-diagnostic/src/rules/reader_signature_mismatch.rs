//! P0308 reader-signature-mismatch.

crate::declare_rule! {
    /// ## What it catches
    /// A reader whose parameters are not exactly the variables of its `uri` template: a variable
    /// with no parameter, or a parameter the template does not use.
    ///
    /// ## Why it matters
    /// An agent calls a reader like a tool: the model fills in the parameters and pipec builds
    /// the URI from them. A missing parameter leaves the URI unbuildable; an extra one asks the
    /// model for a value that is then thrown away.
    ///
    /// ## Example
    /// ```pipe
    /// reader read_emails(deal_id: string, start: string) -> EmailPage from crm {
    ///   uri = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
    ///   max_bytes = 100kb
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// reader read_emails(deal_id: string, start: string, end: string) -> EmailPage from crm {
    ///   uri = "mcp://crm/deals/{deal_id}/emails/{start}/{end}"
    ///   max_bytes = 100kb
    /// }
    /// ```
    pub static READER_SIGNATURE_MISMATCH = {
        code: "P0308",
        name: "reader-signature-mismatch",
        severity: Error,
        summary: "a reader whose parameters differ from its URI template's variables",
    };
}
