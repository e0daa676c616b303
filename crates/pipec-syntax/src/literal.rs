//! Decoding of literals: numbers with size and duration units, escaped strings, and
//! dedented raw strings. Each decoder returns the value or a message for P0002.

/// What a number token means.
#[derive(Clone, Debug, PartialEq)]
pub enum Number {
    Int(i64),
    Float(f64),
    /// Bytes.
    Size(u64),
    /// Milliseconds.
    Duration(u64),
}

pub const SIZE_UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
];

/// A number of bytes as a size literal is written: in the largest unit it is a whole
/// number of (`200kb`, `2mib`, `1234b`).
pub fn size_text(bytes: u64) -> String {
    SIZE_UNITS
        .iter()
        .filter(|(_, unit)| bytes > 0 && bytes.is_multiple_of(*unit))
        .max_by_key(|(_, unit)| *unit)
        .map_or_else(
            || format!("{bytes}b"),
            |(name, unit)| format!("{}{name}", bytes / unit),
        )
}

pub const DURATION_UNITS: &[(&str, u64)] = &[
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

pub fn decode_number(text: &str) -> Result<Number, String> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(body.len());
    let (magnitude, unit) = body.split_at(digits_end);
    let clean: String = magnitude.chars().filter(|c| *c != '_').collect();
    if clean.is_empty() || clean.ends_with('.') || clean.matches('.').count() > 1 {
        return Err(format!("`{text}` is not a number"));
    }
    let is_float = clean.contains('.');
    if unit.is_empty() {
        if is_float {
            let v: f64 = clean
                .parse()
                .map_err(|_| format!("`{text}` is not a number"))?;
            return Ok(Number::Float(if negative { -v } else { v }));
        }
        let v: i64 = clean
            .parse()
            .map_err(|_| format!("`{text}` does not fit in a 64-bit integer"))?;
        return Ok(Number::Int(if negative { -v } else { v }));
    }
    if let Some((_, factor)) = SIZE_UNITS.iter().find(|(u, _)| *u == unit) {
        if negative {
            return Err(format!("a size cannot be negative: `{text}`"));
        }
        let v: f64 = clean
            .parse()
            .map_err(|_| format!("`{text}` is not a size"))?;
        let bytes = (v * *factor as f64).floor();
        if !bytes.is_finite() || bytes > u64::MAX as f64 {
            return Err(format!("`{text}` is too large"));
        }
        return Ok(Number::Size(bytes as u64));
    }
    if let Some((_, factor)) = DURATION_UNITS.iter().find(|(u, _)| *u == unit) {
        if negative {
            return Err(format!("a duration cannot be negative: `{text}`"));
        }
        if is_float {
            return Err(format!(
                "a duration takes a whole number: write `{text}` in a smaller unit"
            ));
        }
        let v: u64 = clean
            .parse()
            .map_err(|_| format!("`{text}` is too large"))?;
        return v
            .checked_mul(*factor)
            .map(Number::Duration)
            .ok_or_else(|| format!("`{text}` is too large"));
    }
    Err(format!(
        "`{text}` has an unknown unit `{unit}`; sizes take b, kb, mb, gb, kib, mib, gib and durations ms, s, m, h, d"
    ))
}

/// A decoded string with its map of (value offset, offset in the literal's text).
pub struct Decoded {
    pub value: String,
    pub map: Vec<(u32, u32)>,
}

/// An escape that could not be decoded: its byte range within the body, and why.
pub struct BadEscape {
    pub start: usize,
    pub end: usize,
    pub message: String,
}

/// Decodes the body of a regular string (between the quotes). Offsets in the map are
/// relative to the body.
pub fn decode_string(body: &str) -> Result<Decoded, BadEscape> {
    let mut value = String::with_capacity(body.len());
    let mut map = vec![(0u32, 0u32)];
    let mut chars = body.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            value.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else {
            return Err(BadEscape {
                start: i,
                end: body.len(),
                message: "a string cannot end with a lone `\\`".into(),
            });
        };
        let decoded = match e {
            '"' => '"',
            '\\' => '\\',
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'u' => decode_unicode_escape(body, i, &mut chars)?,
            other => {
                return Err(BadEscape {
                    start: i,
                    end: i + 1 + other.len_utf8(),
                    message: format!(
                        "unknown escape `\\{other}`; strings take \\\" \\\\ \\n \\t \\r \\u{{...}}"
                    ),
                });
            }
        };
        value.push(decoded);
        let next = chars.peek().map_or(body.len(), |(j, _)| *j);
        map.push((value.len() as u32, next as u32));
    }
    Ok(Decoded { value, map })
}

