//! Counting tokens as a model's tokenizer does: which tokenizer a model name reads with,
//! whether that count is exact, and the count itself (tiktoken-rs, the only crate of the
//! workspace that names it).
//!
//! OpenAI publishes its tokenizers, so a count for `gpt-4o` (o200k_base) or `gpt-4`
//! (cl100k_base) is exact. Anthropic and Google publish none for their current models, so
//! those, and any model pipec does not know, are counted with the closest public one and
//! marked as estimates.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer as Known, get_tokenizer};

/// The tokenizers pipec counts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// gpt-4o, gpt-4.1, gpt-5, the o-series; the estimate for Gemini and unknown models.
    O200kBase,
    /// gpt-4, gpt-3.5; the estimate for Claude, whose vocabulary is nearer its size.
    Cl100kBase,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }
}

/// The tokenizer a model is counted with, and whether the count is the model's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenizerChoice {
    pub encoding: Encoding,
    /// The model's own tokenizer (false: the closest public one, an estimate).
    pub exact: bool,
}

/// The tokenizer of the model an endpoint calls `name` (`gpt-4o-mini`,
/// `openai/gpt-4o-2024-08-06`, `claude-sonnet-4-5`); without a name, an estimate.
pub fn tokenizer_for(name: Option<&str>) -> TokenizerChoice {
    let estimate = |encoding| TokenizerChoice {
        encoding,
        exact: false,
    };
    let Some(name) = name else {
        return estimate(Encoding::O200kBase);
    };
    // A gateway's `vendor/model` and pipec's `provider:model` name the model last.
    let bare = name.rsplit([':', '/']).next().unwrap_or(name);
    match get_tokenizer(bare) {
        Some(Known::O200kBase | Known::O200kHarmony) => TokenizerChoice {
            encoding: Encoding::O200kBase,
            exact: true,
        },
        Some(Known::Cl100kBase) => TokenizerChoice {
            encoding: Encoding::Cl100kBase,
            exact: true,
        },
        // Completion-era encodings, and families with no public tokenizer.
        _ if bare.starts_with("claude") => estimate(Encoding::Cl100kBase),
        _ => estimate(Encoding::O200kBase),
    }
}

/// Text of no particular subject, in plain English: what a value that only a byte cap
/// bounds is taken to hold. Counting it gives the tokens a byte of such text takes.
const PROSE: &str = "The customer asked whether the new contract could start at the \
beginning of next quarter, since their finance team closes the budget in March. We agreed \
to send a revised proposal with two options: a yearly plan with a discount for paying up \
front, and a monthly plan that can be cancelled with thirty days of notice. Their security \
team still has questions about where the data is stored and who can read it, so the next \
call should include someone who can answer those in detail. The renewal is not at risk, but \
the champion is leaving the company in the summer, and nobody else there knows the history \
of the account. Please make sure the handover notes are written before then, and that the \
new contact is invited to the quarterly review. Usage has grown steadily over the last six \
months, mostly in the reporting features, and two teams asked for training sessions. One \
support ticket about slow exports is still open; engineering expects a fix in the next \
release, which ships in about three weeks.\n";

/// Counts tokens with one tokenizer.
pub(super) struct Counter {
    bpe: Option<&'static CoreBPE>,
    /// The tokenizer counted with; `None` for the byte-a-token upper bound.
    encoding: Option<Encoding>,
}

/// The longest piece of text tokenized at once. Byte-pair merging is quadratic in the
/// length of a piece without spaces, so a template line of a megabyte of one word is
/// counted in slices; a token never spans two of them, which changes a count by a token
/// per slice at most.
const SLICE: usize = 4096;

impl Counter {
    pub(super) fn new(choice: TokenizerChoice) -> Counter {
        Counter {
            bpe: loaded(choice.encoding),
            encoding: Some(choice.encoding),
        }
    }

    /// What the counts depend on: two counters of one encoding count alike.
    pub(super) fn encoding(&self) -> Option<Encoding> {
        self.encoding
    }

