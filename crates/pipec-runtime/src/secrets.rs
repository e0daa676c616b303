//! Secrets: read from the environment when an attempt starts, handed to the places that
//! need them (server env, headers, model keys, call arguments, exec stdin), and scrubbed
//! from everything else. A secret never reaches the store, events, output or error texts.
//!
//! Scrubbing finds a secret in any form an encoder may give it, without listing the
//! forms: the text is searched as it is, and through views of it with one or two layers
//! of escapes decoded — JSON string escapes (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`,
//! `\t`, and `\uXXXX` for any character, in either case of hex digits, with surrogate
//! pairs beyond the basic plane) and percent escapes (`%2F`, `%2f`) — each view knowing
//! where each of its bytes came from in the text. An encoder may escape any character
//! or none (Go's escapes `&`, `<` and `>`, Python's everything beyond ASCII), and any
//! mixture of escaped and plain characters decodes to the secret in a view; a secret
//! escaped twice (a command that prints its JSON stdin as a JSON string), a URL inside
//! JSON and JSON inside a URL are views of two layers. In percent-encoded text a space
//! may also be `+` (HTML forms). A secret of [`MIN_BASE64_LEN`] bytes or more is also
//! found base64-encoded, standard or URL-safe alphabet, padded or not, starting at any
//! of the three byte offsets of a base64 stream (`Basic` credentials hold a password
//! after `user:`); the characters that carry some of its bits and the padding go too.
//! Object keys are scrubbed like values. Texts are scrubbed whole, before they are cut
//! (an error's stderr tail), so a cut never leaves half a secret behind; a stderr tail
//! whose start was cut from a longer stream also loses a secret's end at its start.
//!
//! The search is one pass over each view: a table of the two-byte starts of every form
//! searched for (the secret's bytes, its base64 runs) rules out almost every position
//! at once, so the cost does not grow with the number of secrets or forms.
//!
//! Secrets shorter than [`MIN_SCRUBBED_LEN`] bytes are not searched for in free text:
//! scrubbing every `ab` from every message would make them unreadable. They are still
//! never written as values (the store and the plan hold placeholders), but a command
//! that prints one gets it through; the run warns about such a secret when it starts.
//! No piece of a secret shorter than that is scrubbed either, and a piece is scrubbed
//! only where a text was cut: a message that ends with `Bearer` is left alone even when
//! a secret starts with `Bearer `.

use std::borrow::Cow;

use serde_json::Value;

/// Secrets shorter than this are not searched for in free text.
pub const MIN_SCRUBBED_LEN: usize = 4;

/// Secrets at least this long are also searched for base64-encoded. Every base64 run of
/// such a secret has 10 characters or more, which random base64 (an image a tool
/// returns) holds by chance about once in 10^18 positions; shorter runs would scrub
/// pieces of ordinary blobs.
pub const MIN_BASE64_LEN: usize = 8;

/// Every secret value resolved in this attempt, for scrubbing.
#[derive(Clone, Debug, Default)]
pub struct Scrubber {
    /// The secrets' names, by index.
    names: Vec<String>,
    /// What is searched for, ordered by their first two bytes, longest first among those.
    needles: Vec<Needle>,
    /// One bit for each two-byte start some needle has (empty while there is none).
    starts: Vec<u64>,
    /// Names of secrets too short to be searched for.
    short: Vec<String>,
}

/// One run of bytes that, found in a view, is (part of) a secret.
#[derive(Clone, Debug)]
struct Needle {
    bytes: Vec<u8>,
    /// Its first two bytes, the key of the start table.
    key: u16,
    secret: usize,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The secret itself (or with `+` for its spaces).
    Plain,
    /// The base64 characters made of the secret's bits alone; `before` and `after` say
    /// whether the character just before and just after them hold some of its bits too.
    Base64 { before: bool, after: bool },
}

/// A piece of the original text to replace, and the secret it holds.
#[derive(Clone, Copy, Debug)]
struct Hit {
    start: usize,
    end: usize,
    secret: usize,
}

