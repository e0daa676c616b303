//! P0701 tool-annotation-contradiction (`pipec check --online`).

crate::declare_rule! {
    /// ## What it catches
    /// With `pipec check --online`: a tool whose declaration says it is read-only,
    /// idempotent or destructive, where the server's annotations for it
    /// (`readOnlyHint`, `idempotentHint`, `destructiveHint`) say otherwise. Only hints
    /// the server gives are compared; a read-only declaration is compared on
    /// `read_only` alone.
    ///
    /// ## Why it matters
    /// pipec goes by the declaration: a read-only tool may be given to an `agent` or
    /// called from a plain `node`, and an idempotent one is called again to re-derive a
    /// dead link or after a crash. A declaration that claims more safety than the
    /// server does lets a pipeline repeat or hide an effect; one that claims less only
    /// costs an `act` or a decision at resume time. A run prints the same contradiction
    /// as a warning when it starts.
    ///
    /// ## Example
    /// The server says `arm_expiry` is not read-only:
    /// ```pipe
    /// tool arm_expiry(count: int = 1) from crm {
    ///   read_only = true
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// tool arm_expiry(count: int = 1) from crm {
    ///   idempotent = true
    ///   destructive = false
    /// }
    /// ```
    /// Keep a deliberate difference (a declaration more careful than the server) as it
    /// is; the warning says what the server claims.
    pub static TOOL_ANNOTATION_CONTRADICTION = {
        code: "P0701",
        name: "tool-annotation-contradiction",
        severity: Warning,
        summary: "a tool declared read-only, idempotent or destructive where the server says otherwise",
    };
}
