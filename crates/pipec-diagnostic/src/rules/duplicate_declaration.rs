//! P0102 duplicate-declaration.

crate::declare_rule! {
    /// ## What it catches
    /// One name declared twice: two top-level declarations (one of them possibly brought in by
    /// an `import`), a field declared twice in a record, a parameter twice in a signature, or a
    /// setting given twice in a block. The label points at the first one.
    ///
    /// ## Why it matters
    /// Which of the two counts would be an accident of order, and the other would be silently
    /// ignored. pipec refuses to guess.
    ///
    /// ## Example
    /// ```pipe
    /// model fast {
    ///   provider = "openai"
    ///   name = "gpt-4o-mini"
    ///   name = "gpt-4o"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// model fast {
    ///   provider = "openai"
    ///   name = "gpt-4o-mini"
    /// }
    /// ```
    /// For a clash with an imported name, import the library under a namespace
    /// (`import "shared/crm.pipe" as crm`, then `crm.Deal`). Outputs have their own namespace, so
    /// an output may share a node's name.
    pub static DUPLICATE_DECLARATION = {
        code: "P0102",
        name: "duplicate-declaration",
        severity: Error,
        summary: "one name declared twice",
    };
}
