//! P0815 overlapping-served-uris.

crate::declare_rule! {
    /// ## What it catches
    /// Two resource templates of a Resources file or of a `serve` block that match the same
    /// URI, or a template that matches the URI of a fixed resource. pipec finds them by trying
    /// the URIs one template makes against the other.
    ///
    /// ## Why it matters
    /// A read goes to the first that matches: fixed resources first, then templates in the
    /// order written. The later template is never asked for the URIs they share, which is
    /// rarely what was meant.
    ///
    /// ## Example
    /// ```yaml
    /// resourceTemplates:
    ///   'file:///project/{+path}':
    ///     name: Project File
    ///   'file:///project/src/{path}':
    ///     name: Project Source File
    /// ```
    /// Give the two templates different literal text (`file:///project/docs/{+path}`), or
    /// write the narrower one first if the wider one is meant for the rest.
    pub static OVERLAPPING_SERVED_URIS = {
        code: "P0815",
        name: "overlapping-served-uris",
        severity: Warning,
        summary: "two served templates, or a template and a fixed resource, that match the same URI",
    };
}
