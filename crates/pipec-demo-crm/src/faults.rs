//! Fault injection: the grammar of `CRM_FAULT_FILE`, which line applies to a request, and
//! counting a line down by rewriting the file. What a fault *does* is the transports'
//! (`intercept.rs` builds the answers, `stdio.rs` and `http.rs` send them).
//!
//! One fault a line, `FAULT ON [TIMES]`:
//!
//! ```text
//! FAULT := exit | hang | garbage | huge BYTES | bad-link [not-a-uri | no-uri]
//!        | error CODE | empty | status CODE | close
//! ON    := tool NAME | read [URI-PREFIX]
//! TIMES := how many more requests it applies to (absent: every one)
//! ```
//!
//! Blank lines and lines starting with `#` are skipped.

use std::fmt;
use std::path::Path;

use super::locked_file;

/// The largest `huge` answer, so that a typo cannot make the server allocate without end.
pub(crate) const MAX_HUGE_BYTES: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The process exits at once.
    Exit,
    /// The request is never answered.
    Hang,
    /// A line that is not JSON instead of the answer.
    Garbage,
    /// An answer of at least this many bytes, on one line.
    Huge(u64),
    /// A tool result with a malformed `resource_link` after its good blocks.
    BadLink(BadLink),
    /// A JSON-RPC error of this code, message `injected error`.
    Error(i32),
    /// A result with no contents (a read) or no content blocks (a tool).
    Empty,
    /// Over HTTP: this status instead of the answer.
    Status(u16),
    /// Over HTTP: the connection is dropped halfway through the answer.
    Close,
}

/// How a `bad-link` block is malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadLink {
    /// `"uri": "not a uri"`: the block parses, the URI does not.
    NotAUri,
    /// No `uri` at all: the block does not parse as a `resource_link`.
    NoUri,
}

const FAULT_NAMES: &[&str] = &[
    "exit", "hang", "garbage", "huge", "bad-link", "error", "empty", "status", "close",
];

impl Fault {
    /// Its first word, as in the file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fault::Exit => "exit",
            Fault::Hang => "hang",
            Fault::Garbage => "garbage",
            Fault::Huge(_) => "huge",
            Fault::BadLink(_) => "bad-link",
            Fault::Error(_) => "error",
            Fault::Empty => "empty",
            Fault::Status(_) => "status",
            Fault::Close => "close",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Huge(bytes) => write!(f, "huge {bytes}"),
            Fault::Error(code) => write!(f, "error {code}"),
            Fault::Status(code) => write!(f, "status {code}"),
            Fault::BadLink(BadLink::NotAUri) => write!(f, "bad-link"),
            Fault::BadLink(BadLink::NoUri) => write!(f, "bad-link no-uri"),
            other => write!(f, "{}", other.name()),
        }
    }
}

/// Which requests a line is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Tool(String),
    /// Reads of URIs starting with the prefix, or every read.
    Read(Option<String>),
}

/// A request a fault may apply to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request<'a> {
    Tool(&'a str),
    Read(&'a str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Stdio,
    Http,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FaultLine {
    pub(crate) fault: Fault,
    pub(crate) target: Target,
    pub(crate) times: Option<u64>,
}

impl fmt::Display for FaultLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.fault)?;
        match &self.target {
            Target::Tool(name) => write!(f, " tool {name}")?,
            Target::Read(None) => write!(f, " read")?,
            Target::Read(Some(prefix)) => write!(f, " read {prefix}")?,
        }
        if let Some(times) = self.times {
            write!(f, " {times}")?;
        }
        Ok(())
    }
}

fn number<T: std::str::FromStr>(word: Option<&str>, what: &str, fault: &str) -> Result<T, String> {
    let Some(word) = word else {
        return Err(format!("`{fault}` needs {what}"));
    };
    word.parse()
        .map_err(|_| format!("`{fault}` needs {what}, not `{word}`"))
}

