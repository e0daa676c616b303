//! P0408 prompt-exceeds-context.

crate::declare_rule! {
    /// ## What it catches
    /// A `think`, `agent` or `act` node whose worst-case prompt, with the reply it leaves
    /// room for (`max_tokens`, or the model's largest reply), is larger than its model's
    /// context window. The worst case is the template's text, the largest each bounded
    /// value can be (a resource's `max_bytes`, counted as prose; a number's widest form;
    /// an enum's longest variant; a list's `max:`), `output_schema`, the response format
    /// and the tools' schemas, counted with the model's tokenizer. The window is the
    /// model's `context_window`, or pipec's table for a well-known model. Values with no
    /// bound at all (a plain `string` input, a model's reply) count as empty here: the
    /// rule fires only when what is bounded is already too large, and `pipec budget`
    /// lists the unbounded ones.
    ///
    /// ## Why it matters
    /// The caps allow a prompt the model refuses: the run fails at the provider with a
    /// context-length error, after the resources were read and paid for, on the day the
    /// content grows to what the caps allow.
    ///
    /// ## Example
    /// ```pipe
    /// model fast {
    ///   provider = "openai"
    ///   name = "gpt-4o-mini"
    ///   api_key = secret("OPENAI_API_KEY")
    /// }
    ///
    /// think summarize(
    ///   page: string = resource("file:///handbook/all.md", max_bytes: 2mb),
    /// ) -> string {
    ///   model = fast
    ///   prompt = "Summarize:\n{{ page }}"
    /// }
    /// ```
    /// 2 MB of text is about 400,000 tokens; gpt-4o-mini reads 128,000. Lower the cap
    /// (`max_bytes: 200kb`), bound lists with `each(..., max: n)`, split the work over
    /// several nodes, or name a model with a larger window.
    pub static PROMPT_EXCEEDS_CONTEXT = {
        code: "P0408",
        name: "prompt-exceeds-context",
        severity: Warning,
        summary: "a prompt whose worst case does not fit its model's context window",
    };
}
