//! P0303 unroutable-resource.

crate::declare_rule! {
    /// ## What it catches
    /// A resource URI that pipec cannot route to a server: it is not `mcp://NAME/...` for a
    /// declared server, no server's `resources` patterns match it, there are several servers, and
    /// no `server:` option says which.
    ///
    /// ## Why it matters
    /// A resource is read from exactly one server. Guessing could send the request, and the
    /// values in its URI, to the wrong one.
    ///
    /// ## Example
    /// ```pipe
    /// server crm {
    ///   command = "pipec-demo-crm"
    /// }
    ///
    /// server docs {
    ///   command = "docs-server"
    /// }
    ///
    /// node handbook(
    ///   path: string = input.path,
    ///   page: string = resource("file:///handbook/{+path}", max_bytes: 50kb),
    /// ) -> string {
    ///   return = page
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// server crm {
    ///   command = "pipec-demo-crm"
    /// }
    ///
    /// server docs {
    ///   command = "docs-server"
    ///   resources = ["file:///handbook/{+path}"]
    /// }
    ///
    /// node handbook(
    ///   path: string = input.path,
    ///   page: string = resource("file:///handbook/{+path}", max_bytes: 50kb),
    /// ) -> string {
    ///   return = page
    /// }
    /// ```
    /// or name the server on the binding: `resource("file:///handbook/{+path}", server: docs)`.
    pub static UNROUTABLE_RESOURCE = {
        code: "P0303",
        name: "unroutable-resource",
        severity: Error,
        summary: "a resource URI that no server claims",
    };
}
