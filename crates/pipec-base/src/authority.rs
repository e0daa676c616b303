//! Who an HTTP request of pipec's servers (`pipec serve --http`, `pipec ui`) says it is
//! for, and its bearer token: a `Host` checked against the names a server answers to
//! (against DNS rebinding), and a token compared in constant time.

/// `host[:port]` (a bracketed IPv6 address too) as its lowercase name, without brackets,
/// and its port; `None` when it is not one.
fn split(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    let (name, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        match after {
            "" => (v6, None),
            _ => (v6, Some(after.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            // A bare IPv6 address (`::1`) has colons and no port.
            Some((name, _)) if name.contains(':') => (authority, None),
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        }
    };
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#'))
    {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name.to_ascii_lowercase(), port))
}

/// Whether a request's `Host` is one of `allowed` (`host` or `host:port`): the names
/// compared without case or brackets, the port only when the entry names one.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let Some((name, port)) = split(host) else {
        return false;
    };
    allowed
        .iter()
        .filter_map(|a| split(a))
        .any(|(a_name, a_port)| a_name == name && a_port.is_none_or(|p| port == Some(p)))
}

/// The names a server bound to the address `bound` (its IP, as text) answers to: the
/// loopback names, that address, and `allowed` (what `--allowed-host` gave).
pub fn served_hosts(bound: &str, allowed: &[String]) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".into(),
        "::1".into(),
        bound.to_string(),
    ];
    hosts.extend(allowed.iter().cloned());
    hosts
}

/// Whether two secrets are equal, in a time that does not depend on where they differ.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_matched_by_name_and_by_port_when_named() {
        let allowed: Vec<String> = ["localhost", "ui.example:8443", "::1", "[::1]", "127.0.0.1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(host_allowed("localhost:4000", &allowed));
        assert!(host_allowed("LOCALHOST", &allowed));
        assert!(host_allowed("ui.example:8443", &allowed));
        assert!(!host_allowed("ui.example:80", &allowed));
        assert!(host_allowed("[::1]:4545", &allowed));
        assert!(host_allowed("127.0.0.1:1", &allowed));
        assert!(!host_allowed("evil.example", &allowed));
        assert!(!host_allowed("", &allowed));
        assert!(!host_allowed("localhost:99999", &allowed));
        assert!(!host_allowed("user@localhost", &allowed));
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd") && !same_secret(b"ab", b"abc"));
    }
}
