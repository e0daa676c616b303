//! P0802 wrong-spec-api-version.

crate::declare_rule! {
    /// ## What it catches
    /// A Resources file whose `apiVersion` is missing or is not `reshapr.io/v1alpha1`, the
    /// one version of the reShapr Resources format pipec reads.
    ///
    /// ## Why it matters
    /// The version says which format the rest of the file follows. A file of another
    /// version (or another tool's YAML given to `pipec check` by mistake) could mean
    /// something else by the same keys.
    ///
    /// ## Example
    /// ```yaml
    /// apiVersion: reshapr.io/v1
    /// kind: Resources
    /// ```
    /// Write it as:
    /// ```yaml
    /// apiVersion: reshapr.io/v1alpha1
    /// kind: Resources
    /// ```
    pub static WRONG_SPEC_API_VERSION = {
        code: "P0802",
        name: "wrong-spec-api-version",
        severity: Error,
        summary: "a Resources file whose apiVersion is not reshapr.io/v1alpha1",
    };
}
