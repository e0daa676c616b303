//! OAuth against a real authorization flow: the official Python SDK's server and
//! authorization server (`tests/interop/oauth_server.py`, which approves every request at
//! once), the real `pipec` binary and its credentials file. A person logs in once with
//! `pipec mcp login` (the test plays the browser); runs use the stored tokens, and one
//! that expires while a thread waits at a gate is refreshed when another process resumes
//! it; a worker on the client-credentials grant needs no login. Tokens and secrets never
//! reach the store or pipec's output.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::python::python_with_mcp;
use crate::common::{Project, code, json, stderr, stdout, thread_of};

const WITHIN: Duration = Duration::from_secs(30);

/// The OAuth-protected server, killed on drop.
struct Guarded {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Guarded {
    fn start(dir: &Path, extra: &[&str]) -> Guarded {
        let log = dir.join("token-requests.log");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/oauth_server.py");
        let mut child = Command::new(python_with_mcp())
            .arg(script)
            .args(["--port", "0", "--log"])
            .arg(&log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the OAuth server starts");
        let mut line = String::new();
        let out = child.stdout.take().expect("its stdout");
        let _ = BufReader::new(out).read_line(&mut line);
        let url = line
            .trim()
            .strip_prefix("ready ")
            .unwrap_or_else(|| panic!("the OAuth server did not start: {line:?}"))
            .to_string();
        Guarded { child, url, log }
    }

    /// The grant types of the token requests so far.
    fn grants(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| json(l)["grant_type"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

const PIPELINE: &str = r#"
type Who {
  client_id: string
  scopes: string[]
  token_serial: int
}

type Approval {
  approved: bool
}

server guarded {
  url = env("OAUTH_URL")
  oauth {}
}

tool whoami() -> Who from guarded {
  read_only = true
}

node before() -> Who {
  call = whoami()
}

gate check(who: Who = before) -> Approval {
  message = "Go on as {{ who.client_id }}?"
}

node after(ack: Approval = check) -> Who {
  when = ack.approved
  call = whoami()
}

output first: Who = before
output second: Who? = after
"#;

fn pipec(p: &Project, server: &Guarded, args: &[&str]) -> Output {
    p.cmd(args)
        .env("OAUTH_URL", &server.url)
        .env("PIPEC_CREDENTIALS", p.dir.join("config/credentials.json"))
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs")
}

/// `pipec mcp login guarded`, with the test as the browser: it opens the address pipec
/// prints, and follows the authorization server's redirect back to pipec's listener.
fn log_in(p: &Project, server: &Guarded) -> String {
    log_in_to(p, server, None, &[])
}

/// [`log_in`], the tokens kept in `keyring`'s session when one is given (else in the
/// project's credentials file).
fn log_in_to(
    p: &Project,
    server: &Guarded,
    keyring: Option<&Keyring>,
    env: &[(&str, &str)],
) -> String {
    let mut command = p.cmd(&[
        "mcp",
        "login",
        "guarded",
        "--file",
        "guarded.pipe",
        "--no-browser",
    ]);
    command.env("OAUTH_URL", &server.url);
    match keyring {
        Some(k) => k.apply(&mut command),
        None => {
            command.env("PIPEC_CREDENTIALS", p.dir.join("config/credentials.json"));
        }
    }
    command.envs(env.iter().copied());
    let mut login = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pipec mcp login starts");
    let mut err = BufReader::new(login.stderr.take().expect("stderr"));
    let started = Instant::now();
    let address = loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).expect("read") > 0 && started.elapsed() < WITHIN,
            "pipec mcp login printed no authorization address"
        );
        if let Some(at) = line.trim().strip_prefix("http") {
            break format!("http{at}");
        }
    };
    assert!(
        address.contains("code_challenge_method=S256") && address.contains("redirect_uri="),
        "{address}"
    );
    // A connection that never says anything and a callback of another authorization
    // hold nothing up.
    let redirect = url::Url::parse(&address)
        .expect("the address")
        .query_pairs()
        .find(|(k, _)| k == "redirect_uri")
        .map(|(_, v)| v.into_owned())
        .expect("a redirect_uri");
    let listener = url::Url::parse(&redirect).expect("the redirect");
    let port = listener.port().expect("a port");
    let _silent = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the listener");
    let stray = Command::new(python_with_mcp())
        .args([
            "-c",
            "import sys, urllib.request, urllib.error\ntry:\n    urllib.request.urlopen(sys.argv[1])\nexcept urllib.error.HTTPError as e:\n    print(e.code)",
            &format!("{redirect}?code=forged&state=another"),
        ])
        .output()
        .expect("the stray request runs");
    assert_eq!(stdout(&stray).trim(), "400", "{}", stderr(&stray));
    let browser = Command::new(python_with_mcp())
        .args([
            "-c",
            "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())",
            &address,
        ])
        .output()
        .expect("the browser runs");
    assert!(
        stdout(&browser).contains("pipec has the authorization"),
        "{}{}",
        stdout(&browser),
        stderr(&browser)
    );
    let status = login.wait().expect("pipec mcp login ends");
    let mut out = String::new();
    login
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(status.success(), "{out}{rest}");
    format!("{out}{rest}")
}

/// The tokens the credentials file holds for the server.
fn stored_tokens(p: &Project, server: &Guarded) -> Vec<String> {
    let file = p.dir.join("config/credentials.json");
    let all = json(&std::fs::read_to_string(file).expect("the credentials file"));
    let response = &all[&server.url]["token_response"];
    ["access_token", "refresh_token"]
        .iter()
        .filter_map(|k| response[*k].as_str().map(str::to_string))
        .collect()
}

#[test]
fn a_person_logs_in_once_and_a_token_that_expires_during_a_pause_is_refreshed_on_resume() {
    let p = Project::new("oauth-login");
    // Tokens live two seconds: every command below meets an expired one.
    let server = Guarded::start(&p.dir, &["--token-ttl", "2"]);
    p.write("guarded.pipe", PIPELINE);

    // Before logging in, a run fails at the server, saying what to run.
    let refused = pipec(&p, &server, &["run", "guarded.pipe"]);
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("run `pipec mcp login guarded`"),
        "{}",
        stderr(&refused)
    );

