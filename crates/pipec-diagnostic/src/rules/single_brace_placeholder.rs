//! P0406 single-brace-placeholder.

crate::declare_rule! {
    /// ## What it catches
    /// A `{name}` with single braces in a prompt or gate `message`, where `name` is a parameter
    /// of the node. Templates interpolate `{{ name }}`; `{name}` is printed as it is written.
    ///
    /// ## Why it matters
    /// Single braces are the syntax of URI templates, so they slip into prompts easily. The model
    /// or the person answering the gate would see `{deal_id}` instead of the deal. Only
    /// parameter names are flagged, so JSON shown in a prompt does not warn.
    ///
    /// ## Example
    /// ```pipe
    /// gate review(
    ///   summary: DealSummary = research,
    ///   deal_id: string = input.deal_id,
    /// ) -> Approval {
    ///   message = "Approve the research on {deal_id}?"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// gate review(
    ///   summary: DealSummary = research,
    ///   deal_id: string = input.deal_id,
    /// ) -> Approval {
    ///   message = "Approve the research on {{ deal_id }}?"
    /// }
    /// ```
    pub static SINGLE_BRACE_PLACEHOLDER = {
        code: "P0406",
        name: "single-brace-placeholder",
        severity: Warning,
        summary: "a single-brace placeholder that prints literally",
    };
}
