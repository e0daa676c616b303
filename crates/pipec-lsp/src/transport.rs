//! JSON-RPC over stdio with `Content-Length` framing.
//!
//! `lsp-server` gives the message types; the framing is read here so that bad input
//! never ends the session: a frame that is not JSON, or not a JSON-RPC message, is
//! answered with a parse error (`id: null`) and the next frame is read as usual.

use std::io::{self, BufRead, Write};

use lsp_server::Message;
use std::sync::mpsc::Sender;

/// What the reader thread hands the server loop.
pub(crate) enum Incoming {
    Message(Message),
    /// A frame that could not be read as a message, with why.
    Malformed(String),
    /// End of input: the editor is gone.
    Closed,
    /// A test run the editor asked for ended (`test_runs.rs`).
    TestsFinished(super::test_runs::Finished),
}

/// Reads frames from `input` on a thread of its own until it closes, handing them to
/// `tx`.
pub(crate) fn spawn_reader(input: impl BufRead + Send + 'static, tx: Sender<Incoming>) {
    std::thread::spawn(move || read_loop(input, tx));
}

fn read_loop(mut input: impl BufRead, tx: Sender<Incoming>) {
    loop {
        let incoming = match read_frame(&mut input) {
            Ok(Some(body)) => match serde_json::from_slice::<Message>(&body) {
                Ok(msg) => Incoming::Message(msg),
                Err(e) => Incoming::Malformed(format!("not a JSON-RPC message: {e}")),
            },
            Ok(None) => {
                let _ = tx.send(Incoming::Closed);
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Incoming::Malformed(e.to_string()),
            Err(_) => {
                let _ = tx.send(Incoming::Closed);
                return;
            }
        };
        if tx.send(incoming).is_err() {
            return;
        }
    }
}

/// The largest frame read (64 MiB): a bigger `Content-Length` is refused rather than
/// allocated.
const MAX_FRAME: usize = 64 << 20;

/// One frame's body; `None` at the end of input. A header block without a usable
/// `Content-Length` is an `InvalidData` error, after which reading resumes at the next
/// header block.
fn read_frame(input: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut length: Option<usize> = None;
    let mut bad_header: Option<String> = None;
    let mut saw_header = false;
    loop {
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim_end_matches(['\r', '\n']);
        if trimmed.is_empty() {
            if !saw_header {
                continue;
            }
            break;
        }
        saw_header = true;
        match trimmed.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(n) if n <= MAX_FRAME => length = Some(n),
                    _ => bad_header = Some(format!("bad Content-Length `{}`", value.trim())),
                }
            }
            Some(_) => {}
            None => bad_header = Some(format!("malformed header line `{trimmed}`")),
        }
    }
    let Some(length) = length.filter(|_| bad_header.is_none()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            bad_header.unwrap_or_else(|| "a header block without Content-Length".into()),
        ));
    };
    let mut body = vec![0; length];
    input.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Writes framed messages to stdout.
pub(crate) struct Writer {
    out: io::Stdout,
}

impl Writer {
    pub(crate) fn stdout() -> Writer {
        Writer { out: io::stdout() }
    }

    pub(crate) fn send(&mut self, msg: impl Into<Message>) {
        let msg: Message = msg.into();
        if let Ok(text) = serde_json::to_string(&msg) {
            self.raw(&text);
        }
    }

    /// The answer to a frame that was not a message: JSON-RPC's parse error, `id: null`.
    pub(crate) fn parse_error(&mut self, why: &str) {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32700, "message": why },
        });
        self.raw(&body.to_string());
    }

    fn raw(&mut self, text: &str) {
        let mut out = self.out.lock();
        let _ = write!(out, "Content-Length: {}\r\n\r\n{text}", text.len());
        let _ = out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_and_bad_headers_skipped() {
        let input = b"Content-Length: 2\r\n\r\n{}garbage\r\n\r\nContent-Length: 4\r\n\r\nnull";
        let mut r = io::Cursor::new(&input[..]);
        assert_eq!(read_frame(&mut r).ok().flatten(), Some(b"{}".to_vec()));
        assert!(read_frame(&mut r).is_err());
        assert_eq!(read_frame(&mut r).ok().flatten(), Some(b"null".to_vec()));
        assert!(matches!(read_frame(&mut r), Ok(None)));
    }
}
