//! Matching a URI against a template: the subset of RFC 6570 that can be matched (RFC
//! 6570 defines only expansion) and the two-ended scan that matches it without
//! backtracking. The server answers requests with it, the runtime lifts links with it,
//! and the checker predicts overlaps with it, so all three agree on what a URI matches.
//!
//! A template is literal text and expressions:
//! - `{var}` matches one segment: one or more bytes up to `/`, `?`, `#`, `&` or `,`;
//! - `{+var}` matches the rest of the path, `/` included, up to `?` or `#`; a template
//!   holds at most one, and literal text and `{var}`s may follow it;
//! - literal query text (`?mode=raw`, or `?mode={mode}`) is matched exactly, byte for byte;
//! - `{?a,b}` (or `{&a,b}` after a literal query) matches form parameters, in any order,
//!   each optional, at most once each; an unknown parameter means no match; it ends the
//!   template.
//!
//! reShapr compatibility ([`MatchOptions::reshapr_path`], for served templates): a
//! `{path}` variable that ends the path matches several segments, so both `a%2Fb` (RFC
//! 6570's own expansion of `a/b`) and a hand-written `a/b` reach the same file. It does so
//! only when the template has no `{+var}`.

use std::ops::Range;

use super::{Expression, Part, UriTemplate};

/// A `{var}` stops at these bytes.
const SEGMENT_STOPS: &[u8] = b"/?#&,";
/// A `{+var}` (and a reShapr `{path}`) stops at these.
const REST_STOPS: &[u8] = b"?#";

/// How a template is read for matching.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatchOptions {
    /// A `{path}` that ends the path of a template without `{+var}` matches several
    /// segments, as reShapr serves it.
    pub reshapr_path: bool,
}

impl MatchOptions {
    /// The options a server matches requests with (and the checker predicts it with).
    pub const SERVED: MatchOptions = MatchOptions { reshapr_path: true };
}

/// One piece of the part of a template the scan matches: literal bytes or a variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Literal(Vec<u8>),
    Var(Variable),
}

/// A variable of a template and where it stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    /// `{+var}`, or `{path}` under reShapr compatibility.
    pub multi_segment: bool,
    /// In the query (a literal query's `name={var}`, or a form parameter).
    pub in_query: bool,
}

/// The form parameters a `{?a,b}` or `{&a,b}` expression takes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FormQuery {
    names: Vec<String>,
    /// `{&...}`: the parameters follow a literal query.
    after_literal_query: bool,
}

/// Why a template cannot be matched, and the byte range of the expression at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmatchable {
    pub kind: UnmatchableKind,
    /// The expression as written (`{/path*}`).
    pub shown: String,
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnmatchableKind {
    /// `{/x}`, `{#x}`, `{.x}`, `{;x}`.
    Operator,
    /// `{x*}`, `{x:3}`.
    Modifier,
    /// `{a,b}` or `{+a,b}`.
    SeveralVariables,
    /// Anything after `{?a,b}`.
    AfterFormQuery,
    /// `{?a}` after literal query text.
    SecondQuery,
    /// `{&a}` without literal query text before it.
    LoneContinuation,
    /// `{a}{b}`.
    Adjacent,
    /// A second `{+var}`.
    SecondRest,
    /// `{+var}` in the query.
    RestInQuery,
}

impl Unmatchable {
    /// What is wrong, in words, naming the expression.
    pub fn message(&self) -> String {
        let shown = &self.shown;
        match self.kind {
            UnmatchableKind::Operator => format!(
                "pipec cannot match `{shown}`: the expressions it matches are `{{var}}`, `{{+var}}` and `{{?a,b}}`"
            ),
            UnmatchableKind::Modifier => {
                format!("pipec cannot match the modifiers of `{shown}` (`*`, `:n`)")
            }
            UnmatchableKind::SeveralVariables => {
                format!("`{shown}` holds several variables, which cannot be told apart in a URI")
            }
            UnmatchableKind::AfterFormQuery => {
                format!("`{shown}` is the query of the URI, so nothing may follow it")
            }
            UnmatchableKind::SecondQuery => {
                format!("the template already has a query, so `{shown}` would begin a second one")
            }
            UnmatchableKind::LoneContinuation => format!(
                "`{shown}` continues a literal query such as `?mode=raw`, and the template has none"
            ),
            UnmatchableKind::Adjacent => {
                format!("`{shown}` follows another expression, so the two cannot be told apart")
            }
            UnmatchableKind::SecondRest => format!(
                "`{shown}` is a second `{{+var}}`: where one ends and the other begins is ambiguous"
            ),
            UnmatchableKind::RestInQuery => {
                format!("`{shown}` is in the query, where a value holds no path")
            }
        }
    }

