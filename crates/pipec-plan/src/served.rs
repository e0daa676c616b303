//! What a served resource may say about itself in a listing, checked the same way for a
//! `serve` block and a reShapr Resources file: the roles of its `audience`, its
//! `priority`, its last-modified time and the sources of its icons.
//!
//! Each front end reads the values in its own syntax (`last_modified = "..."` or
//! `lastModified: ...`) and reports a value of the wrong kind (a number where a string
//! goes) itself; a value of the right kind that MCP does not allow is reported from here,
//! so both say it in the same words.

use pipec_base::names;
use pipec_base::source::{FileId, Span};
use pipec_diagnostic::rules as r;
use pipec_diagnostic::{Diagnostic, Rule};

/// The roles MCP knows for an `audience`.
pub const AUDIENCES: &[&str] = &["user", "assistant"];

/// A value MCP does not allow, in words; [`Problem::at`] makes it a diagnostic.
#[derive(Clone, Debug)]
pub struct Problem {
    /// Its own rule, or `None` for a value the front end reports under its rule for a
    /// value a key does not take.
    pub rule: Option<&'static Rule>,
    pub message: String,
    pub label: &'static str,
    /// `None` where the help names the key, which each front end writes in its syntax.
    pub help: Option<String>,
}

impl Problem {
    /// The diagnostic at `span`; `value_rule` is the front end's rule for a value a key
    /// does not take.
    pub fn at(self, value_rule: &'static Rule, file: FileId, span: Span) -> Diagnostic {
        let d = Diagnostic::new(self.rule.unwrap_or(value_rule), file, span, self.message)
            .label(self.label);
        match self.help {
            Some(help) => d.help(help),
            None => d,
        }
    }
}

/// One role of an `audience`.
pub fn audience(who: &str) -> Result<(), Problem> {
    if AUDIENCES.contains(&who) {
        return Ok(());
    }
    Err(Problem {
        rule: None,
        message: format!("an audience is `user` or `assistant`, not `{who}`"),
        label: "not a role MCP knows",
        help: Some(
            names::did_you_mean(who, AUDIENCES.iter().copied())
                .unwrap_or_else(|| "write `user`, `assistant`, or both".into()),
        ),
    })
}

/// A `priority`: from 0 (entirely optional) to 1 (effectively required).
pub fn priority(p: f64) -> Result<f64, Problem> {
    if (0.0..=1.0).contains(&p) {
        return Ok(p);
    }
    Err(Problem {
        rule: Some(&r::PRIORITY_OUT_OF_RANGE),
        message: format!("a priority is from 0 to 1, and this one is {p}"),
        label: "out of range",
        help: None,
    })
}

/// A last-modified time, which MCP gives as an ISO 8601 date and time
/// (`2026-12-01T10:00:00Z`, with seconds, fractions and an offset as they come), or a
/// date alone.
pub fn last_modified(time: &str) -> Result<(), Problem> {
    if is_iso_8601(time) {
        return Ok(());
    }
    Err(Problem {
        rule: None,
        message: format!(
            "a last-modified time is an ISO 8601 time such as \"2026-12-01T10:00:00Z\", not `{time}`"
        ),
        label: "not an ISO 8601 time",
        help: None,
    })
}

/// The source of an icon: a `file:` one is served as written, and clients reject it.
pub fn icon_source(src: &str) -> Option<Problem> {
    src.get(..5)
        .is_some_and(|s| s.eq_ignore_ascii_case("file:"))
        .then(|| Problem {
            rule: Some(&r::FILE_ICON_SOURCE),
            message:
                "MCP clients must reject icons with a `file:` source; this one is served as written"
                    .into(),
            label: "a `file:` icon",
            help: Some(
                "give an `https:` address, or the image itself as `data:image/png;base64,...`"
                    .into(),
            ),
        })
}

/// `YYYY-MM-DD`, optionally followed by `T` (or a space) and `hh:mm`, `:ss`, a fraction,
/// and `Z` or `±hh:mm` (none for a local time). The ranges are checked as far as the shape goes (a month from 1
/// to 12, a day from 1 to 31, an hour to 23, minutes and seconds to 59, or 60 for a leap
/// second).
fn is_iso_8601(text: &str) -> bool {
    let b = text.as_bytes();
    let number = |from: usize, len: usize, max: u32| -> Option<u32> {
        let digits = b.get(from..from + len)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = digits
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        (n <= max).then_some(n)
    };
    let date = number(0, 4, 9999).is_some()
        && b.get(4) == Some(&b'-')
        && number(5, 2, 12).is_some_and(|m| m >= 1)
        && b.get(7) == Some(&b'-')
        && number(8, 2, 31).is_some_and(|d| d >= 1);
    if !date {
        return false;
    }
    if b.len() == 10 {
        return true;
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || number(11, 2, 23).is_none()
        || b.get(13) != Some(&b':')
        || number(14, 2, 59).is_none()
    {
        return false;
    }
    let mut at = 16;
    if b.get(at) == Some(&b':') {
        if number(at + 1, 2, 60).is_none() {
            return false;
        }
        at += 3;
        if matches!(b.get(at), Some(b'.' | b',')) {
            let digits = b[at + 1..]
                .iter()
                .take_while(|d| d.is_ascii_digit())
                .count();
            if digits == 0 {
                return false;
            }
            at += 1 + digits;
        }
    }
    match b.get(at) {
        Some(b'Z' | b'z') => at + 1 == b.len(),
        Some(b'+' | b'-') => {
            number(at + 1, 2, 23).is_some()
                && b.get(at + 3) == Some(&b':')
                && number(at + 4, 2, 59).is_some()
                && at + 6 == b.len()
        }
        None => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_mcp_gives_are_iso_8601() {
        for ok in [
            "2025-01-12T15:00:58Z",
            "2026-12-01T10:00:00Z",
            "2026-12-01",
            "2026-12-01T10:00Z",
            "2026-12-01T10:00:00.123Z",
            "2026-12-01T10:00:00+02:00",
            "2026-12-01 10:00:00-05:30",
            "2016-12-31T23:59:60Z",
            "2026-12-01T10:00:00",
        ] {
            assert!(is_iso_8601(ok), "{ok}");
        }
        for bad in [
            "",
            "yesterday",
            "2026",
            "2026-13-01",
            "2026-12-00",
            "2026-12-01T",
            "2026-12-01T25:00:00Z",
            "2026-12-01T10:00:00.Z",
            "2026-12-01T10:00:00+0200",
            "12/01/2026",
            "2026-12-01T10:00:00Zjunk",
        ] {
            assert!(!is_iso_8601(bad), "{bad}");
        }
    }

    #[test]
    fn audiences_and_priorities_mcp_knows() {
        assert!(audience("user").is_ok() && audience("assistant").is_ok());
        let help = audience("asistant").err().and_then(|p| p.help);
        assert_eq!(help.as_deref(), Some("did you mean `assistant`?"));
        assert_eq!(priority(0.8).ok(), Some(0.8));
        assert_eq!(
            priority(8.0).err().and_then(|p| p.rule).map(|r| r.code),
            Some("P0809")
        );
        assert!(icon_source("FILE:///icon.png").is_some());
        assert!(icon_source("https://example.com/icon.png").is_none());
    }
}
