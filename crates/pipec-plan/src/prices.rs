//! What model calls cost: a model's prices (declared on it, or the built-in table's for
//! a well-known model), and the cost of one call's usage at those prices.
//!
//! The table holds the list prices the providers published, in US dollars per million
//! tokens, as of [`TABLE_DATE`]; a price a provider has changed since is declared on the
//! model (`prices { ... }`), which always wins. A model the table does not know and that
//! declares no prices has no cost: it is shown as unknown, never as zero.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Prices of a model in US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Per million input (prompt) tokens.
    pub input: f64,
    /// Per million output (completion) tokens.
    pub output: f64,
    /// Per million input tokens read from the provider's prompt cache; absent, they cost
    /// as `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
}

/// The tokens of one model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Input tokens, the cached ones among them.
    pub input: u64,
    pub output: u64,
    /// Of `input`, those read from the provider's prompt cache.
    pub cached_input: u64,
}

impl Prices {
    /// What `tokens` cost, in US dollars.
    pub fn cost(&self, tokens: Tokens) -> f64 {
        let cached = tokens.cached_input.min(tokens.input);
        let fresh = tokens.input - cached;
        let per = 1_000_000.0;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + tokens.output as f64 * self.output)
            / per
    }
}

/// The day the table's prices were read from the providers' price lists.
pub const TABLE_DATE: &str = "2025-11-15";

/// Well-known models: `(name, input, cached input, output)` in US dollars per million
/// tokens, as of [`TABLE_DATE`]. A dated or versioned name (`gpt-4o-2024-08-06`) is its
/// model's.
const TABLE: &[(&str, f64, Option<f64>, f64)] = &[
    // OpenAI
    ("gpt-5", 1.25, Some(0.125), 10.0),
    ("gpt-5-mini", 0.25, Some(0.025), 2.0),
    ("gpt-5-nano", 0.05, Some(0.005), 0.40),
    ("gpt-4.1", 2.0, Some(0.50), 8.0),
    ("gpt-4.1-mini", 0.40, Some(0.10), 1.60),
    ("gpt-4.1-nano", 0.10, Some(0.025), 0.40),
    ("gpt-4o", 2.50, Some(1.25), 10.0),
    ("gpt-4o-mini", 0.15, Some(0.075), 0.60),
    ("o3", 2.0, Some(0.50), 8.0),
    ("o3-mini", 1.10, Some(0.55), 4.40),
    ("o4-mini", 1.10, Some(0.275), 4.40),
    // Anthropic (its OpenAI-compatible endpoint, or a gateway)
    ("claude-opus-4-5", 5.0, Some(0.50), 25.0),
    ("claude-opus-4-1", 15.0, Some(1.50), 75.0),
    ("claude-opus-4", 15.0, Some(1.50), 75.0),
    ("claude-sonnet-4-5", 3.0, Some(0.30), 15.0),
    ("claude-sonnet-4", 3.0, Some(0.30), 15.0),
    ("claude-haiku-4-5", 1.0, Some(0.10), 5.0),
    ("claude-3-5-haiku", 0.80, Some(0.08), 4.0),
    // Google (prompts up to 200k tokens)
    ("gemini-2.5-pro", 1.25, None, 10.0),
    ("gemini-2.5-flash", 0.30, None, 2.50),
];

/// The table's prices of the model `name` as an endpoint names it: the longest entry it
/// is, or starts with before a `-` suffix (a date or version); a gateway's `vendor/model`
/// and pipec's `provider:model` are read for the model alone.
pub fn table_prices(name: &str) -> Option<Prices> {
    known_entry(TABLE, |(known, ..)| known, name).map(|&(_, input, cached_input, output)| Prices {
        input,
        output,
        cached_input,
    })
}

/// The entry of a table of well-known models (this one, and the context windows beside
/// it) for the model `name` as an endpoint names it: the longest entry it is, or starts
/// with before a `-` suffix (a date or version); a gateway's `vendor/model` and pipec's
/// `provider:model` are read for the model alone.
pub(crate) fn known_entry<'t, T>(
    table: &'t [T],
    key: impl Fn(&T) -> &str,
    name: &str,
) -> Option<&'t T> {
    let name = name.rsplit([':', '/']).next().unwrap_or(name);
    table
        .iter()
        .filter(|entry| {
            let known = key(entry);
            name == known
                || name
                    .strip_prefix(known)
                    .is_some_and(|rest| rest.starts_with('-'))
        })
        .max_by_key(|entry| key(entry).len())
}

/// The names the price table knows, for the tables that must know the same.
#[cfg(test)]
pub(crate) fn table_names() -> Vec<&'static str> {
    TABLE.iter().map(|(name, ..)| *name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dated_or_prefixed_name_is_its_models() {
        let mini = table_prices("gpt-4o-mini").expect("known");
        assert_eq!(mini.input, 0.15);
        assert_eq!(table_prices("gpt-4o-mini-2024-07-18"), Some(mini));
        assert_eq!(table_prices("openai:gpt-4o-mini"), Some(mini));
        assert_eq!(table_prices("openai/gpt-4o-mini"), Some(mini));
        assert_eq!(
            table_prices("gpt-4o-2024-08-06").map(|p| p.input),
            Some(2.5)
        );
        assert_eq!(
            table_prices("claude-sonnet-4-5-20250929").map(|p| p.output),
            Some(15.0)
        );
        assert_eq!(table_prices("gpt-4"), None);
        assert_eq!(table_prices("gpt-4ox"), None);
        assert_eq!(table_prices("llama3.1:8b"), None);
    }

    #[test]
    fn cached_input_costs_its_own_price_or_inputs() {
        let p = Prices {
            input: 2.0,
            output: 8.0,
            cached_input: Some(0.5),
        };
        let t = Tokens {
            input: 1_000_000,
            output: 500_000,
            cached_input: 400_000,
        };
        // 600k fresh at 2, 400k cached at 0.5, 500k out at 8.
        assert!((p.cost(t) - (1.2 + 0.2 + 4.0)).abs() < 1e-9);
        let no_cache = Prices {
            cached_input: None,
            ..p
        };
        assert!((no_cache.cost(t) - (2.0 + 4.0)).abs() < 1e-9);
        // More cached than input is read as all of it.
        let odd = Tokens {
            cached_input: 2_000_000,
            ..t
        };
        assert!((p.cost(odd) - (0.5 + 4.0)).abs() < 1e-9);
    }
}
