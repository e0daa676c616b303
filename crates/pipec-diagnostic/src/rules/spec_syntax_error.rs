//! P0801 spec-syntax-error.

crate::declare_rule! {
    /// ## What it catches
    /// A reShapr Resources file (`.yaml`, `.yml`) that is not valid YAML: a bracket left
    /// open, a tab used for indentation, a key repeated in one mapping, a second document
    /// after `---`, nesting deeper than 64 levels, or aliases that expand past a million
    /// values. The message gives the YAML parser's reason and points where it stopped.
    ///
    /// ## Why it matters
    /// Nothing of a file that cannot be read is served, and a repeated key means one of the
    /// two values is silently lost by every YAML reader that accepts it.
    ///
    /// ## Example
    /// ```yaml
    /// resources:
    ///   'file:///project/readme.md':
    ///     name: README.MD
    ///     sizes: ["48x48"
    /// ```
    /// Close the list: `sizes: ["48x48"]`.
    pub static SPEC_SYNTAX_ERROR = {
        code: "P0801",
        name: "spec-syntax-error",
        severity: Error,
        summary: "a Resources file that is not valid YAML",
    };
}
