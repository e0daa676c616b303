//! Cutting a server's stdout into lines, each within its size limit: bytes are kept only
//! while the line is under the limit that applies to it (the limit of the request it
//! answers, known once its `id` has gone by, else the session's), and past it they are
//! counted and dropped, so an answer of any size costs at most its limit in memory.

use std::collections::VecDeque;

use super::message_id::{MessageId, MessageIdScanner};

/// A line buffer larger than this is given back once its line is done, so one large
/// answer does not keep its memory for the rest of the session.
const KEEP_BUFFER: usize = 1 << 20;

/// What a finished line turned out to be.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// The line, whole (without its newline), within its limit.
    Whole(Vec<u8>),
    /// The line was over its limit and was read past.
    TooLong(TooLongLine),
}

/// A line that was read past.
#[derive(Debug, PartialEq)]
pub(super) struct TooLongLine {
    /// Its `id`, when one was found at its top level.
    pub id: Option<MessageId>,
    /// It had a `method`: the server's request or notification, not an answer.
    pub has_method: bool,
    /// It did not start with `{`.
    pub not_an_object: bool,
    /// Its length in bytes, counted to its end.
    pub size: u64,
    /// The limit it went over.
    pub limit: usize,
}

/// The line being read, fed in pieces as they arrive.
pub(super) struct LineReader {
    session_limit: usize,
    line: Vec<u8>,
    length: u64,
    /// Over its limit: the rest is counted, not kept.
    skipping: bool,
    /// The limit of the current line, lowered once its id names a request with a limit.
    limit: usize,
    limit_known: bool,
    scanner: MessageIdScanner,
    largest_buffer: usize,
}

impl LineReader {
    pub(crate) fn new(session_limit: usize) -> LineReader {
        LineReader {
            session_limit,
            line: Vec::new(),
            length: 0,
            skipping: false,
            limit: session_limit,
            limit_known: false,
            scanner: MessageIdScanner::default(),
            largest_buffer: 0,
        }
    }

    /// The most memory a line has held, in bytes (its buffer's capacity).
    pub(crate) fn largest_buffer(&self) -> usize {
        self.largest_buffer
    }

    /// Feeds bytes as they were read; finished lines are appended to `out`.
    /// `limit_of` gives the limit of the request an id names, if it has one.
    pub(crate) fn feed(
        &mut self,
        mut bytes: &[u8],
        limit_of: &dyn Fn(&MessageId) -> Option<usize>,
        out: &mut VecDeque<Line>,
    ) {
        while !bytes.is_empty() {
            let (piece, rest, ends_line) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            self.take(piece, limit_of);
            if ends_line && let Some(line) = self.finish(limit_of) {
                out.push_back(line);
            }
            bytes = rest;
        }
    }

    fn take(&mut self, piece: &[u8], limit_of: &dyn Fn(&MessageId) -> Option<usize>) {
        if !self.scanner.finished() {
            self.scanner.feed(piece);
        }
        if !self.limit_known
            && let Some(id) = self.scanner.id()
        {
            self.limit_known = true;
            if !self.scanner.has_method()
                && let Some(limit) = limit_of(id)
            {
                self.limit = limit.min(self.session_limit);
            }
        }
        self.length += piece.len() as u64;
        if self.skipping {
            return;
        }
        if self.line.len() + piece.len() > self.limit {
            self.skipping = true;
            self.release();
        } else {
            self.line.extend_from_slice(piece);
            self.largest_buffer = self.largest_buffer.max(self.line.capacity());
        }
    }

    fn finish(&mut self, limit_of: &dyn Fn(&MessageId) -> Option<usize>) -> Option<Line> {
        let scanner = std::mem::take(&mut self.scanner);
        let mut length = self.length;
        let skipped = std::mem::replace(&mut self.skipping, false);
        let mut limit = std::mem::replace(&mut self.limit, self.session_limit);
        let limit_known = std::mem::replace(&mut self.limit_known, false);
        self.length = 0;
        if !skipped && self.line.last() == Some(&b'\r') {
            self.line.pop();
            length -= 1;
        }
        // An id found only at the end of the line (after the answer) still names the
        // request: its limit is checked now, the line having been kept under the
        // session's.
        if !limit_known
            && !scanner.has_method()
            && let Some(limit_of_request) = scanner.id().and_then(limit_of)
        {
            limit = limit.min(limit_of_request);
        }
        let too_long = skipped || length > limit as u64;
        let line = if too_long {
            self.release();
            Line::TooLong(TooLongLine {
                id: scanner.id().cloned(),
                has_method: scanner.has_method(),
                not_an_object: scanner.not_an_object(),
                size: length,
                limit,
            })
        } else {
            let line = std::mem::take(&mut self.line);
            if line.iter().all(u8::is_ascii_whitespace) {
                return None;
            }
            Line::Whole(line)
        };
        Some(line)
    }

