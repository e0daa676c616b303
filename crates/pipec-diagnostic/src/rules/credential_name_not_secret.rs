//! P0606 credential-name-not-secret.

crate::declare_rule! {
    /// ## What it catches
    /// An `env("NAME")` read whose variable is named like a credential, anywhere, and a
    /// server `env` variable named like one that is set from a literal or `env()`. A name is
    /// taken for a credential's when its last word is `TOKEN`, `SECRET`, `PASSWORD`,
    /// `PASSWD`, `PASSPHRASE`, `APIKEY`, `AUTH`, `CREDENTIAL` or `CREDENTIALS`, or its last
    /// two words are `API_KEY`, `ACCESS_KEY`, `SECRET_KEY`, `PRIVATE_KEY`, `SIGNING_KEY` or
    /// `AUTH_KEY` (`GITHUB_TOKEN`, `DB_PASSWORD`, `STRIPE_SECRET_KEY`, `apiKey`).
    ///
    /// ## Why it matters
    /// An `env()` value is recorded with the thread's configuration and shown by `pipec show
    /// --json`, and a literal is copied into the compiled plan. If the value is a credential,
    /// `secret("NAME")` keeps it out of both. It is a warning because a name is only a hint;
    /// silence it with `// pipec: allow(credential-name-not-secret)` above a value that is
    /// not a credential.
    ///
    /// ## Example
    /// ```pipe
    /// server repo {
    ///   command = "./bin/repo-server"
    ///   env = { REPO_TOKEN: env("REPO_TOKEN") }
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// server repo {
    ///   command = "./bin/repo-server"
    ///   env = { REPO_TOKEN: secret("REPO_TOKEN") }
    /// }
    /// ```
    pub static CREDENTIAL_NAME_NOT_SECRET = {
        code: "P0606",
        name: "credential-name-not-secret",
        severity: Warning,
        summary: "a variable named like a credential, set from a literal or `env()`",
    };
}
