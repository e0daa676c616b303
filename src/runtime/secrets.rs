//! Secrets: read from the environment when an attempt starts, handed to the places that
//! need them (server env, model keys, call arguments, exec stdin), and scrubbed from
//! everything else. A secret never reaches the store, events, output or error texts.
//!
//! Scrubbing looks for each secret in every form pipec itself writes it in: as is,
//! percent-encoded (URLs), JSON-escaped the way pipec encodes an `exec`'s stdin (`"`,
//! `\`, control characters escaped), JSON-escaped with every non-ASCII character as
//! `\uXXXX` (what Python's `json.dumps` prints by default, in either case of hex digits),
//! with `/` escaped too, and JSON-escaped twice (a command that prints its stdin as a JSON
//! string). Object keys are scrubbed like values. Texts are scrubbed whole, before they
//! are cut (an error's stderr tail), so a cut never leaves half a secret behind; a tail
//! that starts inside a secret loses that partial secret too.
//!
//! Secrets shorter than [`MIN_SCRUBBED_LEN`] bytes are not searched for in free text:
//! scrubbing every `ab` from every message would make them unreadable. They are still
//! never written as values (the store and the plan hold placeholders), but a command
//! that prints one gets it through; the run warns about such a secret when it starts.

use serde_json::Value;

/// Secrets shorter than this are not searched for in free text.
pub const MIN_SCRUBBED_LEN: usize = 4;

/// Every secret value resolved in this attempt, for scrubbing.
#[derive(Clone, Debug, Default)]
pub struct Scrubber {
    /// (name, one encoded form), longest first.
    forms: Vec<(String, String)>,
    /// Names of secrets too short to be searched for.
    short: Vec<String>,
}

impl Scrubber {
    pub fn add(&mut self, name: &str, value: &str) {
        if value.len() < MIN_SCRUBBED_LEN {
            if !value.is_empty() && !self.short.iter().any(|n| n == name) {
                self.short.push(name.to_string());
            }
            return;
        }
        for form in encodings(value) {
            if !self.forms.iter().any(|(_, f)| *f == form) {
                self.forms.push((name.to_string(), form));
            }
        }
        self.forms.sort_by_key(|(_, f)| std::cmp::Reverse(f.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Secrets too short to be scrubbed from free text, by name.
    pub fn too_short(&self) -> &[String] {
        &self.short
    }

    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, form) in &self.forms {
            if out.contains(form.as_str()) {
                out = out.replace(form.as_str(), &placeholder_text(name));
            }
        }
        out
    }

    /// Scrubs a text that may begin or end inside a secret (a tail kept from a longer
    /// stream): whole secrets as [`Scrubber::scrub`] does, then a secret's end at the
    /// text's start and a secret's beginning at its end, when they are at least
    /// [`MIN_SCRUBBED_LEN`] bytes long.
    pub fn scrub_fragment(&self, text: &str) -> String {
        let mut out = self.scrub(text);
        for (name, form) in &self.forms {
            let cut = (1..form.len().saturating_sub(MIN_SCRUBBED_LEN - 1))
                .filter(|i| form.is_char_boundary(*i))
                .find(|i| out.starts_with(&form[*i..]));
            if let Some(i) = cut {
                out = format!("{}{}", placeholder_text(name), &out[form.len() - i..]);
                break;
            }
        }
        for (name, form) in &self.forms {
            let cut = (MIN_SCRUBBED_LEN..form.len())
                .rev()
                .filter(|i| form.is_char_boundary(*i))
                .find(|i| out.ends_with(&form[..*i]));
            if let Some(i) = cut {
                out = format!("{}{}", &out[..out.len() - i], placeholder_text(name));
                break;
            }
        }
        out
    }

    /// The name of a secret whose placeholder the text holds: a text that was scrubbed
    /// before it was stored (a link's URI) and lost the secret it held.
    pub fn placeholder_in(&self, text: &str) -> Option<&str> {
        self.forms
            .iter()
            .map(|(name, _)| name.as_str())
            .find(|name| text.contains(&placeholder_text(name)))
    }

    pub fn scrub_value(&self, v: &mut Value) {
        if self.forms.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                let scrubbed = self.scrub(s);
                if scrubbed != *s {
                    *s = scrubbed;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.scrub_value(i)),
            Value::Object(m) => {
                if m.keys().any(|k| self.scrub(k) != *k) {
                    let old = std::mem::take(m);
                    for (k, mut item) in old {
                        self.scrub_value(&mut item);
                        m.insert(self.scrub(&k), item);
                    }
                } else {
                    m.values_mut().for_each(|i| self.scrub_value(i));
                }
            }
            _ => {}
        }
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
    let mut start = crate::source::floor_char_boundary(text, text.len().saturating_sub(keep));
    // A placeholder that begins before the cut, or that the cut falls inside.
    let window = crate::source::floor_char_boundary(text, (start + OPEN.len()).min(text.len()));
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

/// The forms a secret takes in what pipec writes.
fn encodings(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    let pct: String = value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    out.push(pct.clone());
    out.push(lower_hex_escapes(&pct));
    let json = json_escaped(value);
    out.push(json.clone());
    out.push(json_escaped(&json));
    for upper in [false, true] {
        let ascii = ascii_escaped(value, upper);
        out.push(ascii.replace('/', "\\/"));
        out.push(ascii);
    }
    out.push(json.replace('/', "\\/"));
    out.dedup();
    out
}

/// Percent escapes with lowercase hex digits (`%2f`), leaving the rest as it is.
fn lower_hex_escapes(pct: &str) -> String {
    let mut out = String::with_capacity(pct.len());
    let mut rest = pct;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i..i + 3).unwrap_or(&rest[i..]);
        out.push_str(&escape.to_ascii_lowercase());
        rest = &rest[i + escape.len()..];
    }
    out.push_str(rest);
    out
}