    /// What to write instead.
    pub fn help(&self) -> &'static str {
        match self.kind {
            UnmatchableKind::Operator => {
                "write one path segment as `{name}`, the rest of a path as `{+name}`, query parameters as `{?a,b}`"
            }
            UnmatchableKind::Modifier => "write the variable without a modifier",
            UnmatchableKind::SeveralVariables => {
                "give each variable an expression of its own, with literal text between them"
            }
            UnmatchableKind::AfterFormQuery => "move it to the end of the template",
            UnmatchableKind::SecondQuery => {
                "keep either the literal query text or the `{?...}` expression, or continue the literal query with `{&...}`"
            }
            UnmatchableKind::LoneContinuation => "write the parameters as `{?a,b}`",
            UnmatchableKind::Adjacent => "put literal text between them, e.g. `{a}/{b}`",
            UnmatchableKind::SecondRest => "keep one `{+var}` and make the other `{var}`",
            UnmatchableKind::RestInQuery => "write `{var}` in the query",
        }
    }
}

/// A template read for matching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matcher {
    /// The path, up to (not including) the `?` that starts the query.
    path: Vec<Piece>,
    /// The literal query after `?` (with any `name={var}` in it), without the `?`.
    query: Vec<Piece>,
    form: Option<FormQuery>,
    /// Everything the scan matches: the path, then `?` and the literal query.
    scanned: Vec<Piece>,
    /// The index in `scanned` of the one multi-segment variable, if any.
    multi: Option<usize>,
    /// The pieces after `multi`, reversed, with their literals reversed too: the scan
    /// from the end is the scan from the start over reversed bytes.
    suffix_reversed: Vec<Piece>,
}

/// A variable and the bytes of the URI it matched (not decoded).
pub type Found = (Variable, Range<usize>);

