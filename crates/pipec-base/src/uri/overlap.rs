//! The entries a server offers (fixed URIs and templates, of a `serve` block or a
//! Resources specification) held against each other, for the warning about two entries
//! that answer one URI. The verdict comes from the server's own matcher, with the
//! server's options, so what is predicted here is what a request meets.

use super::{MatchOptions, Matcher, UriTemplate};

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
/// parameters) is tried against the other, both ways. A template that cannot be matched
/// overlaps nothing (it is refused on its own).
pub fn served_overlaps(resources: &[&str], templates: &[&UriTemplate]) -> Vec<ServedOverlap> {
    let matchers: Vec<Option<Matcher>> = templates
        .iter()
        .map(|t| Matcher::new(t, MatchOptions::SERVED).ok())
        .collect();
    let matches = |t: usize, uri: &str| matchers[t].as_ref().is_some_and(|m| m.find(uri).is_some());
    let mut out = Vec::new();
    for t in 0..templates.len() {
        for (r, resource) in resources.iter().enumerate() {
            if matches(t, resource) {
                out.push(ServedOverlap::Resource {
                    template: t,
                    resource: r,
                });
            }
        }
    }
    for later in 0..templates.len() {
        for earlier in 0..later {
            let shared = [templates[later].sample("x"), templates[earlier].sample("x")]
                .into_iter()
                .find(|uri| matches(later, uri) && matches(earlier, uri));
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
