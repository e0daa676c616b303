//! A template's path with the captured values put back, as decoded segments: the path
//! beneath a file root, or the segments and query pairs appended to a backend URL. Both
//! are built from values, never by splicing strings, and every segment is checked.

use std::fmt;

use super::matcher::{Captures, Piece, Template};
use super::value_check::{self, Refusal};

/// Why a template and its values give no path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathError {
    /// A variable the path needs has no value.
    Missing { variable: String },
    /// A segment is refused; `variable` is the last variable that gave it text.
    Refused {
        variable: Option<String>,
        reason: Refusal,
    },
    /// The template's shape does not give a path (said in words).
    Unsupported { message: String },
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathError::Missing { variable } => write!(f, "no value for `{variable}`"),
            PathError::Refused {
                variable: Some(v),
                reason,
            } => write!(f, "the value of `{v}` is refused: {reason}"),
            PathError::Refused {
                variable: None,
                reason,
            } => write!(f, "the template's path is refused: {reason}"),
            PathError::Unsupported { message } => f.write_str(message),
        }
    }
}

/// One segment being built, and whether a value gave it any text.
struct Segment {
    text: String,
    from_variable: Option<String>,
}

/// The segments of `pieces` with values substituted; each literal is percent-decoded
/// once (it is URI text), each value used as it is (it was decoded when matched).
fn segments_of(pieces: &[Piece], captures: &Captures) -> Result<Vec<Segment>, PathError> {
    let mut segments = vec![Segment {
        text: String::new(),
        from_variable: None,
    }];
    let append = |text: &str, variable: Option<&str>, segments: &mut Vec<Segment>| {
        for (i, part) in text.split('/').enumerate() {
            if i > 0 {
                segments.push(Segment {
                    text: String::new(),
                    from_variable: None,
                });
            }
            if let Some(last) = segments.last_mut() {
                last.text.push_str(part);
                if let Some(v) = variable {
                    last.from_variable = Some(v.to_string());
                }
            }
        }
    };
    for piece in pieces {
        match piece {
            Piece::Literal(bytes) => {
                let text = value_check::percent_decode_once(bytes).map_err(|reason| {
                    PathError::Refused {
                        variable: None,
                        reason,
                    }
                })?;
                append(&text, None, &mut segments);
            }
            Piece::Var(variable) => {
                let Some(value) = captures.get(&variable.name) else {
                    return Err(PathError::Missing {
                        variable: variable.name.clone(),
                    });
                };
                if !variable.multi_segment && value.contains('/') {
                    return Err(PathError::Refused {
                        variable: Some(variable.name.clone()),
                        reason: Refusal::SlashInSegment,
                    });
                }
                // An empty value would merge its neighbours into one segment.
                if value.is_empty() {
                    return Err(PathError::Refused {
                        variable: Some(variable.name.clone()),
                        reason: Refusal::EmptySegment,
                    });
                }
                append(value, Some(&variable.name), &mut segments);
            }
        }
    }
    Ok(segments)
}

fn refused(segment: &Segment, reason: Refusal) -> PathError {
    PathError::Refused {
        variable: segment.from_variable.clone(),
        reason,
    }
}

/// The path beneath a file root: the template's path after the last `/` of its literal
/// prefix (`file:///docs/{lang}/{+path}` gives `LANG/PATH`). Every segment must pass
/// [`value_check::check_segment`], name no drive, and, unless `allow_hidden`, not start
/// with `.`.
pub fn file_segments(
    template: &Template,
    captures: &Captures,
    allow_hidden: bool,
) -> Result<Vec<String>, PathError> {
    let Some(Piece::Literal(prefix)) = template.path().first() else {
        return Err(PathError::Unsupported {
            message: "a file template starts with literal text such as `file:///docs/`".into(),
        });
    };
    let Some(cut) = prefix.iter().rposition(|b| *b == b'/') else {
        return Err(PathError::Unsupported {
            message: "a file template's literal prefix ends its folder with `/`".into(),
        });
    };
    let mut pieces = template.path().to_vec();
    pieces[0] = Piece::Literal(prefix[cut + 1..].to_vec());
    let segments = segments_of(&pieces, captures)?;
    let mut out = Vec::with_capacity(segments.len());
    for segment in &segments {
        value_check::check_segment(&segment.text).map_err(|r| refused(segment, r))?;
        if value_check::names_a_drive(&segment.text) {
            return Err(refused(segment, Refusal::DriveLetter));
        }
        if !allow_hidden && segment.text.starts_with('.') {
            return Err(refused(segment, Refusal::Hidden));
        }
        out.push(segment.text.clone());
    }
    Ok(out)
}

