//! P0205 record-literal-mismatch.

crate::declare_rule! {
    /// ## What it catches
    /// A record literal in `return`, or the arguments of a `call`, that does not match its type
    /// exactly: a required field (or tool parameter) missing, or one the type does not have.
    ///
    /// ## Why it matters
    /// Reading is lenient (extra fields are allowed in what tools and resources return), but
    /// what a node writes must match exactly: a misspelt key would otherwise be dropped and the
    /// field it was meant for left missing.
    ///
    /// ## Example
    /// ```pipe
    /// node digest(deal_id: string = input.deal_id) -> Digest {
    ///   return = { deal_id: deal_id, event: 0 }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// node digest(deal_id: string = input.deal_id) -> Digest {
    ///   return = { deal_id: deal_id, events: 0 }
    /// }
    /// ```
    pub static RECORD_LITERAL_MISMATCH = {
        code: "P0205",
        name: "record-literal-mismatch",
        severity: Error,
        summary: "a record literal with a missing or unknown field",
    };
}
