//! P0407 file-name-as-prompt.

crate::declare_rule! {
    /// ## What it catches
    /// A `prompt` or gate `message` written as a string that is the name of a template file:
    /// `prompt = "research/scan"` where `prompts/research/scan.jinja` exists. A string is
    /// the template itself, so the model would be sent the words `research/scan`.
    ///
    /// ## Why it matters
    /// The two spellings differ by one call, and the string checks clean: it has no
    /// variables to get wrong. The mistake would show only in what the model answers.
    ///
    /// ## Example
    /// ```pipe
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = "research/scan"
    ///   tools = [get_deal]
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// agent research(deal_id: string = input.deal_id) -> DealSummary {
    ///   model = fast
    ///   prompt = file("research/scan")
    ///   tools = [get_deal]
    /// }
    /// ```
    /// `pipec check --fix` makes this change.
    pub static FILE_NAME_AS_PROMPT = {
        code: "P0407",
        name: "file-name-as-prompt",
        severity: Warning,
        summary: "an inline prompt that is the name of a prompt file",
    };
}
