//! P0402 undefined-prompt-variable.

crate::declare_rule! {
    /// ## What it catches
    /// A variable in a prompt or gate `message` that is neither a parameter of the node, nor
    /// `output_schema`, nor one the template defines itself (a loop variable, a `set`). pipec
    /// follows `include` and `import`, and points into the template file.
    ///
    /// ## Why it matters
    /// An undefined variable renders as nothing, so the model would get a prompt with a hole in
    /// it and answer anyway. A template sees only its node's parameters, like every body: bind
    /// what it needs as a parameter.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief for deal {{ deal_id }} ({{ digest.events }} events)."
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   deal_id: string = input.deal_id,
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief for deal {{ deal_id }} ({{ digest.events }} events)."
    /// }
    /// ```
    pub static UNDEFINED_PROMPT_VARIABLE = {
        code: "P0402",
        name: "undefined-prompt-variable",
        severity: Error,
        summary: "a template variable that no parameter provides",
    };
}
