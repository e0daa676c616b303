//! P0206 invalid-server-url.

crate::declare_rule! {
    /// ## What it catches
    /// A server's `url` that is not an absolute `http:` or `https:` URL with a host: one
    /// without a scheme (`localhost:8080/mcp`), one of another scheme (`ws://...`), or one
    /// that does not parse. An `env()` value is held to the same rule when a run reads
    /// it (R0109 config-invalid).
    ///
    /// ## Why it matters
    /// pipec speaks MCP to a `url` server over streamable HTTP. Without a scheme, the text
    /// would fail only when a run first calls the server, with a transport error that does
    /// not name the setting.
    ///
    /// ## Example
    /// ```pipe
    /// server crm {
    ///   url = "localhost:8080/mcp"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// server crm {
    ///   url = "http://localhost:8080/mcp"
    /// }
    /// ```
    pub static INVALID_SERVER_URL = {
        code: "P0206",
        name: "invalid-server-url",
        severity: Error,
        summary: "a server `url` that is not an http(s) URL",
    };
}
