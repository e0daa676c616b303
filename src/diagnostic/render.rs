//! Rendering of diagnostics.
pub struct TerminalOptions;
pub struct JsonFormatVersion;
pub fn render_terminal() {}
pub fn render_json() {}
pub fn render_sarif() {}
