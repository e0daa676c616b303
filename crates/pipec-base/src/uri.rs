//! URI templates (RFC 6570): validation through `iri-string`, variables with their
//! positions, and the matching of URIs against link templates, which RFC 6570 does not
//! define and no maintained crate provides. Also what a server's `url` must be, so the
//! checker (a literal) and the runtime (an `env()` value) judge it alike.
//!
//! Matching is defined for a subset: each expression is `{var}` or `{+var}`, expressions
//! are separated by literal text, `{var}` matches one segment (`[^/?#]+`), and `{+var}`
//! matches the rest and appears at most once, last.
//!
//! The entries a server offers (fixed URIs and templates, of a `serve` block or a
//! Resources specification) are also held against each other here, for the warning about
//! two entries that answer one URI ([`served_overlaps`]).

use iri_string::spec::UriSpec;
use iri_string::template::{UriTemplateStr, simple_context::SimpleContext};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UriTemplate {
    pub text: String,
    pub parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    Expr(Expression),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expression {
    /// `+`, `#`, `.`, `/`, `;`, `?`, `&`, or none.
    pub operator: Option<char>,
    pub vars: Vec<VarSpec>,
    /// Byte range of the whole `{...}` in the template text.
    pub start: usize,
    pub end: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarSpec {
    pub name: String,
    pub explode: bool,
    pub prefix: Option<u16>,
    /// Byte range of the name in the template text.
    pub start: usize,
    pub end: usize,
}

/// Why a template is not valid RFC 6570, and where (a byte offset, when known).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    pub message: String,
    pub offset: Option<usize>,
}

pub fn parse(text: &str) -> Result<UriTemplate, TemplateError> {
    if let Err(e) = UriTemplateStr::new(text) {
        // iri-string keeps the position private but prints it.
        let shown = e.to_string();
        let offset = shown
            .split("(at ")
            .nth(1)
            .and_then(|rest| rest.split('-').next())
            .and_then(|n| n.parse::<usize>().ok());
        let message = shown
            .trim_start_matches("invalid URI template: ")
            .split(" (at ")
            .next()
            .unwrap_or("invalid")
            .to_string();
        return Err(TemplateError { message, offset });
    }
    let mut parts = Vec::new();
    let mut rest = 0usize;
    while rest < text.len() {
        match text[rest..].find('{') {
            None => {
                parts.push(Part::Literal(text[rest..].to_string()));
                break;
            }
            Some(n) => {
                if n > 0 {
                    parts.push(Part::Literal(text[rest..rest + n].to_string()));
                }
                let open = rest + n;
                let Some(close) = text[open..].find('}').map(|c| open + c) else {
                    return Err(TemplateError {
                        message: "unclosed expression".into(),
                        offset: Some(open),
                    });
                };
                parts.push(Part::Expr(parse_expression(text, open, close)));
                rest = close + 1;
            }
        }
    }
    Ok(UriTemplate {
        text: text.to_string(),
        parts,
    })
}

fn parse_expression(text: &str, open: usize, close: usize) -> Expression {
    let body = &text[open + 1..close];
    let (operator, list_start) = match body.chars().next() {
        Some(c @ ('+' | '#' | '.' | '/' | ';' | '?' | '&')) => (Some(c), open + 2),
        _ => (None, open + 1),
    };
    let mut vars = Vec::new();
    let mut pos = list_start;
    for spec in text[list_start..close].split(',') {
        let start = pos;
        pos += spec.len() + 1;
        let (name, explode, prefix) = if let Some(n) = spec.strip_suffix('*') {
            (n, true, None)
        } else if let Some((n, p)) = spec.split_once(':') {
            (n, false, p.parse().ok())
        } else {
            (spec, false, None)
        };
        vars.push(VarSpec {
            name: name.to_string(),
            explode,
            prefix,
            start,
            end: start + name.len(),
        });
    }
    Expression {
        operator,
        vars,
        start: open,
        end: close + 1,
    }
}

impl UriTemplate {
    pub fn variables(&self) -> impl Iterator<Item = &VarSpec> {
        self.parts.iter().flat_map(|p| match p {
            Part::Expr(e) => e.vars.iter(),
            Part::Literal(_) => [].iter(),
        })
    }

    /// The literal text before the first expression.
    pub fn literal_prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Literal(l)) => l,
            _ => "",
        }
    }

    pub fn has_expressions(&self) -> bool {
        self.parts.iter().any(|p| matches!(p, Part::Expr(_)))
    }

    /// `mcp://NAME/...` names its server.
    pub fn mcp_authority(&self) -> Option<&str> {
        let rest = self.text.strip_prefix("mcp://")?;
        let end = rest.find(['/', '{', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        (!authority.is_empty() && !rest[end..].starts_with('{')).then_some(authority)
    }

    /// Checks the subset that can be matched; says what breaks it.
    pub fn check_matchable(&self) -> Result<(), (String, usize, usize)> {
        let mut reserved_seen = false;
        let mut prev_expr = false;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(_) => prev_expr = false,
                Part::Expr(e) => {
                    if reserved_seen {
                        return Err((
                            "`{+var}` matches the rest of the URI, so nothing may follow it".into(),
                            e.start,
                            e.end,
                        ));
                    }
                    if prev_expr {
                        return Err((
                            "two expressions in a row cannot be told apart; put literal text between them".into(),
                            e.start,
                            e.end,
                        ));
                    }
                    if !matches!(e.operator, None | Some('+')) {
                        return Err((
                            "link templates take only `{var}` and `{+var}` expressions".into(),
                            e.start,
                            e.end,
                        ));
                    }
                    if e.vars.len() != 1 || e.vars[0].explode || e.vars[0].prefix.is_some() {
                        return Err((
                            "link template expressions hold one plain variable".into(),
                            e.start,
                            e.end,
                        ));
                    }
                    if e.operator == Some('+') {
                        reserved_seen = true;
                        if i + 1 < self.parts.len() {
                            return Err((
                                "`{+var}` matches the rest of the URI, so nothing may follow it"
                                    .into(),
                                e.start,
                                e.end,
                            ));
                        }
                    }
                    prev_expr = true;
                }
            }
        }
        Ok(())
    }

    /// Matches a URI; returns the captured variables (percent-decoded), or `None`.
    /// Only meaningful for templates that pass [`check_matchable`](Self::check_matchable).
    pub fn match_uri(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let mut captures = Vec::new();
        if match_parts(&self.parts, uri, &mut captures) {
            Some(captures)
        } else {
            None
        }
    }

    /// Expands the template; variables missing from `lookup` are an error, not the empty
    /// expansion RFC 6570 would give.
    pub fn expand(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
        let mut ctx = SimpleContext::new();
        for var in self.variables() {
            match lookup(&var.name) {
                Some(v) => {
                    ctx.insert(var.name.as_str(), v);
                }
                None => return Err(format!("no value for `{}`", var.name)),
            }
        }
        let template = UriTemplateStr::new(&self.text).map_err(|e| e.to_string())?;
        template
            .expand::<UriSpec, _>(&ctx)
            .map(|e| e.to_string())
            .map_err(|e| e.to_string())
    }

    /// A URI this template would produce, for overlap checks.
    pub fn sample(&self, value: &str) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Literal(l) => out.push_str(l),
                Part::Expr(_) => out.push_str(value),
            }
        }
        out
    }
}