    fn release(&mut self) {
        if self.line.capacity() > KEEP_BUFFER {
            self.line = Vec::new();
        } else {
            self.line.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_limits(_: &MessageId) -> Option<usize> {
        None
    }

    fn lines(reader: &mut LineReader, input: &[u8], piece: usize) -> Vec<Line> {
        let mut out = VecDeque::new();
        for chunk in input.chunks(piece) {
            reader.feed(chunk, &no_limits, &mut out);
        }
        out.into_iter().collect()
    }

    #[test]
    fn lines_are_cut_at_newlines_in_any_pieces() {
        for piece in [1, 2, 7, 4096] {
            let mut r = LineReader::new(1000);
            let got = lines(&mut r, b"{\"a\":1}\r\n\n{\"b\":2}\n{\"c\"", piece);
            assert_eq!(
                got,
                vec![
                    Line::Whole(b"{\"a\":1}".to_vec()),
                    Line::Whole(b"{\"b\":2}".to_vec())
                ],
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_line_over_the_session_limit_is_counted_not_kept() {
        let mut r = LineReader::new(100);
        let mut input = br#"{"jsonrpc":"2.0","id":3,"result":""#.to_vec();
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend(b"\"}\n{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n");
        let got = lines(&mut r, &input, 512);
        assert_eq!(got.len(), 2);
        match &got[0] {
            Line::TooLong(t) => {
                assert_eq!(t.id, Some(MessageId::Number(3)));
                let first = input.iter().position(|&b| b == b'\n').expect("newline");
                assert_eq!(t.size, first as u64);
                assert_eq!(t.limit, 100);
                assert!(!t.has_method);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&got[1], Line::Whole(_)));
        assert!(r.largest_buffer() < 1000, "{}", r.largest_buffer());
    }

    #[test]
    fn the_request_limit_applies_once_the_id_is_known() {
        let mut r = LineReader::new(1 << 20);
        let limits = |id: &MessageId| (id == &MessageId::Number(9)).then_some(50);
        let mut out = VecDeque::new();
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":9,"result":"{}"}}"#,
            "y".repeat(200)
        );
        let other = format!(
            r#"{{"jsonrpc":"2.0","id":8,"result":"{}"}}"#,
            "y".repeat(200)
        );
        r.feed(format!("{long}\n{other}\n").as_bytes(), &limits, &mut out);
        assert!(
            matches!(&out[0], Line::TooLong(t) if t.limit == 50 && t.size == long.len() as u64)
        );
        assert!(matches!(&out[1], Line::Whole(l) if l.len() == other.len()));
    }

    #[test]
    fn an_id_at_the_end_is_checked_against_its_limit_after_the_line() {
        let mut r = LineReader::new(1 << 20);
        let limits = |id: &MessageId| (id == &MessageId::Number(9)).then_some(50);
        let mut out = VecDeque::new();
        let late = format!(
            r#"{{"jsonrpc":"2.0","result":"{}","id":9}}"#,
            "z".repeat(200)
        );
        r.feed(format!("{late}\n").as_bytes(), &limits, &mut out);
        assert!(
            matches!(&out[0], Line::TooLong(t) if t.limit == 50 && t.id == Some(MessageId::Number(9)))
        );
    }

    #[test]
    fn a_server_request_does_not_take_the_limit_of_a_client_request_with_its_id() {
        let mut r = LineReader::new(1 << 20);
        let limits = |_: &MessageId| Some(10);
        let mut out = VecDeque::new();
        r.feed(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{}}\n",
            &limits,
            &mut out,
        );
        assert!(matches!(&out[0], Line::Whole(_)));
    }

    #[test]
    fn twenty_megabytes_read_with_a_small_limit_keep_the_buffer_small() {
        let mut r = LineReader::new(64 << 20);
        let limits = |_: &MessageId| Some(200_000);
        let mut out = VecDeque::new();
        r.feed(
            br#"{"jsonrpc":"2.0","id":1,"result":{"text":""#,
            &limits,
            &mut out,
        );
        let chunk = vec![b'a'; 64 * 1024];
        let mut total = 0u64;
        while total < 20_000_000 {
            r.feed(&chunk, &limits, &mut out);
            total += chunk.len() as u64;
        }
        r.feed(b"\"}}\n", &limits, &mut out);
        assert!(matches!(&out[0], Line::TooLong(t) if t.size > 20_000_000 && t.limit == 200_000));
        assert!(r.largest_buffer() <= 2 * 200_000, "{}", r.largest_buffer());
    }
}
