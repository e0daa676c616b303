//! P0805 conflicting-resource-content.

crate::declare_rule! {
    /// ## What it catches
    /// A resource of a Resources file that gives its content more than one way: two or
    /// three of `text`, `blob` and `remoteContent`.
    ///
    /// ## Why it matters
    /// A read returns one content. Which of two would win is not said anywhere, so a
    /// client could be served the text where the author meant the image, or the reverse.
    ///
    /// ## Example
    /// ```yaml
    /// resources:
    ///   'file:///project/logo.png':
    ///     name: Logo
    ///     text: the logo
    ///     blob: iVBORw0KGgo=
    /// ```
    /// Keep one: `blob: iVBORw0KGgo=` (and put the words in `description`).
    pub static CONFLICTING_RESOURCE_CONTENT = {
        code: "P0805",
        name: "conflicting-resource-content",
        severity: Error,
        summary: "a resource with more than one of text, blob and remoteContent",
    };
}
