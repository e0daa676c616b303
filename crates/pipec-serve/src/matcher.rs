//! Matching a requested URI against a resource template: the subset of RFC 6570 a server
//! can match (RFC 6570 defines only expansion), the two-ended scan that matches it
//! without backtracking, and the decoding and checks of every captured value.
//!
//! A template is literal text and expressions:
//! - `{var}` matches one segment: it stops at `/`, `?`, `#`, `&` and `,`;
//! - `{+var}` matches the rest of the path, `/` included: it stops at `?` and `#`;
//! - literal query text (`?mode=raw`) is matched exactly, byte for byte;
//! - `{?a,b}` (or `{&a,b}` after a literal query) matches form parameters, in any order,
//!   each optional, at most once each; an unknown parameter means no match.
//!
//! reShapr compatibility: a `{path}` variable that ends the path (followed by the query,
//! or by nothing) matches several segments, so both `a%2Fb` (RFC 6570's own expansion
//! of `a/b`) and a hand-written `a/b` reach the same file. It does so only when the
//! template has no `{+var}`.

use std::fmt;
use std::ops::Range;

use pipec_base::uri::{self, Part, TemplateError};

use super::value_check::{self, Refusal};

/// The longest URI matched; a longer one is refused before any template is tried.
pub const MAX_URI_BYTES: usize = 64 * 1024;
/// The longest template accepted.
pub const MAX_TEMPLATE_BYTES: usize = 8 * 1024;

/// A `{var}` stops at these bytes.
const SEGMENT_STOPS: &[u8] = b"/?#&,";
/// A `{+var}` (and a reShapr `{path}`) stops at these.
const REST_STOPS: &[u8] = b"?#";

/// One piece of the part of a template the scan matches: literal bytes or a variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Literal(Vec<u8>),
    Var(Variable),
}

/// A variable of a template and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Variable {
    pub name: String,
    /// `{+var}`, or `{path}` under reShapr compatibility.
    pub multi_segment: bool,
    /// In the query (a literal query's `name={var}`): checked as text, not as a path.
    pub in_query: bool,
}

/// The form parameters a `{?a,b}` or `{&a,b}` expression takes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FormQuery {
    names: Vec<String>,
    /// `{&...}`: the parameters follow a literal query.
    after_literal_query: bool,
}