impl Scrubber {
    pub fn add(&mut self, name: &str, value: &str) {
        if value.len() < MIN_SCRUBBED_LEN {
            if !value.is_empty() && !self.short.iter().any(|n| n == name) {
                self.short.push(name.to_string());
            }
            return;
        }
        let secret = self.names.len();
        self.names.push(name.to_string());
        let mut forms = vec![(value.as_bytes().to_vec(), Kind::Plain)];
        if value.contains(' ') {
            forms.push((value.replace(' ', "+").into_bytes(), Kind::Plain));
        }
        if value.len() >= MIN_BASE64_LEN {
            forms.extend(base64_runs(value.as_bytes()));
        }
        for (bytes, kind) in forms {
            if self.needles.iter().any(|n| n.bytes == bytes) {
                continue;
            }
            self.needles.push(Needle {
                key: key(&bytes),
                bytes,
                secret,
                kind,
            });
        }
        self.needles
            .sort_by_key(|n| (n.key, std::cmp::Reverse(n.bytes.len())));
        self.starts = vec![0; 1 << 10];
        for n in &self.needles {
            self.starts[usize::from(n.key >> 6)] |= 1 << (n.key & 63);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Secrets too short to be scrubbed from free text, by name.
    pub fn too_short(&self) -> &[String] {
        &self.short
    }

    /// The text with every secret in it, in any encoding, replaced by `secret(NAME)`.
    pub fn scrub(&self, text: &str) -> String {
        if self.needles.is_empty() {
            return text.to_string();
        }
        let mut hits = Vec::new();
        for view in views(text) {
            self.find(&view, &mut hits);
        }
        self.replace(text, hits)
    }

    /// Scrubs a text cut from the end of a longer stream (a stderr tail), which may
    /// begin inside a secret: whole secrets as [`Scrubber::scrub`] does, and a secret's
    /// end at the text's start when it is at least [`MIN_SCRUBBED_LEN`] bytes long.
    pub fn scrub_tail(&self, text: &str) -> String {
        if self.needles.is_empty() {
            return text.to_string();
        }
        let mut hits = Vec::new();
        for view in views(text) {
            self.find(&view, &mut hits);
            if let Some(hit) = self.end_at_start(&view) {
                hits.push(hit);
            }
        }
        self.replace(text, hits)
    }

    /// The name of a secret whose placeholder the text holds: a text that was scrubbed
    /// before it was stored (a link's URI) and lost the secret it held.
    pub fn placeholder_in(&self, text: &str) -> Option<&str> {
        self.names
            .iter()
            .map(String::as_str)
            .find(|name| text.contains(&placeholder_text(name)))
    }

    /// The value with every string in it (object keys too) scrubbed.
    pub fn scrub_value(&self, v: &mut Value) {
        if !self.needles.is_empty() {
            scrub_strings(v, &|s| self.scrub(s));
        }
    }

    /// Every needle in the view, leftmost first; a found one is skipped past.
    fn find(&self, view: &View<'_>, hits: &mut Vec<Hit>) {
        let b: &[u8] = &view.bytes;
        let mut i = 0;
        while i + 1 < b.len() {
            let k = u16::from_be_bytes([b[i], b[i + 1]]);
            if self.starts[usize::from(k >> 6)] & (1 << (k & 63)) == 0 {
                i += 1;
                continue;
            }
            let first = self.needles.partition_point(|n| n.key < k);
            let found = self.needles[first..]
                .iter()
                .take_while(|n| n.key == k)
                .find(|n| b[i..].starts_with(&n.bytes));
            let Some(n) = found else {
                i += 1;
                continue;
            };
            let (start, end) = n.extent(b, i);
            hits.push(Hit {
                start: view.source(start),
                end: view.source(end),
                secret: n.secret,
            });
            i += n.bytes.len();
        }
    }

    /// The longest end of a secret (shorter than the secret, at least
    /// [`MIN_SCRUBBED_LEN`] bytes) that the view starts with.
    fn end_at_start(&self, view: &View<'_>) -> Option<Hit> {
        let b: &[u8] = &view.bytes;
        let first = *b.first()?;
        self.needles
            .iter()
            .filter(|n| n.kind == Kind::Plain)
            .filter_map(|n| {
                let len = (MIN_SCRUBBED_LEN..n.bytes.len()).rev().find(|len| {
                    let end = &n.bytes[n.bytes.len() - len..];
                    end[0] == first && b.starts_with(end)
                })?;
                Some((len, n.secret))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(len, secret)| Hit {
                start: 0,
                end: view.source(len),
                secret,
            })
    }

    /// The text with the hits (from every view, overlapping or not) replaced.
    fn replace(&self, text: &str, mut hits: Vec<Hit>) -> String {
        if hits.is_empty() {
            return text.to_string();
        }
        hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut current: Option<Hit> = None;
        for hit in hits {
            if let Some(c) = current.as_mut()
                && hit.start < c.end
            {
                c.end = c.end.max(hit.end);
                continue;
            }
            if let Some(c) = current.replace(hit) {
                at = self.put(text, &mut out, at, c);
            }
        }
        if let Some(c) = current {
            at = self.put(text, &mut out, at, c);
        }
        out.push_str(&text[at..]);
        out
    }

    /// Copies the text up to the hit, then its placeholder; where the copy goes on.
    fn put(&self, text: &str, out: &mut String, at: usize, hit: Hit) -> usize {
        let start = pipec_base::source::floor_char_boundary(text, hit.start).max(at);
        let end = ceil_char_boundary(text, hit.end).max(start);
        out.push_str(&text[at..start]);
        out.push_str(&placeholder_text(&self.names[hit.secret]));
        end
    }
}

/// Every string of a value, object keys included, passed through `scrub`.
pub fn scrub_strings(v: &mut Value, scrub: &dyn Fn(&str) -> String) {
    match v {
        Value::String(s) => {
            let scrubbed = scrub(s);
            if scrubbed != *s {
                *s = scrubbed;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| scrub_strings(i, scrub)),
        Value::Object(m) => {
            if m.keys().any(|k| scrub(k) != *k) {
                for (k, mut item) in std::mem::take(m) {
                    scrub_strings(&mut item, scrub);
                    m.insert(scrub(&k), item);
                }
            } else {
                m.values_mut().for_each(|i| scrub_strings(i, scrub));
            }
        }
        _ => {}
    }
}

impl Needle {
    /// Where a needle found at `at` begins and ends in the view: a base64 run takes the
    /// characters beside it that hold some of the secret's bits, and the padding.
    fn extent(&self, b: &[u8], at: usize) -> (usize, usize) {
        let mut start = at;
        let mut end = at + self.bytes.len();
        if let Kind::Base64 { before, after } = self.kind {
            if before && start > 0 && is_base64(b[start - 1]) {
                start -= 1;
            }
            if after && end < b.len() && is_base64(b[end]) {
                end += 1;
            }
            let mut padding = 0;
            while padding < 2 && end < b.len() && b[end] == b'=' {
                end += 1;
                padding += 1;
            }
        }
        (start, end)
    }
}

fn key(bytes: &[u8]) -> u16 {
    u16::from_be_bytes([
        bytes.first().copied().unwrap_or(0),
        bytes.get(1).copied().unwrap_or(0),
    ])
}

fn ceil_char_boundary(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset += 1;
    }
    offset
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"+/-_".contains(&b)
}

/// The base64 runs of a secret: for each of the three offsets it may start at in a
/// stream (its first byte the first, second or third of a group of three), the
/// characters made of its bits alone, in the standard and the URL-safe alphabet.
fn base64_runs(secret: &[u8]) -> Vec<(Vec<u8>, Kind)> {
    let mut out = Vec::new();
    for offset in 0..3usize {
        let mut stream = vec![0u8; offset];
        stream.extend_from_slice(secret);
        let encoded = pipec_base::base64::encode(&stream).into_bytes();
        let (first_bit, end_bit) = (8 * offset, 8 * (offset + secret.len()));
        let first = first_bit.div_ceil(6);
        let end = end_bit / 6;
        let Some(run) = encoded.get(first..end) else {
            continue;
        };
        let kind = Kind::Base64 {
            before: first_bit % 6 != 0,
            after: end_bit % 6 != 0,
        };
        let url_safe: Vec<u8> = run
            .iter()
            .map(|&c| match c {
                b'+' => b'-',
                b'/' => b'_',
                c => c,
            })
            .collect();
        out.push((run.to_vec(), kind));
        out.push((url_safe, kind));
    }
    out
}

/// The text, or the text with a layer (or two) of escapes decoded, and for each byte
/// the offset in the text of the escape (or byte) it came from.
struct View<'a> {
    bytes: Cow<'a, [u8]>,
    /// `None`: the text itself. Else one offset per byte, and one more for the end.
    from: Option<Vec<u32>>,
}

impl View<'_> {
    fn source(&self, i: usize) -> usize {
        match &self.from {
            None => i,
            Some(from) => from.get(i).map_or(usize::MAX, |&o| o as usize),
        }
    }
}

#[derive(Clone, Copy)]
enum Layer {
    Json,
    Percent,
}

impl Layer {
    fn marker(self) -> u8 {
        match self {
            Layer::Json => b'\\',
            Layer::Percent => b'%',
        }
    }

