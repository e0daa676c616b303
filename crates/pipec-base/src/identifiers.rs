//! Names for pulled declarations: a server's names (`search-tickets`, `getDeal`,
//! `deal.id`) made into valid pipec identifiers in the style the language asks for, and
//! kept apart from every name already taken (`pipec tools pull`, and the record types
//! `pipec-schema` reads from a server's schemas); and string literals as a `.pipe` file
//! writes them.

use std::collections::BTreeSet;

use crate::names::words;

/// Words a tool or reader would better not be called: they are reserved for nodes and
/// their parameters, or mean something in a body.
const AVOIDED: &[&str] = &["input", "true", "false", "null", "role", "output_schema"];

/// Whether `name` is a pipec identifier: an ASCII letter or `_`, then letters, digits
/// and `_`.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `snake_case` for a name (`getDeal` → `get_deal`, `search-tickets` →
/// `search_tickets`); `fallback` when nothing of it is usable.
pub fn snake_case(name: &str, fallback: &str) -> String {
    let joined = words(name)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    if joined.is_empty() {
        return fallback.to_string();
    }
    if joined.starts_with(|c: char| c.is_ascii_digit()) {
        return format!("{fallback}_{joined}");
    }
    joined
}

/// `CamelCase` for a name (`get_deal` → `GetDeal`, `deal id` → `DealId`); `fallback`
/// when nothing of it is usable.
pub fn camel_case(name: &str, fallback: &str) -> String {
    let joined: String = words(name)
        .iter()
        .map(|w| {
            let mut cs = w.chars();
            match cs.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect();
    if joined.is_empty() {
        return fallback.to_string();
    }
    if joined.starts_with(|c: char| c.is_ascii_digit()) {
        return format!("{fallback}{joined}");
    }
    joined
}

/// `kebab-case`, for link kinds.
pub fn kebab_case(name: &str, fallback: &str) -> String {
    let joined = words(name)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("-");
    if joined.is_empty() {
        fallback.to_string()
    } else {
        joined
    }
}

/// A regular string literal for `value`, escaped.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Names taken in one namespace; new ones are made unique with a number.
#[derive(Debug, Default)]
pub struct Taken {
    names: BTreeSet<String>,
}

impl Taken {
    pub fn new(names: impl IntoIterator<Item = String>) -> Taken {
        Taken {
            names: names.into_iter().collect(),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// `base`, or `base_2`, `base_3`… (`Base2` for a CamelCase base): the first that is
    /// free, now taken.
    pub fn claim(&mut self, base: &str) -> String {
        let base = if AVOIDED.contains(&base) {
            format!("{base}_")
        } else {
            base.to_string()
        };
        let camel = base.starts_with(|c: char| c.is_ascii_uppercase());
        let mut candidate = base.clone();
        let mut n = 2;
        while self.names.contains(&candidate) {
            candidate = if camel {
                format!("{base}{n}")
            } else {
                format!("{base}_{n}")
            };
            n += 1;
        }
        self.names.insert(candidate.clone());
        candidate
    }

    /// Frees a name claimed before.
    pub fn release(&mut self, name: &str) {
        self.names.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_the_styles_pipec_asks_for() {
        assert_eq!(snake_case("getDeal", "tool"), "get_deal");
        assert_eq!(snake_case("search-tickets", "tool"), "search_tickets");
        assert_eq!(snake_case("HTTPServer", "tool"), "http_server");
        assert_eq!(snake_case("2fa", "tool"), "tool_2fa");
        assert_eq!(snake_case("—", "tool"), "tool");
        assert_eq!(camel_case("get_deal", "T"), "GetDeal");
        assert_eq!(camel_case("Deal Id", "T"), "DealId");
        assert_eq!(camel_case("9lives", "T"), "T9lives");
        assert_eq!(kebab_case("Deal activity", "kind"), "deal-activity");
    }

    #[test]
    fn identifiers_are_ascii_words() {
        assert!(is_identifier("deal_id"));
        assert!(is_identifier("_x1"));
        assert!(!is_identifier("x-id"));
        assert!(!is_identifier("1x"));
        assert!(!is_identifier(""));
        assert!(!is_identifier("dé"));
    }

    #[test]
    fn claimed_names_stay_apart() {
        let mut taken = Taken::new(["get_deal".to_string(), "Deal".to_string()]);
        assert_eq!(taken.claim("get_deal"), "get_deal_2");
        assert_eq!(taken.claim("get_deal"), "get_deal_3");
        assert_eq!(taken.claim("Deal"), "Deal2");
        assert_eq!(taken.claim("input"), "input_");
    }
}
