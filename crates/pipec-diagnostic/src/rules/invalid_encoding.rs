//! P0004 invalid-encoding.

crate::declare_rule! {
    /// ## What it catches
    /// A `.pipe` file, an imported file or a prompt template that is not UTF-8 text, such as
    /// one saved as Latin-1 or UTF-16. The message names the file and the line and column of
    /// the first byte that is not UTF-8.
    ///
    /// ## Why it matters
    /// pipec reads every source as UTF-8, and so do the models and tools the text reaches. A
    /// file in another encoding would otherwise look missing (an import not found, a prompt
    /// not found) and the real cause would stay hidden.
    ///
    /// ## Example
    /// A prompt template saved as Latin-1, where `café` is the bytes `63 61 66 e9`:
    /// ```pipe
    /// think brief(deal: Deal = deal) -> string {
    ///   model = fast
    ///   prompt = file("brief/cafe")
    /// }
    /// ```
    /// Save `prompts/brief/cafe.jinja` as UTF-8 (`iconv -f latin1 -t utf-8`, or the encoding
    /// setting of the editor), where `café` is `63 61 66 c3 a9`, and check again.
    pub static INVALID_ENCODING = {
        code: "P0004",
        name: "invalid-encoding",
        severity: Error,
        summary: "a source file, import or prompt template that is not UTF-8 text",
    };
}