/// A parsed, matchable resource template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    text: String,
    /// The path, up to (not including) the `?` that starts the query.
    pub(crate) path: Vec<Piece>,
    /// The literal query after `?` (with any `name={var}` in it), without the `?`.
    pub(crate) query: Vec<Piece>,
    form: Option<FormQuery>,
    /// Everything the scan matches: the path, then `?` and the literal query.
    scanned: Vec<Piece>,
    /// The index in `scanned` of the one multi-segment variable, if any.
    multi: Option<usize>,
    /// The pieces after `multi`, reversed, with their literals reversed too: the scan
    /// from the end is the scan from the start over reversed bytes.
    suffix_reversed: Vec<Piece>,
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
    /// Parses a template, refusing (with the byte offset of the cause) what cannot be
    /// matched: operators other than none, `+`, `?` and `&`; several variables, `*` or
    /// `:n` in one simple expression; two expressions in a row; a second multi-segment
    /// variable; anything after a form query.
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
        let mut path: Vec<Piece> = Vec::new();
        let mut query: Vec<Piece> = Vec::new();
        let mut in_query = false;
        let mut form: Option<FormQuery> = None;
        let mut previous_was_expression = false;
        let mut multi_count = 0usize;
        let mut last_expression_end = 0usize;
        for part in &parsed.parts {
            let error = |message: &str, offset: usize| TemplateError {
                message: message.to_string(),
                offset: Some(offset),
            };
            match part {
                Part::Literal(literal) => {
                    if form.is_some() {
                        return Err(error(
                            "nothing may follow a form query `{?...}`",
                            last_expression_end,
                        ));
                    }
                    previous_was_expression = false;
                    if in_query {
                        push_literal(&mut query, literal.as_bytes());
                    } else if let Some((before, after)) = literal.split_once('?') {
                        push_literal(&mut path, before.as_bytes());
                        push_literal(&mut query, after.as_bytes());
                        in_query = true;
                    } else {
                        push_literal(&mut path, literal.as_bytes());
                    }
                }
                Part::Expr(expression) => {
                    if form.is_some() {
                        return Err(error(
                            "nothing may follow a form query `{?...}`",
                            expression.start,
                        ));
                    }
                    // A form query starts at its own `?` or `&`, so it may follow a
                    // variable directly; two variables in a row could not be split.
                    let is_form = matches!(expression.operator, Some('?' | '&'));
                    if previous_was_expression && !is_form {
                        return Err(error(
                            "two expressions in a row cannot be told apart; put literal text between them",
                            expression.start,
                        ));
                    }
                    previous_was_expression = true;
                    last_expression_end = expression.end;
                    if expression
                        .vars
                        .iter()
                        .any(|v| v.explode || v.prefix.is_some())
                    {
                        return Err(error(
                            "served templates take no `*` or `:n` modifiers",
                            expression.start,
                        ));
                    }
                    match expression.operator {
                        None | Some('+') => {
                            let [var] = expression.vars.as_slice() else {
                                return Err(error(
                                    "a `{var}` or `{+var}` expression holds one variable",
                                    expression.start,
                                ));
                            };
                            let multi_segment = expression.operator == Some('+');
                            if multi_segment && in_query {
                                return Err(error(
                                    "`{+var}` belongs in the path; in the query use `{var}`",
                                    expression.start,
                                ));
                            }
                            if multi_segment {
                                multi_count += 1;
                                if multi_count > 1 {
                                    return Err(error(
                                        "a template may hold one multi-segment `{+var}`",
                                        expression.start,
                                    ));
                                }
                            }
                            let piece = Piece::Var(Variable {
                                name: var.name.clone(),
                                multi_segment,
                                in_query,
                            });
                            if in_query {
                                query.push(piece);
                            } else {
                                path.push(piece);
                            }
                        }
                        Some(op @ ('?' | '&')) => {
                            if op == '?' && in_query {
                                return Err(error(
                                    "after a literal query, form parameters are `{&a,b}`",
                                    expression.start,
                                ));
                            }
                            if op == '&' && (!in_query || query.is_empty()) {
                                return Err(error(
                                    "`{&a,b}` follows a literal query such as `?mode=raw`; alone, write `{?a,b}`",
                                    expression.start,
                                ));
                            }
                            form = Some(FormQuery {
                                names: expression.vars.iter().map(|v| v.name.clone()).collect(),
                                after_literal_query: op == '&',
                            });
                        }
                        Some(_) => {
                            return Err(error(
                                "served templates take `{var}`, `{+var}`, `{?a,b}` and `{&a,b}` expressions",
                                expression.start,
                            ));
                        }
                    }
                }
            }
        }
        // reShapr compatibility: see the module's documentation.
        if multi_count == 0
            && let Some(Piece::Var(last)) = path.last_mut()
            && last.name == "path"
        {
            last.multi_segment = true;
        }
        let mut scanned = path.clone();
        if in_query && form.as_ref().is_none_or(|f| f.after_literal_query) {
            push_literal(&mut scanned, b"?");
            for piece in &query {
                match piece {
                    Piece::Literal(bytes) => push_literal(&mut scanned, bytes),
                    Piece::Var(_) => scanned.push(piece.clone()),
                }
            }
        }
        let multi = scanned
            .iter()
            .position(|p| matches!(p, Piece::Var(v) if v.multi_segment));
        let suffix_reversed = match multi {
            Some(m) => scanned[m + 1..]
                .iter()
                .rev()
                .map(|p| match p {
                    Piece::Literal(bytes) => Piece::Literal(bytes.iter().rev().copied().collect()),
                    Piece::Var(_) => p.clone(),
                })
                .collect(),
            None => Vec::new(),
        };
        Ok(Template {
            text: text.to_string(),
            path,
            query,
            form,
            scanned,
            multi,
            suffix_reversed,
        })
    }

    /// The template as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The names of its variables, in order, form parameters last.
    pub fn variable_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .path
            .iter()
            .chain(&self.query)
            .filter_map(|p| match p {
                Piece::Var(v) => Some(v.name.as_str()),
                Piece::Literal(_) => None,
            })
            .collect();
        if let Some(form) = &self.form {
            names.extend(form.names.iter().map(String::as_str));
        }
        names
    }

    /// The names a form query (`{?a,b}` or `{&a,b}`) takes, in declared order.
    pub fn form_names(&self) -> &[String] {
        self.form.as_ref().map_or(&[], |f| f.names.as_slice())
    }

    /// Whether the variable `name` may hold several segments (`{+name}`, or `{path}`
    /// under reShapr compatibility).
    pub fn is_multi_segment(&self, name: &str) -> bool {
        self.path
            .iter()
            .any(|p| matches!(p, Piece::Var(v) if v.name == name && v.multi_segment))
    }
}

