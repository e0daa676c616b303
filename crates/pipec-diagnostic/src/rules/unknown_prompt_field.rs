//! P0405 unknown-prompt-field.

crate::declare_rule! {
    /// ## What it catches
    /// A field path in a prompt or gate `message` that the parameter's type does not have:
    /// `{{ history.emials }}` where `history` is an `EmailPage`. The help suggests the closest
    /// field. A loop variable over a typed list (`{% for e in history.emails %}`) has the item's
    /// type and is checked too; `set` variables and values from filters are not.
    ///
    /// ## Why it matters
    /// A missing field renders as nothing: the model would get a prompt without the data it was
    /// meant to see, and no error would say so.
    ///
    /// ## Example
    /// ```pipe
    /// think consume(
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Summarise these emails: {{ history.emials }}"
    /// }
    /// ```
    /// Write it as:
    /// ```pipe
    /// think consume(
    ///   history: EmailPage = resource(ref: "email-history", max_bytes: 200kb),
    /// ) -> Brief {
    ///   model = fast
    ///   prompt = "Summarise these emails: {{ history.emails }}"
    /// }
    /// ```
    pub static UNKNOWN_PROMPT_FIELD = {
        code: "P0405",
        name: "unknown-prompt-field",
        severity: Error,
        summary: "a template field path the parameter's type does not have",
    };
}
