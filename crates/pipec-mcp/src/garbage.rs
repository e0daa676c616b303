//! Lines a server wrote to stdout that are not JSON-RPC messages. The first one spoils
//! the session: every request in flight and every later one fails with
//! [`McpError::Garbage`](super::McpError::Garbage), since an answer may have been among
//! what could not be read, and a request must not wait for it until its timeout.

use std::sync::Mutex;

use tokio::sync::watch;

/// How much of the first such line an error shows.
const SAMPLE_CHARS: usize = 200;

/// The count and a sample, shared by the transport (which counts) and the session
/// (which fails requests).
#[derive(Debug)]
pub(super) struct GarbageLines {
    seen: Mutex<Seen>,
    spoiled: watch::Sender<bool>,
}

#[derive(Debug, Default, Clone)]
struct Seen {
    lines: u64,
    sample: String,
}

impl Default for GarbageLines {
    fn default() -> Self {
        GarbageLines {
            seen: Mutex::new(Seen::default()),
            spoiled: watch::channel(false).0,
        }
    }
}

impl GarbageLines {
    /// Counts one line (its first one is kept, shortened, as the sample).
    pub(crate) fn record(&self, line: &[u8]) {
        {
            let mut seen = match self.seen.lock() {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
            seen.lines += 1;
            if seen.lines == 1 {
                seen.sample = sample(line);
            }
        }
        self.spoiled.send_replace(true);
    }

    /// The count and the sample, once there is at least one line.
    pub(crate) fn seen(&self) -> Option<(u64, String)> {
        let seen = match self.seen.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        (seen.lines > 0).then_some((seen.lines, seen.sample))
    }

    /// Returns once the first line has been seen (at once if it has).
    pub(crate) async fn spoiled(&self) {
        let mut rx = self.spoiled.subscribe();
        // An error means the sender is gone, which cannot happen while `self` lives.
        let _ = rx.wait_for(|spoiled| *spoiled).await;
    }
}

/// The start of `line` as text, cut at a character boundary.
fn sample(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    match text.char_indices().nth(SAMPLE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_line_spoils_and_is_the_sample() {
        let g = GarbageLines::default();
        assert_eq!(g.seen(), None);
        g.record(b"Starting server...\r");
        g.record(b"second");
        assert_eq!(g.seen(), Some((2, "Starting server...".to_string())));
        tokio::time::timeout(std::time::Duration::from_secs(1), g.spoiled())
            .await
            .expect("spoiled");
    }

    #[test]
    fn a_long_line_is_shortened_at_a_character() {
        let long = "é".repeat(500);
        let s = sample(long.as_bytes());
        assert_eq!(s.chars().count(), SAMPLE_CHARS + 1);
    }
}