    /// Decodes the escape `rest` starts with into `out`: its length in `rest`, or `None`
    /// when `rest` does not start with one.
    fn escape(self, rest: &[u8], out: &mut Vec<u8>) -> Option<usize> {
        match self {
            Layer::Percent => {
                out.push(hex(rest.get(1..3)?)? as u8);
                Some(3)
            }
            Layer::Json => {
                let short = match rest.get(1)? {
                    b'u' => return unicode_escape(rest, out),
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    c @ (b'"' | b'\\' | b'/') => *c,
                    _ => return None,
                };
                out.push(short);
                Some(2)
            }
        }
    }
}

/// `\uXXXX`, or a surrogate pair `\uD83D\uDD11`, as UTF-8.
fn unicode_escape(rest: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let unit = hex(rest.get(2..6)?)?;
    let (code, len) = if (0xD800..0xDC00).contains(&unit) {
        let low = rest
            .get(6..12)
            .filter(|r| r.starts_with(b"\\u"))
            .and_then(|r| hex(&r[2..]))
            .filter(|low| (0xDC00..0xE000).contains(low))?;
        (0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), 12)
    } else {
        (unit, 6)
    };
    let c = char::from_u32(code)?;
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    Some(len)
}

/// Hex digits of either case as a number.
fn hex(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &d| {
        let v = (d as char).to_digit(16)?;
        Some(n * 16 + v)
    })
}