impl Matcher {
    /// Reads `template` for matching, refusing what cannot be matched. This is the one
    /// definition of the matchable subset.
    pub fn new(template: &UriTemplate, options: MatchOptions) -> Result<Matcher, Unmatchable> {
        let mut path: Vec<Piece> = Vec::new();
        let mut query: Vec<Piece> = Vec::new();
        let mut in_query = false;
        let mut form: Option<FormQuery> = None;
        let mut previous_was_expression = false;
        let mut multi_count = 0usize;
        let count = template.parts.len();
        for (i, part) in template.parts.iter().enumerate() {
            let expression = match part {
                Part::Literal(literal) => {
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
                    continue;
                }
                Part::Expr(expression) => expression,
            };
            let refuse = |kind| {
                Err(Unmatchable {
                    kind,
                    shown: template.text[expression.start..expression.end].to_string(),
                    start: expression.start,
                    end: expression.end,
                })
            };
            if !matches!(expression.operator, None | Some('+' | '?' | '&')) {
                return refuse(UnmatchableKind::Operator);
            }
            if expression
                .vars
                .iter()
                .any(|v| v.explode || v.prefix.is_some())
            {
                return refuse(UnmatchableKind::Modifier);
            }
            if let Some(op @ ('?' | '&')) = expression.operator {
                if i + 1 != count {
                    return refuse(UnmatchableKind::AfterFormQuery);
                }
                if op == '?' && in_query {
                    return refuse(UnmatchableKind::SecondQuery);
                }
                if op == '&' && (!in_query || query.is_empty()) {
                    return refuse(UnmatchableKind::LoneContinuation);
                }
                // A form query starts at its own `?` or `&`, so it may follow a
                // variable directly.
                form = Some(form_query(expression, op));
                continue;
            }
            let [var] = expression.vars.as_slice() else {
                return refuse(UnmatchableKind::SeveralVariables);
            };
            if previous_was_expression {
                return refuse(UnmatchableKind::Adjacent);
            }
            previous_was_expression = true;
            let multi_segment = expression.operator == Some('+');
            if multi_segment {
                if in_query {
                    return refuse(UnmatchableKind::RestInQuery);
                }
                multi_count += 1;
                if multi_count > 1 {
                    return refuse(UnmatchableKind::SecondRest);
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
        if options.reshapr_path
            && multi_count == 0
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
        Ok(Matcher {
            path,
            query,
            form,
            scanned,
            multi,
            suffix_reversed,
        })
    }

    /// The pieces of the path, before the query.
    pub fn path(&self) -> &[Piece] {
        &self.path
    }

    /// The pieces of the literal query, without its `?`.
    pub fn query(&self) -> &[Piece] {
        &self.query
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
        names.extend(self.form_names().iter().map(String::as_str));
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

    /// Matches the whole `uri`: each variable's byte range in it (not decoded), in the
    /// template's order, form parameters in declared order; a form parameter the URI
    /// left out has no entry. `None`: it does not match.
    pub fn find(&self, uri: &str) -> Option<Vec<Found>> {
        let (scanned_end, form_text) = match &self.form {
            None => (uri.len(), None),
            Some(form) if !form.after_literal_query => match uri.find('?') {
                Some(q) => (q, Some(q + 1)),
                None => (uri.len(), None),
            },
            Some(_) => {
                // The literal query has a known number of `&`-separated fields; the
                // URI's first that many fields are the literal's, the rest are form
                // parameters.
                let q = uri.find('?')?;
                let fields = 1 + self
                    .query
                    .iter()
                    .map(|p| match p {
                        Piece::Literal(b) => b.iter().filter(|c| **c == b'&').count(),
                        Piece::Var(_) => 0,
                    })
                    .sum::<usize>();
                let mut ampersands = uri[q + 1..]
                    .match_indices('&')
                    .map(|(i, _)| q + 1 + i)
                    .skip(fields - 1);
                match ampersands.next() {
                    Some(end) => (end, Some(end + 1)),
                    None => (uri.len(), None),
                }
            }
        };
        let mut found = scan(self, &uri.as_bytes()[..scanned_end])?;
        if let (Some(form), Some(start)) = (&self.form, form_text) {
            let pairs = form_pairs(&form.names, uri, start)?;
            // Declared order, whatever order the URI gave them in.
            for name in &form.names {
                if let Some((_, range)) = pairs.iter().find(|(n, _)| n == name) {
                    let variable = Variable {
                        name: name.clone(),
                        multi_segment: false,
                        in_query: true,
                    };
                    found.push((variable, range.clone()));
                }
            }
        }
        Some(found)
    }
}

fn form_query(expression: &Expression, op: char) -> FormQuery {
    FormQuery {
        names: expression.vars.iter().map(|v| v.name.clone()).collect(),
        after_literal_query: op == '&',
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

/// `a=1&b=2` from `start` to the end of `uri`, split into names and the ranges of their
/// values, each name one of `names` and none twice; `None` when a field is not
/// `name=value`, a name is unknown, or a name repeats.
fn form_pairs<'u>(
    names: &[String],
    uri: &'u str,
    start: usize,
) -> Option<Vec<(&'u str, Range<usize>)>> {
    let text = &uri[start..];
    let mut pairs: Vec<(&str, Range<usize>)> = Vec::new();
    if text.is_empty() {
        return Some(pairs);
    }
    if text.contains('#') {
        return None;
    }
    let mut at = start;
    for field in text.split('&') {
        let (name, value) = field.split_once('=')?;
        if !names.iter().any(|n| n == name) || pairs.iter().any(|(n, _)| *n == name) {
            return None;
        }
        let value_start = at + name.len() + 1;
        pairs.push((name, value_start..value_start + value.len()));
        at += field.len() + 1;
    }
    Some(pairs)
}

/// The scan: the pieces before the multi-segment variable from the start, the pieces
/// after it from the end, and the variable takes what lies between. Each variable's end
/// is fixed by its stop bytes and the literal after it, so nothing is ever tried twice.
fn scan(matcher: &Matcher, input: &[u8]) -> Option<Vec<Found>> {
    let Some(m) = matcher.multi else {
        let (found, consumed) = scan_forward(&matcher.scanned, input, true)?;
        return (consumed == input.len()).then_some(found);
    };
    let (mut found, start) = scan_forward(&matcher.scanned[..m], input, false)?;
    let rest = &input[start..];
    let reversed: Vec<u8> = rest.iter().rev().copied().collect();
    let (from_end, consumed) = scan_forward(&matcher.suffix_reversed, &reversed, false)?;
    let end = start + rest.len().checked_sub(consumed)?;
    if end <= start || input[start..end].iter().any(|b| REST_STOPS.contains(b)) {
        return None;
    }
    let Piece::Var(middle) = &matcher.scanned[m] else {
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
