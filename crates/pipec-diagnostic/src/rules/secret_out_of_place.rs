//! P0603 secret-out-of-place.

crate::declare_rule! {
    /// ## What it catches
    /// `secret("X")` anywhere but a server's `env` or `headers`, a model's `api_key`, or a parameter of a
    /// `node` or `act` whose body is a `call` (to pass it as an argument), an `exec` or a `host`.
    /// It is refused in the parameters of `think`, `agent` and `gate` nodes and of `act` loops,
    /// in `return` nodes, in resource URIs, and in outputs.
    ///
    /// ## Why it matters
    /// pipec never stores a secret. Prompts go to a model provider, gate messages are shown to
    /// people, and node outputs are checkpointed and printed; a secret that reached any of them
    /// would leak. In the allowed places it goes straight to a server, an endpoint or a process.
    ///
    /// ## Example
    /// ```pipe
    /// agent research(
    ///   deal_id: string = input.deal_id,
    ///   token: string = secret("CRM_TOKEN"),
    /// ) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// server crm {
    ///   command = "pipec-demo-crm"
    ///   env = { CRM_TOKEN: secret("CRM_TOKEN") }
    /// }
    ///
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    pub static SECRET_OUT_OF_PLACE = {
        code: "P0603",
        name: "secret-out-of-place",
        severity: Error,
        summary: "a secret bound where it could be stored or shown",
    };
}
