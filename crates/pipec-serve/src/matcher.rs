//! Matching a requested URI against a resource template, as a server does it: the
//! matching itself is `pipec_base::uri::Matcher` with the server's options (the checker
//! predicts overlaps with the same); here are the limits on what is matched and the
//! decoding and checks of every captured value.

use std::fmt;

use pipec_base::uri::{self, MatchOptions, Matcher, TemplateError};
pub use pipec_base::uri::{Piece, Variable};

use super::value_check::{self, Refusal};

/// The longest URI matched; a longer one is refused before any template is tried.
pub const MAX_URI_BYTES: usize = 64 * 1024;
/// The longest template accepted.
pub const MAX_TEMPLATE_BYTES: usize = 8 * 1024;

/// A parsed, matchable resource template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
    matcher: Matcher,
}

/// One value taken from a URI, percent-decoded once and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    pub name: String,
    pub value: String,
    /// Matched by `{+var}` or a reShapr `{path}`: the value may hold `/`.
    pub multi_segment: bool,
    /// Taken from the query.
    pub in_query: bool,
}

/// The values a URI gave a template's variables, in the template's order. A form
/// parameter the URI left out has no entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captures {
    pub values: Vec<Capture>,
}

impl Captures {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.value.as_str())
    }

    /// `(name, value)` pairs, as a renderer or a completion context takes them.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.values
            .iter()
            .map(|c| (c.name.clone(), c.value.clone()))
            .collect()
    }
}

/// A URI that is refused outright, rather than merely not matching. The search for a
/// template stops here: a more permissive template later on is never tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatchError {
    TooLong { bytes: usize },
    Refused { variable: String, reason: Refusal },
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::TooLong { bytes } => write!(
                f,
                "the URI is {bytes} bytes long, over the limit of {MAX_URI_BYTES}"
            ),
            MatchError::Refused { variable, reason } => {
                write!(f, "the value of `{variable}` is refused: {reason}")
            }
        }
    }
}

impl Template {
    /// Parses a template, refusing (with the byte offset of the cause) one over
    /// [`MAX_TEMPLATE_BYTES`] and one outside the matchable subset.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        if text.len() > MAX_TEMPLATE_BYTES {
            return Err(TemplateError {
                message: format!(
                    "the template is {} bytes long, over the limit of {MAX_TEMPLATE_BYTES}",
                    text.len()
                ),
                offset: None,
            });
        }
        let parsed = uri::parse(text)?;
        let matcher =
            Matcher::new(&parsed, MatchOptions::SERVED).map_err(|problem| TemplateError {
                message: problem.message(),
                offset: Some(problem.start),
            })?;
        Ok(Template {
            text: text.to_string(),
            matcher,
        })
    }

    /// The template as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The pieces of the path, before the query.
    pub fn path(&self) -> &[Piece] {
        self.matcher.path()
    }

    /// The pieces of the literal query, without its `?`.
    pub fn query(&self) -> &[Piece] {
        self.matcher.query()
    }

    /// The names of its variables, in order, form parameters last.
    pub fn variable_names(&self) -> Vec<&str> {
        self.matcher.variable_names()
    }

    /// The names a form query (`{?a,b}` or `{&a,b}`) takes, in declared order.
    pub fn form_names(&self) -> &[String] {
        self.matcher.form_names()
    }

    /// Whether the variable `name` may hold several segments (`{+name}`, or `{path}`
    /// under reShapr compatibility).
    pub fn is_multi_segment(&self, name: &str) -> bool {
        self.matcher.is_multi_segment(name)
    }
}

/// Matches `uri` against `template`. `Ok(None)`: it does not match (another template may).
/// `Err`: the URI matched but a value is refused, or the URI is too long; the search
/// stops there.
pub fn match_uri(template: &Template, uri: &str) -> Result<Option<Captures>, MatchError> {
    if uri.len() > MAX_URI_BYTES {
        return Err(MatchError::TooLong { bytes: uri.len() });
    }
    let Some(found) = template.matcher.find(uri) else {
        return Ok(None);
    };
    let mut captures = Captures::default();
    for (variable, range) in found {
        let value = decode_and_check(&variable, &uri.as_bytes()[range])?;
        captures.values.push(Capture {
            name: variable.name,
            value,
            multi_segment: variable.multi_segment,
            in_query: variable.in_query,
        });
    }
    Ok(Some(captures))
}