impl FaultLine {
    /// One line of the file; `Ok(None)` for a blank line or a comment.
    pub(crate) fn parse(line: &str) -> Result<Option<FaultLine>, String> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(None);
        }
        let mut words = line.split_whitespace().peekable();
        let name = words.next().unwrap_or_default();
        let fault = match name {
            "exit" => Fault::Exit,
            "hang" => Fault::Hang,
            "garbage" => Fault::Garbage,
            "huge" => {
                let bytes: u64 = number(words.next(), "a size in bytes", name)?;
                if bytes > MAX_HUGE_BYTES {
                    return Err(format!("`huge` answers at most {MAX_HUGE_BYTES} bytes"));
                }
                Fault::Huge(bytes)
            }
            "bad-link" => match words.peek().copied() {
                Some("no-uri") => {
                    words.next();
                    Fault::BadLink(BadLink::NoUri)
                }
                Some("not-a-uri") => {
                    words.next();
                    Fault::BadLink(BadLink::NotAUri)
                }
                _ => Fault::BadLink(BadLink::NotAUri),
            },
            "error" => Fault::Error(number(words.next(), "a JSON-RPC error code", name)?),
            "empty" => Fault::Empty,
            "status" => {
                let code: u16 = number(words.next(), "an HTTP status", name)?;
                // A 1xx status is no final answer: HTTP would wait for the real one.
                if !(200..=599).contains(&code) {
                    return Err(format!(
                        "`status` needs a final HTTP status (200 to 599), not {code}"
                    ));
                }
                Fault::Status(code)
            }
            "close" => Fault::Close,
            other => {
                let hint = pipec_base::names::did_you_mean(other, FAULT_NAMES.iter().copied())
                    .unwrap_or_else(|| format!("faults are {}", FAULT_NAMES.join(", ")));
                return Err(format!("unknown fault `{other}`; {hint}"));
            }
        };
        let target = match words.next() {
            Some("tool") => match words.next() {
                Some(tool) => Target::Tool(tool.to_string()),
                None => return Err("`tool` needs the tool's name".into()),
            },
            Some("read") => match words.peek() {
                // A number after `read` is TIMES: URI prefixes have a scheme.
                Some(word) if !word.bytes().all(|b| b.is_ascii_digit()) => {
                    let prefix = word.to_string();
                    words.next();
                    Target::Read(Some(prefix))
                }
                _ => Target::Read(None),
            },
            Some(other) => {
                let hint = pipec_base::names::did_you_mean(other, ["tool", "read"])
                    .unwrap_or_else(|| "write `tool NAME` or `read [URI-PREFIX]`".into());
                return Err(format!("`{other}` is not what a fault applies to; {hint}"));
            }
            None => {
                return Err(format!(
                    "`{fault}` applies to nothing; add `tool NAME` or `read [URI-PREFIX]`"
                ));
            }
        };
        let times = match words.next() {
            Some(word) => Some(
                word.parse::<u64>()
                    .map_err(|_| format!("`{word}` is not a count of times"))?,
            ),
            None => None,
        };
        if let Some(extra) = words.next() {
            return Err(format!(
                "`{extra}` after the count; a line is `FAULT ON [TIMES]`"
            ));
        }
        Ok(Some(FaultLine {
            fault,
            target,
            times,
        }))
    }

    /// Whether this line applies to the request now (its count not run out, its fault
    /// one that this request and transport can have).
    pub(crate) fn applies_to(&self, request: Request<'_>, transport: Transport) -> bool {
        if self.times == Some(0) {
            return false;
        }
        let target = match (&self.target, request) {
            (Target::Tool(name), Request::Tool(tool)) => name == tool,
            (Target::Read(prefix), Request::Read(uri)) => {
                prefix.as_deref().is_none_or(|p| uri.starts_with(p))
            }
            _ => false,
        };
        let possible = match self.fault {
            Fault::Status(_) | Fault::Close => transport == Transport::Http,
            Fault::BadLink(_) => matches!(request, Request::Tool(_)),
            _ => true,
        };
        target && possible
    }
}

