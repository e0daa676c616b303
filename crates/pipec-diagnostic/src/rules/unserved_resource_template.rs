//! P0703 unserved-resource-template (`pipec check --online`).

crate::declare_rule! {
    /// ## What it catches
    /// With `pipec check --online`: a reader's `uri`, or the URI of a
    /// `resource("...")` binding, that matches none of the resource templates its
    /// server lists (`resources/templates/list`) and none of its fixed resources
    /// (`resources/list`), or whose server declares no resources at all. A template
    /// matches when it is the same apart from variable names, or when it matches a URI
    /// the declared one expands to; a fixed resource matches when it is one of the URIs
    /// the declared one expands to. URIs without expressions are not compared: they
    /// may name resources a listing leaves out.
    ///
    /// ## Why it matters
    /// A read of a URI the server does not serve fails at run time with R0105
    /// resource-not-found, often after earlier steps have run (and spent model
    /// calls). A template that changed on the server (a renamed path segment, a new
    /// variable) shows up here before any run does.
    ///
    /// ## Example
    /// The server lists `mcp://crm/deals/{deal_id}/emails/{start}/{end}`:
    /// ```pipe
    /// reader read_emails(deal_id: string, start: string, end: string) -> EmailPage from crm {
    ///   uri = "mcp://crm/deals/{deal_id}/mail/{start}/{end}"
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
    /// A server that serves URIs it does not list may be right anyway; the help lists
    /// what it does list.
    pub static UNSERVED_RESOURCE_TEMPLATE = {
        code: "P0703",
        name: "unserved-resource-template",
        severity: Warning,
        summary: "a reader or resource URI that none of the server's resource templates or fixed resources matches",
    };
}
