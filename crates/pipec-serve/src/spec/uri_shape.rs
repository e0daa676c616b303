//! What a URI key of a Resources file must look like: a scheme for every URI, and for a
//! template the subset of RFC 6570 a server can match URIs against, as
//! `pipec_base::uri::Matcher` defines it.

use pipec_base::uri::{self, UriTemplate};

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
    template.check_matchable().map_err(|problem| UriProblem {
        message: problem.message(),
        label: "here".into(),
        help: problem.help().to_string(),
        start: problem.start,
        end: problem.end,
    })?;
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
    fn templates_outside_the_served_subset_are_located() {
        assert!(check_template("file:///project/{+path}{?rev}").is_ok());
        let problem = check_template("x://a/{a}{b}").expect_err("adjacent");
        assert_eq!((problem.start, problem.end), (9, 12));
        assert_eq!(
            problem.help,
            "put literal text between them, e.g. `{a}/{b}`"
        );
        let broken = check_template("x://a/{p").expect_err("unclosed");
        assert!(broken.message.starts_with("not a valid URI template"));
    }
}
