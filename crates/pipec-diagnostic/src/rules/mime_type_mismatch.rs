//! P0310 mime-type-mismatch.

crate::declare_rule! {
    /// ## What it catches
    /// A resource binding or reader whose `mime:` expects content that is not JSON, such as
    /// `text/*` or `image/png`, while its type is a record (or another type read from JSON).
    ///
    /// ## Why it matters
    /// A record is parsed from JSON; text or image content would fail to parse on every run.
    /// Text binds to `string`, binary content to `bytes`.
    ///
    /// ## Example
    /// ```pipe
    /// think summarise(
    ///   readme: Readme = resource("file:///readme.md", mime: "text/markdown", max_bytes: 20kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("summarise/readme")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think summarise(
    ///   readme: string = resource("file:///readme.md", mime: "text/markdown", max_bytes: 20kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("summarise/readme")
    /// }
    /// ```
    pub static MIME_TYPE_MISMATCH = {
        code: "P0310",
        name: "mime-type-mismatch",
        severity: Error,
        summary: "a non-JSON MIME type bound to a record type",
    };
}
