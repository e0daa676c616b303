//! What counts as a credential in a declaration: the HTTP headers that carry one, the
//! variable names that say they hold one, and URLs with a user part. The checker asks
//! these before it lets such a value be a literal (copied into the plan) or an `env()`
//! read (recorded with each thread): P0605 credential-not-secret and P0606
//! credential-name-not-secret.

use pipec_base::names::words;

/// Headers that carry credentials whatever they end with.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "api-key",
    "apikey",
];

/// The last word of a header's name that says it carries a credential (`X-Api-Key`,
/// `X-Auth-Token`, `Private-Token`, `X-Client-Secret`).
const CREDENTIAL_HEADER_ENDINGS: &[&str] = &[
    "token",
    "key",
    "secret",
    "password",
    "auth",
    "apikey",
    "credentials",
];

/// Headers ending like a credential's that carry none.
const NOT_CREDENTIAL_HEADERS: &[&str] = &["idempotency-key"];

/// The last word of a variable's name that says it holds a credential.
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "auth",
    "credential",
    "credentials",
];

/// The last two words of a variable's name that say it holds a credential; a name that
/// merely ends in `KEY` (`SORT_KEY`, `CACHE_KEY`) says nothing.
const CREDENTIAL_PAIRS: &[(&str, &str)] = &[
    ("api", "key"),
    ("access", "key"),
    ("secret", "key"),
    ("private", "key"),
    ("signing", "key"),
    ("auth", "key"),
];

/// Whether an HTTP header of this name carries a credential.
pub(crate) fn is_credential_header(name: &str) -> bool {
    let lower = name.trim().to_ascii_lowercase();
    if NOT_CREDENTIAL_HEADERS.contains(&lower.as_str()) {
        return false;
    }
    if CREDENTIAL_HEADERS.contains(&lower.as_str()) {
        return true;
    }
    lower
        .rsplit(['-', '_'])
        .next()
        .is_some_and(|last| CREDENTIAL_HEADER_ENDINGS.contains(&last))
}

/// Whether a variable of this name (`GITHUB_TOKEN`, `apiKey`) says it holds a credential.
pub(crate) fn is_credential_name(name: &str) -> bool {
    let words: Vec<String> = words(name).iter().map(|w| w.to_ascii_lowercase()).collect();
    let last = |n: usize| words.len().checked_sub(n).map(|i| words[i].as_str());
    match (last(2), last(1)) {
        (_, Some(word)) if CREDENTIAL_WORDS.contains(&word) => true,
        (Some(before), Some(word)) => CREDENTIAL_PAIRS.contains(&(before, word)),
        _ => false,
    }
}

/// Where the user part of a URL is (`user:password` in `https://user:password@host/`),
/// as a byte range of the text, when it has one.
pub(crate) fn url_user_part(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |e| start + e);
    let at = start + url[start..end].rfind('@')?;
    (at > start).then_some(start..at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_that_carry_credentials() {
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "X-Api-Key",
            "X-API-KEY",
            "Api-Key",
            "X-Auth-Token",
            "Private-Token",
            "X-Client-Secret",
            "Ocp-Apim-Subscription-Key",
        ] {
            assert!(is_credential_header(name), "{name}");
        }
        for name in [
            "X-Team",
            "Accept",
            "Idempotency-Key",
            "X-Request-Id",
            "User-Agent",
        ] {
            assert!(!is_credential_header(name), "{name}");
        }
    }

    #[test]
    fn variable_names_that_say_they_hold_credentials() {
        for name in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "STRIPE_SECRET_KEY",
            "OPENAI_API_KEY",
            "apiKey",
            "KB_AUTH",
            "AWS_SECRET_ACCESS_KEY",
            "TOKEN",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in [
            "SORT_KEY",
            "MAX_TOKENS",
            "TOKENIZER_PATH",
            "AWS_ACCESS_KEY_ID",
            "TRIAGE_TEAM",
            "OAUTH_URL",
        ] {
            assert!(!is_credential_name(name), "{name}");
        }
    }

    #[test]
    fn urls_with_a_user_part() {
        let url = "https://u:p@x.example/v1?q=a@b";
        assert_eq!(url_user_part(url).map(|r| &url[r]), Some("u:p"));
        assert_eq!(
            url_user_part("https://tok@x.example").map(|r| r.len()),
            Some(3)
        );
        assert_eq!(url_user_part("https://x.example/a@b"), None);
        assert_eq!(url_user_part("https://@x.example"), None);
        assert_eq!(url_user_part("not a url"), None);
    }
}
