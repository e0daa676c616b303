//! P0506 multiple-each.

crate::declare_rule! {
    /// ## What it catches
    /// A node with more than one `each` parameter.
    ///
    /// ## Why it matters
    /// Two lists could mean pairs or every combination, and pipec will not guess. A node fans
    /// out over one list; its other parameters are shared by every item. Build the pairs you
    /// mean upstream, or chain two `each` nodes.
    ///
    /// ## Example
    /// ```pipe
    /// think score(
    ///   email: Email = each(history.emails),
    ///   activity: Activity = each(log.activity),
    /// ) -> Score {
    ///   model = fast
    ///   prompt = file("score/email")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think score(
    ///   email: Email = each(history.emails),
    ///   log: ActivityLog = log,
    /// ) -> Score {
    ///   model = fast
    ///   prompt = file("score/email")
    /// }
    /// ```
    pub static MULTIPLE_EACH = {
        code: "P0506",
        name: "multiple-each",
        severity: Error,
        summary: "a node with more than one each parameter",
    };
}