    /// A counter that takes every byte for a token: an upper bound of any tokenizer's
    /// count (a token is at least a byte), with no table to load.
    pub(super) fn upper_bound() -> Counter {
        Counter {
            bpe: None,
            encoding: None,
        }
    }

    /// The tokens of `text`. Without a table (an upper bound, or were the tokenizer's
    /// ever unreadable) every byte counts as a token: never a guess below the truth.
    pub(super) fn count(&self, text: &str) -> u64 {
        let Some(bpe) = self.bpe else {
            return text.len() as u64;
        };
        slices(text)
            .map(|s| bpe.encode_ordinary(s).len() as u64)
            .sum()
    }

    /// The tokens a byte of plain prose takes with this tokenizer.
    pub(super) fn prose_per_byte(&self) -> f64 {
        self.count(PROSE) as f64 / PROSE.len() as f64
    }
}

/// The tokenizer's table, read once per process.
fn loaded(encoding: Encoding) -> Option<&'static CoreBPE> {
    static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
    static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
    match encoding {
        Encoding::O200kBase => O200K.get_or_init(|| tiktoken_rs::o200k_base().ok()),
        Encoding::Cl100kBase => CL100K.get_or_init(|| tiktoken_rs::cl100k_base().ok()),
    }
    .as_ref()
}

/// `text` in pieces of at most [`SLICE`] bytes, cut after a newline where there is one.
fn slices(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(SLICE);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        if end < rest.len()
            && let Some(newline) = rest[..end].rfind('\n')
        {
            end = newline + 1;
        }
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_are_exact_and_the_others_estimates() {
        let exact = |n: &str| tokenizer_for(Some(n));
        assert_eq!(
            exact("gpt-4o-mini"),
            TokenizerChoice {
                encoding: Encoding::O200kBase,
                exact: true
            }
        );
        assert_eq!(
            exact("openai/gpt-4.1-2025-04-14").encoding,
            Encoding::O200kBase
        );
        assert!(exact("o3").exact);
        assert_eq!(
            exact("gpt-4"),
            TokenizerChoice {
                encoding: Encoding::Cl100kBase,
                exact: true
            }
        );
        assert_eq!(
            exact("claude-sonnet-4-5"),
            TokenizerChoice {
                encoding: Encoding::Cl100kBase,
                exact: false
            }
        );
        assert!(!exact("gemini-2.5-pro").exact);
        assert!(!exact("llama3.1:8b").exact);
        assert!(!tokenizer_for(None).exact);
    }

    #[test]
    fn counts_are_the_tokenizers() {
        let o200k = Counter::new(tokenizer_for(Some("gpt-4o")));
        // "Hello, world!" is four tokens in both: Hello , world !
        assert_eq!(o200k.count("Hello, world!"), 4);
        let cl100k = Counter::new(tokenizer_for(Some("gpt-4")));
        assert_eq!(cl100k.count("Hello, world!"), 4);
        assert_eq!(o200k.count(""), 0);
        // Prose is several bytes a token, never more than one token a byte.
        let density = o200k.prose_per_byte();
        assert!(density > 0.15 && density < 0.35, "{density}");
    }

    #[test]
    fn long_lines_are_counted_in_slices_that_cover_the_text() {
        let line = "é".repeat(5000);
        let pieces: Vec<&str> = slices(&line).collect();
        assert!(pieces.iter().all(|p| p.len() <= SLICE));
        assert_eq!(pieces.concat(), line);
        let lines = "a line\n".repeat(2000);
        let pieces: Vec<&str> = slices(&lines).collect();
        assert!(pieces.iter().all(|p| p.ends_with('\n')));
        assert_eq!(pieces.concat(), lines);
        // One word of a megabyte is counted, not merged for minutes.
        let word = "a".repeat(1 << 20);
        let counter = Counter::new(tokenizer_for(Some("gpt-4o")));
        assert!(counter.count(&word) > 1000);
    }
}
