//! P0403 unused-parameter.

crate::declare_rule! {
    /// ## What it catches
    /// A parameter that nothing in its node reads: not the prompt, `return`, `call` arguments,
    /// `when`, a URI template or a `where:`. Never reported for `exec` and `host` nodes (their
    /// stdin gets every parameter) or for gates (a gate's parameters place it in the graph).
    ///
    /// ## Why it matters
    /// Every binding is an edge: the node waits for a value it then ignores, and a resource
    /// parameter is fetched for nothing. Often the prompt was meant to use it and does not. For
    /// ordering without data, use `after = [node]`.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief from {{ digest }}."
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief from {{ digest }} and these emails: {{ history.emails }}."
    /// }
    /// ```
    /// or remove the parameter.
    pub static UNUSED_PARAMETER = {
        code: "P0403",
        name: "unused-parameter",
        severity: Warning,
        summary: "a parameter that nothing in its node uses",
    };
}
