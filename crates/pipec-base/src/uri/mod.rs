//! URI templates (RFC 6570): parsing, with variables and their positions, and expansion
//! through `iri-string`; the matching of URIs against templates, which RFC 6570 does not
//! define and no maintained crate provides (`matcher.rs`); the warning about two entries
//! of one server that answer one URI (`overlap.rs`). Also what a server's `url` must be,
//! so the checker (a literal) and the runtime (an `env()` value) judge it alike.

mod matcher;
#[cfg(test)]
mod matcher_tests;
mod overlap;

pub use matcher::{Found, MatchOptions, Matcher, Piece, Unmatchable, UnmatchableKind, Variable};
pub use overlap::{ServedOverlap, served_overlaps};

use iri_string::spec::UriSpec;
use iri_string::template::{UriTemplateStr, simple_context::SimpleContext};
use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};

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

    /// Whether the template is in the subset that can be matched (`matcher.rs`); says
    /// what breaks it.
    pub fn check_matchable(&self) -> Result<(), Unmatchable> {
        Matcher::new(self, MatchOptions::default()).map(drop)
    }

    /// Matches a URI as a link template (no reShapr `{path}`); returns the captured
    /// variables (percent-decoded, invalid UTF-8 replaced), or `None` when the URI does
    /// not match or the template cannot be matched.
    pub fn match_uri(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let found = Matcher::new(self, MatchOptions::default())
            .ok()?
            .find(uri)?;
        Some(
            found
                .into_iter()
                .map(|(variable, range)| (variable.name, percent_decode(&uri[range])))
                .collect(),
        )
    }

    /// Expands the template; variables missing from `lookup` are an error, not the empty
    /// expansion RFC 6570 would give.
    pub fn expand(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(literal) => {
                    out.push_str(&expand_text(literal, &SimpleContext::new())?)
                }
                Part::Expr(e) => {
                    let mut ctx = SimpleContext::new();
                    for var in &e.vars {
                        let Some(value) = lookup(&var.name) else {
                            return Err(format!("no value for `{}`", var.name));
                        };
                        // iri-string 0.7 panics on the reserved expansion (`{+var}`,
                        // `{#var}`) of a value that starts with a non-ASCII character.
                        // Encoding those characters first gives what RFC 6570 asks for,
                        // since reserved expansion keeps `%XX` as it is written.
                        let value = if matches!(e.operator, Some('+' | '#')) {
                            utf8_percent_encode(&value, CONTROLS).to_string()
                        } else {
                            value
                        };
                        ctx.insert(var.name.as_str(), value);
                    }
                    out.push_str(&expand_text(&self.text[e.start..e.end], &ctx)?);
                }
            }
        }
        Ok(out)
    }

    /// A URI this template would produce, for overlap checks: `value` for every
    /// variable, written as it is, and no form query parameters (they are optional).
    pub fn sample(&self, value: &str) -> String {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Literal(l) => out.push_str(l),
                Part::Expr(e) if matches!(e.operator, Some('?' | '&')) => {}
                Part::Expr(_) => out.push_str(value),
            }
        }
        out
    }
}

/// A value as one path segment, the way RFC 6570's `{var}` expands it: unreserved
/// characters as they are, every other byte percent-encoded.
pub fn encode_segment(value: &str) -> String {
    const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    utf8_percent_encode(value, NOT_UNRESERVED).to_string()
}

/// One literal or one expression of a template, expanded by iri-string.
fn expand_text(text: &str, ctx: &SimpleContext) -> Result<String, String> {
    let template = UriTemplateStr::new(text).map_err(|e| e.to_string())?;
    template
        .expand::<UriSpec, _>(ctx)
        .map(|e| e.to_string())
        .map_err(|e| e.to_string())
}

/// Decodes `%XX` escapes; a `%` without two hex digits stays as it is, and bytes that are
/// not UTF-8 once decoded become U+FFFD.
pub fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
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

/// The form two spellings of one URI share, RFC 3986's syntax-based normalization (§6.2.2:
/// the scheme and host in lower case, escapes of unreserved characters decoded, the
/// others' hex digits in upper case, dot segments removed), by `iri-string`. Text that is
/// not a URI is its own normal form.
pub fn normal_form(uri: &str) -> String {
    match iri_string::types::UriStr::new(uri) {
        Ok(parsed) => parsed.normalize().to_string(),
        Err(_) => uri.to_string(),
    }
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
    #[test]
    fn spellings_of_one_uri_share_a_normal_form() {
        assert_eq!(normal_form("FILE:///a/%7Eb%2fc"), "file:///a/~b%2Fc");
        assert_eq!(normal_form("mcp://CRM/a/./b/../c"), "mcp://crm/a/c");
        assert_eq!(normal_form("x://a%2"), "x://a%2");
        assert_eq!(normal_form("no scheme"), "no scheme");
    }

    #[test]
    fn normal_forms_of_generated_text_are_fixed_points_and_never_panic() {
        let alphabet: Vec<char> = "aZ09:/?#[]@!$&'()*+,;=%-._~ é{}|\\^`\"<>".chars().collect();
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 24) as usize;
            let mut text =
                String::from(["x:", "http://h", "mcp://a/", ""][(state >> 40) as usize % 4]);
            for n in 0..len {
                text.push(alphabet[((state >> (n % 48)) as usize + n * 7) % alphabet.len()]);
            }
            let once = normal_form(&text);
            assert_eq!(normal_form(&once), once, "{text:?}");
        }
    }

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
    fn expansion_requires_every_variable() {
        let tpl = t("mcp://crm/deals/{deal_id}/activity");
        let got = tpl.expand(&|n| (n == "deal_id").then(|| "D 1/x".to_string()));
        assert_eq!(got.as_deref(), Ok("mcp://crm/deals/D%201%2Fx/activity"));
        assert!(tpl.expand(&|_| None).is_err());
        assert_eq!(encode_segment("D 1/x-é~"), "D%201%2Fx-%C3%A9~");
        // A value that starts with a non-ASCII character, in a reserved expansion (which
        // iri-string alone panics on).
        let files = t("file:///docs/{+path}#{frag}");
        let got = files.expand(&|n| Some(if n == "path" { "é/ü a.md" } else { "€" }.to_string()));
        assert_eq!(
            got.as_deref(),
            Ok("file:///docs/%C3%A9/%C3%BC%20a.md#%E2%82%AC")
        );
        let kept = t("x://{+p}").expand(&|_| Some("%E2%82%AC/€".to_string()));
        assert_eq!(kept.as_deref(), Ok("x://%E2%82%AC/%E2%82%AC"));
    }
}
