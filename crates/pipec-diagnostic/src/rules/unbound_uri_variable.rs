//! P0301 unbound-uri-variable.

crate::declare_rule! {
    /// ## What it catches
    /// A variable of a `resource("...")` URI template that no parameter of the node provides, or
    /// one that names a parameter which is itself a resource. Dotted paths are allowed
    /// (`{file.path}`) when the parameter's type has the field.
    ///
    /// ## Why it matters
    /// The URI is expanded at the node's entry from the node's own parameters; a variable with no
    /// value could only fetch the wrong thing, or nothing. Resources are fetched together at
    /// entry, so one cannot provide another's URI.
    ///
    /// ## Example
    /// ```pipe
    /// node digest(
    ///   id: string = input.deal_id,
    ///   activity: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity"),
    /// ) -> Digest {
    ///   return = { deal_id: id, events: len(activity.activity) }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// node digest(
    ///   deal_id: string = input.deal_id,
    ///   activity: ActivityLog = resource("mcp://crm/deals/{deal_id}/activity"),
    /// ) -> Digest {
    ///   return = { deal_id: deal_id, events: len(activity.activity) }
    /// }
    /// ```
    pub static UNBOUND_URI_VARIABLE = {
        code: "P0301",
        name: "unbound-uri-variable",
        severity: Error,
        summary: "a URI template variable that no parameter provides",
    };
}