/// The view with one layer of escapes decoded, or `None` when it has none.
fn decode<'a>(parent: &View<'_>, layer: Layer) -> Option<View<'a>> {
    let b: &[u8] = &parent.bytes;
    let marker = layer.marker();
    if !b.contains(&marker) {
        return None;
    }
    let mut bytes = Vec::with_capacity(b.len());
    let mut from: Vec<u32> = Vec::with_capacity(b.len() + 1);
    let mut decoded = false;
    let mut i = 0;
    while i < b.len() {
        let origin = parent.source(i) as u32;
        if b[i] == marker
            && let Some(len) = layer.escape(&b[i..], &mut bytes)
        {
            from.resize(bytes.len(), origin);
            decoded = true;
            i += len;
            continue;
        }
        bytes.push(b[i]);
        from.push(origin);
        i += 1;
    }
    from.push(parent.source(b.len()) as u32);
    decoded.then_some(View {
        bytes: Cow::Owned(bytes),
        from: Some(from),
    })
}

/// The text and its views with one and two layers of escapes decoded (those that
/// differ from the view they were decoded from).
fn views(text: &str) -> Vec<View<'_>> {
    let raw = View {
        bytes: Cow::Borrowed(text.as_bytes()),
        from: None,
    };
    // Offsets are kept in 32 bits; a text too long for them is searched as it is.
    if u32::try_from(text.len()).is_err() {
        return vec![raw];
    }
    let mut out = Vec::new();
    for first in [Layer::Json, Layer::Percent] {
        if let Some(once) = decode(&raw, first) {
            for second in [Layer::Json, Layer::Percent] {
                if let Some(twice) = decode(&once, second) {
                    out.push(twice);
                }
            }
            out.push(once);
        }
    }
    out.push(raw);
    out
}

/// A session to an MCP server scrubs the texts of its errors: its messages whole, a
/// server's stderr tail as the tail it is.
impl pipec_mcp::Redaction for Scrubber {
    fn whole(&self, text: &str) -> String {
        self.scrub(text)
    }

    fn tail(&self, text: &str) -> String {
        self.scrub_tail(text)
    }
}

/// What a secret is replaced with in texts: its name, as the language writes it.
fn placeholder_text(name: &str) -> String {
    format!("secret({name})")
}

