//! The matcher's cases: what each expression matches, what cannot be matched and where,
//! that expansion and matching are inverse, that matching takes linear time, and the
//! overlap warning built on it.

#![allow(clippy::unwrap_used)]

use super::*;

fn template(text: &str) -> UriTemplate {
    parse(text).unwrap()
}

fn matcher(text: &str) -> Matcher {
    Matcher::new(&template(text), MatchOptions::SERVED).unwrap()
}

/// What a server captures, decoded.
fn matched(template_text: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let found = matcher(template_text).find(uri)?;
    Some(
        found
            .into_iter()
            .map(|(v, range)| (v.name, percent_decode(&uri[range])))
            .collect(),
    )
}

fn pairs(list: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
    Some(
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn a_simple_variable_is_one_segment() {
    let t = "tracker://tickets/{ticket_id}";
    assert_eq!(
        matched(t, "tracker://tickets/T-1"),
        pairs(&[("ticket_id", "T-1")])
    );
    assert_eq!(matched(t, "tracker://tickets/T-1/x"), None);
    assert_eq!(matched(t, "tracker://tickets/"), None);
    assert_eq!(matched(t, "tracker://ticket/T-1"), None);
    assert_eq!(
        matched(t, "tracker://tickets/a%20b"),
        pairs(&[("ticket_id", "a b")])
    );
}

#[test]
fn literal_text_after_a_variable_in_the_same_segment() {
    let t = "x://docs/{name}.json";
    assert_eq!(matched(t, "x://docs/a.b.json"), pairs(&[("name", "a.b")]));
    assert_eq!(matched(t, "x://docs/a.json/x"), None);
    let t = "x://{a}-{b}/end";
    assert_eq!(
        matched(t, "x://p-q-r/end"),
        pairs(&[("a", "p"), ("b", "q-r")])
    );
}

#[test]
fn a_reserved_variable_takes_the_rest_and_literals_after_it() {
    let t = "file:///handbook/{+path}";
    assert_eq!(
        matched(t, "file:///handbook/a/b%20c.md"),
        pairs(&[("path", "a/b c.md")])
    );
    let t = "x://r/{+dir}/{name}.json";
    assert_eq!(
        matched(t, "x://r/a/b/c.json"),
        pairs(&[("dir", "a/b"), ("name", "c")])
    );
    assert_eq!(matched("x://r/{+p}", "x://r/a?b"), None);
    assert_eq!(matched("x://r/{+p}", "x://r/a#b"), None);
}

#[test]
fn literal_query_text_is_matched_exactly() {
    let t = "file:///project/src/{path}?mode=raw";
    assert_eq!(
        matched(t, "file:///project/src/doc.md?mode=raw"),
        pairs(&[("path", "doc.md")])
    );
    assert_eq!(matched(t, "file:///project/src/doc.md"), None);
    assert_eq!(matched(t, "file:///project/src/doc.md?mode=raw&x=1"), None);
    assert_eq!(matched(t, "file:///project/src/doc.md?mode=RAW"), None);
}

#[test]
fn reshapr_compatibility_takes_encoded_and_raw_slashes() {
    let t = "file:///project/src/{path}?mode=raw";
    let encoded = matched(t, "file:///project/src/resources%2Fdoc.md?mode=raw");
    let raw = matched(t, "file:///project/src/resources/doc.md?mode=raw");
    assert_eq!(encoded, pairs(&[("path", "resources/doc.md")]));
    assert_eq!(raw, encoded);
    assert!(matcher(t).is_multi_segment("path"));
    // Another name, or `{path}` not at the end, keeps to one segment.
    assert_eq!(matched("x://r/{name}", "x://r/a/b"), None);
    assert_eq!(matched("x://r/{path}/meta", "x://r/a/b/meta"), None);
    assert!(!matcher("x://r/{path}/{+rest}").is_multi_segment("path"));
}

#[test]
fn form_queries_are_optional_in_any_order_and_closed() {
    let t = "x://search/{+scope}{?q,limit}";
    assert_eq!(matched(t, "x://search/a/b"), pairs(&[("scope", "a/b")]));
    assert_eq!(
        matched(t, "x://search/a?limit=5&q=x%20y"),
        pairs(&[("scope", "a"), ("q", "x y"), ("limit", "5")])
    );
    assert_eq!(matched(t, "x://search/a?q=1&other=2"), None);
    assert_eq!(matched(t, "x://search/a?q=1&q=2"), None);
    assert_eq!(matched(t, "x://search/a?q"), None);
    let t = "x://f/{id}?mode=raw{&lines}";
    assert_eq!(matched(t, "x://f/a?mode=raw"), pairs(&[("id", "a")]));
    assert_eq!(
        matched(t, "x://f/a?mode=raw&lines=3"),
        pairs(&[("id", "a"), ("lines", "3")])
    );
    assert_eq!(matched(t, "x://f/a?mode=cooked&lines=3"), None);
    assert_eq!(matched(t, "x://f/a"), None);
}

#[test]
fn variables_inside_a_literal_query() {
    let t = "x://f/{id}?mode={mode}&v=1";
    assert_eq!(
        matched(t, "x://f/a?mode=raw&v=1"),
        pairs(&[("id", "a"), ("mode", "raw")])
    );
    assert_eq!(matched(t, "x://f/a?mode=raw&v=2"), None);
}

#[test]
fn unmatchable_templates_are_refused_with_a_position() {
    for (text, offset) in [
        ("x://{a}{b}", 7),
        ("x://{+a}/{+b}", 9),
        ("x://{#a}", 4),
        ("x://{a,b}", 4),
        ("x://{a*}", 4),
        ("x://{?a}/x", 4),
        ("x://r{&a}", 5),
        ("x://r?m=1{?a}", 9),
    ] {
        let error = Matcher::new(&template(text), MatchOptions::SERVED).unwrap_err();
        assert_eq!(error.start, offset, "{text}: {}", error.message());
    }
}

#[test]
fn adversarial_inputs_finish_quickly() {
    // A backtracking matcher takes quadratic time or worse on these.
    let t = matcher("x://{a}-{+b}-{c}");
    let uri = format!("x://{}", "-".repeat(64 * 1024 - 8));
    let started = std::time::Instant::now();
    let _ = t.find(&uri);
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn link_templates_match_without_reshapr_paths() {
    let tpl = template("mcp://crm/deals/{deal_id}/emails/{start}/{end}");
    assert_eq!(tpl.check_matchable(), Ok(()));
    let caps = tpl
        .match_uri("mcp://crm/deals/D1/emails/2025-01-01/2025-12-31")
        .unwrap();
    assert_eq!(caps[0], ("deal_id".into(), "D1".into()));
    assert_eq!(caps[2], ("end".into(), "2025-12-31".into()));
    assert!(tpl.match_uri("mcp://crm/deals/D1/activity").is_none());
    let files = template("file:///handbook/{+path}");
    assert_eq!(
        files.match_uri("file:///handbook/a/b%20c.md"),
        pairs(&[("path", "a/b c.md")])
    );
    // Served, `{path}` takes several segments; as a link it takes one.
    assert_eq!(template("x://r/{path}").match_uri("x://r/a/b"), None);
    assert_eq!(
        matched("x://r/{path}", "x://r/a/b"),
        pairs(&[("path", "a/b")])
    );
}

#[test]
fn segments_rests_literal_and_form_queries() {
    let raw = "file:///project/src/{name}?mode=raw";
    assert!(matched(raw, "file:///project/src/main.rs?mode=raw").is_some());
    assert!(matched(raw, "file:///project/src/a/b.rs?mode=raw").is_none());
    assert!(matched(raw, "file:///project/src/main.rs").is_none());
    let rest = "file:///project/{+path}{?rev}";
    assert!(matched(rest, "file:///project/a/b.rs").is_some());
    assert!(matched(rest, "file:///project/a/b.rs?rev=3").is_some());
    assert!(matched(rest, "file:///project/a/b.rs?other=3").is_none());
    assert!(matched(rest, "file:///project/").is_none());
    let two = "x://{a}/n/{b}.md";
    assert!(matched(two, "x://1/n/2.md").is_some());
    assert!(matched(two, "x://1/n/2.x.md").is_some());
    assert_eq!(template(rest).sample("x"), "file:///project/x");
}

#[test]
fn long_templates_match_in_linear_time() {
    let text = format!("x://{}", "{a}-".repeat(2000));
    let uri = format!("x://{}", "y-".repeat(2000));
    let started = std::time::Instant::now();
    assert!(matcher(&text).find(&uri).is_some());
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

#[test]
fn the_matchable_subset_names_the_expression_at_fault() {
    for ok in [
        "file:///project/src/{path}?mode=raw",
        "file:///project/{+path}",
        "file:///project/{+path}{?rev}",
        "https://x/{a}/{b}{?q,r}",
        "x://a?mode={mode}",
        "x://{+path}/raw",
        "x://f/{id}?mode=raw{&lines}",
    ] {
        assert_eq!(template(ok).check_matchable(), Ok(()), "{ok}");
    }
    for (text, at, kind) in [
        ("x://a{/path}", "{/path}", UnmatchableKind::Operator),
        ("x://a/{#f}", "{#f}", UnmatchableKind::Operator),
        ("x://a/{/p*}", "{/p*}", UnmatchableKind::Operator),
        ("x://a/{p*}", "{p*}", UnmatchableKind::Modifier),
        ("x://a/{p:3}", "{p:3}", UnmatchableKind::Modifier),
        ("x://a/{a,b}", "{a,b}", UnmatchableKind::SeveralVariables),
        ("x://a/{a}{b}", "{b}", UnmatchableKind::Adjacent),
        ("x://a/{+a}/{+b}", "{+b}", UnmatchableKind::SecondRest),
        ("x://a/{?q}/x", "{?q}", UnmatchableKind::AfterFormQuery),
        (
            "x://a/{p}?mode=raw{?q}",
            "{?q}",
            UnmatchableKind::SecondQuery,
        ),
        ("x://r{&a}", "{&a}", UnmatchableKind::LoneContinuation),
        ("x://r?a={+b}", "{+b}", UnmatchableKind::RestInQuery),
    ] {
        let problem = template(text).check_matchable().unwrap_err();
        assert_eq!(&text[problem.start..problem.end], at, "{text}");
        assert_eq!(problem.shown, at, "{text}");
        assert_eq!(problem.kind, kind, "{text}: {}", problem.message());
    }
}

/// The `n`th value of 1 to 8 characters drawn from `alphabet`: every character in every
/// position, and every length, as `n` grows.
fn nth_value(n: usize, alphabet: &[char]) -> String {
    let len = 1 + n % 8;
    let mut digits = n.wrapping_mul(0x9E37_79B9) / 8;
    (0..len)
        .map(|i| {
            let c = alphabet[(digits + i * 7) % alphabet.len()];
            digits /= alphabet.len().max(2) / 2 + 1;
            c
        })
        .collect()
}

/// Whatever values a template is expanded with, matching the URI gives them back.
#[test]
fn expanding_then_matching_gives_the_values_back() {
    // `{var}` values are percent-encoded by expansion, so any character goes; `{+var}`
    // keeps reserved characters as they are, so its values hold no `?`, `#` or `%`
    // (which a URI would read as the query, the fragment, or an escape).
    let anything: Vec<char> = "aZ09 /?#&,%+=:@~!$'()*;[]é€".chars().collect();
    let path_like: Vec<char> = "aZ09 /&,+=:@~!$'()*;é€".chars().collect();
    let cases: [(&str, &[(&str, bool)]); 6] = [
        (
            "mcp://crm/deals/{deal_id}/emails/{start}/{end}",
            &[("deal_id", false), ("start", false), ("end", false)],
        ),
        ("x://docs/{name}.json", &[("name", false)]),
        (
            "file:///r/{+dir}/{name}.json",
            &[("dir", true), ("name", false)],
        ),
        (
            "x://f/{id}?mode={mode}&v=1",
            &[("id", false), ("mode", false)],
        ),
        (
            "x://search/{+scope}{?q,limit}",
            &[("scope", true), ("q", false), ("limit", false)],
        ),
        ("x://{a}-{b}/end", &[("a", false), ("b", false)]),
    ];
    for (case, (text, vars)) in cases.into_iter().enumerate() {
        let tpl = template(text);
        for round in 0..200 {
            let values: Vec<(String, String)> = vars
                .iter()
                .enumerate()
                .map(|(i, (name, rest))| {
                    let alphabet = if *rest { &path_like } else { &anything };
                    (
                        name.to_string(),
                        nth_value(round * 31 + i * 7 + case, alphabet),
                    )
                })
                .collect();
            let uri = tpl
                .expand(&|n| values.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
                .unwrap();
            assert_eq!(
                tpl.match_uri(&uri),
                Some(values.clone()),
                "{text} round {round}: {uri}"
            );
        }
    }
}

#[test]
fn served_overlaps_of_resources_and_templates() {
    let wide = template("file:///project/{+path}");
    let narrow = template("file:///project/src/{name}");
    let other = template("file:///docs/{name}");
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
