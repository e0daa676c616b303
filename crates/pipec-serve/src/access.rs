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

/// The variable that gives the key a served pipeline's call seals its `requestState`
/// with (at least 32 bytes): the same on every replica of a server behind one address.
pub const STATE_KEY_VAR: &str = "PIPEC_SERVE_STATE_KEY";

/// The file of the state key in pipec's configuration folder, made on first use.
pub const STATE_KEY_FILE: &str = "serve-state.key";

/// The key that seals the state of calls that ask their client (2026-07-28): the
/// variable's, else the key file's in `folder` (made, readable by its owner alone, the
/// first time), so a state outlives a restart of the server; else, with no folder, one
/// for this process.
pub fn state_key(folder: Option<&std::path::Path>) -> Result<Vec<u8>, String> {
    if let Some(key) = std::env::var_os(STATE_KEY_VAR).filter(|k| !k.is_empty()) {
        let key = key.into_encoded_bytes();
        if key.len() < 32 {
            return Err(format!(
                "{STATE_KEY_VAR} has {} bytes, and a key needs at least 32\n  help: set it to 32 random bytes or more, such as the output of `openssl rand -hex 32`",
                key.len()
            ));
        }
        return Ok(key);
    }
    let Some(folder) = folder else {
        return Ok(random_token()?.into_bytes());
    };
    let path = folder.join(STATE_KEY_FILE);
    match std::fs::read(&path) {
        Ok(key) if key.len() >= 32 => return Ok(key),
        Ok(_) => {
            return Err(format!(
                "{} holds fewer than 32 bytes, too few for a key\n  help: delete it (a new one is made) or set {STATE_KEY_VAR}",
                path.display()
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    }
    let key = random_token()?;
    let made = std::fs::create_dir_all(folder).and_then(|()| {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&path)?.write_all(key.as_bytes())
    });
    match made {
        Ok(()) => Ok(key.into_bytes()),
        // Another server made it first: its key is the one.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        }
        Err(e) => Err(format!(
            "cannot write the state key {}: {e}\n  help: set {STATE_KEY_VAR} to a key of 32 bytes or more",
            path.display()
        )),
    }
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
    fn the_state_key_is_made_once_in_its_folder_and_kept() {
        let dir = std::env::temp_dir().join(format!("pipec-state-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = state_key(Some(&dir)).expect("made");
        assert_eq!(first.len(), 64);
        assert_eq!(state_key(Some(&dir)).expect("read"), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join(STATE_KEY_FILE))
                .expect("file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "readable by its owner alone");
        }
        std::fs::write(dir.join(STATE_KEY_FILE), b"short").expect("write");
        assert!(
            state_key(Some(&dir))
                .expect_err("too short")
                .contains("fewer than 32 bytes")
        );
        let _ = std::fs::remove_dir_all(&dir);
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
