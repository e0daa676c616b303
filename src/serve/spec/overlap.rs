//! Finding served URIs that two entries would both answer: a template that matches a fixed
//! resource's URI, or two templates that match a URI one of them makes. A URI that a
//! template makes (`x` for every variable, no query parameters) is tried against the
//! other, both ways.
//!
//! Matching here is for the warning only; it follows the rules a server applies (`{var}`
//! one segment, `{+var}` up to the query, `{?a,b}` optional parameters of those names) and
//! runs in time linear in the URI for each part of the template, whatever the template.

use crate::uri::{Part, UriTemplate};

/// One piece of a template, as matching sees it.
enum Piece<'t> {
    Literal(&'t [u8]),
    /// `{var}`: one or more characters up to `/`, `?` or `#`.
    Segment,
    /// `{+var}`: one or more characters up to `?` or `#`.
    Rest,
    /// `{?a,b}`: nothing, or `?` and `name=value` pairs of these names joined by `&`.
    Query(Vec<&'t str>),
}

fn pieces(template: &UriTemplate) -> Vec<Piece<'_>> {
    template
        .parts
        .iter()
        .map(|p| match p {
            Part::Literal(l) => Piece::Literal(l.as_bytes()),
            Part::Expr(e) => match e.operator {
                Some('+') => Piece::Rest,
                Some('?') => Piece::Query(e.vars.iter().map(|v| v.name.as_str()).collect()),
                _ => Piece::Segment,
            },
        })
        .collect()
}

/// A URI the template makes: each variable `x`, no query parameters.
pub(crate) fn sample(template: &UriTemplate) -> String {
    let mut out = String::new();
    for part in &template.parts {
        match part {
            Part::Literal(l) => out.push_str(l),
            Part::Expr(e) if e.operator == Some('?') => {}
            Part::Expr(_) => out.push('x'),
        }
    }
    out
}

/// Whether the template matches the whole URI.
pub(crate) fn matches(template: &UriTemplate, uri: &str) -> bool {
    let bytes = uri.as_bytes();
    let n = bytes.len();
    // `reach[i]`: the pieces so far can match exactly the first `i` bytes.
    let mut reach = vec![false; n + 1];
    reach[0] = true;
    for piece in pieces(template) {
        let mut next = vec![false; n + 1];
        match piece {
            Piece::Literal(l) => {
                for i in 0..=n {
                    if reach[i] && bytes[i..].starts_with(l) {
                        next[i + l.len()] = true;
                    }
                }
            }
            Piece::Segment => run(bytes, &reach, &mut next, b"/?#"),
            Piece::Rest => run(bytes, &reach, &mut next, b"?#"),
            Piece::Query(names) => {
                for i in 0..=n {
                    if !reach[i] {
                        continue;
                    }
                    next[i] = true;
                    if bytes.get(i) == Some(&b'?') {
                        query_ends(uri, i + 1, &names, &mut next);
                    }
                }
            }
        }
        reach = next;
        if !reach.iter().any(|r| *r) {
            return false;
        }
    }
    reach[n]
}

/// Marks the ends of every run of one or more bytes without a stop byte that starts at
/// a reached position.
fn run(bytes: &[u8], reach: &[bool], next: &mut [bool], stops: &[u8]) {
    let mut active = false;
    for (i, b) in bytes.iter().enumerate() {
        active |= reach[i];
        if stops.contains(b) {
            active = false;
        } else if active {
            next[i + 1] = true;
        }
    }
}

/// Marks the end of each `name=value` pair of a form query beginning at `start`, while
/// every name is one of `names`.
fn query_ends(uri: &str, start: usize, names: &[&str], next: &mut [bool]) {
    let end = uri[start..].find('#').map_or(uri.len(), |h| start + h);
    let mut at = start;
    for pair in uri[start..end].split('&') {
        let name = pair.split_once('=').map_or(pair, |(k, _)| k);
        if !names.contains(&name) {
            return;
        }
        at += pair.len();
        next[at] = true;
        at += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> UriTemplate {
        crate::uri::parse(text).expect("a template")
    }

    #[test]
    fn segments_rests_literal_and_form_queries() {
        let raw = t("file:///project/src/{path}?mode=raw");
        assert!(matches(&raw, "file:///project/src/main.rs?mode=raw"));
        assert!(!matches(&raw, "file:///project/src/a/b.rs?mode=raw"));
        assert!(!matches(&raw, "file:///project/src/main.rs"));
        let rest = t("file:///project/{+path}{?rev}");
        assert!(matches(&rest, "file:///project/a/b.rs"));
        assert!(matches(&rest, "file:///project/a/b.rs?rev=3"));
        assert!(!matches(&rest, "file:///project/a/b.rs?other=3"));
        assert!(!matches(&rest, "file:///project/"));
        let two = t("x://{a}/n/{b}.md");
        assert!(matches(&two, "x://1/n/2.md"));
        assert!(matches(&two, "x://1/n/2.x.md"));
        assert_eq!(sample(&rest), "file:///project/x");
    }

    #[test]
    fn long_templates_match_in_linear_time() {
        let text = format!("x://{}", "{a}-".repeat(2000));
        let template = t(&text);
        let uri = format!("x://{}", "y-".repeat(2000));
        assert!(matches(&template, &uri));
    }
}
