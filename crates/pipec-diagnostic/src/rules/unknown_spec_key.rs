//! P0813 unknown-spec-key.

crate::declare_rule! {
    /// ## What it catches
    /// A key the Resources format does not define, at the top of the file, in `service`, in
    /// a resource or a template, in an icon or in `annotations`. The help names the closest
    /// key the place takes (`mime_type` for `mimeType`).
    ///
    /// ## Why it matters
    /// The file is served all the same (reShapr's own files carry extra keys, such as the
    /// `tools` of MCP Apps resources), but the key is ignored: a misspelt `mimeType` leaves
    /// the resource without its MIME type.
    ///
    /// ## Example
    /// ```yaml
    ///     mime_type: text/plain
    /// ```
    /// Write it as `mimeType: text/plain`.
    pub static UNKNOWN_SPEC_KEY = {
        code: "P0813",
        name: "unknown-spec-key",
        severity: Warning,
        summary: "a key the Resources format does not define",
    };
}
