//! The attempts a served root or backend must refuse: traversal in every spelling,
//! links, special files, dotfiles and oversized files beneath a file root; path and host
//! tricks, redirects and oversized answers from a backend. Each attempt is refused, and
//! nothing outside the root (a canary file) or outside the backend's path (a server that
//! logs every request) is ever read. And `pipec serve --http` against clients that hold
//! connections: without the token, idle, or sending their headers slowly, over real TCP
//! connections.

#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pipec::serve::backend_fetch::{BackendClient, FetchError, FetchOptions};
use pipec::serve::files::{FileError, FileOptions, FileRoot, Resolve};
use pipec::serve::matcher::{MatchError, Template, match_uri};
use pipec::serve::uri_build::{Backend, BackendUrlError, backend_url};

const CANARY: &str = "CANARY-OUTSIDE-THE-ROOT";
const MAX_BYTES: u64 = 1024;

/// A folder holding `root/` (served) and `outside/` (the canary), removed on drop.
struct Fixture {
    dir: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn fixture(tag: &str) -> Fixture {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("pipec-sec-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(dir.join("outside")).unwrap();
    std::fs::create_dir_all(dir.join("root-evil")).unwrap();
    std::fs::write(dir.join("outside/canary.txt"), CANARY).unwrap();
    std::fs::write(dir.join("root-evil/canary.txt"), CANARY).unwrap();
    std::fs::write(root.join("docs/guide.md"), "# Guide").unwrap();
    std::fs::write(root.join("docs/.hidden.md"), CANARY).unwrap();
    std::fs::write(root.join(".env"), CANARY).unwrap();
    std::fs::write(root.join(".git/config"), CANARY).unwrap();
    std::fs::write(root.join("huge.txt"), "x".repeat(4 * MAX_BYTES as usize)).unwrap();
    use std::os::unix::fs::symlink as link;
    link(dir.join("outside"), root.join("link-out")).unwrap();
    link(dir.join("outside/canary.txt"), root.join("link-file")).unwrap();
    link("../../outside/canary.txt", root.join("docs/link-up")).unwrap();
    link("docs/guide.md", root.join("inside-link")).unwrap();
    link("/dev/zero", root.join("zero-link")).unwrap();
    let fifo = std::ffi::CString::new(root.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY (test): a NUL-terminated path; mkfifo reads nothing else.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "mkfifo");
    let _socket = std::os::unix::net::UnixListener::bind(root.join("socket")).unwrap();
    // A device node needs privileges; where they are missing the symlink to /dev/zero
    // above still covers devices.
    let device =
        std::ffi::CString::new(root.join("null-device").as_os_str().as_encoded_bytes()).unwrap();
    #[allow(unsafe_code)]
    // SAFETY (test): a NUL-terminated path and a device number; mknod reads nothing else.
    let _ = unsafe { libc::mknod(device.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) };
    std::mem::forget(_socket);
    Fixture { dir }
}

fn roots(root: &Path) -> [FileRoot; 2] {
    [Resolve::Auto, Resolve::Walk].map(|resolve| {
        FileRoot::new(
            root,
            FileOptions {
                max_bytes: MAX_BYTES,
                allow_hidden: false,
                resolve,
            },
        )
    })
}

/// What became of an attempt.
#[derive(Debug)]
enum Outcome {
    MatchRefused,
    NoMatch,
    NotFound,
    Refused,
    TooLarge,
    /// Served: always a failure of the test for an attack.
    Served(String),
}

/// Reads `uri` through `template` (matched, then read beneath the root) and checks that
/// nothing in the answer, success or error, holds the canary or the root's real path.
fn attempt(files: &FileRoot, template: &str, uri: &str, root: &Path) -> Outcome {
    let template = Template::parse(template).unwrap();
    let captures = match match_uri(&template, uri) {
        Err(MatchError::Refused { .. }) => return Outcome::MatchRefused,
        Err(e) => panic!("{uri}: {e}"),
        Ok(None) => return Outcome::NoMatch,
        Ok(Some(c)) => c,
    };
    match files.read(&template, &captures) {
        Ok(read) => {
            let shown = format!("{:?}", read.body);
            assert!(!shown.contains(CANARY), "{uri}: the canary was read");
            Outcome::Served(shown)
        }
        Err(error) => {
            let message = error.to_string();
            assert!(!message.contains(CANARY), "{uri}: {message}");
            assert!(
                !message.contains(root.to_str().unwrap()),
                "{uri}: the root's path is shown: {message}"
            );
            match error {
                FileError::NotFound { .. } => Outcome::NotFound,
                FileError::Refused { .. } => Outcome::Refused,
                FileError::TooLarge { .. } => Outcome::TooLarge,
                FileError::Io { .. } => panic!("{uri}: an I/O error: {message}"),
            }
        }
    }
}

const TREE: &str = "file:///srv/{+path}";
const RESHAPR: &str = "file:///project/src/{path}?mode=raw";
const ONE: &str = "file:///one/{name}";

/// Every attempt beneath a file root, with the template it goes through.
const FILE_ATTEMPTS: &[(&str, &str)] = &[
    (TREE, "file:///srv/../outside/canary.txt"),
    (TREE, "file:///srv/..%2Foutside%2Fcanary.txt"),
    (TREE, "file:///srv/%2e%2e/outside/canary.txt"),
    (TREE, "file:///srv/%2E%2E/outside/canary.txt"),
    (TREE, "file:///srv/%2e%2e%2f%2e%2e%2foutside%2fcanary.txt"),
    (TREE, "file:///srv/%252e%252e/outside/canary.txt"),
    (TREE, "file:///srv/..%252f..%252foutside%252fcanary.txt"),
    (TREE, "file:///srv/%c0%ae%c0%ae/outside/canary.txt"),
    (TREE, "file:///srv/%e0%80%ae%e0%80%ae/outside/canary.txt"),
    (TREE, "file:///srv/..%c0%afoutside%c0%afcanary.txt"),
    (TREE, "file:///srv/%ef%bc%8e%ef%bc%8e/outside/canary.txt"),
    (TREE, "file:///srv/..%5coutside%5ccanary.txt"),
    (TREE, "file:///srv/..\\outside\\canary.txt"),
    (TREE, "file:///srv/docs/guide.md%00.txt"),
    (TREE, "file:///srv/%00"),
    (TREE, "file:///srv/docs/guide.md%0a"),
    (TREE, "file:///srv/%2Fetc%2Fpasswd"),
    (TREE, "file:///srv//etc/passwd"),
    (TREE, "file:///srv/docs/../../outside/canary.txt"),
    (TREE, "file:///srv/docs/./guide.md"),
    (TREE, "file:///srv/....//outside/canary.txt"),
    (TREE, "file:///srv/docs//guide.md"),
    (TREE, "file:///srv/..;/outside/canary.txt"),
    (TREE, "file:///srv/../root-evil/canary.txt"),
    (TREE, "file:///srv/C:/Windows/win.ini"),
    (TREE, "file:///srv/a%zz"),
    (TREE, "file:///srv/%u002e%u002e/outside"),
    (TREE, "file:///srv/link-out/canary.txt"),
    (TREE, "file:///srv/link-file"),
    (TREE, "file:///srv/docs/link-up"),
    (TREE, "file:///srv/inside-link"),
    (TREE, "file:///srv/zero-link"),
    (TREE, "file:///srv/null-device"),
    (TREE, "file:///srv/fifo"),
    (TREE, "file:///srv/socket"),
    (TREE, "file:///srv/docs"),
    (TREE, "file:///srv/.env"),
    (TREE, "file:///srv/.git/config"),
    (TREE, "file:///srv/docs/.hidden.md"),
    (TREE, "file:///srv/huge.txt"),
    (
        RESHAPR,
        "file:///project/src/..%2Foutside%2Fcanary.txt?mode=raw",
    ),
    (
        RESHAPR,
        "file:///project/src/../outside/canary.txt?mode=raw",
    ),
    (RESHAPR, "file:///project/src/link-out/canary.txt?mode=raw"),
    (RESHAPR, "file:///project/src/.env?mode=raw"),
    (ONE, "file:///one/..%2Foutside%2Fcanary.txt"),
    (ONE, "file:///one/link-out%2Fcanary.txt"),
    (ONE, "file:///one/.."),
];

#[test]
fn every_file_attempt_is_refused_and_reads_nothing_outside_the_root() {
    let fixture = fixture("corpus");
    let root = fixture.dir.join("root");
    assert!(FILE_ATTEMPTS.len() >= 40);
    for files in roots(&root) {
        for (template, uri) in FILE_ATTEMPTS {
            let outcome = attempt(&files, template, uri, &root);
            assert!(
                !matches!(outcome, Outcome::Served(_)),
                "{uri} ({:?}): served {outcome:?}",
                files.options().resolve
            );
        }
        // The same root serves what it should, so the refusals above are not a root
        // that serves nothing.
        let ok = attempt(&files, TREE, "file:///srv/docs/guide.md", &root);
        assert!(
            matches!(ok, Outcome::Served(ref s) if s.contains("# Guide")),
            "{ok:?}"
        );
        let ok = attempt(
            &files,
            RESHAPR,
            "file:///project/src/docs%2Fguide.md?mode=raw",
            &root,
        );
        assert!(matches!(ok, Outcome::Served(_)), "{ok:?}");
    }
}

#[test]
fn refusals_are_typed() {
    let fixture = fixture("typed");
    let root = fixture.dir.join("root");
    for files in roots(&root) {
        let outcome = |uri: &str| attempt(&files, TREE, uri, &root);
        assert!(matches!(
            outcome("file:///srv/%2e%2e/x"),
            Outcome::MatchRefused
        ));
        assert!(matches!(
            outcome("file:///srv/%252e%252e/x"),
            Outcome::NotFound
        ));
        assert!(matches!(
            outcome("file:///srv/link-out/canary.txt"),
            Outcome::Refused
        ));
        assert!(matches!(outcome("file:///srv/fifo"), Outcome::Refused));
        assert!(matches!(outcome("file:///srv/docs"), Outcome::Refused));
        assert!(matches!(outcome("file:///srv/.env"), Outcome::Refused));
        assert!(matches!(outcome("file:///srv/huge.txt"), Outcome::TooLarge));
        assert!(matches!(
            outcome("file:///srv/missing.md"),
            Outcome::NotFound
        ));
        assert!(matches!(
            attempt(&files, RESHAPR, "file:///project/src/x", &root),
            Outcome::NoMatch
        ));
    }
}

#[test]
fn a_fifo_is_refused_without_waiting_for_a_writer() {
    let fixture = fixture("fifo");
    let root = fixture.dir.join("root");
    let (sender, receiver) = std::sync::mpsc::channel();
    let thread_root = root.clone();
    std::thread::spawn(move || {
        for files in roots(&thread_root) {
            let outcome = attempt(&files, TREE, "file:///srv/fifo", &thread_root);
            let _ = sender.send(format!("{outcome:?}"));
        }
    });
    for _ in 0..2 {
        let got = receiver
            .recv_timeout(Duration::from_secs(5))
            .expect("reading a FIFO blocked");
        assert_eq!(got, "Refused");
    }
}

#[test]
fn a_file_over_the_cap_is_refused_not_truncated() {
    let fixture = fixture("cap");
    let root = fixture.dir.join("root");
    let files = FileRoot::new(
        &root,
        FileOptions {
            max_bytes: 3,
            ..FileOptions::default()
        },
    );
    assert!(matches!(
        files.read_path("docs/guide.md"),
        Err(FileError::TooLarge { max_bytes: 3, .. })
    ));
}

#[test]
fn a_symlink_swapped_in_during_reads_never_leads_outside() {
    let fixture = fixture("race");
    let root = fixture.dir.join("root");
    let outside = fixture.dir.join("outside");
    std::fs::create_dir_all(root.join("swap-dir")).unwrap();
    std::fs::write(root.join("swap-dir/canary.txt"), "inside").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("swap-link")).unwrap();
    std::fs::rename(root.join("swap-dir"), root.join("swap")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let root = root.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) {
                // `swap` is the folder, then the link, then the folder again.
                let _ = std::fs::rename(root.join("swap"), root.join("swap-dir"));
                let _ = std::fs::rename(root.join("swap-link"), root.join("swap"));
                let _ = std::fs::rename(root.join("swap"), root.join("swap-link"));
                let _ = std::fs::rename(root.join("swap-dir"), root.join("swap"));
                swaps += 1;
            }
            swaps
        })
    };
    let mut served_inside = 0;
    let mut refused = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(800) {
        for files in roots(&root) {
            match files.read_path("swap/canary.txt") {
                Ok(read) => {
                    let shown = format!("{:?}", read.body);
                    assert!(
                        !shown.contains(CANARY),
                        "the canary was read through the swap"
                    );
                    served_inside += 1;
                }
                Err(e) => {
                    assert!(!e.to_string().contains(CANARY));
                    refused += 1;
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper ran {swaps} times");
    assert!(served_inside + refused > 10);
}

/// A tiny HTTP server on 127.0.0.1 that logs every request's target and answers by path.
struct LocalServer {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

fn local_server(answer: fn(&str, u16) -> Vec<u8>, redirect_to: u16) -> LocalServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let thread_log = log.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let target = read_request_target(&mut stream);
            thread_log.lock().unwrap().push(target.clone());
            let _ = stream.write_all(&answer(&target, redirect_to));
            let _ = stream.flush();
        }
    });
    LocalServer { port, log }
}

