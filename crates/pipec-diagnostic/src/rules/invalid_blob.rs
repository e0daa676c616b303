//! P0810 invalid-blob.

crate::declare_rule! {
    /// ## What it catches
    /// A resource `blob` that is not base64 (RFC 4648, standard alphabet): a character
    /// outside `A-Z a-z 0-9 + /`, text after the `=` padding, or a length no bytes encode.
    /// White space and line breaks are allowed, and the padding may be left out.
    ///
    /// ## Why it matters
    /// The blob is decoded once, when the file is loaded, and served as bytes; a blob that
    /// does not decode would be served as nothing, or as bytes nobody wrote.
    ///
    /// ## Example
    /// ```yaml
    ///     blob: iVBORw0KGgo_AAAA
    /// ```
    /// `_` belongs to the URL-safe alphabet; write `/` instead (`base64 -w0 logo.png` gives
    /// the standard alphabet).
    pub static INVALID_BLOB = {
        code: "P0810",
        name: "invalid-blob",
        severity: Error,
        summary: "a resource blob that is not base64",
    };
}