/// The string's contents as serde_json writes them, without the quotes.
fn json_escaped(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(&quoted)
        .to_string()
}

/// JSON escaping with every non-ASCII character as `\uXXXX` (surrogate pairs beyond the
/// basic plane), as ASCII-only JSON encoders write it.
fn ascii_escaped(value: &str, upper: bool) -> String {
    let mut out = String::new();
    for c in json_escaped(value).chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                if upper {
                    out.push_str(&format!("\\u{:04X}", u));
                } else {
                    out.push_str(&format!("\\u{:04x}", u));
                }
            }
        }
    }
    out
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
    fn every_encoding_pipec_writes_is_scrubbed() {
        let secret = "pa\"ss\\wörd\n🔑x";
        let mut s = Scrubber::default();
        s.add("K", secret);
        let json = serde_json::to_string(&serde_json::json!({ "k": secret })).unwrap_or_default();
        assert_eq!(s.scrub(&json), r#"{"k":"secret(K)"}"#);
        let twice = serde_json::to_string(&json).unwrap_or_default();
        assert!(!s.scrub(&twice).contains("rd"), "{}", s.scrub(&twice));
        let python = r#"{"k": "pa\"ss\\w\u00f6rd\n\ud83d\udd11x"}"#;
        assert_eq!(s.scrub(python), r#"{"k": "secret(K)"}"#);
        let upper = r#"pa\"ss\\w\u00F6rd\n\uD83D\uDD11x"#;
        assert_eq!(s.scrub(upper), "secret(K)");
        let mut keyed = serde_json::json!({ secret: 1, "n": { secret: secret } });
        s.scrub_value(&mut keyed);
        assert_eq!(
            keyed,
            serde_json::json!({ "secret(K)": 1, "n": { "secret(K)": "secret(K)" } })
        );
        let mut url = Scrubber::default();
        url.add("U", "a/b c");
        assert_eq!(url.scrub("x?q=a%2fb%20c"), "x?q=secret(U)");
    }

    #[test]
    fn a_fragment_that_starts_or_ends_inside_a_secret_loses_that_part() {
        let mut s = Scrubber::default();
        s.add("K", "0123456789");
        assert_eq!(s.scrub_fragment("56789 end"), "secret(K) end");
        assert_eq!(s.scrub_fragment("log: 012345"), "log: secret(K)");
        assert_eq!(
            s.scrub_fragment("log: 0123456789 end"),
            "log: secret(K) end"
        );
        // Shorter pieces than the minimum are left alone.
        assert_eq!(s.scrub_fragment("89 end"), "89 end");
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

    #[test]
    fn short_secrets_are_named_not_searched() {
        let mut s = Scrubber::default();
        s.add("PIN", "12");
        assert_eq!(s.scrub("pin 12"), "pin 12");
        assert_eq!(s.too_short(), ["PIN".to_string()]);
    }
}
