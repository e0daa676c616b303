//! What a value taken from a requested URI may hold: the one percent-decoding it gets,
//! and the checks it passes afterwards. The matcher, the file reader and the backend URL
//! builder all judge values by these same rules, so a value one of them accepts is never
//! read differently by another.

use std::fmt;

/// Why a value was refused. Each is a security refusal: the request is answered with an
/// error and no other template is tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A `%` not followed by two hexadecimal digits.
    BadPercentEncoding,
    /// The decoded bytes are not UTF-8 (this covers overlong forms such as `%c0%ae`).
    InvalidUtf8,
    /// A NUL byte (`%00`).
    Nul,
    /// A control character other than NUL (`%01` to `%1f`, `%7f`).
    ControlCharacter,
    /// A backslash, which some systems read as a path separator.
    Backslash,
    /// A `.` or `..` segment.
    DotSegment,
    /// An empty segment (`a//b`, or a trailing `/`).
    EmptySegment,
    /// A value that starts with `/`.
    Absolute,
    /// A segment such as `C:`, which names a drive on some systems.
    DriveLetter,
    /// A `/` in the value of a one-segment `{var}`.
    SlashInSegment,
    /// A name that starts with `.` where dotfiles are not served.
    Hidden,
    /// An `@` in a path segment sent to a backend: it reads as credentials before a host
    /// to anything that joins URLs as text.
    AtSign,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::BadPercentEncoding => "it holds a `%` that is not followed by two hex digits",
            Refusal::InvalidUtf8 => "it is not UTF-8 once percent-decoded",
            Refusal::Nul => "it holds a NUL byte",
            Refusal::ControlCharacter => "it holds a control character",
            Refusal::Backslash => "it holds a backslash",
            Refusal::DotSegment => "it holds a `.` or `..` segment",
            Refusal::EmptySegment => "it holds an empty segment",
            Refusal::Absolute => "it is an absolute path",
            Refusal::DriveLetter => "it names a drive (`C:`)",
            Refusal::SlashInSegment => "it holds a `/` where the template takes one segment",
            Refusal::Hidden => "it names a dotfile, and dotfiles are not served",
            Refusal::AtSign => "it holds an `@`, which a URL reads as credentials before a host",
        })
    }
}

/// Decodes `%XX` escapes exactly once. `+` stays `+`: URI templates encode a space as
/// `%20`, and reading `+` as a space would give one URI two meanings.
pub fn percent_decode_once(raw: &[u8]) -> Result<String, Refusal> {
    // The decoder leaves a malformed escape as it is; a server refuses it instead.
    let hex_at = |i: usize| raw.get(i).is_some_and(u8::is_ascii_hexdigit);
    let malformed = raw
        .iter()
        .enumerate()
        .any(|(i, b)| *b == b'%' && !(hex_at(i + 1) && hex_at(i + 2)));
    if malformed {
        return Err(Refusal::BadPercentEncoding);
    }
    percent_encoding::percent_decode(raw)
        .decode_utf8()
        .map(|value| value.into_owned())
        .map_err(|_| Refusal::InvalidUtf8)
}

/// The checks every decoded value passes, wherever it stands in the URI.
pub fn check_text(value: &str) -> Result<(), Refusal> {
    for c in value.chars() {
        if c == '\0' {
            return Err(Refusal::Nul);
        }
        if c.is_ascii_control() {
            return Err(Refusal::ControlCharacter);
        }
    }
    Ok(())
}

/// The checks a decoded value in the path of a URI passes: the text checks, no
/// backslash, and, split on `/`, no empty, `.` or `..` segment and no leading `/`.
pub fn check_path_value(value: &str) -> Result<(), Refusal> {
    check_text(value)?;
    if value.contains('\\') {
        return Err(Refusal::Backslash);
    }
    if value.starts_with('/') {
        return Err(Refusal::Absolute);
    }
    for segment in value.split('/') {
        check_segment(segment)?;
    }
    Ok(())
}

/// One segment of a path (no `/` in it): not empty, not `.` or `..`, no backslash.
pub fn check_segment(segment: &str) -> Result<(), Refusal> {
    if segment.is_empty() {
        return Err(Refusal::EmptySegment);
    }
    if segment == "." || segment == ".." {
        return Err(Refusal::DotSegment);
    }
    if segment.contains('\\') {
        return Err(Refusal::Backslash);
    }
    check_text(segment)
}

/// `C:` and `C:anything`: a drive on Windows, refused in file paths everywhere so a
/// root behaves the same on every system.
pub fn names_a_drive(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_happens_once() {
        assert_eq!(percent_decode_once(b"%252e%252e").as_deref(), Ok("%2e%2e"));
        assert_eq!(percent_decode_once(b"a%2Fb+c").as_deref(), Ok("a/b+c"));
        assert_eq!(percent_decode_once(b"%e2%82%ac").as_deref(), Ok("€"));
    }

    #[test]
    fn malformed_escapes_and_overlong_forms_are_refused() {
        assert_eq!(percent_decode_once(b"%2"), Err(Refusal::BadPercentEncoding));
        assert_eq!(
            percent_decode_once(b"%zz"),
            Err(Refusal::BadPercentEncoding)
        );
        assert_eq!(percent_decode_once(b"%c0%ae"), Err(Refusal::InvalidUtf8));
        assert_eq!(percent_decode_once(b"%ff"), Err(Refusal::InvalidUtf8));
    }

    #[test]
    fn path_values_are_checked_segment_by_segment() {
        assert_eq!(check_path_value("a/b.md"), Ok(()));
        assert_eq!(check_path_value("a/../b"), Err(Refusal::DotSegment));
        assert_eq!(check_path_value("./b"), Err(Refusal::DotSegment));
        assert_eq!(check_path_value("a//b"), Err(Refusal::EmptySegment));
        assert_eq!(check_path_value("a/"), Err(Refusal::EmptySegment));
        assert_eq!(check_path_value("/etc"), Err(Refusal::Absolute));
        assert_eq!(check_path_value("a\\b"), Err(Refusal::Backslash));
        assert_eq!(check_path_value("a\0b"), Err(Refusal::Nul));
        assert_eq!(check_path_value("a\nb"), Err(Refusal::ControlCharacter));
        assert_eq!(check_path_value("%2e%2e"), Ok(()));
        assert!(names_a_drive("C:"));
        assert!(!names_a_drive("notes:1"));
    }
}