fn match_parts(parts: &[Part], uri: &str, captures: &mut Vec<(String, String)>) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(l), rest)) => {
            uri.starts_with(l.as_str()) && match_parts(rest, &uri[l.len()..], captures)
        }
        Some((Part::Expr(e), rest)) => {
            let Some(var) = e.vars.first() else {
                return false;
            };
            if e.operator == Some('+') {
                if uri.is_empty() || !rest.is_empty() {
                    return false;
                }
                captures.push((var.name.clone(), percent_decode(uri)));
                return true;
            }
            // One segment: the longest run without `/`, `?`, `#`, shortened until the
            // rest matches.
            let segment = uri.find(['/', '?', '#']).unwrap_or(uri.len());
            let mut end = segment;
            while end > 0 {
                let mut attempt = captures.clone();
                attempt.push((var.name.clone(), percent_decode(&uri[..end])));
                if match_parts(rest, &uri[end..], &mut attempt) {
                    *captures = attempt;
                    return true;
                }
                end -= 1;
                while end > 0 && !uri.is_char_boundary(end) {
                    end -= 1;
                }
            }
            false
        }
    }
}

pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------- served URIs

/// Two entries of one served catalogue that answer the same URI: a template that
/// matches a fixed resource's URI (the resource is served, never the template), or two
/// templates that match a URI one of them makes (the earlier one serves it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServedOverlap {
    /// `templates[template]` matches `resources[resource]`.
    Resource { template: usize, resource: usize },
    /// `templates[earlier]` and `templates[later]` both match `uri`.
    Templates {
        earlier: usize,
        later: usize,
        uri: String,
    },
}

