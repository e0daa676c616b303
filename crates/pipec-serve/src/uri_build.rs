//! Building URLs and URIs from a template and values, never by joining strings: the
//! backend URL a template read is passed on to (the rest of the template after
//! `scheme://`, appended to the backend's URL segment by segment with the `url` crate,
//! then checked to keep the backend's origin and path), and the URIs a provider builds
//! for its own templates (RFC 6570 expansion, checked to match back to the same values).

use std::fmt;

use iri_string::spec::UriSpec;
use iri_string::template::UriTemplateStr;
use iri_string::template::simple_context::SimpleContext;
use url::Url;

use super::matcher::{self, Captures, Template};
use super::template_path::{self, PathError};
use super::value_check::{self, Refusal};

/// A backend base URL: `http` or `https`, with a host, without a fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    base: Url,
}

/// Why no backend URL was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendUrlError {
    /// The configured backend is not a usable base URL.
    BadBackend { message: String },
    /// The template and its values give no path (a refused value among them).
    Path(PathError),
    /// The URL built would leave the backend's origin or its path: refused.
    Escapes { message: String },
}

impl fmt::Display for BackendUrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendUrlError::BadBackend { message } => write!(f, "the backend URL {message}"),
            BackendUrlError::Path(error) => write!(f, "{error}"),
            BackendUrlError::Escapes { message } => {
                write!(f, "the backend URL is refused: {message}")
            }
        }
    }
}

impl Backend {
    pub fn parse(text: &str) -> Result<Backend, BackendUrlError> {
        let bad = |message: &str| BackendUrlError::BadBackend {
            message: message.to_string(),
        };
        let base = Url::parse(text).map_err(|e| bad(&format!("is not a URL ({e})")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(bad("must start with `http://` or `https://`"));
        }
        if base.host_str().is_none_or(str::is_empty) || base.cannot_be_a_base() {
            return Err(bad("has no host"));
        }
        if base.fragment().is_some() {
            return Err(bad("may not hold a `#` fragment"));
        }
        Ok(Backend { base })
    }

    pub fn url(&self) -> &Url {
        &self.base
    }

    /// The backend's own path segments, a trailing empty one left out.
    fn prefix(&self) -> Vec<String> {
        let mut segments: Vec<String> = self
            .base
            .path_segments()
            .map(|s| s.map(str::to_string).collect())
            .unwrap_or_default();
        if segments.last().is_some_and(String::is_empty) {
            segments.pop();
        }
        segments
    }
}

/// The URL a read of `template` with `captures` fetches: the backend URL, its path
/// followed by the template's path after `scheme://` (an empty authority dropped), each
/// segment percent-encoded on its own, and its query followed by the template's literal
/// query and the form parameters given. `weather://forecast/{city}` with backend
/// `http://h/api` and `city` = `New York` gives `http://h/api/forecast/New%20York`.
pub fn backend_url(
    backend: &Backend,
    template: &Template,
    captures: &Captures,
) -> Result<Url, BackendUrlError> {
    let path = template_path::backend_path(template, captures).map_err(BackendUrlError::Path)?;
    // `url` drops `.` and `..` when pushed, which would shift the path silently; the
    // values were checked already, and the check is repeated here on what is pushed.
    for segment in &path.segments {
        if segment == "." || segment == ".." {
            return Err(BackendUrlError::Path(PathError::Refused {
                variable: None,
                reason: Refusal::DotSegment,
            }));
        }
        // Encoded, an `@` stays inside its segment here; it is refused anyway, so a
        // backend (or a proxy before it) that joins URLs as text never sees a host trick.
        if segment.contains('@') {
            return Err(BackendUrlError::Path(PathError::Refused {
                variable: None,
                reason: Refusal::AtSign,
            }));
        }
    }
    let prefix = backend.prefix();
    let mut url = backend.base.clone();
    url.set_fragment(None);
    {
        let Ok(mut segments) = url.path_segments_mut() else {
            return Err(BackendUrlError::BadBackend {
                message: "has no host".into(),
            });
        };
        segments.pop_if_empty();
        segments.extend(&path.segments);
    }
    if !path.query.is_empty() {
        url.query_pairs_mut().extend_pairs(&path.query);
    }
    check_stays_inside(backend, &prefix, &path.segments, &url)?;
    Ok(url)
}

/// The invariants of a built URL, checked on the URL itself: the backend's scheme,
/// user, host and port; the backend's path segments first; then exactly the segments
/// meant, each decoding back to its value.
fn check_stays_inside(
    backend: &Backend,
    prefix: &[String],
    wanted: &[String],
    url: &Url,
) -> Result<(), BackendUrlError> {
    let escapes = |message: &str| {
        Err(BackendUrlError::Escapes {
            message: message.to_string(),
        })
    };
    let base = &backend.base;
    if url.scheme() != base.scheme() || !matches!(url.scheme(), "http" | "https") {
        return escapes("its scheme changed");
    }
    if url.host_str() != base.host_str()
        || url.port_or_known_default() != base.port_or_known_default()
        || url.username() != base.username()
        || url.password() != base.password()
    {
        return escapes("its origin changed");
    }
    // The serialisation parsed again must be the same URL: what reqwest sends is text.
    match Url::parse(url.as_str()) {
        Ok(again) if again == *url => {}
        _ => return escapes("it does not read back as itself"),
    }
    let Some(segments) = url.path_segments() else {
        return escapes("it has no path");
    };
    let segments: Vec<&str> = segments.collect();
    if segments.len() != prefix.len() + wanted.len() {
        return escapes("its path has other segments than the template's");
    }
    if segments[..prefix.len()] != *prefix {
        return escapes("its path leaves the backend's path");
    }
    for (sent, value) in segments[prefix.len()..].iter().zip(wanted) {
        match value_check::percent_decode_once(sent.as_bytes()) {
            Ok(decoded) if decoded == *value => {}
            _ => return escapes("a segment does not decode back to its value"),
        }
    }
    Ok(())
}

/// Why no URI was built from a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UriBuildError {
    /// The template cannot be served (the message says why, at a byte offset).
    Template(pipec_base::uri::TemplateError),
    Missing {
        variable: String,
    },
    Unknown {
        variable: String,
        help: Option<String>,
    },
    /// The value cannot be carried by the template: the URI built would not match back
    /// to it (a `?` in a `{+var}`, an already percent-encoded text, `..`).
    NotCarried {
        variable: String,
        message: String,
    },
}

