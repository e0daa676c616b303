//! P0505 skippable-output.

crate::declare_rule! {
    /// ## What it catches
    /// An output that a `when` can skip (its node, or a node that node depends on, has a
    /// `when`), whose type is not declared optional.
    ///
    /// ## Why it matters
    /// A skipped output prints `null`. Whoever reads the run's outputs, a script or a client of
    /// `pipec serve`, relies on the declared type, so the type must say the value may be
    /// missing.
    ///
    /// ## Example
    /// ```pipe
    /// output brief: Brief = consume
    /// ```
    /// Write it as:
    /// ```pipe
    /// output brief: Brief? = consume
    /// ```
    /// or join it with a node that always runs: `output brief: Brief = consume ?? fallback`.
    pub static SKIPPABLE_OUTPUT = {
        code: "P0505",
        name: "skippable-output",
        severity: Error,
        summary: "a skippable output not declared optional",
    };
}
