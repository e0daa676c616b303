//! P0804 missing-spec-key.

crate::declare_rule! {
    /// ## What it catches
    /// A key a Resources file requires and does not have: the `name` of a resource or a
    /// template, the `src` of an icon, the `service` with its `name` and `version`, or
    /// both of `resources` and `resourceTemplates` (a file declares at least one).
    ///
    /// ## Why it matters
    /// MCP lists every resource and template by its name, and an icon without a source
    /// shows nothing; reShapr binds a file to its service by name and version, and pipec
    /// serves them as the server's name and version.
    ///
    /// ## Example
    /// ```yaml
    /// resources:
    ///   'file:///project/readme.md':
    ///     title: Open-Meteo APIs readme
    ///     text: Welcome!
    /// ```
    /// Write it as:
    /// ```yaml
    /// resources:
    ///   'file:///project/readme.md':
    ///     name: README.MD
    ///     title: Open-Meteo APIs readme
    ///     text: Welcome!
    /// ```
    pub static MISSING_SPEC_KEY = {
        code: "P0804",
        name: "missing-spec-key",
        severity: Error,
        summary: "a Resources file without a key it requires",
    };
}