/// What a backend request appends to the backend URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendPath {
    /// Decoded path segments, appended after the backend's own path.
    pub segments: Vec<String>,
    /// Decoded query pairs: the template's literal query, then the form parameters given.
    pub query: Vec<(String, String)>,
}

/// The rest of the template after `scheme://` (authority and path, an empty authority
/// dropped), with values substituted, and its query as pairs.
pub fn backend_path(template: &Template, captures: &Captures) -> Result<BackendPath, PathError> {
    let Some(Piece::Literal(prefix)) = template.path().first() else {
        return Err(PathError::Unsupported {
            message: "a backend template starts with `scheme://`".into(),
        });
    };
    let Some(at) = prefix.windows(3).position(|w| w == b"://") else {
        return Err(PathError::Unsupported {
            message: "a backend template starts with `scheme://`".into(),
        });
    };
    let mut rest = &prefix[at + 3..];
    // `file:///project/src`: the authority is empty, the path starts at the third `/`.
    if let Some(stripped) = rest.strip_prefix(b"/") {
        rest = stripped;
    }
    let mut pieces = template.path().to_vec();
    pieces[0] = Piece::Literal(rest.to_vec());
    let built = segments_of(&pieces, captures)?;
    let mut segments = Vec::with_capacity(built.len());
    for segment in &built {
        // An empty segment written in the template itself (a trailing `/`) is kept; any
        // segment a value touched passes every check.
        if segment.from_variable.is_some() || !segment.text.is_empty() {
            value_check::check_segment(&segment.text).map_err(|r| refused(segment, r))?;
        }
        segments.push(segment.text.clone());
    }
    let mut query = literal_query_pairs(template, captures)?;
    for name in template.form_names() {
        if let Some(value) = captures.get(name) {
            value_check::check_text(value).map_err(|reason| PathError::Refused {
                variable: Some(name.clone()),
                reason,
            })?;
            query.push((name.clone(), value.to_string()));
        }
    }
    Ok(BackendPath { segments, query })
}

