//! P0607 client-model-in-loop.

crate::declare_rule! {
    /// ## What it catches
    /// An `agent` or `act` node whose model is the calling client's (`provider = "client"`).
    ///
    /// ## Why it matters
    /// The client's model is asked from outside the run, one reply at a time (MCP sampling
    /// when the pipeline is served, `pipec answer` otherwise), and answers text. A tool
    /// loop needs a model that chooses tool calls turn after turn, which such a reply cannot.
    ///
    /// ## Example
    /// ```pipe
    /// model caller {
    ///   provider = "client"
    /// }
    ///
    /// agent research(deal_id: string = input.deal_id) -> string {
    ///   model = caller
    ///   prompt = "Research the deal {{ deal_id }}."
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as a `think` node given what it needs, or give the agent a model of its own:
    /// ```pipe
    /// think summary(deal: Deal = fetch) -> string {
    ///   model = caller
    ///   prompt = "Summarize the deal {{ deal }}."
    /// }
    /// ```
    pub static CLIENT_MODEL_IN_LOOP = {
        code: "P0607",
        name: "client-model-in-loop",
        severity: Error,
        summary: "an agent or act whose model is the calling client's",
    };
}
