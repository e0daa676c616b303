//! The JSON-RPC `id` of a message, found while its bytes stream in: a small state machine
//! over the top level of one JSON object that notes the value of its `id` member and
//! whether it has a `method` (a request or notification from the server) — without
//! keeping the message. The transports use it to know which request an answer belongs
//! to, and so which size limit applies, before the answer has been read to its end.

use rmcp::model::RequestId;
use serde_json::Value;

/// A request id as pipec compares them: a number, or a string that is not a number
/// (servers may echo `3` as `"3"`, which is the same request).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum MessageId {
    Number(i64),
    Text(String),
}

impl MessageId {
    pub(crate) fn from_value(value: &Value) -> Option<MessageId> {
        match value {
            Value::Number(n) => n.as_i64().map(MessageId::Number),
            Value::String(s) => Some(MessageId::from_text(s)),
            _ => None,
        }
    }

    pub(crate) fn from_text(text: &str) -> MessageId {
        match text.parse::<i64>() {
            Ok(n) => MessageId::Number(n),
            Err(_) => MessageId::Text(text.to_string()),
        }
    }

    /// The id written as JSON (`3`, `"abc"`), as the scanner captured it.
    fn from_json(bytes: &[u8]) -> Option<MessageId> {
        serde_json::from_slice::<Value>(bytes)
            .ok()
            .and_then(|v| MessageId::from_value(&v))
    }
}

impl From<&RequestId> for MessageId {
    fn from(id: &RequestId) -> MessageId {
        match id {
            RequestId::Number(n) => MessageId::Number(*n),
            RequestId::String(s) => MessageId::from_text(s),
        }
    }
}

/// The longest key the scanner keeps: longer keys are none of the ones it looks for.
const KEY_CAPACITY: usize = 16;
/// The longest `id` value it keeps: an id longer than this is not one pipec sent.
const ID_CAPACITY: usize = 128;

/// What the scanner has learned of one line so far.
#[derive(Debug, Default)]
pub(super) struct MessageIdScanner {
    /// Bytes seen that were not whitespace; the first must open an object.
    started: bool,
    not_an_object: bool,
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a key.
    expecting_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    key_too_long: bool,
    /// At depth 1, between the `:` after `"id"` and the value's end.
    reading_id: bool,
    id_bytes: Vec<u8>,
    id_too_long: bool,
    id: Option<MessageId>,
    has_method: bool,
    has_answer: bool,
}

impl MessageIdScanner {
    /// Feeds the next bytes of the line (no newline among them).
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.finished() {
                return;
            }
            self.step(b);
        }
    }

    /// Nothing more of the line can change what the scanner reports: the id and the
    /// message's kind are known, or the line is not an object.
    pub(crate) fn finished(&self) -> bool {
        self.not_an_object || (self.id.is_some() && (self.has_method || self.has_answer))
    }

    /// The line's id, once its value has been read whole.
    pub(crate) fn id(&self) -> Option<&MessageId> {
        self.id.as_ref()
    }

    /// The line has a top-level `method`: it is the server's request or notification.
    pub(crate) fn has_method(&self) -> bool {
        self.has_method
    }

    /// The line does not start with `{`: it cannot be a JSON-RPC message.
    pub(crate) fn not_an_object(&self) -> bool {
        self.not_an_object
    }

    fn step(&mut self, b: u8) {
        if !self.started {
            if b.is_ascii_whitespace() {
                return;
            }
            self.started = true;
            if b != b'{' {
                self.not_an_object = true;
                return;
            }
        }
        if self.in_string {
            self.keep(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                }
            }
            return;
        }
        match b {
            b'"' => {
                if self.depth == 1 && self.expecting_key {
                    self.reading_key = true;
                    self.key.clear();
                    self.key_too_long = false;
                }
                // The quotes are kept with a key or an id, so `"id"` is told from `id`.
                self.keep(b);
                self.in_string = true;
            }
            b'{' | b'[' => {
                self.keep(b);
                self.depth += 1;
                if self.depth == 1 {
                    self.expecting_key = true;
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                } else {
                    self.keep(b);
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.expecting_key = false;
                if !self.key_too_long {
                    match self.key.as_slice() {
                        b"\"id\"" => {
                            self.reading_id = true;
                            self.id_bytes.clear();
                        }
                        b"\"method\"" => self.has_method = true,
                        b"\"result\"" | b"\"error\"" => self.has_answer = true,
                        _ => {}
                    }
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.expecting_key = true;
            }
            b if b.is_ascii_whitespace() => {}
            _ => self.keep(b),
        }
    }

    /// Keeps a byte of the key or of the id value being read.
    fn keep(&mut self, b: u8) {
        if self.reading_key {
            if self.key.len() < KEY_CAPACITY {
                self.key.push(b);
            } else {
                self.key_too_long = true;
            }
        } else if self.reading_id {
            if self.id_bytes.len() < ID_CAPACITY {
                self.id_bytes.push(b);
            } else {
                self.id_too_long = true;
            }
        }
    }

    fn end_value(&mut self) {
        if self.reading_id {
            self.reading_id = false;
            if !self.id_too_long {
                self.id = MessageId::from_json(&self.id_bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(line: &str) -> MessageIdScanner {
        let mut s = MessageIdScanner::default();
        s.feed(line.as_bytes());
        s
    }

    fn scan_in_pieces(line: &str, piece: usize) -> MessageIdScanner {
        let mut s = MessageIdScanner::default();
        for chunk in line.as_bytes().chunks(piece) {
            s.feed(chunk);
        }
        s
    }

    #[test]
    fn finds_the_id_at_the_start_and_stops() {
        let s = scan(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#);
        assert_eq!(s.id(), Some(&MessageId::Number(7)));
        assert!(s.finished());
        assert!(!s.has_method());
    }

    #[test]
    fn finds_an_id_that_comes_last_and_ignores_nested_ids() {
        let line =
            r#"{"jsonrpc":"2.0","result":{"id":99,"items":[{"id":5}],"s":"\"id\":4"},"id":"12"}"#;
        for piece in [1, 3, 1000] {
            let s = scan_in_pieces(line, piece);
            assert_eq!(s.id(), Some(&MessageId::Number(12)), "pieces of {piece}");
        }
    }

    #[test]
    fn a_string_id_and_spaces() {
        let s = scan(r#"  { "id" : "req-1" , "error" : {"code": -1} }"#);
        assert_eq!(s.id(), Some(&MessageId::Text("req-1".into())));
    }

    #[test]
    fn a_request_from_the_server_is_told_apart() {
        let s = scan(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#);
        assert_eq!(s.id(), Some(&MessageId::Number(0)));
        assert!(s.has_method());
    }

    #[test]
    fn a_notification_has_no_id() {
        let s = scan(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"id":3}}"#);
        assert_eq!(s.id(), None);
        assert!(s.has_method());
    }

    #[test]
    fn text_that_is_not_an_object() {
        assert!(scan("Traceback (most recent call last):").not_an_object());
        assert!(scan("  [1,2]").not_an_object());
        assert!(!scan(r#"{"id":1"#).not_an_object());
    }

    #[test]
    fn an_unfinished_id_is_not_reported() {
        let s = scan(r#"{"jsonrpc":"2.0","id":12"#);
        assert_eq!(s.id(), None);
    }

    #[test]
    fn numeric_strings_match_numbers() {
        assert_eq!(MessageId::from_text("3"), MessageId::Number(3));
        assert_eq!(
            MessageId::from_value(&serde_json::json!("x")),
            Some(MessageId::Text("x".into()))
        );
        assert_eq!(MessageId::from_value(&serde_json::json!(1.5)), None);
    }
}
