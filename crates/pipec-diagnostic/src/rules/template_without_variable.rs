//! P0806 template-without-variable.

crate::declare_rule! {
    /// ## What it catches
    /// An entry of `resourceTemplates` whose URI template has no variable (`{path}`): it
    /// stands for one URI, not a family of them.
    ///
    /// ## Why it matters
    /// A template's content comes from its backend, addressed by the variables a client
    /// fills in; without one, every read asks for the same thing, and clients list the
    /// entry among the templates they must fill in.
    ///
    /// ## Example
    /// ```yaml
    /// resourceTemplates:
    ///   'file:///project/src/main.rs':
    ///     name: Project Source File
    /// ```
    /// Write it as a template with a variable, `'file:///project/src/{path}'`, or move it to
    /// `resources` with its `text`.
    pub static TEMPLATE_WITHOUT_VARIABLE = {
        code: "P0806",
        name: "template-without-variable",
        severity: Error,
        summary: "a resource template whose URI has no variable",
    };
}