/// The last `keep` bytes of a scrubbed text (on a character boundary), widened to the
/// start of a placeholder the cut would split, so it reads `secret(NAME)`.
pub fn tail(text: &str, keep: usize) -> &str {
    const OPEN: &str = "secret(";
    let mut start = pipec_base::source::floor_char_boundary(text, text.len().saturating_sub(keep));
    // A placeholder that begins before the cut, or that the cut falls inside.
    let window =
        pipec_base::source::floor_char_boundary(text, (start + OPEN.len()).min(text.len()));
    if let Some(open) = text[..window].rfind(OPEN)
        && open < start
        && text[open..]
            .find(')')
            .is_some_and(|close| open + close >= start)
    {
        start = open;
    }
    &text[start..]
}

/// The placeholder a secret is stored as.
pub fn placeholder(name: &str) -> Value {
    serde_json::json!({ "$secret": name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrubbed_text_names_the_secret_it_lost() {
        let mut s = Scrubber::default();
        s.add("CRM_TOKEN", "cnry-1234");
        let uri = s.scrub("mcp://crm/deals/cnry-1234/activity");
        assert_eq!(uri, "mcp://crm/deals/secret(CRM_TOKEN)/activity");
        assert_eq!(s.placeholder_in(&uri), Some("CRM_TOKEN"));
        assert_eq!(s.placeholder_in("mcp://crm/deals/D1/activity"), None);
        assert_eq!(
            s.placeholder_in("mcp://crm/deals/secret(OTHER)/activity"),
            None
        );
    }

    #[test]
    fn secrets_are_scrubbed_in_text_and_values() {
        let mut s = Scrubber::default();
        s.add("TOKEN", "canary-123/x");
        assert_eq!(
            s.scrub("auth canary-123/x failed"),
            "auth secret(TOKEN) failed"
        );
        assert_eq!(s.scrub("url?k=canary-123%2Fx"), "url?k=secret(TOKEN)");
        assert_eq!(s.scrub(r"a canary-123\/x"), "a secret(TOKEN)");
        let mut v = serde_json::json!({ "a": ["canary-123/x"] });
        s.scrub_value(&mut v);
        assert_eq!(v, serde_json::json!({ "a": ["secret(TOKEN)"] }));
    }

    #[test]
    fn a_tail_that_starts_inside_a_secret_loses_that_part() {
        let mut s = Scrubber::default();
        s.add("K", "0123456789");
        assert_eq!(s.scrub_tail("56789 end"), "secret(K) end");
        assert_eq!(s.scrub_tail("log: 0123456789 end"), "log: secret(K) end");
        // Escaped, as a tail of a JSON log line.
        s.add("Q", "say \"hello\" now");
        assert_eq!(s.scrub_tail(r#"hello\" now", next"#), r#"secret(Q)", next"#);
        // Shorter pieces than the minimum are left alone.
        assert_eq!(s.scrub_tail("89 end"), "89 end");
        // A tail ends where its stream ended: the beginning of a secret there stays.
        assert_eq!(s.scrub_tail("log: 012345"), "log: 012345");
    }

    #[test]
    fn a_message_ending_with_a_secrets_first_word_keeps_it() {
        let mut s = Scrubber::default();
        s.add("KB_AUTH", "Bearer kb-7f3a9c");
        let message = "the server `kb` answered HTTP 401: Bearer";
        assert_eq!(s.scrub(message), message);
        assert_eq!(s.scrub_tail("Bearer realm=\"kb\""), "Bearer realm=\"kb\"");
        assert_eq!(s.scrub("sent Bearer kb-7f3a9c"), "sent secret(KB_AUTH)");
    }

    #[test]
    fn a_tail_never_splits_a_placeholder() {
        let text = "aaaa secret(KEY) bbbb";
        assert_eq!(tail(text, 8), "secret(KEY) bbbb");
        assert_eq!(tail(text, 13), "secret(KEY) bbbb", "a cut inside `secret(`");
        assert_eq!(tail(text, 10), "secret(KEY) bbbb", "a cut inside the name");
        assert_eq!(tail(text, 4), "bbbb");
        assert_eq!(tail(text, 100), text);
    }

    /// Scrubs `text` with the one secret `K`, and says what is left.
    fn scrubbed(secret: &str, text: &str) -> String {
        let mut s = Scrubber::default();
        s.add("K", secret);
        s.scrub(text)
    }

    #[test]
    fn characters_a_json_encoder_chose_to_escape_are_scrubbed() {
        // Go escapes `&`, `<` and `>`.
        assert_eq!(
            scrubbed("pa&ss<word>", r#"{"echo":"pa\u0026ss\u003cword\u003e"}"#),
            r#"{"echo":"secret(K)"}"#
        );
        // Every character as `\uXXXX`, in either case, and a mixture of both.
        let every: String = "pa&ss<word>"
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    format!("\\u{:04x}", c as u32)
                } else {
                    format!("\\u{:04X}", c as u32)
                }
            })
            .collect();
        assert_eq!(scrubbed("pa&ss<word>", &every), "secret(K)");
        let mixed = r#"p\u0061&s\u0073<w\u006Frd>"#;
        assert_eq!(scrubbed("pa&ss<word>", mixed), "secret(K)");
    }

    #[test]
    fn the_short_json_escapes_are_scrubbed() {
        let secret = "q\"b\\s/f\u{8}\u{c}\n\r\tz";
        let all = r#"x q\"b\\s\/f\b\f\n\r\tz y"#;
        assert_eq!(scrubbed(secret, all), "x secret(K) y");
        // `/` plain, and `\t` as `\u0009`.
        let other = r#"q\"b\\s/f\b\f\n\r\u0009z"#;
        assert_eq!(scrubbed(secret, other), "secret(K)");
    }

    #[test]
    fn characters_beyond_the_basic_plane_as_surrogate_pairs_are_scrubbed() {
        let secret = "key🔑wörd";
        assert_eq!(
            scrubbed(secret, r#""key\ud83d\udd11w\u00f6rd""#),
            r#""secret(K)""#
        );
        assert_eq!(
            scrubbed(secret, r#""key\uD83D\uDD11w\u00F6rd""#),
            r#""secret(K)""#
        );
        // A pair split by something else is no character, and no secret.
        let split = r#"key\ud83d \udd11w\u00f6rd"#;
        assert_eq!(scrubbed(secret, split), split);
    }

    #[test]
    fn every_encoding_pipec_writes_is_scrubbed() {
        let secret = "pa\"ss\\wörd\n🔑x";
        let mut s = Scrubber::default();
        s.add("K", secret);
        let json = serde_json::to_string(&serde_json::json!({ "k": secret })).unwrap_or_default();
        assert_eq!(s.scrub(&json), r#"{"k":"secret(K)"}"#);
        let twice = serde_json::to_string(&json).unwrap_or_default();
        assert_eq!(s.scrub(&twice), r#""{\"k\":\"secret(K)\"}""#);
        let python = r#"{"k": "pa\"ss\\w\u00f6rd\n\ud83d\udd11x"}"#;
        assert_eq!(s.scrub(python), r#"{"k": "secret(K)"}"#);
        let mut keyed = serde_json::json!({ secret: 1, "n": { secret: secret } });
        s.scrub_value(&mut keyed);
        assert_eq!(
            keyed,
            serde_json::json!({ "secret(K)": 1, "n": { "secret(K)": "secret(K)" } })
        );
    }

    #[test]
    fn percent_escapes_in_either_case_and_plus_for_space_are_scrubbed() {
        assert_eq!(scrubbed("a/b c", "x?q=a%2fb%20c"), "x?q=secret(K)");
        assert_eq!(scrubbed("a/b c", "x?q=a%2Fb+c&r=1"), "x?q=secret(K)&r=1");
        assert_eq!(scrubbed("a/b c", "x?q=a/b%20c"), "x?q=secret(K)");
        assert_eq!(scrubbed("wörd-x", "q=w%C3%B6rd-x"), "q=secret(K)");
        assert_eq!(scrubbed("wörd-x", "q=%77%c3%b6%72%64%2d%78"), "q=secret(K)");
        // Escaped twice (a URL inside a URL), a URL inside JSON, JSON inside a URL.
        assert_eq!(scrubbed("a/b c", "u=a%252Fb%2520c"), "u=secret(K)");
        assert_eq!(
            scrubbed("a/b c", r#"{"u":"https:\/\/x\/?q=a%2Fb%20c"}"#),
            r#"{"u":"https:\/\/x\/?q=secret(K)"}"#
        );
        assert_eq!(
            scrubbed("pa\"ss", "q=%7B%22k%22%3A%22pa%5C%22ss%22%7D"),
            "q=%7B%22k%22%3A%22secret(K)%22%7D"
        );
    }

    #[test]
    fn a_secret_base64_encoded_at_any_offset_is_scrubbed() {
        let secret = "s3cr/t?>pa&ss~";
        for prefix in ["", "x", "xy", "user:", "Bearer and more "] {
            for suffix in ["", "!", "!?", " tail"] {
                let bytes = format!("{prefix}{secret}{suffix}");
                let std = pipec_base::base64::encode(bytes.as_bytes());
                let url = std.replace('+', "-").replace('/', "_");
                for encoded in [
                    std.clone(),
                    std.trim_end_matches('=').to_string(),
                    url.clone(),
                    url.trim_end_matches('=').to_string(),
                ] {
                    let text = format!("data: {encoded} end");
                    let got = scrubbed(secret, &text);
                    assert!(got.contains("secret(K)"), "{bytes:?} as {text}: {got}");
                    let left = pipec_base::base64::decode(
                        got.trim_start_matches("data: ")
                            .trim_end_matches(" end")
                            .split("secret(K)")
                            .next()
                            .unwrap_or(""),
                    );
                    // What is left before the placeholder decodes to the prefix at most.
                    if let Ok(left) = left {
                        assert!(prefix.as_bytes().starts_with(&left), "{got}");
                    }
                }
                // Inside JSON, with `/` escaped.
                let json = serde_json::to_string(&std).unwrap_or_default();
                let escaped = json.replace('/', "\\/");
                assert!(
                    scrubbed(secret, &escaped).contains("secret(K)"),
                    "{escaped}"
                );
            }
        }
        // Padding goes with the secret's last characters.
        let std = pipec_base::base64::encode(secret.as_bytes());
        assert_eq!(scrubbed(secret, &format!("[{std}]")), "[secret(K)]");
    }

    #[test]
    fn short_secrets_are_not_searched_for_in_base64() {
        let mut s = Scrubber::default();
        s.add("K", "pa55");
        let blob = pipec_base::base64::encode(b"pa55");
        assert_eq!(s.scrub(&blob), blob);
        assert_eq!(s.scrub("pa55"), "secret(K)");
    }

    #[test]
    fn any_mixture_of_escapes_is_scrubbed() {
        // Each character of the secret escaped one of the ways an encoder may, chosen
        // by a fixed pseudo-random sequence, in many secrets and texts.
        let pool: Vec<char> = "aZ09-_.~ /\\\"&<>+%=:\n\t\u{1}é€🔑".chars().collect();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for round in 0..300 {
            let len = 6 + next(20);
            let secret: String = (0..len).map(|_| pool[next(pool.len())]).collect();
            let mut text = String::from("before ");
            let percent = round % 3 == 0;
            for c in secret.chars() {
                let form = next(4);
                if percent {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        if form == 0 && (b.is_ascii_alphanumeric() || b"-_.~".contains(&b)) {
                            text.push(b as char);
                        } else if form == 1 {
                            text.push_str(&format!("%{b:02x}"));
                        } else {
                            text.push_str(&format!("%{b:02X}"));
                        }
                    }
                    continue;
                }
                let plain = !matches!(c, '"' | '\\') && !c.is_control();
                match form {
                    0 if plain => text.push(c),
                    1 if c == '/' => text.push_str("\\/"),
                    1 if c == '\n' => text.push_str("\\n"),
                    1 if c == '"' => text.push_str("\\\""),
                    1 if c == '\\' => text.push_str("\\\\"),
                    _ => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            if form == 2 {
                                text.push_str(&format!("\\u{u:04x}"));
                            } else {
                                text.push_str(&format!("\\u{u:04X}"));
                            }
                        }
                    }
                }
            }
            text.push_str(" after");
            assert_eq!(
                scrubbed(&secret, &text),
                "before secret(K) after",
                "{secret:?} in {text}"
            );
        }
    }

    #[test]
    fn short_secrets_are_named_not_searched() {
        let mut s = Scrubber::default();
        s.add("PIN", "12");
        assert_eq!(s.scrub("pin 12"), "pin 12");
        assert_eq!(s.too_short(), ["PIN".to_string()]);
    }
}