fn read_request_target(stream: &mut TcpStream) -> String {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buffer = Vec::new();
    let mut byte = [0u8; 1];
    while !buffer.ends_with(b"\r\n\r\n") && buffer.len() < 65536 {
        match stream.read(&mut byte) {
            Ok(1) => buffer.push(byte[0]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&buffer);
    text.split(' ').nth(1).unwrap_or("").to_string()
}

fn backend_answer(target: &str, redirect_to: u16) -> Vec<u8> {
    if target.contains("redirect") {
        return format!(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{redirect_to}/outside\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .into_bytes();
    }
    if target.contains("missing") {
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret"
            .to_vec();
    }
    if target.contains("huge") {
        // No Content-Length: only the streamed cap can stop it.
        let mut answer =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n".to_vec();
        answer.extend(std::iter::repeat_n(b'x', 64 * 1024));
        return answer;
    }
    if target.contains("claims-big") {
        let mut answer =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 99999999\r\nConnection: close\r\n\r\n".to_vec();
        answer.extend_from_slice(b"short");
        return answer;
    }
    let body = format!("served {target}");
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn outside_answer(_: &str, _: u16) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{CANARY}",
        CANARY.len()
    )
    .into_bytes()
}

/// What became of a backend attempt.
#[derive(Debug)]
enum BackendOutcome {
    MatchRefused,
    NoMatch,
    UrlRefused(#[allow(dead_code)] BackendUrlError),
    Fetch(FetchError),
    /// Fetched: the request target the backend saw.
    Fetched(String),
}

fn backend_attempt(
    backend: &Backend,
    client: &BackendClient,
    template: &str,
    uri: &str,
) -> BackendOutcome {
    let template = Template::parse(template).unwrap();
    let captures = match match_uri(&template, uri) {
        Err(_) => return BackendOutcome::MatchRefused,
        Ok(None) => return BackendOutcome::NoMatch,
        Ok(Some(c)) => c,
    };
    let url = match backend_url(backend, &template, &captures) {
        Ok(url) => url,
        Err(e) => return BackendOutcome::UrlRefused(e),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    match runtime.block_on(client.fetch(&url)) {
        Ok(fetched) => {
            let body = String::from_utf8_lossy(&fetched.bytes).to_string();
            assert!(!body.contains(CANARY), "{uri}: the outside server answered");
            BackendOutcome::Fetched(body.trim_start_matches("served ").to_string())
        }
        Err(e) => BackendOutcome::Fetch(e),
    }
}

const TICKET: &str = "tracker://tickets/{id}";
const DOCS: &str = "docs://files/{+path}";

/// Attempts that must be refused before any request is made.
const BACKEND_REFUSED: &[(&str, &str)] = &[
    (TICKET, "tracker://tickets/.."),
    (TICKET, "tracker://tickets/%2e%2e"),
    (TICKET, "tracker://tickets/%2E%2e"),
    (TICKET, "tracker://tickets/..%2Fadmin"),
    (TICKET, "tracker://tickets/a%2Fb"),
    (TICKET, "tracker://tickets/a%5cb"),
    (TICKET, "tracker://tickets/a%00"),
    (TICKET, "tracker://tickets/%c0%ae%c0%ae"),
    (TICKET, "tracker://tickets/a%0d%0aHost:%20evil"),
    (DOCS, "docs://files/a/../../admin"),
    (DOCS, "docs://files/%2e%2e/%2e%2e/admin"),
    (DOCS, "docs://files//evil.com/x"),
    (DOCS, "docs://files/a//b"),
    (DOCS, "docs://files/%2F%2Fevil.com"),
    (DOCS, "docs://files/a\\..\\admin"),
    (TICKET, "tracker://tickets/@evil.com"),
    (TICKET, "tracker://tickets/user:pw@evil.com"),
    (TICKET, "tracker://tickets/%40evil.com"),
    (DOCS, "docs://files/@evil.com/x"),
];

/// Attempts that are served, but only inside the backend's path, as one segment each:
/// `(template, uri, the request target the backend must see)`.
const BACKEND_CONTAINED: &[(&str, &str, &str)] = &[
    (
        TICKET,
        "tracker://tickets/a%3Fadmin=1",
        "/api/tickets/a%3Fadmin=1",
    ),
    (
        TICKET,
        "tracker://tickets/a%23frag",
        "/api/tickets/a%23frag",
    ),
    (
        TICKET,
        "tracker://tickets/%252e%252e",
        "/api/tickets/%252e%252e",
    ),
    (
        TICKET,
        "tracker://tickets/.evil.com",
        "/api/tickets/.evil.com",
    ),
];

#[test]
fn every_backend_attempt_stays_inside_the_backend() {
    let outside = local_server(outside_answer, 0);
    let server = local_server(backend_answer, outside.port);
    let backend = Backend::parse(&format!("http://127.0.0.1:{}/api", server.port)).unwrap();
    let client = BackendClient::new(FetchOptions {
        max_bytes: 16 * 1024,
        ..FetchOptions::default()
    })
    .unwrap();
    assert!(BACKEND_REFUSED.len() + BACKEND_CONTAINED.len() >= 20);
    for (template, uri) in BACKEND_REFUSED {
        let outcome = backend_attempt(&backend, &client, template, uri);
        assert!(
            matches!(
                outcome,
                BackendOutcome::MatchRefused | BackendOutcome::UrlRefused(_)
            ),
            "{uri}: {outcome:?}"
        );
    }
    assert!(
        server.log.lock().unwrap().is_empty(),
        "a refused attempt reached the backend"
    );
    for (template, uri, target) in BACKEND_CONTAINED {
        match backend_attempt(&backend, &client, template, uri) {
            BackendOutcome::Fetched(seen) => assert_eq!(seen, *target, "{uri}"),
            other => panic!("{uri}: {other:?}"),
        }
    }
    // A redirect to another server is not followed.
    let outcome = backend_attempt(&backend, &client, TICKET, "tracker://tickets/redirect");
    assert!(
        matches!(
            outcome,
            BackendOutcome::Fetch(FetchError::Redirect { status: 302 })
        ),
        "{outcome:?}"
    );
    // An answer over the cap is refused whether or not its length is announced.
    let outcome = backend_attempt(&backend, &client, TICKET, "tracker://tickets/huge");
    assert!(
        matches!(outcome, BackendOutcome::Fetch(FetchError::TooLarge { .. })),
        "{outcome:?}"
    );
    let outcome = backend_attempt(&backend, &client, TICKET, "tracker://tickets/claims-big");
    assert!(
        matches!(outcome, BackendOutcome::Fetch(FetchError::TooLarge { .. })),
        "{outcome:?}"
    );
    // A 404 is not-found, and its body is not carried.
    match backend_attempt(&backend, &client, TICKET, "tracker://tickets/missing") {
        BackendOutcome::Fetch(e @ FetchError::NotFound) => {
            assert!(!e.to_string().contains("secret"))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        outside.log.lock().unwrap().is_empty(),
        "the outside server was reached"
    );
    for target in server.log.lock().unwrap().iter() {
        assert!(target.starts_with("/api/"), "the backend saw {target}");
    }
    // No other template shape reaches further: a template that does not match is not
    // tried against the backend at all.
    assert!(matches!(
        backend_attempt(&backend, &client, TICKET, "other://tickets/1"),
        BackendOutcome::NoMatch
    ));
}

#[test]
fn only_http_backends_are_accepted_and_fetched() {
    for bad in [
        "file:///etc/passwd",
        "ftp://127.0.0.1/",
        "gopher://127.0.0.1/",
        "http://",
    ] {
        assert!(Backend::parse(bad).is_err(), "{bad}");
    }
    let client = BackendClient::new(FetchOptions::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = url_of("file:///etc/passwd");
    assert!(matches!(
        runtime.block_on(client.fetch(&url)),
        Err(FetchError::Refused { .. })
    ));
}

fn url_of(text: &str) -> url::Url {
    url::Url::parse(text).unwrap()
}

// `pipec serve --http` and the connections clients hold. Each test fails on a build
// without connection limits (`PIPEC_TEST_BIN=<that build> cargo test --test
// serve_security NAME`): it has no such options, keeps a refused client's connection
// open, and waits for slow headers forever.

mod connections {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    use super::common::Project;
    use super::common::serve_http::{authority, request, serve_http, status_of};

    const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

    fn site(tag: &str) -> Project {
        let p = Project::new(tag);
        p.write(
            "site.pipe",
            "serve {\n  resource \"file:///site/readme\" {\n    name = \"readme\"\n    text = \"# Site\"\n  }\n}\n",
        );
        p
    }

    /// A request with the token: it reaches MCP, which answers this bare `ping` by
    /// asking for the handshake it skipped.
    fn authorized(url: &str) -> (u16, String) {
        request(url, "POST", &[("authorization", "Bearer t0ken")], PING)
    }

    fn reaches_mcp((status, answer): (u16, String)) {
        assert!(
            status != 0 && status != 401 && status != 503 && answer.contains("Session"),
            "{answer}"
        );
    }

    /// Whether the server closed `stream` (read at most `wait`).
    fn closed(stream: &mut TcpStream, wait: Duration) -> bool {
        let _ = stream.set_read_timeout(Some(wait));
        let mut buf = [0u8; 256];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) => {
                    return !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    );
                }
            }
        }
    }

    /// Sends `request` on a kept-alive connection and reads its one answer.
    fn ask(stream: &mut TcpStream, host: &str, token: &str) -> String {
        let text = format!(
            "POST /mcp HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{PING}",
            PING.len()
        );
        stream.write_all(text.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
            head.push_str(&line);
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        head + &String::from_utf8_lossy(&body)
    }

    #[test]
    fn clients_without_the_token_cannot_crowd_out_a_client_with_it() {
        let p = site("serve-crowd");
        let (_server, url) = serve_http(&p.dir, &["site.pipe", "--max-connections", "8"], "t0ken");
        // Eight times the cap, connected and silent: each newcomer past the cap makes
        // room by closing the oldest connection that has not shown the token.
        let mut idle: Vec<TcpStream> = (0..64)
            .map(|_| TcpStream::connect(authority(&url)).unwrap())
            .collect();
        reaches_mcp(authorized(&url));
        let dropped = idle
            .iter_mut()
            .filter_map(|s| closed(s, Duration::from_millis(200)).then_some(()))
            .count();
        assert!(
            dropped >= 64 - 8,
            "only {dropped} idle connections were closed"
        );
    }

    #[test]
    fn when_every_connection_has_shown_the_token_a_newcomer_is_told_to_come_back() {
        let p = site("serve-full");
        let (_server, url) = serve_http(&p.dir, &["site.pipe", "--max-connections", "2"], "t0ken");
        let host = authority(&url).to_string();
        let mut kept: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&host).unwrap()).collect();
        for stream in &mut kept {
            let answer = ask(stream, &host, "t0ken");
            assert!(answer.contains("Session"), "{answer}");
        }
        let (status, answer) = authorized(&url);
        assert_eq!(status, 503, "{answer}");
        assert!(answer.contains("--max-connections"), "{answer}");
        drop(kept);
        // Once they close, there is room again.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, answer) = authorized(&url);
            if status != 503 {
                reaches_mcp((status, answer));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no room after the connections closed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn a_request_without_the_token_is_answered_401_and_its_connection_closed() {
        let p = site("serve-401-close");
        let (_server, url) = serve_http(&p.dir, &["site.pipe"], "t0ken");
        let host = authority(&url);
        let mut stream = TcpStream::connect(host).unwrap();
        let text = format!(
            "POST /mcp HTTP/1.1\r\nhost: {host}\r\nconnection: keep-alive\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{PING}",
            PING.len()
        );
        stream.write_all(text.as_bytes()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut answer = String::new();
        let read = stream.read_to_string(&mut answer);
        assert!(
            read.is_ok(),
            "the connection was kept open after the 401: {read:?}"
        );
        assert_eq!(status_of(&answer), 401, "{answer}");
    }

    #[test]
    fn a_client_that_sends_its_headers_slowly_is_dropped() {
        let p = site("serve-slow-headers");
        let (_server, url) = serve_http(&p.dir, &["site.pipe", "--header-timeout", "1"], "t0ken");
        let mut slow = TcpStream::connect(authority(&url)).unwrap();
        slow.write_all(b"POST /mcp HTTP/1.1\r\n").unwrap();
        // A header line now and then, never the blank line that ends them.
        let deadline = Instant::now() + Duration::from_secs(30);
        let dropped = loop {
            if slow.write_all(b"x-slow: 1\r\n").is_err()
                || closed(&mut slow, Duration::from_millis(200))
            {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
        };
        assert!(dropped, "the slow client was never dropped");
        reaches_mcp(authorized(&url));
    }
}
