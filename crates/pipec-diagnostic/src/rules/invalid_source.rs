//! P0108 invalid-source.

crate::declare_rule! {
    /// ## What it catches
    /// A parameter bound to something that is not a source, such as `ok: bool = a.ok && b.ok`
    /// or `count: int = len(research.recent_email_subjects)`. A source is a pipeline input, a node
    /// or a field of one, a join `a ?? b`, a constant, `env()`, `secret()`, `resource()`,
    /// `resources()` or `each()`.
    ///
    /// ## Why it matters
    /// A signature says where each value comes from: its bindings are the edges of the graph,
    /// which pipec checks and `pipec graph` draws. Computing belongs in the body (`when`,
    /// `return`, `call` arguments), which sees the node's parameters.
    ///
    /// ## Example
    /// ```pipe
    /// node both(
    ///   ok: bool = first.ok && second.ok,
    /// ) -> bool {
    ///   return = ok
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// node both(
    ///   first: Check = first,
    ///   second: Check = second,
    /// ) -> bool {
    ///   return = first.ok && second.ok
    /// }
    /// ```
    pub static INVALID_SOURCE = {
        code: "P0108",
        name: "invalid-source",
        severity: Error,
        summary: "a parameter bound to a computation instead of a source",
    };
}
