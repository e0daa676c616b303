//! P0107 reserved-name.

crate::declare_rule! {
    /// ## What it catches
    /// A name that already means something else: a parameter named `output_schema` or `role` in a
    /// node that has a prompt, and a node or node parameter named `input`, `true`, `false` or
    /// `null`. Record fields are not affected: `type`, `from` and `input` are valid field names.
    ///
    /// ## Why it matters
    /// A template sees the output type as `{{ output_schema }}` and splits messages with
    /// `{{ role("user") }}`; a parameter of that name would hide them. In a source, `input` means
    /// the pipeline's inputs (`input.deal_id`) and `true`, `false`, `null` are literals, so a
    /// declaration with one of these names could never be referred to.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   role: string = input.role,
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   digest: Digest = digest,
    ///   audience: string = input.role,
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    pub static RESERVED_NAME = {
        code: "P0107",
        name: "reserved-name",
        severity: Error,
        summary: "a name that pipec reserves for its own meaning",
    };
}
