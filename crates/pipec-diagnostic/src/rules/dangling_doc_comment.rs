//! P0003 dangling-doc-comment.

crate::declare_rule! {
    /// ## What it catches
    /// A `///` comment with nothing after it to document: at the end of the file, or after the
    /// last field, parameter, enum variant or setting of a block.
    ///
    /// ## Why it matters
    /// A `///` comment is not a note for readers alone: it becomes a JSON Schema `description` or
    /// a tool description that the model sees. One that documents nothing reaches no one. It
    /// was usually meant for the line below it, or meant as a plain `//` comment.
    ///
    /// ## Example
    /// ```pipe
    /// type Brief {
    ///   text: string
    ///   /// Keep it under 200 words.
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// type Brief {
    ///   /// The brief itself; keep it under 200 words.
    ///   text: string
    /// }
    /// ```
    /// Use `//` for a note that is meant only for readers of the file.
    pub static DANGLING_DOC_COMMENT = {
        code: "P0003",
        name: "dangling-doc-comment",
        severity: Warning,
        summary: "a doc comment that documents nothing",
    };
}
