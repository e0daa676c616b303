//! A server's stderr, drained as it is written (an undrained pipe fills and blocks the
//! server) into a ring that keeps only its end: the tail errors carry, after the
//! caller's redaction.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::types::Redaction;

/// How much of the end of stderr is kept.
pub(super) const STDERR_TAIL_BYTES: usize = 16 * 1024;

/// The end of what a server wrote to stderr.
#[derive(Debug)]
pub(super) struct StderrTail {
    ring: Mutex<Ring>,
    ended: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct Ring {
    bytes: VecDeque<u8>,
    /// Bytes were dropped from the front: the first line in the ring is cut.
    wrapped: bool,
}

impl StderrTail {
    /// Starts draining `stderr` in a task of its own; the tail fills as it reads.
    pub(crate) fn drain<R>(stderr: R) -> Arc<StderrTail>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = Arc::new(StderrTail::with_end(false));
        let filling = tail.clone();
        tokio::spawn(async move {
            let mut stderr = stderr;
            let mut buf = vec![0u8; 8 * 1024];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => filling.push(&buf[..n]),
                }
            }
            filling.ended.send_replace(true);
        });
        tail
    }

    /// A tail for a server without stderr (over HTTP): always empty, already ended.
    pub(crate) fn empty() -> StderrTail {
        StderrTail::with_end(true)
    }

    fn with_end(ended: bool) -> StderrTail {
        StderrTail {
            ring: Mutex::new(Ring::default()),
            ended: watch::channel(ended).0,
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut ring = match self.ring.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        let keep = &bytes[bytes.len().saturating_sub(STDERR_TAIL_BYTES)..];
        let overflow = (ring.bytes.len() + keep.len()).saturating_sub(STDERR_TAIL_BYTES);
        if overflow > 0 || keep.len() < bytes.len() {
            ring.wrapped = true;
        }
        let drop = overflow.min(ring.bytes.len());
        ring.bytes.drain(..drop);
        ring.bytes.extend(keep);
    }

    /// The tail as text, through `redact`. When the ring has dropped bytes, the cut
    /// first line is left out (half a line may hold half a secret, which no redaction
    /// of whole values would recognise), and the rest is redacted as a tail: a secret
    /// with a line break in it may still have begun before the cut.
    pub(crate) fn text(&self, redact: &dyn Redaction) -> String {
        let (bytes, wrapped) = {
            let ring = match self.ring.lock() {
                Ok(r) => r,
                Err(p) => p.into_inner(),
            };
            (
                ring.bytes.iter().copied().collect::<Vec<u8>>(),
                ring.wrapped,
            )
        };
        let text = String::from_utf8_lossy(&bytes);
        if !wrapped {
            return redact.whole(&text);
        }
        match text.find('\n') {
            Some(at) => redact.tail(&text[at + 1..]),
            None => String::new(),
        }
    }

    /// Waits until the server's stderr reached its end (it exited), at most `limit`:
    /// what a dying server wrote last is often the reason it died.
    pub(crate) async fn wait_ended(&self, limit: Duration) {
        let mut rx = self.ended.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|ended| *ended)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(s: &str) -> String {
        s.to_string()
    }

    #[tokio::test]
    async fn the_tail_keeps_the_end_and_drops_a_cut_first_line() {
        let (mut w, r) = tokio::io::duplex(1024);
        let tail = StderrTail::drain(r);
        let mut text = String::new();
        for i in 0..2000 {
            text.push_str(&format!("line {i} of the log\n"));
        }
        text.push_str("fatal: token=SECRET\n");
        tokio::io::AsyncWriteExt::write_all(&mut w, text.as_bytes())
            .await
            .expect("write");
        drop(w);
        tail.wait_ended(Duration::from_secs(5)).await;
        let got = tail.text(&same);
        assert!(got.len() <= STDERR_TAIL_BYTES);
        assert!(got.ends_with("fatal: token=SECRET\n"));
        assert!(got.starts_with("line "), "{}", &got[..40]);
        let redacted = tail.text(&|s: &str| s.replace("SECRET", "[secret]"));
        assert!(redacted.ends_with("token=[secret]\n"));
    }

    #[tokio::test]
    async fn a_short_stderr_is_kept_whole() {
        let (mut w, r) = tokio::io::duplex(64);
        let tail = StderrTail::drain(r);
        tokio::io::AsyncWriteExt::write_all(&mut w, b"no newline")
            .await
            .expect("write");
        drop(w);
        tail.wait_ended(Duration::from_secs(5)).await;
        assert_eq!(tail.text(&same), "no newline");
        assert_eq!(StderrTail::empty().text(&same), "");
        let t = std::time::Instant::now();
        StderrTail::empty().wait_ended(Duration::from_secs(5)).await;
        assert!(t.elapsed() < Duration::from_secs(1), "nothing to wait for");
    }
}
