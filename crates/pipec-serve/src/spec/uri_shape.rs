//! What a URI key of a Resources file must look like: a scheme for every URI, and for a
//! template the subset of RFC 6570 a server can match URIs against (`{var}`, `{+var}`,
//! `{?a,b}` and literal text, literal query text included).

use pipec_base::uri::{self, Part, UriTemplate};

/// A problem with a URI key, at a byte range of the key's text.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UriProblem {
    pub message: String,
    pub label: String,
    pub help: String,
    pub start: usize,
    pub end: usize,
}

/// Whether the text starts with a scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`,
/// RFC 3986), written out rather than left to a template variable.
pub(crate) fn has_scheme(text: &str) -> bool {
    let Some(colon) = text.find(':') else {
        return false;
    };
    let scheme = &text[..colon];
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The end of the scheme-like text at the start, for the label of a URI without one.
pub(crate) fn scheme_problem(text: &str) -> UriProblem {
    let end = text
        .find(['/', '{', '?', '#'])
        .unwrap_or(text.len())
        .max(1)
        .min(text.len());
    let suggestion = if text.starts_with('/') {
        format!("write it with its scheme, e.g. `file://{text}`")
    } else {
        "start it with a scheme and `:`, e.g. `file:///project/readme.md` or `https://example.com/doc`"
            .to_string()
    };
    UriProblem {
        message: "a resource URI starts with a scheme (`file:`, `https:`, ...)".into(),
        label: "no scheme".into(),
        help: suggestion,
        start: 0,
        end,
    }
}

/// A template parsed and held to the subset pipec serves.
pub(crate) fn check_template(text: &str) -> Result<UriTemplate, UriProblem> {
    let template = uri::parse(text).map_err(|e| {
        let at = e.offset.unwrap_or(0).min(text.len());
        UriProblem {
            message: format!("not a valid URI template: {}", e.message),
            label: "here".into(),
            help: "write variables as `{name}`, with letters, digits and `_` in the name".into(),
            start: at,
            end: (at + 1).min(text.len()),
        }
    })?;
    let mut reserved_seen = false;
    let mut previous_was_expression = false;
    let mut literal_query = false;
    let count = template.parts.len();
    for (i, part) in template.parts.iter().enumerate() {
        let e = match part {
            Part::Literal(l) => {
                previous_was_expression = false;
                literal_query |= l.contains('?');
                continue;
            }
            Part::Expr(e) => e,
        };
        let problem = |message: String, help: &str| UriProblem {
            message,
            label: "here".into(),
            help: help.to_string(),
            start: e.start,
            end: e.end,
        };
        let shown = &text[e.start..e.end];
        if !matches!(e.operator, None | Some('+') | Some('?')) {
            return Err(problem(
                format!(
                    "pipec does not serve `{shown}`: the expressions it matches are `{{var}}`, `{{+var}}` and `{{?a,b}}`"
                ),
                "write one path segment as `{name}`, the rest of a path as `{+name}`, query parameters as `{?a,b}`",
            ));
        }
        if e.vars.iter().any(|v| v.explode || v.prefix.is_some()) {
            return Err(problem(
                format!("pipec does not serve the modifiers of `{shown}` (`*`, `:n`)"),
                "write the variable without a modifier",
            ));
        }
        if e.operator != Some('?') && e.vars.len() != 1 {
            return Err(problem(
                format!("`{shown}` holds several variables, which cannot be told apart in a URI"),
                "give each variable an expression of its own, with literal text between them",
            ));
        }
        if e.operator == Some('?') {
            if i + 1 != count {
                return Err(problem(
                    format!("`{shown}` is the query of the URI, so nothing may follow it"),
                    "move it to the end of the template",
                ));
            }
            if literal_query {
                return Err(problem(
                    format!(
                        "the template already has a query, so `{shown}` would begin a second one"
                    ),
                    "keep either the literal query text or the `{?...}` expression",
                ));
            }
        } else if previous_was_expression {
            return Err(problem(
                format!("`{shown}` follows another expression, so the two cannot be told apart"),
                "put literal text between them, e.g. `{a}/{b}`",
            ));
        }
        if e.operator == Some('+') {
            if reserved_seen {
                return Err(problem(
                    format!(
                        "`{shown}` is a second `{{+var}}`: where one ends and the other begins is ambiguous"
                    ),
                    "keep one `{+var}` and make the other `{var}`",
                ));
            }
            reserved_seen = true;
        }
        previous_was_expression = true;
    }
    Ok(template)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert!(has_scheme("file:///project/readme.md"));
        assert!(has_scheme("ui://widget"));
        assert!(has_scheme("urn:isbn:1"));
        assert!(has_scheme("svn+ssh://x"));
        assert!(!has_scheme("/project/readme.md"));
        assert!(!has_scheme("project/readme.md"));
        assert!(!has_scheme("{scheme}://x"));
        assert!(!has_scheme("1file://x"));
        assert!(!has_scheme(":x"));
        assert_eq!(
            scheme_problem("/a/b").help,
            "write it with its scheme, e.g. `file:///a/b`"
        );
    }

    #[test]
    fn the_served_subset() {
        for ok in [
            "file:///project/src/{path}?mode=raw",
            "file:///project/{+path}",
            "file:///project/{+path}{?rev}",
            "https://x/{a}/{b}{?q,r}",
            "x://a?mode={mode}",
            "x://{+path}/raw",
        ] {
            assert!(check_template(ok).is_ok(), "{ok}");
        }
        let refused = [
            ("x://a{/path}", "{/path}"),
            ("x://a/{#f}", "{#f}"),
            ("x://a/{p*}", "{p*}"),
            ("x://a/{p:3}", "{p:3}"),
            ("x://a/{a,b}", "{a,b}"),
            ("x://a/{a}{b}", "{b}"),
            ("x://a/{+a}/{+b}", "{+b}"),
            ("x://a/{?q}/x", "{?q}"),
            ("x://a/{p}?mode=raw{?q}", "{?q}"),
        ];
        for (text, at) in refused {
            let problem = check_template(text).expect_err(text);
            assert_eq!(
                &text[problem.start..problem.end],
                at,
                "{text}: {}",
                problem.message
            );
        }
        let broken = check_template("x://a/{p").expect_err("unclosed");
        assert!(broken.message.starts_with("not a valid URI template"));
    }
}
