//! P0404 prompt-syntax-error.

crate::declare_rule! {
    /// ## What it catches
    /// A prompt or gate `message` that the template engine (minijinja) cannot parse: an unclosed
    /// `{{` or `{%`, a `{% for %}` without `{% endfor %}`. The label points into the template,
    /// in the template file when there is one.
    ///
    /// ## Why it matters
    /// The template would fail when the node's turn comes, after the work upstream of it; and
    /// nothing else about the template (its variables, its fields) can be checked until it
    /// parses.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = "Summarise {{ digest.deal_id } in one paragraph."
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = "Summarise {{ digest.deal_id }} in one paragraph."
    /// }
    /// ```
    pub static PROMPT_SYNTAX_ERROR = {
        code: "P0404",
        name: "prompt-syntax-error",
        severity: Error,
        summary: "a prompt template that does not parse",
    };
}