fn push_literal(pieces: &mut Vec<Piece>, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    if let Some(Piece::Literal(last)) = pieces.last_mut() {
        last.extend_from_slice(bytes);
    } else {
        pieces.push(Piece::Literal(bytes.to_vec()));
    }
}

/// Matches `uri` against `template`. `Ok(None)`: it does not match (another template may).
/// `Err`: the URI matched but a value is refused, or the URI is too long; the search
/// stops there.
pub fn match_uri(template: &Template, uri: &str) -> Result<Option<Captures>, MatchError> {
    if uri.len() > MAX_URI_BYTES {
        return Err(MatchError::TooLong { bytes: uri.len() });
    }
    let bytes = uri.as_bytes();
    let (scanned_end, form_text) = match &template.form {
        None => (bytes.len(), None),
        Some(form) if !form.after_literal_query => match uri.find('?') {
            Some(q) => (q, Some(&uri[q + 1..])),
            None => (bytes.len(), None),
        },
        Some(_) => {
            // The literal query has a known number of `&`-separated fields; the URI's
            // first that many fields are the literal's, the rest are form parameters.
            let Some(q) = uri.find('?') else {
                return Ok(None);
            };
            let fields = 1 + template
                .query
                .iter()
                .map(|p| match p {
                    Piece::Literal(b) => b.iter().filter(|c| **c == b'&').count(),
                    Piece::Var(_) => 0,
                })
                .sum::<usize>();
            let mut end = q + 1;
            let mut seen = 0;
            let mut form = None;
            for (i, c) in uri[q + 1..].char_indices() {
                if c == '&' {
                    seen += 1;
                    if seen == fields {
                        end = q + 1 + i;
                        form = Some(&uri[q + 2 + i..]);
                        break;
                    }
                }
            }
            if form.is_none() {
                end = bytes.len();
            }
            (end, form)
        }
    };
    let Some(ranges) = scan(template, &bytes[..scanned_end]) else {
        return Ok(None);
    };
    let mut captures = Captures::default();
    for (variable, range) in ranges {
        let value = decode_and_check(&variable, &bytes[range])?;
        captures.values.push(Capture {
            name: variable.name,
            value,
            multi_segment: variable.multi_segment,
            in_query: variable.in_query,
        });
    }
    if let (Some(form), Some(text)) = (&template.form, form_text) {
        let Some(pairs) = form_pairs(&form.names, text) else {
            return Ok(None);
        };
        // Declared order, whatever order the URI gave them in.
        for name in &form.names {
            if let Some((_, raw)) = pairs.iter().find(|(n, _)| n == name) {
                let variable = Variable {
                    name: name.clone(),
                    multi_segment: false,
                    in_query: true,
                };
                let value = decode_and_check(&variable, raw.as_bytes())?;
                captures.values.push(Capture {
                    name: name.clone(),
                    value,
                    multi_segment: false,
                    in_query: true,
                });
            }
        }
    }
    Ok(Some(captures))
}

/// `a=1&b=2` split into pairs, each name one of `names` and none twice; `None` when a
/// field is not `name=value`, a name is unknown, or a name repeats.
fn form_pairs<'u>(names: &[String], text: &'u str) -> Option<Vec<(&'u str, &'u str)>> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if text.is_empty() {
        return Some(pairs);
    }
    if text.contains('#') {
        return None;
    }
    for field in text.split('&') {
        let (name, value) = field.split_once('=')?;
        if !names.iter().any(|n| n == name) || pairs.iter().any(|(n, _)| *n == name) {
            return None;
        }
        pairs.push((name, value));
    }
    Some(pairs)
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

/// A variable and the bytes of the input it matched.
type Found = (Variable, Range<usize>);

