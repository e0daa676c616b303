//! P0201 type-mismatch.

crate::declare_rule! {
    /// ## What it catches
    /// A source whose type does not fit the parameter's declared type (an input, a node or a
    /// field of one, a side of a join), an output whose value does not fit its type, a `when`
    /// that is not a `bool`, or an operand that an operator does not take (`&&` on a string,
    /// `<` on a list). The message shows both types and the first field that differs.
    ///
    /// ## Why it matters
    /// Assignability is structural: a value fits when it has every required field with a
    /// fitting type, and extra fields are allowed. A mismatch found now would otherwise fail the
    /// run at the node's entry, perhaps after paid model calls or a person's approval.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   subject: string = research.recent_email_subjects,
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   subjects: string[] = research.recent_email_subjects,
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    /// Ints fit `float`, and a `ref<T>` fits `T` (it is fetched at the node's entry).
    pub static TYPE_MISMATCH = {
        code: "P0201",
        name: "type-mismatch",
        severity: Error,
        summary: "a value whose type does not fit the declared type",
    };
}
