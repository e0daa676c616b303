//! P0508 gate-in-each.

crate::declare_rule! {
    /// ## What it catches
    /// A gate with an `each` parameter.
    ///
    /// ## Why it matters
    /// A gate is answered once, by name; a gate per item would need an answer per item, which
    /// pipec does not support yet. Ask once about the whole list, and let the answer steer the
    /// nodes that fan out after it.
    ///
    /// ## Example
    /// ```pipe
    /// gate approve(email: Email = each(history.emails)) -> Approval {
    ///   message = "Reply to {{ email.subject }}?"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// gate approve(emails: Email[] = history.emails) -> Approval {
    ///   message = "Reply to these {{ emails | length }} emails?"
    /// }
    /// ```
    pub static GATE_IN_EACH = {
        code: "P0508",
        name: "gate-in-each",
        severity: Error,
        summary: "a gate with an each parameter",
    };
}
