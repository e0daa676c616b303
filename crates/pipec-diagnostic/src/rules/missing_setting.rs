//! P0104 missing-setting.

crate::declare_rule! {
    /// ## What it catches
    /// A block without a setting it cannot do without: a `think`, `agent` or `act` without `model`
    /// or `prompt`; a `node` without exactly one of `return`, `call`, `exec` and `host` (none, or
    /// two of them); a `reader` without `uri`; a `server` with no `command` to start it.
    ///
    /// ## Why it matters
    /// The node could not run, and the run would find out only when it reaches it. A `node` has
    /// one way to produce its output; with two, which one wins would be a guess.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(digest: Digest = digest) -> Brief {
    ///   model = fast
    ///   prompt = file("consume/brief")
    /// }
    /// ```
    pub static MISSING_SETTING = {
        code: "P0104",
        name: "missing-setting",
        severity: Error,
        summary: "a block without a setting it needs",
    };
}
