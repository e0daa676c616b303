//! P0901 unused-suppression.

crate::declare_rule! {
    /// ## What it catches
    /// A `// pipec: allow(name)` comment that silences nothing on the declaration below it, or
    /// that names no rule.
    ///
    /// ## Why it matters
    /// A stale allow, left behind after the problem was fixed, would hide the next real problem
    /// of its kind on that declaration. A misspelt one silences nothing while looking as if it
    /// did. Allows name rules by their kebab-case name, as `pipec explain` prints it.
    ///
    /// ## Example
    /// ```pipe
    /// // pipec: allow(unused-parameter)
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief from {{ digest }}."
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = "Write a call brief from {{ digest }}."
    /// }
    /// ```
    pub static UNUSED_SUPPRESSION = {
        code: "P0901",
        name: "unused-suppression",
        severity: Warning,
        summary: "an allow comment that silences nothing",
    };
}
