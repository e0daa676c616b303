//! The email histories of the deals one server process has been asked about, each made
//! once and kept (with the size of its whole-history read, which `get_deal`'s link
//! announces). Making 5,000 emails and writing them out takes milliseconds, and every
//! `get_deal` and every email read needs them: without the cache a one-day read cost
//! ~5 ms and a `get_deal` ~9 ms, which is the server's time, not the client's.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use super::data::{self, Corpus, Email, HISTORY_END, HISTORY_START};

/// The most deals kept at once; the oldest is dropped past it, so a client that walks
/// through many deals holds a bounded amount of memory (~5 MB a deal at 5,000 emails).
const KEPT_DEALS: usize = 8;

/// One deal's history.
pub(crate) struct Mailbox {
    deal_id: String,
    emails: Vec<Email>,
    whole_history_bytes: OnceLock<usize>,
}

impl Mailbox {
    /// The text of a read of the emails dated from `start` to `end`.
    pub(crate) fn page_text(&self, start: &str, end: &str) -> String {
        let page = data::email_page(&self.deal_id, start, end, &self.emails);
        serde_json::to_string(&page).unwrap_or_default()
    }

    /// The bytes of the read of the whole history: the `size` of its link.
    pub(crate) fn whole_history_bytes(&self) -> usize {
        *self
            .whole_history_bytes
            .get_or_init(|| self.page_text(HISTORY_START, HISTORY_END).len())
    }
}

/// The histories kept by one process, for its one corpus.
pub(crate) struct Mailboxes {
    corpus: Corpus,
    kept: Mutex<VecDeque<Arc<Mailbox>>>,
}

impl Mailboxes {
    pub(crate) fn new(corpus: Corpus) -> Mailboxes {
        Mailboxes {
            corpus,
            kept: Mutex::new(VecDeque::new()),
        }
    }

    /// The deal's history, made now if it is not kept.
    pub(crate) fn of(&self, deal_id: &str) -> Arc<Mailbox> {
        let mut kept = match self.kept.lock() {
            Ok(kept) => kept,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(found) = kept.iter().find(|m| m.deal_id == deal_id) {
            return found.clone();
        }
        // Made under the lock: two first requests for one deal make it once.
        let made = Arc::new(Mailbox {
            deal_id: deal_id.to_string(),
            emails: data::emails(deal_id, self.corpus),
            whole_history_bytes: OnceLock::new(),
        });
        if kept.len() >= KEPT_DEALS {
            kept.pop_front();
        }
        kept.push_back(made.clone());
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORPUS: Corpus = Corpus {
        emails: 100,
        activities: 5,
    };

    /// A page as the server wrote one before it kept histories: the whole history made
    /// anew, filtered, owned.
    #[derive(serde::Serialize)]
    struct PageMadeAnew {
        deal_id: String,
        start: String,
        end: String,
        count: usize,
        emails: Vec<Email>,
    }

    fn made_anew(deal_id: &str, start: &str, end: &str) -> String {
        let emails: Vec<Email> = data::emails(deal_id, CORPUS)
            .into_iter()
            .filter(|e| e.date.as_str() >= start && e.date.as_str() <= end)
            .collect();
        let page = PageMadeAnew {
            deal_id: deal_id.to_string(),
            start: start.to_string(),
            end: end.to_string(),
            count: emails.len(),
            emails,
        };
        serde_json::to_string(&page).unwrap_or_default()
    }

    #[test]
    fn kept_histories_give_the_bytes_a_fresh_one_gives() {
        let boxes = Mailboxes::new(CORPUS);
        for (start, end) in [
            ("2025-03-01", "2025-03-01"),
            ("2025-03-01", "2025-04-15"),
            (HISTORY_START, HISTORY_END),
            ("2026-01-01", "2026-02-01"),
            ("2025-05-01", "2025-04-01"),
        ] {
            for _ in 0..2 {
                assert_eq!(
                    boxes.of("D1").page_text(start, end),
                    made_anew("D1", start, end),
                    "{start}/{end}"
                );
            }
        }
        assert_eq!(
            boxes.of("D1").whole_history_bytes(),
            made_anew("D1", HISTORY_START, HISTORY_END).len()
        );
    }

    #[test]
    fn a_deal_is_made_once_and_the_oldest_goes_past_the_cap() {
        let boxes = Mailboxes::new(CORPUS);
        let first = boxes.of("D0");
        assert!(Arc::ptr_eq(&first, &boxes.of("D0")));
        for i in 1..=KEPT_DEALS {
            boxes.of(&format!("D{i}"));
        }
        assert!(!Arc::ptr_eq(&first, &boxes.of("D0")), "D0 was dropped");
        let kept = boxes.kept.lock().map(|k| k.len()).unwrap_or(0);
        assert_eq!(kept, KEPT_DEALS);
    }
}
