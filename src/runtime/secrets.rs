//! Secrets: read from the environment when an attempt starts, handed to the places that
//! need them (server env, model keys, call arguments, exec stdin), and scrubbed from
//! everything else. A secret never reaches the store, events, output or error texts.

use serde_json::Value;

/// Every secret value resolved in this attempt, for scrubbing.
#[derive(Clone, Debug, Default)]
pub struct Scrubber {
    secrets: Vec<(String, String)>,
}

impl Scrubber {
    pub fn add(&mut self, name: &str, value: &str) {
        // Very short values would scrub half of every text; they are still kept out of
        // the store by the placeholders, but not searched for in free text.
        if value.len() >= 4 && !self.secrets.iter().any(|(_, v)| v == value) {
            self.secrets.push((name.to_string(), value.to_string()));
            // Also the common encodings of the value.
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
            if pct != value {
                self.secrets.push((name.to_string(), pct));
            }
        }
        self.secrets
            .sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("«secret:{name}»"));
            }
        }
        out
    }

    pub fn scrub_value(&self, v: &mut Value) {
        if self.secrets.is_empty() {
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
            Value::Object(m) => m.values_mut().for_each(|i| self.scrub_value(i)),
            _ => {}
        }
    }
}

/// The placeholder a secret is stored as.
pub fn placeholder(name: &str) -> Value {
    serde_json::json!({ "$secret": name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_scrubbed_in_text_and_values() {
        let mut s = Scrubber::default();
        s.add("TOKEN", "canary-123/x");
        assert_eq!(
            s.scrub("auth canary-123/x failed"),
            "auth «secret:TOKEN» failed"
        );
        assert_eq!(s.scrub("url?k=canary-123%2Fx"), "url?k=«secret:TOKEN»");
        let mut v = serde_json::json!({ "a": ["canary-123/x"] });
        s.scrub_value(&mut v);
        assert_eq!(v, serde_json::json!({ "a": ["«secret:TOKEN»"] }));
    }
}
