//! P0605 credential-not-secret.

crate::declare_rule! {
    /// ## What it catches
    /// A credential that is not read with `secret("NAME")`: a model's `api_key`, or the value
    /// of a server header that carries credentials, written as a literal or read with
    /// `env("NAME")`; and a model's `base_url` or a server's `url` with a user part
    /// (`https://user:password@host`). The headers that carry credentials are
    /// `Authorization`, `Proxy-Authorization`, `Cookie`, `Api-Key`, and any header whose
    /// name ends in `-Token`, `-Key`, `-Secret`, `-Password`, `-Auth`, `-Apikey` or
    /// `-Credentials` (`X-Api-Key`, `X-Auth-Token`, `Private-Token`), but `Idempotency-Key`.
    ///
    /// ## Why it matters
    /// A literal is copied into the compiled plan, which is stored with every thread and
    /// printed by `pipec compile`; an `env()` value is recorded with the thread's
    /// configuration and shown by `pipec show --json`. A secret is read from the environment
    /// when a run needs it, handed only to the endpoint, and never stored; every text pipec
    /// writes shows `secret(NAME)` in its place. The fix of an `env("NAME")` reads the same
    /// variable as a secret (it is unsafe when the `env()` had a default, which a secret
    /// cannot have).
    ///
    /// ## Example
    /// ```pipe
    /// model fast {
    ///   provider = "openai"
    ///   name = "gpt-4o-mini"
    ///   api_key = env("OPENAI_API_KEY")
    /// }
    ///
    /// server tracker {
    ///   url = "https://tracker.example/mcp"
    ///   headers = { Authorization: "Bearer tr-8f2c01" }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// model fast {
    ///   provider = "openai"
    ///   name = "gpt-4o-mini"
    ///   api_key = secret("OPENAI_API_KEY")
    /// }
    ///
    /// server tracker {
    ///   url = "https://tracker.example/mcp"
    ///   headers = { Authorization: secret("TRACKER_AUTHORIZATION") }
    /// }
    /// ```
    /// An endpoint that needs no key (a local model server) takes no `api_key` at all.
    pub static CREDENTIAL_NOT_SECRET = {
        code: "P0605",
        name: "credential-not-secret",
        severity: Error,
        summary: "a credential written in the source or read with `env()`",
    };
}