    let said = log_in(&p, &server);
    assert!(said.contains("logged in to the server `guarded`"), "{said}");
    let file = p.dir.join("config/credentials.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("stored")
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the credentials file is its owner's alone"
        );
    }
    let at_login = stored_tokens(&p, &server);
    assert_eq!(at_login.len(), 2, "an access token and a refresh token");
    assert_eq!(server.grants(), ["authorization_code"]);

    let run = pipec(&p, &server, &["run", "guarded.pipe"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let thread =
        thread_of(&format!("{}{}", stdout(&run), stderr(&run))).expect("paused at the gate");
    let before_resume = server.grants();
    std::thread::sleep(Duration::from_millis(2500));
    let resumed = pipec(
        &p,
        &server,
        &["resume", &thread, "--answer", r#"check={"approved": true}"#],
    );
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let outputs: Value = json(&stdout(&resumed));
    let first = outputs["first"]["token_serial"].as_i64().expect("first");
    let second = outputs["second"]["token_serial"].as_i64().expect("second");
    assert!(
        second > first,
        "the resume used a newer token than the run: {outputs}"
    );
    // The token had expired while the thread waited: the resume refreshed it, and nobody
    // logged in again.
    let mut refreshed = before_resume.clone();
    refreshed.push("refresh_token".to_string());
    assert_eq!(server.grants(), refreshed);
    assert_eq!(
        server
            .grants()
            .iter()
            .filter(|g| *g == "authorization_code")
            .count(),
        1
    );

    // No token, old or new, is in the store or in what pipec printed.
    let now = stored_tokens(&p, &server);
    let store = p.store_contents();
    let printed = [&refused, &run, &resumed]
        .iter()
        .map(|o| format!("{}{}", stdout(o), stderr(o)))
        .collect::<String>()
        + &said;
    for token in at_login.iter().chain(&now) {
        assert!(!store.contains(token.as_str()), "a token is in the store");
        assert!(!printed.contains(token.as_str()), "a token was printed");
    }

    // Logging out forgets them: the next run is refused again.
    let out = pipec(
        &p,
        &server,
        &["mcp", "logout", "guarded", "--file", "guarded.pipe"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("logged out"), "{}", stdout(&out));
    let again = pipec(&p, &server, &["run", "guarded.pipe"]);
    assert_eq!(code(&again), 1, "{}", stderr(&again));
}

#[test]
fn a_worker_on_the_client_credentials_grant_needs_no_login_and_keeps_its_secret() {
    let p = Project::new("oauth-worker");
    let secret = "s3cret-of-the-worker-client";
    let server = Guarded::start(
        &p.dir,
        &["--client-id", "worker", "--client-secret", secret],
    );
    let text = r#"
type Who {
  client_id: string
  scopes: string[]
  token_serial: int
}

server guarded {
  url = env("OAUTH_URL")
  oauth {
    grant = "client_credentials"
    client_id = "worker"
    client_secret = secret("WORKER_SECRET")
  }
}

tool whoami() -> Who from guarded {
  read_only = true
}

node who() -> Who {
  call = whoami()
}

output who: Who = who
"#;
    p.write("guarded.pipe", text);
    let check = pipec(
        &p,
        &server,
        &["check", "--deny", "warnings", "guarded.pipe"],
    );
    assert_eq!(code(&check), 0, "{}{}", stdout(&check), stderr(&check));

    let submitted = p
        .cmd(&["run", "guarded.pipe", "--submit"])
        .env("OAUTH_URL", &server.url)
        .env("WORKER_SECRET", secret)
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&submitted), 0, "{}", stderr(&submitted));
    let thread = stdout(&submitted).trim().to_string();

    // The worker has the client's secret, and no credentials file.
    let log = std::fs::File::create(p.dir.join("worker.log")).expect("log");
    let mut worker = p
        .cmd(&["worker", "--poll", "100ms"])
        .env("OAUTH_URL", &server.url)
        .env("WORKER_SECRET", secret)
        .env("PIPEC_CREDENTIALS", p.dir.join("nowhere/credentials.json"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("pipec worker starts");
    let started = Instant::now();
    let shown = loop {
        let shown = p.show_json(&thread);
        if shown["status"] == "completed" || started.elapsed() > WITHIN {
            break shown;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(
        shown["status"],
        "completed",
        "{shown}\n{}",
        p.read("worker.log")
    );
    assert_eq!(server.grants(), ["client_credentials"]);
    assert!(
        !p.dir.join("nowhere").exists(),
        "client credentials are not stored as a login"
    );
    let store = p.store_contents();
    assert!(!store.contains(secret), "the client secret is in the store");
    assert!(!p.read("worker.log").contains(secret));
}

#[test]
fn parallel_calls_after_a_pause_spend_the_refresh_token_once() {
    let p = Project::new("oauth-parallel");
    let server = Guarded::start(&p.dir, &["--token-ttl", "2"]);
    let text = PIPELINE.replace(
        "output first: Who = before\noutput second: Who? = after\n",
        r#"node also(ack: Approval = check) -> Who {
  when = ack.approved
  call = whoami()
}

node again(ack: Approval = check) -> Who {
  when = ack.approved
  call = whoami()
}

output first: Who = before
output second: Who? = after
output third: Who? = also
output fourth: Who? = again
"#,
    );
    p.write("guarded.pipe", &text);
    log_in(&p, &server);
    let run = pipec(&p, &server, &["run", "guarded.pipe"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let thread =
        thread_of(&format!("{}{}", stdout(&run), stderr(&run))).expect("paused at the gate");
    let before_resume = server.grants();
    std::thread::sleep(Duration::from_millis(2500));
    // Three nodes call the server at once with an expired token: one refresh serves them
    // all (the server spends a refresh token when it is used, so a second refresh with
    // the same one would be refused and fail its node).
    let resumed = pipec(
        &p,
        &server,
        &["resume", &thread, "--answer", r#"check={"approved": true}"#],
    );
    assert_eq!(code(&resumed), 0, "{}", stderr(&resumed));
    let outputs = json(&stdout(&resumed));
    let serials: Vec<i64> = ["second", "third", "fourth"]
        .iter()
        .map(|k| outputs[*k]["token_serial"].as_i64().expect("a serial"))
        .collect();
    assert!(
        serials.iter().all(|s| *s == serials[0]),
        "one token for all three: {outputs}"
    );
    let mut refreshed = before_resume;
    refreshed.push("refresh_token".to_string());
    assert_eq!(server.grants(), refreshed);
}

/// A private session bus with GNOME Keyring's Secret Service on it, its login keyring
/// unlocked, and a home of its own; both stopped on drop.
struct Keyring {
    bus: String,
    bus_pid: u32,
    home: PathBuf,
}

impl Keyring {
    /// `None` (the test passes, saying so) where the programs are missing, unless
    /// `PIPEC_REQUIRE_KEYRING=1` (as in CI).
    fn start(dir: &Path) -> Option<Keyring> {
        let required = std::env::var("PIPEC_REQUIRE_KEYRING").is_ok_and(|v| v == "1");
        let missing = ["dbus-daemon", "gnome-keyring-daemon"]
            .into_iter()
            .find(|program| Command::new(program).arg("--version").output().is_err());
        if let Some(program) = missing {
            assert!(
                !required,
                "PIPEC_REQUIRE_KEYRING=1 but `{program}` is missing"
            );
            eprintln!(
                "skipped: `{program}` is missing (set PIPEC_REQUIRE_KEYRING=1 to fail instead)"
            );
            return None;
        }
        let home = dir.join("home");
        let runtime = dir.join("run");
        for d in [&home, &runtime] {
            std::fs::create_dir_all(d).expect("a folder");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
                .expect("private");
        }
        let started = Command::new("dbus-daemon")
            .args(["--session", "--fork", "--print-address=1", "--print-pid=1"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .expect("dbus-daemon starts");
        let out = stdout(&started);
        let mut lines = out.lines();
        let bus = lines.next().expect("the bus address").trim().to_string();
        let bus_pid: u32 = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("the bus's pid");
        let keyring = Keyring { bus, bus_pid, home };
        let mut daemon = Command::new("gnome-keyring-daemon");
        daemon.args(["--unlock", "--components=secrets"]);
        keyring.apply(&mut daemon);
        let mut daemon = daemon
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon starts");
        {
            use std::io::Write;
            let mut input = daemon.stdin.take().expect("its stdin");
            input.write_all(b"test-password").expect("the password");
        }
        let _ = daemon.wait();
        Some(keyring)
    }

    /// The session a command runs in: the bus, the home, no credentials file named.
    fn apply(&self, command: &mut Command) {
        command
            .env("DBUS_SESSION_BUS_ADDRESS", &self.bus)
            .env("HOME", &self.home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("PIPEC_CREDENTIALS")
            .env_remove("PIPEC_TOKEN_STORE");
    }
}

impl Drop for Keyring {
    fn drop(&mut self) {
        // The keyring daemon leaves with its bus.
        let _ = Command::new("kill").arg(self.bus_pid.to_string()).status();
    }
}

/// Where the session has a keyring, `pipec mcp login` keeps the tokens there (no
/// credentials file is written), runs use them, `PIPEC_TOKEN_STORE=file` does not see
/// them, and `pipec mcp logout` takes them out.
#[test]
fn tokens_live_in_the_os_keyring_where_the_session_has_one() {
    let p = Project::new("oauth-keyring");
    let Some(keyring) = Keyring::start(&p.dir) else {
        return;
    };
    let server = Guarded::start(&p.dir, &[]);
    p.write("guarded.pipe", PIPELINE);
    let said = log_in_to(&p, &server, Some(&keyring), &[]);
    assert!(said.contains("stored in the OS keyring"), "{said}");
    assert!(
        !keyring.home.join(".config/pipec/credentials.json").exists(),
        "a credentials file was written"
    );
    let in_keyring = |args: &[&str]| {
        let mut c = p.cmd(args);
        keyring.apply(&mut c);
        c.env("OAUTH_URL", &server.url)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    };
    let run = in_keyring(&["run", "guarded.pipe"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    assert!(stderr(&run).contains("waits"), "{}", stderr(&run));

    // The file store has nothing for the server.
    let mut file_only = p.cmd(&["run", "guarded.pipe"]);
    keyring.apply(&mut file_only);
    let file_only = file_only
        .env("PIPEC_TOKEN_STORE", "file")
        .env("OAUTH_URL", &server.url)
        .stdin(Stdio::null())
        .output()
        .expect("pipec runs");
    assert_eq!(code(&file_only), 1, "{}", stderr(&file_only));
    assert!(
        stderr(&file_only).contains("pipec mcp login guarded"),
        "{}",
        stderr(&file_only)
    );

    let out = in_keyring(&["mcp", "logout", "guarded", "--file", "guarded.pipe"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let after = in_keyring(&["run", "guarded.pipe"]);
    assert_eq!(code(&after), 1, "{}", stderr(&after));
    assert!(
        stderr(&after).contains("pipec mcp login guarded"),
        "{}",
        stderr(&after)
    );
    // Tokens kept in the credentials file (before the keyring was there) are found from
    // a session with a keyring, and a logout there takes them out of the file too.
    let said = log_in_to(
        &p,
        &server,
        Some(&keyring),
        &[("PIPEC_TOKEN_STORE", "file")],
    );
    let file = keyring.home.join(".config/pipec/credentials.json");
    assert!(
        said.contains(&format!("stored in {}", file.display())),
        "{said}"
    );
    let run = in_keyring(&["run", "guarded.pipe"]);
    assert_eq!(code(&run), 0, "{}", stderr(&run));
    let out = in_keyring(&["mcp", "logout", "guarded", "--file", "guarded.pipe"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let kept = std::fs::read_to_string(&file).expect("the credentials file");
    assert!(!kept.contains(&server.url), "{kept}");
}

/// `PIPEC_TOKEN_STORE` takes `keyring` or `file`: another value, or `keyring` where the
/// session has none, is refused before anyone is asked to approve, and nothing is written.
#[test]
fn a_wrong_token_store_is_refused_with_what_to_set() {
    let p = Project::new("oauth-token-store");
    p.write("guarded.pipe", PIPELINE);
    let home = p.dir.join("home");
    for (value, says) in [
        ("vault", "neither `keyring` nor `file`"),
        ("keyring", "has no OS keyring"),
    ] {
        let out = p
            .cmd(&[
                "mcp",
                "login",
                "guarded",
                "--file",
                "guarded.pipe",
                "--no-browser",
            ])
            .env("OAUTH_URL", "http://127.0.0.1:9/mcp")
            .env("PIPEC_TOKEN_STORE", value)
            .env("HOME", &home)
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("PIPEC_CREDENTIALS")
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs");
        assert_eq!(code(&out), 2, "{value}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{value}: {}", stderr(&out));
        assert!(stderr(&out).contains("help: "), "{}", stderr(&out));
        assert!(!home.exists(), "nothing is written");
    }
}