fn decode_and_check(variable: &Variable, raw: &[u8]) -> Result<String, MatchError> {
    let refused = |reason| MatchError::Refused {
        variable: variable.name.clone(),
        reason,
    };
    let value = value_check::percent_decode_once(raw).map_err(refused)?;
    if variable.in_query {
        value_check::check_text(&value).map_err(refused)?;
    } else {
        value_check::check_path_value(&value).map_err(refused)?;
    }
    Ok(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn template(text: &str) -> Template {
        Template::parse(text).unwrap()
    }

    fn matched(template_text: &str, uri: &str) -> Option<Vec<(String, String)>> {
        match_uri(&template(template_text), uri)
            .unwrap()
            .map(|c| c.pairs())
    }

    #[test]
    fn values_are_decoded_once_then_checked() {
        let t = template("file:///r/{+path}");
        let refused = |uri: &str| match match_uri(&t, uri) {
            Err(MatchError::Refused { reason, .. }) => reason,
            other => panic!("{uri}: {other:?}"),
        };
        assert_eq!(refused("file:///r/a/../b"), Refusal::DotSegment);
        assert_eq!(refused("file:///r/%2e%2e/b"), Refusal::DotSegment);
        assert_eq!(refused("file:///r/a%00b"), Refusal::Nul);
        assert_eq!(refused("file:///r/%c0%ae%c0%ae/x"), Refusal::InvalidUtf8);
        assert_eq!(refused("file:///r/a%5cb"), Refusal::Backslash);
        assert_eq!(refused("file:///r/%2Fetc"), Refusal::Absolute);
        assert_eq!(refused("file:///r/a%zz"), Refusal::BadPercentEncoding);
        // Decoded once: a double-encoded dot stays a literal name.
        assert_eq!(
            match_uri(&t, "file:///r/%252e%252e/x")
                .unwrap()
                .unwrap()
                .get("path"),
            Some("%2e%2e/x")
        );
    }

    #[test]
    fn limits_are_enforced() {
        let t = template("x://r/{id}");
        let long = format!("x://r/{}", "a".repeat(MAX_URI_BYTES));
        assert!(matches!(
            match_uri(&t, &long),
            Err(MatchError::TooLong { .. })
        ));
        let long_template = format!("x://{}/{{id}}", "a".repeat(MAX_TEMPLATE_BYTES));
        assert!(Template::parse(&long_template).is_err());
    }

    /// The checker's overlap warning predicts what this matcher answers: for the cases
    /// where the checker used to match differently (a `{var}` stopping at `,` and `&`,
    /// reShapr's `{path}`, `{&a}` after a literal query), the verdicts agree.
    #[test]
    fn the_overlap_warning_agrees_with_the_server() {
        for (template_text, resource, served) in [
            ("x://tags/{tag}", "x://tags/a,b", false),
            ("x://tags/{tag}", "x://tags/a&b", false),
            ("file:///src/{path}", "file:///src/a/b.md", true),
            ("x://f/{id}?mode=raw{&lines}", "x://f/a?mode=raw", true),
            (
                "x://f/{id}?mode=raw{&lines}",
                "x://f/a?mode=raw&lines=2",
                true,
            ),
            ("x://s/{+scope}{?q}", "x://s/a/b?q=1", true),
        ] {
            let by_server = matched(template_text, resource).is_some();
            let parsed = pipec_base::uri::parse(template_text).unwrap();
            let warned = !pipec_base::uri::served_overlaps(&[resource], &[&parsed]).is_empty();
            assert_eq!(by_server, served, "{template_text} against {resource}");
            assert_eq!(warned, by_server, "{template_text} against {resource}");
        }
        assert_eq!(
            matched("file:///src/{path}", "file:///src/a/b.md"),
            Some(vec![("path".to_string(), "a/b.md".to_string())])
        );
    }
}
