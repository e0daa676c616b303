//! Who may reach `pipec serve --http`: by default only this machine (a loopback address)
//! and only with the bearer token printed at start. Serving without a token is allowed on
//! loopback alone; an address other machines reach needs the host names clients will use
//! (`--allowed-host`, checked against `Host` so DNS rebinding cannot reach the server)
//! and a token.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use pipec_mcp::server::HttpAccess;

/// What the command line asked for.
#[derive(Clone, Debug, Default)]
pub struct AccessRequest {
    /// `--http ADDR`.
    pub addr: String,
    /// `--no-auth`.
    pub no_auth: bool,
    /// `--allowed-host`.
    pub allowed_hosts: Vec<String>,
    /// `--allowed-origin`.
    pub allowed_origins: Vec<String>,
    /// A token given in the environment (`PIPEC_SERVE_TOKEN`); else one is made.
    pub token: Option<String>,
}

/// The access to serve with, and whether the token was made here (so it is printed).
#[derive(Debug)]
pub struct Access {
    pub http: HttpAccess,
    pub made_token: bool,
}

/// Resolves `addr` to the addresses it names.
fn addresses(addr: &str) -> Result<Vec<SocketAddr>, String> {
    addr.to_socket_addrs().map(Iterator::collect).map_err(|e| {
        format!(
            "`{addr}` is not an address to listen on ({e}); write HOST:PORT, such as 127.0.0.1:8080"
        )
    })
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// Decides the access for a request, or why it is refused.
pub fn decide(request: &AccessRequest) -> Result<Access, String> {
    let addrs = addresses(&request.addr)?;
    if addrs.is_empty() {
        return Err(format!("`{}` names no address", request.addr));
    }
    let loopback = addrs.iter().all(|a| is_loopback(a.ip()));
    if request.no_auth && !loopback {
        return Err(format!(
            "--no-auth is allowed on a loopback address only, and {} is reachable from other machines; keep the token, or listen on 127.0.0.1",
            request.addr
        ));
    }
    if !loopback && request.allowed_hosts.is_empty() {
        return Err(format!(
            "listening on {} lets other machines connect: name the host names they will use with --allowed-host (e.g. --allowed-host mcp.example.com)",
            request.addr
        ));
    }
    let (token, made_token) = if request.no_auth {
        (None, false)
    } else {
        match request.token.as_deref().filter(|t| !t.is_empty()) {
            Some(t) => (Some(t.to_string()), false),
            None => (Some(random_token()?), true),
        }
    };
    Ok(Access {
        http: HttpAccess {
            token,
            allowed_hosts: request.allowed_hosts.clone(),
            allowed_origins: request.allowed_origins.clone(),
        },
        made_token,
    })
}

/// 32 random bytes from the operating system, as hex.
fn random_token() -> Result<String, String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("cannot make a token: reading /dev/urandom failed: {e}"))?;
    Ok(pipec_base::digest::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(addr: &str) -> AccessRequest {
        AccessRequest {
            addr: addr.into(),
            ..AccessRequest::default()
        }
    }

    #[test]
    fn loopback_gets_a_fresh_token_by_default() {
        let a = decide(&req("127.0.0.1:0")).expect("allowed");
        assert!(a.made_token);
        assert_eq!(a.http.token.as_deref().map(str::len), Some(64));
        let b = decide(&req("127.0.0.1:0")).expect("allowed");
        assert_ne!(a.http.token, b.http.token);
    }

    #[test]
    fn no_auth_only_on_loopback() {
        let mut r = req("127.0.0.1:0");
        r.no_auth = true;
        assert_eq!(decide(&r).expect("allowed").http.token, None);
        let mut r = req("0.0.0.0:0");
        r.no_auth = true;
        r.allowed_hosts = vec!["h".into()];
        assert!(decide(&r).expect_err("refused").contains("--no-auth"));
    }

    #[test]
    fn other_machines_need_allowed_hosts_and_keep_the_token() {
        let e = decide(&req("0.0.0.0:0")).expect_err("refused");
        assert!(e.contains("--allowed-host"), "{e}");
        let mut r = req("0.0.0.0:0");
        r.allowed_hosts = vec!["mcp.example.com".into()];
        r.token = Some("given".into());
        let a = decide(&r).expect("allowed");
        assert_eq!(a.http.token.as_deref(), Some("given"));
        assert!(!a.made_token);
    }

    #[test]
    fn an_address_that_is_not_one_is_refused() {
        assert!(
            decide(&req("nonsense"))
                .expect_err("refused")
                .contains("HOST:PORT")
        );
    }
}