fn decode_unicode_escape(
    body: &str,
    start: usize,
    chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
) -> Result<char, BadEscape> {
    // The whole escape, up to its closing brace (or the end of the string).
    let escape_end = |from: usize| body[from..].find('}').map_or(body.len(), |n| from + n + 1);
    let bad = |end: usize, message: &str| BadEscape {
        start,
        end,
        message: message.to_string(),
    };
    const FORM: &str = "a unicode escape is written `\\u{...}` with 1 to 6 hex digits";
    match chars.next() {
        Some((_, '{')) => {}
        Some((j, _)) => return Err(bad(j + 1, FORM)),
        None => return Err(bad(body.len(), FORM)),
    }
    let mut hex = String::new();
    loop {
        match chars.next() {
            Some((_, '}')) => break,
            Some((_, c)) if c.is_ascii_hexdigit() && hex.len() < 6 => hex.push(c),
            Some((j, _)) => return Err(bad(escape_end(j), FORM)),
            None => return Err(bad(body.len(), FORM)),
        }
    }
    let end = chars.peek().map_or(body.len(), |(j, _)| *j);
    if hex.is_empty() {
        return Err(bad(end, FORM));
    }
    match u32::from_str_radix(&hex, 16).ok().map(char::from_u32) {
        Some(Some(c)) => Ok(c),
        Some(None) if u32::from_str_radix(&hex, 16).is_ok_and(|v| v > 0x10FFFF) => {
            Err(bad(end, "a unicode escape must be at most `\\u{10FFFF}`"))
        }
        _ => Err(bad(
            end,
            "`\\u{D800}` to `\\u{DFFF}` are surrogates, not characters",
        )),
    }
}

/// Dedents the body of a raw string: drops the newline right after the opener, the
/// common indentation of the non-blank lines, and a final whitespace-only line.
/// Offsets in the map are relative to the body.
pub fn dedent_raw(body: &str) -> Decoded {
    let (content, skip) = if let Some(rest) = body.strip_prefix("\r\n") {
        (rest, 2)
    } else if let Some(rest) = body.strip_prefix('\n') {
        (rest, 1)
    } else {
        // A one-line raw string is taken as written.
        return Decoded {
            value: body.to_string(),
            map: vec![(0, 0)],
        };
    };
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut offset = skip;
    for line in content.split('\n') {
        lines.push((offset, line));
        offset += line.len() + 1;
    }
    if let Some((_, last)) = lines.last()
        && last.trim().is_empty()
        && lines.len() > 1
    {
        lines.pop();
    }
    let indent = lines
        .iter()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(_, l)| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    let mut value = String::with_capacity(content.len());
    let mut map = Vec::with_capacity(lines.len());
    for (n, (start, line)) in lines.iter().enumerate() {
        if n > 0 {
            value.push('\n');
        }
        let cut = indent.min(line.len() - line.trim_start_matches([' ', '\t']).len());
        map.push((value.len() as u32, (start + cut) as u32));
        value.push_str(&line[cut..]);
    }
    if map.is_empty() {
        map.push((0, skip as u32));
    }
    Decoded { value, map }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_sizes_and_durations() {
        assert_eq!(decode_number("42"), Ok(Number::Int(42)));
        assert_eq!(decode_number("-3"), Ok(Number::Int(-3)));
        assert_eq!(decode_number("0.8"), Ok(Number::Float(0.8)));
        assert_eq!(decode_number("200kb"), Ok(Number::Size(200_000)));
        assert_eq!(size_text(200_000), "200kb");
        assert_eq!(size_text(2 << 20), "2mib");
        assert_eq!(size_text(1234), "1234b");
        assert_eq!(size_text(0), "0b");
        assert_eq!(decode_number("1mib"), Ok(Number::Size(1_048_576)));
        assert_eq!(decode_number("1.5mb"), Ok(Number::Size(1_500_000)));
        assert_eq!(decode_number("500ms"), Ok(Number::Duration(500)));
        assert_eq!(decode_number("5m"), Ok(Number::Duration(300_000)));
        assert_eq!(decode_number("2d"), Ok(Number::Duration(172_800_000)));
        assert!(decode_number("12qq").is_err());
        assert!(decode_number("1.5s").is_err());
        assert!(decode_number("-1kb").is_err());
        assert!(decode_number("99999999999999999999").is_err());
    }

    #[test]
    fn escapes() {
        let d = decode_string(r#"a\"b\n\u{41}"#).ok().map(|d| d.value);
        assert_eq!(d.as_deref(), Some("a\"b\nA"));
        assert!(decode_string(r"\q").is_err());
        assert!(decode_string(r"\u{zz}").is_err());
        assert!(decode_string(r"\u{110000}").is_err());
    }

    #[test]
    fn raw_strings_are_dedented() {
        let d = dedent_raw("\n    hello\n      world\n    ");
        assert_eq!(d.value, "hello\n  world");
        assert_eq!(dedent_raw("## Hello").value, "## Hello");
        // The map points each line at its first kept character.
        assert_eq!(d.map, vec![(0, 5), (6, 15)]);
    }
}
