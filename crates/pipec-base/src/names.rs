//! "Did you mean": the closest known name to a misspelt one; and the naming styles:
//! the words of a name, snake_case, CamelCase, and names of environment variables.

/// A close known name for a misspelt one, and whether it is the only one that close.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suggestion {
    pub name: String,
    /// No other candidate is as close: renaming to it is what the author meant.
    pub unique: bool,
}

/// The candidate closest to `name`, if it is close enough to be a likely typo, or a
/// longer name that starts with it (`deal` for `deal_id`).
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    suggestion(name, candidates).map(|s| s.name)
}

/// [`suggest`], with whether the suggestion is the only candidate that close.
pub fn suggestion<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<Suggestion> {
    let limit = match name.chars().count() {
        0..=2 => 1,
        3..=5 => 2,
        _ => 3,
    };
    let lower = name.to_lowercase();
    let mut candidates: Vec<&str> = candidates.into_iter().filter(|c| *c != name).collect();
    candidates.sort_unstable();
    candidates.dedup();
    let closest = |key: &dyn Fn(&str) -> Option<usize>| -> Option<Suggestion> {
        let scored: Vec<(usize, &str)> = candidates
            .iter()
            .filter_map(|c| key(c).map(|d| (d, *c)))
            .collect();
        let best = scored.iter().min()?;
        let ties = scored.iter().filter(|(d, _)| *d == best.0).count();
        Some(Suggestion {
            name: best.1.to_string(),
            unique: ties == 1,
        })
    };
    let by_distance = |c: &str| {
        let d = distance(&lower, &c.to_lowercase());
        (d <= limit).then_some(d)
    };
    if let Some(s) = closest(&by_distance) {
        return Some(s);
    }
    if name.chars().count() >= 3 {
        let by_prefix = |c: &str| c.to_lowercase().starts_with(&lower).then_some(c.len());
        if let Some(s) = closest(&by_prefix) {
            return Some(s);
        }
    }
    // A plain name for one that lives in a namespace (`chunk` for `kb.chunk`, declared
    // through `import "..." as kb`): compare with the part after the namespace.
    if !name.contains('.') {
        let by_last = |c: &str| {
            let (_, last) = c.rsplit_once('.')?;
            let d = distance(&lower, &last.to_lowercase());
            (d <= limit).then_some(d)
        };
        return closest(&by_last);
    }
    None
}

/// [`suggestion`] among a closed set of names, one of which must be meant (the
/// parameters of a tool a call has not given yet, the variables of a template): when none
/// is close and the set holds exactly one name, that one. It is a guess, not a likely
/// typo, so it is not `unique` (renaming to it is an unsafe fix).
pub fn suggestion_among<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<Suggestion> {
    let mut candidates: Vec<&str> = candidates.into_iter().filter(|c| *c != name).collect();
    candidates.sort_unstable();
    candidates.dedup();
    suggestion(name, candidates.iter().copied()).or(match candidates.as_slice() {
        [only] => Some(Suggestion {
            name: only.to_string(),
            unique: false,
        }),
        _ => None,
    })
}

/// The help line for a suggestion.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    suggest(name, candidates).map(|s| format!("did you mean `{s}`?"))
}

/// Levenshtein distance with transpositions counted as one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.is_empty() || b.is_empty() {
        return a.len().max(b.len());
    }
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
}

pub fn is_snake_case(name: &str) -> bool {
    let trimmed = name.trim_start_matches('_');
    !trimmed.is_empty()
        && trimmed
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

pub fn is_camel_case(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
}

pub fn to_snake_case(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

pub fn to_camel_case(name: &str) -> String {
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut cs = p.chars();
            match cs.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + cs.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The words of a name: runs of ASCII letters and digits, split where the case turns
/// from lower to upper (`getDeal` is `get`, `Deal`) and before the last capital of a
/// run of capitals followed by a lowercase letter (`HTTPServer` is `HTTP`, `Server`).
pub fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
        let next = chars.get(i + 1).copied();
        let boundary = c.is_ascii_uppercase()
            && prev.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase() && next.is_some_and(|n| n.is_ascii_lowercase()))
            });
        if boundary && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `SCREAMING_SNAKE_CASE`, for environment variables.
pub fn env_var_name(name: &str) -> String {
    let joined = words(name)
        .iter()
        .map(|w| w.to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join("_");
    if joined.is_empty() {
        "VALUE".to_string()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names() {
        assert_eq!(
            suggest("reseach", ["research", "review"]),
            Some("research".into())
        );
        assert_eq!(
            suggest("emials", ["emails", "start"]),
            Some("emails".into())
        );
        assert_eq!(suggest("zzz", ["research"]), None);
    }

    #[test]
    fn a_suggestion_knows_whether_it_is_the_only_close_one() {
        let one = suggestion("reserch", ["research", "review"]).map(|s| s.unique);
        assert_eq!(one, Some(true));
        // `dal` is one edit from both: the first in order is named, and not unique.
        let two = suggestion("dal", ["deal", "dial"]);
        assert_eq!(
            two,
            Some(Suggestion {
                name: "deal".into(),
                unique: false
            })
        );
        // The same candidate listed twice is still one.
        let same = suggestion("reserch", ["research", "research"]).map(|s| s.unique);
        assert_eq!(same, Some(true));
    }

    #[test]
    fn the_only_name_of_a_closed_set_is_suggested_however_far() {
        assert_eq!(
            suggestion_among("id", ["deal_id"]),
            Some(Suggestion {
                name: "deal_id".into(),
                unique: false
            })
        );
        // A close name is still found as a likely typo among several.
        let close = suggestion_among("dael_id", ["deal_id", "start"]);
        assert_eq!(
            close.map(|s| (s.name, s.unique)),
            Some(("deal_id".into(), true))
        );
        assert_eq!(suggestion_among("id", ["deal_id", "start"]), None);
        assert_eq!(suggestion_among("id", []), None);
        assert_eq!(
            suggest("id", ["deal_id"]),
            None,
            "open sets keep the distance rule"
        );
    }

    #[test]
    fn suggests_the_namespaced_name_for_a_plain_one() {
        assert_eq!(
            suggest("chunk", ["kb.chunk", "page"]),
            Some("kb.chunk".into())
        );
        assert_eq!(suggest("chunks", ["kb.chunk"]), Some("kb.chunk".into()));
        // A close plain name still wins over a namespaced one.
        assert_eq!(
            suggest("chunk", ["chunks", "kb.chunk"]),
            Some("chunks".into())
        );
        assert_eq!(suggest("chunk", ["kb.page"]), None);
    }

    #[test]
    fn naming_styles() {
        assert!(is_snake_case("deal_id"));
        assert!(!is_snake_case("dealId"));
        assert!(is_camel_case("DealSummary"));
        assert!(!is_camel_case("deal_summary"));
        assert_eq!(to_snake_case("dealId"), "deal_id");
        assert_eq!(to_camel_case("deal_summary"), "DealSummary");
    }

    #[test]
    fn environment_variables_are_named_in_screaming_snake_case() {
        assert_eq!(env_var_name("crm Authorization"), "CRM_AUTHORIZATION");
        assert_eq!(env_var_name("tracker X-Api-Key"), "TRACKER_X_API_KEY");
        assert_eq!(env_var_name("—"), "VALUE");
    }
}
