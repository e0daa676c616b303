//! P0001 syntax-error.

crate::declare_rule! {
    /// ## What it catches
    /// Text the grammar cannot read: a missing `=` or `{`, an unclosed bracket, a word
    /// where a declaration should start. The message says what was expected, in words.
    ///
    /// ## Why it matters
    /// Nothing else about a declaration can be checked until it parses. pipec parses every
    /// top-level declaration on its own, so one error hides nothing else in the file.
    ///
    /// ## Example
    /// ```pipe
    /// server crm {
    ///   command: "pipec-demo-crm"   // settings use `=`
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// server crm {
    ///   command = "pipec-demo-crm"
    /// }
    /// ```
    pub static SYNTAX_ERROR = {
        code: "P0001",
        name: "syntax-error",
        severity: Error,
        summary: "text the grammar cannot read",
    };
}
