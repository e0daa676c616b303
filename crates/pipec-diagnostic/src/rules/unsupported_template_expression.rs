//! P0812 unsupported-template-expression.

crate::declare_rule! {
    /// ## What it catches
    /// A key of `resourceTemplates` that is not a valid RFC 6570 URI template, or that uses
    /// what pipec cannot match URIs against. pipec serves templates made of literal text
    /// (literal query text such as `?mode=raw` included) and the expressions `{var}` (one
    /// path segment), `{+var}` (the rest of the path, at most once) and `{?a,b}` (query
    /// parameters, last). Other operators (`{#x}`, `{/x}`, `{.x}`, `{;x}`, `{&x}`),
    /// modifiers (`{x*}`, `{x:3}`), several variables in `{var}` or `{+var}`, and two
    /// expressions in a row (but `{+path}{?q}`) are refused.
    ///
    /// ## Why it matters
    /// A server uses its templates backwards: it matches the URI a client reads against
    /// them to find the variables. RFC 6570 defines only expansion, and the forms above are
    /// the ones that can be matched without guessing.
    ///
    /// ## Example
    /// ```yaml
    /// resourceTemplates:
    ///   'file:///project/src{/path*}':
    ///     name: Project Source File
    /// ```
    /// Write it as `'file:///project/src/{+path}'`.
    pub static UNSUPPORTED_TEMPLATE_EXPRESSION = {
        code: "P0812",
        name: "unsupported-template-expression",
        severity: Error,
        summary: "a resource template that is invalid or cannot be matched",
    };
}
