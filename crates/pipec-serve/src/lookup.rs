//! Which entry of a [`Catalogue`] answers a requested URI: a static resource with that
//! exact URI first, then the templates in declaration order. A refused value stops the
//! search, so a URI a strict template refuses never falls through to a more permissive
//! one declared after it.

use std::collections::HashMap;

use pipec_base::uri::TemplateError;

use super::catalogue::Catalogue;
use super::matcher::{self, Captures, MatchError, Template};

/// The catalogue's templates, parsed once, and its static URIs.
#[derive(Clone, Debug)]
pub struct UriLookup {
    statics: HashMap<String, usize>,
    /// `(index in catalogue.templates, parsed template)`.
    templates: Vec<(usize, Template)>,
}

/// What answers a URI, by index into the catalogue it was built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    Static { index: usize },
    Template { index: usize, captures: Captures },
}

/// A template of the catalogue that cannot be matched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmatchableTemplate {
    pub index: usize,
    pub uri_template: String,
    pub error: TemplateError,
}

impl UriLookup {
    /// Parses every template; all that fail are returned together.
    pub fn new(catalogue: &Catalogue) -> Result<UriLookup, Vec<UnmatchableTemplate>> {
        let mut statics = HashMap::new();
        for (index, resource) in catalogue.resources.iter().enumerate() {
            // The first declaration of a URI is the one served.
            statics.entry(resource.uri.clone()).or_insert(index);
        }
        let mut templates = Vec::new();
        let mut errors = Vec::new();
        for (index, def) in catalogue.templates.iter().enumerate() {
            match Template::parse(&def.uri_template) {
                Ok(t) => templates.push((index, t)),
                Err(error) => errors.push(UnmatchableTemplate {
                    index,
                    uri_template: def.uri_template.clone(),
                    error,
                }),
            }
        }
        if errors.is_empty() {
            Ok(UriLookup { statics, templates })
        } else {
            Err(errors)
        }
    }

    /// The entry that answers `uri`, `Ok(None)` when none does.
    pub fn find(&self, uri: &str) -> Result<Option<Found>, MatchError> {
        if uri.len() > matcher::MAX_URI_BYTES {
            return Err(MatchError::TooLong { bytes: uri.len() });
        }
        if let Some(index) = self.statics.get(uri) {
            return Ok(Some(Found::Static { index: *index }));
        }
        for (index, template) in &self.templates {
            if let Some(captures) = matcher::match_uri(template, uri)? {
                return Ok(Some(Found::Template {
                    index: *index,
                    captures,
                }));
            }
        }
        Ok(None)
    }

    /// The parsed template of `catalogue.templates[index]`.
    pub fn template(&self, index: usize) -> Option<&Template> {
        self.templates
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, t)| t)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::catalogue::{ResourceMeta, StaticResource, TemplateDef, TemplateSource};

    fn catalogue(statics: &[&str], templates: &[&str]) -> Catalogue {
        Catalogue {
            service: None,
            prompts: Vec::new(),
            resources: statics
                .iter()
                .map(|uri| StaticResource {
                    uri: uri.to_string(),
                    meta: ResourceMeta::default(),
                    content: None,
                    at: None,
                })
                .collect(),
            templates: templates
                .iter()
                .map(|t| TemplateDef {
                    uri_template: t.to_string(),
                    meta: ResourceMeta::default(),
                    source: TemplateSource::Render(String::new()),
                    at: None,
                })
                .collect(),
        }
    }

    #[test]
    fn static_uris_come_first_then_templates_in_order() {
        let c = catalogue(&["x://r/README.md"], &["x://r/{name}", "x://r/{+path}"]);
        let lookup = UriLookup::new(&c).unwrap();
        assert_eq!(
            lookup.find("x://r/README.md").unwrap(),
            Some(Found::Static { index: 0 })
        );
        assert!(matches!(
            lookup.find("x://r/a.md").unwrap(),
            Some(Found::Template { index: 0, .. })
        ));
        assert!(matches!(
            lookup.find("x://r/a/b.md").unwrap(),
            Some(Found::Template { index: 1, .. })
        ));
        assert_eq!(lookup.find("y://other").unwrap(), None);
    }

    #[test]
    fn a_refusal_stops_the_search() {
        // The first template refuses the NUL; the second would take anything, and must
        // not be tried.
        let c = catalogue(&[], &["x://r/{name}", "x://{+anything}"]);
        let lookup = UriLookup::new(&c).unwrap();
        assert!(matches!(
            lookup.find("x://r/a%00b"),
            Err(MatchError::Refused { .. })
        ));
    }

    #[test]
    fn unmatchable_templates_are_all_reported() {
        let c = catalogue(&[], &["x://{a}{b}", "x://ok/{id}", "x://{#frag}"]);
        let errors = UriLookup::new(&c).unwrap_err();
        let indexes: Vec<usize> = errors.iter().map(|e| e.index).collect();
        assert_eq!(indexes, vec![0, 2]);
    }
}