impl fmt::Display for UriBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UriBuildError::Template(e) => write!(f, "the template cannot be served: {}", e.message),
            UriBuildError::Missing { variable } => write!(f, "no value for `{variable}`"),
            UriBuildError::Unknown { variable, help } => {
                write!(f, "the template has no variable `{variable}`")?;
                if let Some(help) = help {
                    write!(f, "; {help}")?;
                }
                Ok(())
            }
            UriBuildError::NotCarried { variable, message } => {
                write!(
                    f,
                    "the value of `{variable}` cannot be carried by this template: {message}"
                )
            }
        }
    }
}

/// Builds the URI `template` names for `values` with RFC 6570 expansion: a `{var}`
/// value is percent-encoded whole (`/` becomes `%2F`), a `{+var}` value keeps `/`; a form
/// parameter without a value is left out. Every path variable needs a value. The URI is
/// then matched against the template and must give back exactly `values`, so a URI this
/// builds is one the server reads as meant.
pub fn build_uri(template: &str, values: &[(&str, &str)]) -> Result<String, UriBuildError> {
    let parsed = Template::parse(template).map_err(UriBuildError::Template)?;
    let names = parsed.variable_names();
    for (name, _) in values {
        if !names.contains(name) {
            return Err(UriBuildError::Unknown {
                variable: name.to_string(),
                help: pipec_base::names::did_you_mean(name, names.iter().copied()),
            });
        }
    }
    let form = parsed.form_names();
    for name in &names {
        if !form.iter().any(|f| f == name) && !values.iter().any(|(n, _)| n == name) {
            return Err(UriBuildError::Missing {
                variable: name.to_string(),
            });
        }
    }
    let mut context = SimpleContext::new();
    for (name, value) in values {
        context.insert(*name, *value);
    }
    let not_carried = |variable: &str, message: String| UriBuildError::NotCarried {
        variable: variable.to_string(),
        message,
    };
    let first = values.first().map(|(n, _)| *n).unwrap_or("");
    let expanded = UriTemplateStr::new(template)
        .map_err(|e| not_carried(first, e.to_string()))?
        .expand::<UriSpec, _>(&context)
        .map_err(|e| not_carried(first, e.to_string()))?
        .to_string();
    let captures = match matcher::match_uri(&parsed, &expanded) {
        Ok(Some(captures)) => captures,
        Ok(None) => {
            return Err(not_carried(
                first,
                "the URI built does not match the template".into(),
            ));
        }
        Err(matcher::MatchError::Refused { variable, reason }) => {
            return Err(UriBuildError::NotCarried {
                variable,
                message: reason.to_string(),
            });
        }
        Err(e) => return Err(not_carried(first, e.to_string())),
    };
    for (name, value) in values {
        if captures.get(name) != Some(*value) {
            return Err(not_carried(
                name,
                "the URI built reads back as another value".into(),
            ));
        }
    }
    if captures.values.len() != values.len() {
        return Err(not_carried(
            first,
            "the URI built reads back with other variables".into(),
        ));
    }
    Ok(expanded)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn built(backend: &str, template: &str, uri: &str) -> Result<String, BackendUrlError> {
        let t = Template::parse(template).unwrap();
        let captures = matcher::match_uri(&t, uri).unwrap().unwrap();
        backend_url(&Backend::parse(backend).unwrap(), &t, &captures).map(|u| u.to_string())
    }

    #[test]
    fn the_rest_after_the_scheme_goes_after_the_backend_path() {
        assert_eq!(
            built(
                "http://127.0.0.1:8088/api",
                "weather://forecast/{city}",
                "weather://forecast/New%20York"
            )
            .unwrap(),
            "http://127.0.0.1:8088/api/forecast/New%20York"
        );
        assert_eq!(
            built(
                "http://h/base/",
                "file:///project/src/{path}?mode=raw",
                "file:///project/src/resources%2Fdoc.md?mode=raw"
            )
            .unwrap(),
            "http://h/base/project/src/resources/doc.md?mode=raw"
        );
        assert_eq!(
            built(
                "https://h",
                "t://tickets/{id}{?fields}",
                "t://tickets/a%25b?fields=x%20y"
            )
            .unwrap(),
            "https://h/tickets/a%25b?fields=x+y"
        );
    }

    #[test]
    fn host_tricks_are_refused_or_stay_inside_one_segment() {
        for at in [
            "t://x/@evil.com",
            "t://x/user:pw@evil.com",
            "t://x/%40evil.com",
        ] {
            assert!(built("http://h/api", "t://x/{id}", at).is_err(), "{at}");
        }
        let got = built("http://h/api", "t://{id}", "t://.evil.com%3A80").unwrap();
        assert_eq!(Url::parse(&got).unwrap().host_str(), Some("h"));
    }

    #[test]
    fn backends_must_be_http_urls_with_a_host() {
        assert!(Backend::parse("file:///etc").is_err());
        assert!(Backend::parse("ftp://h/").is_err());
        assert!(Backend::parse("http://h/#x").is_err());
        assert!(Backend::parse("not a url").is_err());
        assert!(Backend::parse("https://h:8443/a").is_ok());
    }

    #[test]
    fn uris_are_built_with_rfc_6570_encoding() {
        assert_eq!(
            build_uri("mcp://crm/deals/{deal_id}", &[("deal_id", "D 1/x")]).unwrap(),
            "mcp://crm/deals/D%201%2Fx"
        );
        assert_eq!(
            build_uri("file:///docs/{+path}", &[("path", "a/b c.md")]).unwrap(),
            "file:///docs/a/b%20c.md"
        );
        assert_eq!(
            build_uri("x://s/{id}{?q,limit}", &[("id", "a"), ("limit", "5")]).unwrap(),
            "x://s/a?limit=5"
        );
    }

    #[test]
    fn values_a_template_cannot_carry_are_refused() {
        assert!(matches!(
            build_uri("file:///docs/{+path}", &[("path", "a?b")]),
            Err(UriBuildError::NotCarried { .. })
        ));
        assert!(matches!(
            build_uri("file:///docs/{+path}", &[("path", "a%2Fb")]),
            Err(UriBuildError::NotCarried { .. })
        ));
        assert!(matches!(
            build_uri("file:///docs/{+path}", &[("path", "../x")]),
            Err(UriBuildError::NotCarried { .. })
        ));
        assert_eq!(
            build_uri("x://d/{deal_id}", &[]),
            Err(UriBuildError::Missing {
                variable: "deal_id".into()
            })
        );
        match build_uri("x://d/{deal_id}", &[("deal_idd", "1")]) {
            Err(UriBuildError::Unknown {
                help: Some(help), ..
            }) => assert!(help.contains("deal_id")),
            other => panic!("{other:?}"),
        }
    }
}
