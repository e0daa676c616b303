//! P0808 uri-without-scheme.

crate::declare_rule! {
    /// ## What it catches
    /// A key of `resources` or `resourceTemplates` that does not start with a URI scheme
    /// (`file:`, `https:`, `ui:`, ...): a bare path such as `/project/readme.md`, or a
    /// template whose scheme is a variable.
    ///
    /// ## Why it matters
    /// MCP names resources by URI, and clients choose how to show and fetch them by their
    /// scheme; reShapr requires "some protocol-specific notation like `file://`".
    ///
    /// ## Example
    /// ```yaml
    /// resources:
    ///   '/project/readme.md':
    ///     name: README.MD
    /// ```
    /// Write it as `'file:///project/readme.md'`.
    pub static URI_WITHOUT_SCHEME = {
        code: "P0808",
        name: "uri-without-scheme",
        severity: Error,
        summary: "a resource URI without a scheme",
    };
}
