//! P0204 optional-into-required.

crate::declare_rule! {
    /// ## What it catches
    /// A value of type `T?` (an optional field, input or node output) bound to a parameter, output
    /// or record field of type `T` with no default. A source that a `when` can skip is not
    /// optional in this sense: a node bound to it with type `T` is skipped along with it.
    ///
    /// ## Why it matters
    /// `null` would reach a node that does not expect it: a template would print nothing, a tool
    /// would receive `null` for a required argument. Either the receiving side accepts `null`, or
    /// a default replaces it.
    ///
    /// ## Example
    /// ```pipe
    /// node remark(note: string = review.note) -> Brief {
    ///   return = { text: note }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// node remark(note: string = review.note ?? "") -> Brief {
    ///   return = { text: note }
    /// }
    /// ```
    /// or declare the parameter `note: string?` and handle `null` in the body.
    pub static OPTIONAL_INTO_REQUIRED = {
        code: "P0204",
        name: "optional-into-required",
        severity: Error,
        summary: "an optional value bound to a required type without a default",
    };
}
