//! P0803 wrong-spec-kind.

crate::declare_rule! {
    /// ## What it catches
    /// A reShapr file whose `kind` is missing or is not `Resources`. pipec reads only
    /// Resources specifications; reShapr's other artifacts (a Configuration Plan, a
    /// Service) are not served.
    ///
    /// ## Why it matters
    /// The kind says what the file declares. Reading another kind's keys as resources
    /// would serve nothing the file meant, without a word.
    ///
    /// ## Example
    /// ```yaml
    /// apiVersion: reshapr.io/v1alpha1
    /// kind: Resource
    /// ```
    /// Write it as `kind: Resources`.
    pub static WRONG_SPEC_KIND = {
        code: "P0803",
        name: "wrong-spec-kind",
        severity: Error,
        summary: "a reShapr file whose kind is not Resources",
    };
}