/// The scan: the pieces before the multi-segment variable from the start, the pieces
/// after it from the end, and the variable takes what lies between. Each variable's end
/// is fixed by its stop bytes and the literal after it, so nothing is ever tried twice.
fn scan(template: &Template, input: &[u8]) -> Option<Vec<Found>> {
    let Some(m) = template.multi else {
        let (found, consumed) = scan_forward(&template.scanned, input, true)?;
        return (consumed == input.len()).then_some(found);
    };
    let (mut found, start) = scan_forward(&template.scanned[..m], input, false)?;
    let rest = &input[start..];
    let reversed: Vec<u8> = rest.iter().rev().copied().collect();
    let (from_end, consumed) = scan_forward(&template.suffix_reversed, &reversed, false)?;
    let end = start + rest.len().checked_sub(consumed)?;
    if end <= start || input[start..end].iter().any(|b| REST_STOPS.contains(b)) {
        return None;
    }
    let Piece::Var(middle) = &template.scanned[m] else {
        return None;
    };
    found.push((middle.clone(), start..end));
    let len = rest.len();
    for (variable, range) in from_end.into_iter().rev() {
        found.push((variable, start + len - range.end..start + len - range.start));
    }
    Some(found)
}

/// Matches `pieces` from the start of `input`, which holds no multi-segment variable.
/// `whole`: the pieces must reach the end of `input` (no multi-segment variable follows).
/// Returns each variable's byte range and how far the pieces reached.
fn scan_forward(pieces: &[Piece], input: &[u8], whole: bool) -> Option<(Vec<Found>, usize)> {
    let mut found = Vec::new();
    let mut pos = 0usize;
    for (i, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Literal(literal) => {
                if !input.get(pos..)?.starts_with(literal) {
                    return None;
                }
                pos += literal.len();
            }
            Piece::Var(variable) => {
                let run_end = pos
                    + input[pos..]
                        .iter()
                        .position(|b| SEGMENT_STOPS.contains(b))
                        .unwrap_or(input.len() - pos);
                let end = match pieces.get(i + 1) {
                    None => {
                        if whole && run_end != input.len() {
                            return None;
                        }
                        run_end
                    }
                    Some(Piece::Literal(next)) => {
                        let lead = next
                            .iter()
                            .position(|b| SEGMENT_STOPS.contains(b))
                            .unwrap_or(next.len());
                        let last_piece = i + 2 == pieces.len();
                        if lead == next.len() && !(last_piece && whole) {
                            // A literal with no stop byte, followed by more pieces: the
                            // value ends where the literal first appears.
                            let from = pos + 1;
                            if from > run_end {
                                return None;
                            }
                            from + find(&input[from..run_end], next)?
                        } else {
                            // The value and the literal's lead fill the run exactly.
                            let lead = &next[..lead];
                            if !input[pos..run_end].ends_with(lead) {
                                return None;
                            }
                            run_end - lead.len()
                        }
                    }
                    Some(Piece::Var(_)) => return None,
                };
                if end <= pos {
                    return None;
                }
                found.push((variable.clone(), pos..end));
                pos = end;
            }
        }
    }
    Some((found, pos))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    haystack.windows(needle.len()).position(|w| w == needle)
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

    fn pairs(list: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(
            list.iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn a_simple_variable_is_one_segment() {
        let t = "tracker://tickets/{ticket_id}";
        assert_eq!(
            matched(t, "tracker://tickets/T-1"),
            pairs(&[("ticket_id", "T-1")])
        );
        assert_eq!(matched(t, "tracker://tickets/T-1/x"), None);
        assert_eq!(matched(t, "tracker://tickets/"), None);
        assert_eq!(matched(t, "tracker://ticket/T-1"), None);
        assert_eq!(
            matched(t, "tracker://tickets/a%20b"),
            pairs(&[("ticket_id", "a b")])
        );
    }

    #[test]
    fn literal_text_after_a_variable_in_the_same_segment() {
        let t = "x://docs/{name}.json";
        assert_eq!(matched(t, "x://docs/a.b.json"), pairs(&[("name", "a.b")]));
        assert_eq!(matched(t, "x://docs/a.json/x"), None);
        let t = "x://{a}-{b}/end";
        assert_eq!(
            matched(t, "x://p-q-r/end"),
            pairs(&[("a", "p"), ("b", "q-r")])
        );
    }

    #[test]
    fn a_reserved_variable_takes_the_rest_and_literals_after_it() {
        let t = "file:///handbook/{+path}";
        assert_eq!(
            matched(t, "file:///handbook/a/b%20c.md"),
            pairs(&[("path", "a/b c.md")])
        );
        let t = "x://r/{+dir}/{name}.json";
        assert_eq!(
            matched(t, "x://r/a/b/c.json"),
            pairs(&[("dir", "a/b"), ("name", "c")])
        );
        assert_eq!(matched("x://r/{+p}", "x://r/a?b"), None);
        assert_eq!(matched("x://r/{+p}", "x://r/a#b"), None);
    }

    #[test]
    fn literal_query_text_is_matched_exactly() {
        let t = "file:///project/src/{path}?mode=raw";
        assert_eq!(
            matched(t, "file:///project/src/doc.md?mode=raw"),
            pairs(&[("path", "doc.md")])
        );
        assert_eq!(matched(t, "file:///project/src/doc.md"), None);
        assert_eq!(matched(t, "file:///project/src/doc.md?mode=raw&x=1"), None);
        assert_eq!(matched(t, "file:///project/src/doc.md?mode=RAW"), None);
    }

    #[test]
    fn reshapr_compatibility_takes_encoded_and_raw_slashes() {
        let t = "file:///project/src/{path}?mode=raw";
        let encoded = matched(t, "file:///project/src/resources%2Fdoc.md?mode=raw");
        let raw = matched(t, "file:///project/src/resources/doc.md?mode=raw");
        assert_eq!(encoded, pairs(&[("path", "resources/doc.md")]));
        assert_eq!(raw, encoded);
        assert!(template(t).is_multi_segment("path"));
        // Another name, or `{path}` not at the end, keeps to one segment.
        assert_eq!(matched("x://r/{name}", "x://r/a/b"), None);
        assert_eq!(matched("x://r/{path}/meta", "x://r/a/b/meta"), None);
        assert!(!template("x://r/{path}/{+rest}").is_multi_segment("path"));
    }

    #[test]
    fn form_queries_are_optional_in_any_order_and_closed() {
        let t = "x://search/{+scope}{?q,limit}";
        assert_eq!(matched(t, "x://search/a/b"), pairs(&[("scope", "a/b")]));
        assert_eq!(
            matched(t, "x://search/a?limit=5&q=x%20y"),
            pairs(&[("scope", "a"), ("q", "x y"), ("limit", "5")])
        );
        assert_eq!(matched(t, "x://search/a?q=1&other=2"), None);
        assert_eq!(matched(t, "x://search/a?q=1&q=2"), None);
        assert_eq!(matched(t, "x://search/a?q"), None);
        let t = "x://f/{id}?mode=raw{&lines}";
        assert_eq!(matched(t, "x://f/a?mode=raw"), pairs(&[("id", "a")]));
        assert_eq!(
            matched(t, "x://f/a?mode=raw&lines=3"),
            pairs(&[("id", "a"), ("lines", "3")])
        );
        assert_eq!(matched(t, "x://f/a?mode=cooked&lines=3"), None);
        assert_eq!(matched(t, "x://f/a"), None);
    }

    #[test]
    fn variables_inside_a_literal_query() {
        let t = "x://f/{id}?mode={mode}&v=1";
        assert_eq!(
            matched(t, "x://f/a?mode=raw&v=1"),
            pairs(&[("id", "a"), ("mode", "raw")])
        );
        assert_eq!(matched(t, "x://f/a?mode=raw&v=2"), None);
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

    #[test]
    fn unmatchable_templates_are_refused_with_a_position() {
        for (text, offset) in [
            ("x://{a}{b}", 7),
            ("x://{+a}/{+b}", 9),
            ("x://{#a}", 4),
            ("x://{a,b}", 4),
            ("x://{a*}", 4),
            ("x://{?a}/x", 8),
            ("x://r{&a}", 5),
            ("x://r?m=1{?a}", 9),
        ] {
            let error = Template::parse(text).unwrap_err();
            assert_eq!(error.offset, Some(offset), "{text}: {}", error.message);
        }
    }

    #[test]
    fn adversarial_inputs_finish_quickly() {
        // A backtracking matcher takes quadratic time or worse on these.
        let t = template("x://{a}-{+b}-{c}");
        let uri = format!("x://{}", "-".repeat(MAX_URI_BYTES - 8));
        let started = std::time::Instant::now();
        let _ = match_uri(&t, &uri);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
