//! URI templates (RFC 6570): validation through `iri-string`, variables with their
//! positions, and the matching of URIs against link templates, which RFC 6570 does not
//! define and no maintained crate provides. Also what a server's `url` must be, so the
//! checker (a literal) and the runtime (an `env()` value) judge it alike.
//!
//! Matching is defined for a subset: each expression is `{var}` or `{+var}`, expressions
//! are separated by literal text, `{var}` matches one segment (`[^/?#]+`), and `{+var}`
//! matches the rest and appears at most once, last.

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
}
