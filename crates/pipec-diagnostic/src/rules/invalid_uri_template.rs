//! P0302 invalid-uri-template.

crate::declare_rule! {
    /// ## What it catches
    /// A URI template that is not valid RFC 6570 (an unclosed `{`, an empty `{}`), or a link
    /// template that cannot be matched against URIs: two expressions with no literal text
    /// between them (`{owner}{repo}`), or a second `{+var}`.
    ///
    /// ## Why it matters
    /// A link template is used backwards: pipec recognises the kind of a link a tool returned by
    /// matching its URI, and keeps the captured variables for `where:`. `{var}` matches one
    /// segment and `{+var}` the rest of the path, so expressions must be delimited by literal
    /// text and one `{+var}` at most may take several segments, or the match is ambiguous.
    ///
    /// ## Example
    /// ```pipe
    /// link "file": string = "mcp://repo/files/{+rev}/{+path}"
    /// ```
    /// Write it as:
    /// ```pipe
    /// link "file": string = "mcp://repo/files/{rev}/{+path}"
    /// ```
    pub static INVALID_URI_TEMPLATE = {
        code: "P0302",
        name: "invalid-uri-template",
        severity: Error,
        summary: "a URI template that is invalid or cannot be matched",
    };
}