/// The literal query as pairs: each field `name=text` or `name={var}`.
fn literal_query_pairs(
    template: &Template,
    captures: &Captures,
) -> Result<Vec<(String, String)>, PathError> {
    let unsupported = || PathError::Unsupported {
        message: "in a backend template's query, each field is `name=text` or `name={var}`".into(),
    };
    let decode = |bytes: &[u8]| {
        value_check::percent_decode_once(bytes).map_err(|reason| PathError::Refused {
            variable: None,
            reason,
        })
    };
    // The query's pieces regrouped by field (`&` ends a field).
    let mut fields: Vec<(Vec<u8>, Option<&str>)> = vec![(Vec::new(), None)];
    for piece in template.query() {
        match piece {
            Piece::Literal(bytes) => {
                for (i, chunk) in bytes.split(|b| *b == b'&').enumerate() {
                    if i > 0 {
                        fields.push((Vec::new(), None));
                    }
                    let Some((text, variable)) = fields.last_mut() else {
                        return Err(unsupported());
                    };
                    if variable.is_some() && !chunk.is_empty() {
                        return Err(unsupported());
                    }
                    text.extend_from_slice(chunk);
                }
            }
            Piece::Var(v) => {
                let Some((text, variable)) = fields.last_mut() else {
                    return Err(unsupported());
                };
                if variable.is_some() || !text.ends_with(b"=") {
                    return Err(unsupported());
                }
                *variable = Some(v.name.as_str());
            }
        }
    }
    let mut pairs = Vec::new();
    for (text, variable) in fields {
        if text.is_empty() && variable.is_none() {
            continue;
        }
        let Some(eq) = text.iter().position(|b| *b == b'=') else {
            return Err(unsupported());
        };
        let name = decode(&text[..eq])?;
        let value = match variable {
            None => decode(&text[eq + 1..])?,
            Some(variable) => {
                if eq + 1 != text.len() {
                    return Err(unsupported());
                }
                let Some(value) = captures.get(variable) else {
                    return Err(PathError::Missing {
                        variable: variable.to_string(),
                    });
                };
                value_check::check_text(value).map_err(|reason| PathError::Refused {
                    variable: Some(variable.to_string()),
                    reason,
                })?;
                value.to_string()
            }
        };
        pairs.push((name, value));
    }
    Ok(pairs)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::matcher::match_uri;

    fn captured(template: &Template, uri: &str) -> Captures {
        match_uri(template, uri).unwrap().unwrap()
    }

    #[test]
    fn file_paths_start_after_the_literal_folder() {
        let t = Template::parse("file:///docs/{lang}/{+path}").unwrap();
        let c = captured(&t, "file:///docs/en/a/b.md");
        assert_eq!(file_segments(&t, &c, false).unwrap(), ["en", "a", "b.md"]);
        let t = Template::parse("file:///docs/v{version}.md").unwrap();
        let c = captured(&t, "file:///docs/v2.md");
        assert_eq!(file_segments(&t, &c, false).unwrap(), ["v2.md"]);
        let t = Template::parse("file:///project/src/{path}?mode=raw").unwrap();
        let c = captured(&t, "file:///project/src/a%2Fb.md?mode=raw");
        assert_eq!(file_segments(&t, &c, false).unwrap(), ["a", "b.md"]);
    }

    #[test]
    fn a_one_segment_variable_may_not_hold_a_slash() {
        let t = Template::parse("file:///docs/{name}").unwrap();
        let c = captured(&t, "file:///docs/a%2Fb");
        assert_eq!(
            file_segments(&t, &c, false),
            Err(PathError::Refused {
                variable: Some("name".into()),
                reason: Refusal::SlashInSegment
            })
        );
    }

    #[test]
    fn dotfiles_and_drives_are_refused_in_file_paths() {
        let t = Template::parse("file:///docs/{+path}").unwrap();
        let c = captured(&t, "file:///docs/a/.env");
        assert!(matches!(
            file_segments(&t, &c, false),
            Err(PathError::Refused {
                reason: Refusal::Hidden,
                ..
            })
        ));
        assert_eq!(file_segments(&t, &c, true).unwrap(), ["a", ".env"]);
        let c = captured(&t, "file:///docs/C:/x");
        assert!(matches!(
            file_segments(&t, &c, false),
            Err(PathError::Refused {
                reason: Refusal::DriveLetter,
                ..
            })
        ));
    }

    #[test]
    fn backend_paths_take_everything_after_the_scheme() {
        let t = Template::parse("weather://forecast/{city}").unwrap();
        let c = captured(&t, "weather://forecast/New%20York");
        let built = backend_path(&t, &c).unwrap();
        assert_eq!(built.segments, ["forecast", "New York"]);
        let t = Template::parse("file:///project/src/{path}?mode=raw").unwrap();
        let c = captured(&t, "file:///project/src/resources/doc.md?mode=raw");
        let built = backend_path(&t, &c).unwrap();
        assert_eq!(built.segments, ["project", "src", "resources", "doc.md"]);
        assert_eq!(built.query, [("mode".to_string(), "raw".to_string())]);
        let t = Template::parse("x://s/{id}?mode={mode}&v=1{&q}").unwrap();
        let c = captured(&t, "x://s/a?mode=m&v=1&q=z");
        let built = backend_path(&t, &c).unwrap();
        assert_eq!(
            built.query,
            [
                ("mode".to_string(), "m".to_string()),
                ("v".to_string(), "1".to_string()),
                ("q".to_string(), "z".to_string())
            ]
        );
    }
}
