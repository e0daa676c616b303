//! How much a model can read and write: its context window (prompt and reply together,
//! in tokens) and the largest reply it gives, for the models of the price table.
//!
//! Like the prices beside it, the table holds what the providers published, as of
//! [`TABLE_DATE`]; a model declares its own window with `context_window = 128000`, which
//! always wins, and a model neither knows has no window: nothing is compared with it.

use crate::prices::known_entry;

/// The day the table's windows were read from the providers' model pages.
pub const TABLE_DATE: &str = "2025-11-15";

/// What a model can take: `(name, context window, largest reply)` in tokens, as of
/// [`TABLE_DATE`]; the names are the price table's. A dated or versioned name
/// (`gpt-4o-2024-08-06`) is its model's.
const TABLE: &[(&str, u64, u64)] = &[
    // OpenAI
    ("gpt-5", 400_000, 128_000),
    ("gpt-5-mini", 400_000, 128_000),
    ("gpt-5-nano", 400_000, 128_000),
    ("gpt-4.1", 1_047_576, 32_768),
    ("gpt-4.1-mini", 1_047_576, 32_768),
    ("gpt-4.1-nano", 1_047_576, 32_768),
    ("gpt-4o", 128_000, 16_384),
    ("gpt-4o-mini", 128_000, 16_384),
    ("o3", 200_000, 100_000),
    ("o3-mini", 200_000, 100_000),
    ("o4-mini", 200_000, 100_000),
    // Anthropic (the standard window; a larger one in beta is declared on the model)
    ("claude-opus-4-5", 200_000, 64_000),
    ("claude-opus-4-1", 200_000, 32_000),
    ("claude-opus-4", 200_000, 32_000),
    ("claude-sonnet-4-5", 200_000, 64_000),
    ("claude-sonnet-4", 200_000, 64_000),
    ("claude-haiku-4-5", 200_000, 64_000),
    ("claude-3-5-haiku", 200_000, 8_192),
    // Google
    ("gemini-2.5-pro", 1_048_576, 65_536),
    ("gemini-2.5-flash", 1_048_576, 65_536),
];

/// What the table says a model can take, in tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// The prompt and the reply together.
    pub context: u64,
    /// The largest reply: what a request without `max_tokens` may get back.
    pub max_output: u64,
}

/// The table's window of the model `name` as an endpoint names it (matched as
/// [`crate::prices::table_prices`] matches names).
pub fn table_window(name: &str) -> Option<Window> {
    known_entry(TABLE, |(known, ..)| known, name).map(|&(_, context, max_output)| Window {
        context,
        max_output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_windows_name_the_models_the_prices_name() {
        let windows: Vec<&str> = TABLE.iter().map(|(name, ..)| *name).collect();
        assert_eq!(windows, crate::prices::table_names());
    }

    #[test]
    fn a_dated_or_prefixed_name_is_its_models() {
        let mini = table_window("gpt-4o-mini").expect("known");
        assert_eq!(mini.context, 128_000);
        assert_eq!(mini.max_output, 16_384);
        assert_eq!(table_window("openai/gpt-4o-mini-2024-07-18"), Some(mini));
        assert_eq!(
            table_window("gpt-4.1-2025-04-14").map(|w| w.context),
            Some(1_047_576)
        );
        assert_eq!(table_window("llama3.1:8b"), None);
        // Every reply fits its own window.
        assert!(TABLE.iter().all(|(_, context, out)| out < context));
    }
}
