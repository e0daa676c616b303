//! P0814 file-icon-source.

crate::declare_rule! {
    /// ## What it catches
    /// An icon whose `src` is a `file:` URI.
    ///
    /// ## Why it matters
    /// The MCP specification says clients must reject icon URIs with the `file:` scheme: an
    /// icon names a place on the server's disk that the client cannot, and should not, read.
    /// pipec serves the icon as written (reShapr's files do so), so most clients will show
    /// none.
    ///
    /// ## Example
    /// ```yaml
    ///     icons:
    ///       - src: file:///assets/icons/md-file-icon.png
    /// ```
    /// Give an `https:` address, or the image itself as a `data:` URI
    /// (`data:image/png;base64,...`).
    pub static FILE_ICON_SOURCE = {
        code: "P0814",
        name: "file-icon-source",
        severity: Warning,
        summary: "an icon whose src is a file: URI, which clients reject",
    };
}