/// The overlaps among the fixed URIs and the templates (in the order written) that one
/// server offers. A URI that a template makes (`x` for every variable, no query
/// parameters) is tried against the other, both ways. Matching here is for warnings only;
/// it follows the rules a server applies (`{var}` one segment, `{+var}` up to the
/// query, `{?a,b}` optional parameters of those names) and runs in time linear in the
/// URI for each part of the template, whatever the template.
pub fn served_overlaps(resources: &[&str], templates: &[&UriTemplate]) -> Vec<ServedOverlap> {
    let mut out = Vec::new();
    for (t, template) in templates.iter().enumerate() {
        for (r, resource) in resources.iter().enumerate() {
            if served_matches(template, resource) {
                out.push(ServedOverlap::Resource {
                    template: t,
                    resource: r,
                });
            }
        }
    }
    for (later, l) in templates.iter().enumerate() {
        for (earlier, e) in templates.iter().enumerate().take(later) {
            let shared = [served_sample(l), served_sample(e)]
                .into_iter()
                .find(|uri| served_matches(l, uri) && served_matches(e, uri));
            if let Some(uri) = shared {
                out.push(ServedOverlap::Templates {
                    earlier,
                    later,
                    uri,
                });
            }
        }
    }
    out
}

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

/// A URI the template makes, as a server serves it: each variable `x`, no query
/// parameters.
fn served_sample(template: &UriTemplate) -> String {
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

/// Whether the template matches the whole URI, as a server matches a request.
fn served_matches(template: &UriTemplate, uri: &str) -> bool {
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

/// Why a server's `url` cannot be reached over streamable HTTP, and the URL it most
/// likely meant when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerUrlProblem {
    /// What is wrong, in words (`it has no scheme`).
    pub why: String,
    /// The text with the scheme it lacks: `http://` for this machine, `https://` else.
    pub meant: Option<String>,
}

/// `None` when `text` is an absolute `http:` or `https:` URL with a host. A URL without
/// `scheme://` (`localhost:8080/mcp`, which a URL parser takes for the scheme
/// `localhost`) has no scheme.
pub fn server_url_problem(text: &str) -> Option<ServerUrlProblem> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Some(ServerUrlProblem {
            why: "it is empty".into(),
            meant: None,
        });
    }
    let Some((scheme, _)) = trimmed.split_once("://") else {
        let host = trimmed
            .split(['/', ':', '?', '#'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let local = matches!(
            host.as_str(),
            "localhost" | "127.0.0.1" | "[::1]" | "0.0.0.0"
        ) || host.starts_with("127.");
        let well_formed = !trimmed.contains(char::is_whitespace) && !host.is_empty();
        return Some(ServerUrlProblem {
            why: "it has no scheme".into(),
            meant: well_formed
                .then(|| format!("{}://{trimmed}", if local { "http" } else { "https" })),
        });
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Some(ServerUrlProblem {
            why: format!(
                "`{scheme}:` is not a scheme MCP is spoken over (streamable HTTP takes `http:` or `https:`)"
            ),
            meant: None,
        });
    }
    match url::Url::parse(trimmed) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => None,
        Ok(_) => Some(ServerUrlProblem {
            why: "it names no host".into(),
            meant: None,
        }),
        Err(e) => Some(ServerUrlProblem {
            why: format!("it is not a URL ({e})"),
            meant: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_needs_http_or_https_and_a_host() {
        assert_eq!(server_url_problem("http://127.0.0.1:8080/mcp"), None);
        assert_eq!(server_url_problem("HTTPS://mcp.example.com"), None);
        let p = server_url_problem("localhost:8080/mcp").expect("no scheme");
        assert_eq!(p.why, "it has no scheme");
        assert_eq!(p.meant.as_deref(), Some("http://localhost:8080/mcp"));
        let p = server_url_problem("mcp.example.com/mcp").expect("no scheme");
        assert_eq!(p.meant.as_deref(), Some("https://mcp.example.com/mcp"));
        assert!(server_url_problem("ftp://x/y").is_some_and(|p| p.why.contains("`ftp:`")));
        assert!(server_url_problem("").is_some());
        assert!(server_url_problem("http://").is_some());
        assert!(server_url_problem("/just/a/path").is_some_and(|p| p.meant.is_none()));
    }

    fn t(s: &str) -> UriTemplate {
        parse(s).expect("valid template")
    }

    #[test]
    fn variables_have_positions() {
        let tpl = t("mcp://crm/deals/{deal_id}/emails/{start}/{end}");
        let vars: Vec<_> = tpl
            .variables()
            .map(|v| (v.name.as_str(), v.start))
            .collect();
        assert_eq!(vars, vec![("deal_id", 17), ("start", 34), ("end", 42)]);
        assert_eq!(tpl.mcp_authority(), Some("crm"));
    }

    #[test]
    fn invalid_templates_are_refused() {
        assert!(parse("mcp://x/{deal").is_err());
        assert!(parse("mcp://x/{de al}").is_err());
    }

    #[test]
    fn matching_captures_variables() {
        let tpl = t("mcp://crm/deals/{deal_id}/emails/{start}/{end}");
        assert_eq!(tpl.check_matchable(), Ok(()));
        let caps = tpl
            .match_uri("mcp://crm/deals/D1/emails/2025-01-01/2025-12-31")
            .expect("matches");
        assert_eq!(caps[0], ("deal_id".into(), "D1".into()));
        assert_eq!(caps[2], ("end".into(), "2025-12-31".into()));
        assert!(tpl.match_uri("mcp://crm/deals/D1/activity").is_none());
        let files = t("file:///handbook/{+path}");
        assert_eq!(
            files.match_uri("file:///handbook/a/b%20c.md"),
            Some(vec![("path".into(), "a/b c.md".into())])
        );
    }

    #[test]
    fn unmatchable_templates_say_why() {
        assert!(t("x://{a}{b}").check_matchable().is_err());
        assert!(t("x://{+a}/b").check_matchable().is_err());
        assert!(t("x://{?a}").check_matchable().is_err());
        assert!(t("x://{a,b}").check_matchable().is_err());
    }

    #[test]
    fn expansion_requires_every_variable() {
        let tpl = t("mcp://crm/deals/{deal_id}/activity");
        let got = tpl.expand(&|n| (n == "deal_id").then(|| "D 1/x".to_string()));
        assert_eq!(got.as_deref(), Ok("mcp://crm/deals/D%201%2Fx/activity"));
        assert!(tpl.expand(&|_| None).is_err());
    }

    #[test]
    fn segments_rests_literal_and_form_queries() {
        let raw = t("file:///project/src/{path}?mode=raw");
        assert!(served_matches(&raw, "file:///project/src/main.rs?mode=raw"));
        assert!(!served_matches(&raw, "file:///project/src/a/b.rs?mode=raw"));
        assert!(!served_matches(&raw, "file:///project/src/main.rs"));
        let rest = t("file:///project/{+path}{?rev}");
        assert!(served_matches(&rest, "file:///project/a/b.rs"));
        assert!(served_matches(&rest, "file:///project/a/b.rs?rev=3"));
        assert!(!served_matches(&rest, "file:///project/a/b.rs?other=3"));
        assert!(!served_matches(&rest, "file:///project/"));
        let two = t("x://{a}/n/{b}.md");
        assert!(served_matches(&two, "x://1/n/2.md"));
        assert!(served_matches(&two, "x://1/n/2.x.md"));
        assert_eq!(served_sample(&rest), "file:///project/x");
    }

    #[test]
    fn long_templates_match_in_linear_time() {
        let text = format!("x://{}", "{a}-".repeat(2000));
        let template = t(&text);
        let uri = format!("x://{}", "y-".repeat(2000));
        assert!(served_matches(&template, &uri));
    }

    #[test]
    fn served_overlaps_of_resources_and_templates() {
        let wide = t("file:///project/{+path}");
        let narrow = t("file:///project/src/{path}");
        let other = t("file:///docs/{path}");
        let found = served_overlaps(
            &["file:///project/README.md", "file:///x"],
            &[&wide, &narrow, &other],
        );
        assert_eq!(
            found,
            vec![
                ServedOverlap::Resource {
                    template: 0,
                    resource: 0
                },
                ServedOverlap::Templates {
                    earlier: 0,
                    later: 1,
                    uri: "file:///project/src/x".into()
                },
            ]
        );
    }
}
