//! P0401 prompt-not-found.

crate::declare_rule! {
    /// ## What it catches
    /// `prompt = file("x/y")` where `prompts/x/y.jinja` does not exist in the project root (the
    /// nearest folder, the `.pipe` file's own included, that holds `prompts/` or a `pipec.toml`),
    /// or a template that includes or imports a file that does not exist.
    ///
    /// ## Why it matters
    /// Without the check the node would fail when its turn comes, after the work upstream of it.
    /// The help points out that any plain string is an inline template: `prompt = "consume/brief"`
    /// would send those two words to the model.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/breif")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief") // prompts/consume/brief.jinja
    /// }
    /// ```
    pub static PROMPT_NOT_FOUND = {
        code: "P0401",
        name: "prompt-not-found",
        severity: Error,
        summary: "a prompt file that does not exist",
    };
}
