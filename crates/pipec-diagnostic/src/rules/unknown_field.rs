//! P0202 unknown-field.

crate::declare_rule! {
    /// ## What it catches
    /// `x.field` where the type of `x` has no such field, in a source (`research.headlin`) or a
    /// body (`ack.aproved`). The help suggests the closest field. On an `each` node, the value
    /// downstream is a list: `scores.total` is refused, and `scores[*].total` takes the field of
    /// every item.
    ///
    /// ## Why it matters
    /// A misspelt field would read as missing at run time, and the node would fail (or a `when`
    /// would quietly never hold) only once the run gets there.
    ///
    /// ## Example
    /// ```pipe
    /// node digest(
    ///   ack: Approval = review,
    ///   deal_id: string = input.deal_id,
    /// ) -> Digest {
    ///   when = ack.aproved
    ///   return = { deal_id: deal_id, events: 0 }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// node digest(
    ///   ack: Approval = review,
    ///   deal_id: string = input.deal_id,
    /// ) -> Digest {
    ///   when = ack.approved
    ///   return = { deal_id: deal_id, events: 0 }
    /// }
    /// ```
    pub static UNKNOWN_FIELD = {
        code: "P0202",
        name: "unknown-field",
        severity: Error,
        summary: "a field path the type does not have",
    };
}
