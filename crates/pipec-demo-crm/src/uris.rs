//! The CRM's resource URIs: the two templates, building a URI from a deal's values, and
//! telling which resource a URI names.

use pipec_base::uri::{encode_segment, percent_decode};

pub(crate) const ACTIVITY_TEMPLATE: &str = "mcp://crm/deals/{deal_id}/activity";
pub(crate) const EMAILS_TEMPLATE: &str = "mcp://crm/deals/{deal_id}/emails/{start}/{end}";

const DEALS_PREFIX: &str = "mcp://crm/deals/";

/// What a URI names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    Activity {
        deal_id: String,
    },
    /// The dates as written in the URI; whether they are dates is the read's to check.
    Emails {
        deal_id: String,
        start: String,
        end: String,
    },
}

pub(crate) fn activity_uri(deal_id: &str) -> String {
    format!("{DEALS_PREFIX}{}/activity", encode_segment(deal_id))
}

/// A deal's card: only ever embedded in a `get_deal_card` result, never read.
pub(crate) fn card_uri(deal_id: &str) -> String {
    format!("{DEALS_PREFIX}{}/card", encode_segment(deal_id))
}

pub(crate) fn emails_uri(deal_id: &str, start: &str, end: &str) -> String {
    format!(
        "{DEALS_PREFIX}{}/emails/{}/{}",
        encode_segment(deal_id),
        encode_segment(start),
        encode_segment(end)
    )
}

/// The resource a URI names, its values percent-decoded; `None` for a URI of neither
/// template (a query or fragment included, which the templates do not have).
pub(crate) fn recognise(uri: &str) -> Option<Named> {
    let rest = uri.strip_prefix(DEALS_PREFIX)?;
    if rest.contains(['?', '#']) {
        return None;
    }
    let segments: Vec<&str> = rest.split('/').collect();
    match segments.as_slice() {
        [deal, "activity"] if !deal.is_empty() => Some(Named::Activity {
            deal_id: percent_decode(deal),
        }),
        [deal, "emails", start, end] if !deal.is_empty() => Some(Named::Emails {
            deal_id: percent_decode(deal),
            start: percent_decode(start),
            end: percent_decode(end),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_uri_is_recognised_as_what_built_it() {
        assert_eq!(
            recognise(&activity_uri("D1")),
            Some(Named::Activity {
                deal_id: "D1".into()
            })
        );
        let uri = emails_uri("D 7/x", "2025-01-01", "2025-12-31");
        assert_eq!(
            uri,
            "mcp://crm/deals/D%207%2Fx/emails/2025-01-01/2025-12-31"
        );
        assert_eq!(
            recognise(&uri),
            Some(Named::Emails {
                deal_id: "D 7/x".into(),
                start: "2025-01-01".into(),
                end: "2025-12-31".into()
            })
        );
    }

    #[test]
    fn uris_of_neither_template_name_nothing() {
        for uri in [
            "mcp://crm/deals/D1",
            "mcp://crm/deals//activity",
            "mcp://crm/deals/D1/activity/more",
            "mcp://crm/deals/D1/activity?page=2",
            "mcp://crm/deals/D1/emails/2025-01-01",
            "mcp://other/deals/D1/activity",
            "",
        ] {
            assert_eq!(recognise(uri), None, "{uri}");
        }
    }

    #[test]
    fn the_templates_match_the_uris_built_for_them() {
        for (template, uri) in [
            (ACTIVITY_TEMPLATE, activity_uri("D 1")),
            (
                EMAILS_TEMPLATE,
                emails_uri("D1", "2025-01-01", "2025-02-01"),
            ),
        ] {
            let parsed = pipec_base::uri::parse(template).ok();
            let captured = parsed.and_then(|t| t.match_uri(&uri));
            assert!(captured.is_some(), "{uri} against {template}");
        }
    }
}
