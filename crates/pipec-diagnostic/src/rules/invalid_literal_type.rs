//! P0203 invalid-literal-type.

crate::declare_rule! {
    /// ## What it catches
    /// A literal that does not fit the type it meets: a constant source (`limit: int = "20"`), an
    /// input or tool parameter default, a gate's `on_timeout` answer, or a string compared with a
    /// union or enum it is not a member of.
    ///
    /// ## Why it matters
    /// A constant of the wrong type would fail the node on every run. A comparison with a
    /// string that is not a member can never hold, so a `when` built on it would skip its node
    /// every time, without an error.
    ///
    /// ## Example
    /// ```pipe
    /// enum Stage { open, won, lost }
    ///
    /// node closed(stage: Stage = input.stage) -> bool {
    ///   return = stage == "closed-won"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// enum Stage { open, won, lost }
    ///
    /// node closed(stage: Stage = input.stage) -> bool {
    ///   return = stage == "won"
    /// }
    /// ```
    pub static INVALID_LITERAL_TYPE = {
        code: "P0203",
        name: "invalid-literal-type",
        severity: Error,
        summary: "a literal that does not fit its type",
    };
}