/// The fault for this request, if the file at `path` exists and one of its lines applies
/// (the first that does); a line with a count is counted down in the file. Lines that do
/// not parse are skipped and reported on stderr.
pub(crate) fn take(path: &Path, request: Request<'_>, transport: Transport) -> Option<Fault> {
    let taken = locked_file::update(path, |text| {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (number, line) in lines.iter_mut().enumerate() {
            let parsed = match FaultLine::parse(line) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => continue,
                Err(message) => {
                    eprintln!(
                        "pipec-demo-crm: CRM_FAULT_FILE {} line {}: {message}",
                        path.display(),
                        number + 1
                    );
                    continue;
                }
            };
            if !parsed.applies_to(request, transport) {
                continue;
            }
            let Some(times) = parsed.times else {
                return (None, Some(parsed.fault));
            };
            let counted = FaultLine {
                times: Some(times - 1),
                ..parsed.clone()
            };
            *line = counted.to_string();
            let mut new_text = lines.join("\n");
            new_text.push('\n');
            return (Some(new_text), Some(parsed.fault));
        }
        (None, None)
    });
    match taken {
        Ok(fault) => fault.flatten(),
        Err(e) => {
            eprintln!(
                "pipec-demo-crm: CRM_FAULT_FILE {} could not be read: {e}",
                path.display()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> FaultLine {
        match FaultLine::parse(line) {
            Ok(Some(parsed)) => parsed,
            other => panic!("{line:?} gave {other:?}"),
        }
    }

    #[test]
    fn every_fault_reads_and_prints_back_the_same() {
        for line in [
            "exit tool get_deal",
            "hang read",
            "garbage read mcp://crm/deals/D1/emails 2",
            "huge 300000 tool get_deal 1",
            "bad-link tool get_deal",
            "bad-link no-uri tool get_deal 3",
            "error -32000 read mcp://crm/",
            "empty read 1",
            "status 401 tool get_deal",
            "close read",
        ] {
            assert_eq!(parse(line).to_string(), line);
        }
        assert_eq!(
            parse("bad-link not-a-uri tool get_deal").fault,
            Fault::BadLink(BadLink::NotAUri)
        );
        assert_eq!(parse("  hang   tool  x  ").to_string(), "hang tool x");
    }

    #[test]
    fn a_number_after_read_is_a_count_not_a_prefix() {
        let line = parse("empty read 2");
        assert_eq!(line.target, Target::Read(None));
        assert_eq!(line.times, Some(2));
    }

    #[test]
    fn blank_lines_and_comments_are_skipped() {
        assert_eq!(FaultLine::parse("   "), Ok(None));
        assert_eq!(FaultLine::parse("# exit tool get_deal"), Ok(None));
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        let error = |line: &str| FaultLine::parse(line).err().unwrap_or_default();
        assert!(error("exitt tool get_deal").contains("did you mean `exit`?"));
        assert!(error("huge tool get_deal").contains("a size in bytes"));
        assert!(error("huge 99999999999 tool x").contains("at most"));
        assert!(error("error x tool get_deal").contains("JSON-RPC error code"));
        assert!(error("status 99 tool get_deal").contains("200 to 599"));
        assert!(error("status 101 tool get_deal").contains("200 to 599"));
        assert!(error("exit").contains("applies to nothing"));
        assert!(error("exit tools get_deal").contains("did you mean `tool`?"));
        assert!(error("exit tool").contains("the tool's name"));
        assert!(error("exit tool get_deal many").contains("not a count"));
        assert!(error("exit tool get_deal 1 2").contains("after the count"));
    }

    #[test]
    fn lines_apply_to_their_requests_on_the_transports_that_can_have_them() {
        let tool = Request::Tool("get_deal");
        let read = Request::Read("mcp://crm/deals/D1/emails/2025-01-01/2025-12-31");
        let stdio = Transport::Stdio;
        let http = Transport::Http;
        assert!(parse("exit tool get_deal").applies_to(tool, stdio));
        assert!(!parse("exit tool arm_expiry").applies_to(tool, stdio));
        assert!(!parse("exit tool get_deal").applies_to(read, stdio));
        assert!(parse("hang read").applies_to(read, stdio));
        assert!(parse("hang read mcp://crm/deals/D1/emails").applies_to(read, stdio));
        assert!(!parse("hang read mcp://crm/deals/D1/activity").applies_to(read, stdio));
        assert!(!parse("status 500 tool get_deal").applies_to(tool, stdio));
        assert!(parse("status 500 tool get_deal").applies_to(tool, http));
        assert!(!parse("close read").applies_to(read, stdio));
        assert!(!parse("bad-link read").applies_to(read, http));
        assert!(!parse("exit tool get_deal 0").applies_to(tool, stdio));
    }

    #[test]
    fn a_counted_line_runs_down_in_the_file_and_the_first_line_that_applies_wins() {
        let path = std::env::temp_dir().join(format!("pipec-fault-file-{}", std::process::id()));
        std::fs::write(
            &path,
            "# two hangs, then errors\nhang tool get_deal 2\nnonsense here\nerror -32001 tool get_deal\n",
        )
        .ok();
        let tool = Request::Tool("get_deal");
        let next = || take(&path, tool, Transport::Stdio);
        assert_eq!(next(), Some(Fault::Hang));
        assert!(
            std::fs::read_to_string(&path)
                .unwrap_or_default()
                .contains("hang tool get_deal 1\nnonsense here\n")
        );
        assert_eq!(next(), Some(Fault::Hang));
        assert_eq!(next(), Some(Fault::Error(-32001)));
        assert_eq!(next(), Some(Fault::Error(-32001)));
        assert_eq!(
            take(&path, Request::Tool("arm_expiry"), Transport::Stdio),
            None
        );
        let _ = std::fs::remove_file(&path);
        assert_eq!(next(), None, "no file, no fault");
    }
}
