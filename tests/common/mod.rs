//! Helpers shared by the runtime tests: temporary projects, running the real binary.

#![allow(dead_code)]

pub mod chat_server;
pub mod hooked;
pub mod lsp_client;
pub mod npm;
pub mod otlp_json;
pub mod pg_schema;
pub mod phoenix;
pub mod python;
pub mod rng;
pub mod serve_http;
pub mod show_shape;
pub mod store_fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The binary under test: this build's, or `PIPEC_TEST_BIN` (to run a regression test
/// against an older build and see it fail there).
pub fn pipec_bin() -> String {
    demo_crm_bin();
    std::env::var("PIPEC_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pipec").to_string())
}

/// The demo CRM server, which pipelines in the tests start by its bare name: pipec finds
/// it beside its own executable. It is a crate of its own, so `cargo test -p pipec` does not
/// build it; the first test that needs it builds it with the cargo running the tests.
pub fn demo_crm_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let pipec = Path::new(env!("CARGO_BIN_EXE_pipec"));
        let bin = pipec.with_file_name("pipec-demo-crm");
        if !bin.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = Command::new(cargo);
            build.args(["build", "--quiet", "-p", "pipec-demo-crm"]);
            if pipec
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|dir| dir == "release")
            {
                build.arg("--release");
            }
            let status = build
                .status()
                .expect("cargo starts to build pipec-demo-crm");
            assert!(status.success(), "cargo build -p pipec-demo-crm failed");
        }
        bin
    })
}

/// The full tier: `PIPEC_TEST_FULL=1` (set by `.ci/run`) runs the tortures, the corruption
/// sweep and the fuzz run at full size; without it they run the same real processes and
/// stores at a smaller size, so that the test command answers in minutes.
pub fn full_tier() -> bool {
    std::env::var("PIPEC_TEST_FULL").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A test's size: `var` when it is set to a number, else `small`, or `full` in the full tier.
pub fn tier_size(var: &str, small: usize, full: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full_tier() { full } else { small })
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The store a test's commands use: the project's redb file (`.pipec/runs.redb`), or a
/// schema of the PostgreSQL server the tests are given (a URL from
/// [`pg_schema::postgres_store`]).
#[derive(Clone, Debug)]
pub enum StoreKind {
    Redb,
    Postgres(String),
}

/// How long a lease lasts on PostgreSQL in these tests (`PIPEC_LEASE_TTL_MS`), so that a
/// thread whose holder was killed is free again soon.
pub const PG_LEASE_TTL: std::time::Duration = std::time::Duration::from_millis(1500);

/// Runs each named `fn case(store: &StoreKind)` once per store: `on_redb::case` and
/// `on_postgres::case` (which says it is skipped without `PIPEC_TEST_POSTGRES`, and fails
/// without it under `PIPEC_REQUIRE_POSTGRES=1`).
#[allow(unused_macros)]
macro_rules! on_every_store {
    ($($case:ident),* $(,)?) => {
        mod on_redb {
            $(
                #[test]
                fn $case() {
                    super::$case(&$crate::common::StoreKind::Redb);
                }
            )*
        }
        mod on_postgres {
            $(
                #[test]
                fn $case() {
                    if let Some(url) = $crate::common::pg_schema::postgres_store(stringify!($case)) {
                        super::$case(&$crate::common::StoreKind::Postgres(url));
                    }
                }
            )*
        }
    };
}

/// A temporary project folder, removed on drop, and the store its commands use.
pub struct Project {
    pub dir: PathBuf,
    /// The PostgreSQL store every command names (`PIPEC_STORE`); `None`: the project's
    /// redb file.
    pub pg: Option<String>,
}

impl Project {
    pub fn new(tag: &str) -> Project {
        Project::on(&StoreKind::Redb, tag)
    }

    /// A project whose commands all use `store`.
    pub fn on(store: &StoreKind, tag: &str) -> Project {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("pipec-rt-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("prompts")).expect("mkdir");
        let pg = match store {
            StoreKind::Redb => None,
            StoreKind::Postgres(url) => Some(url.clone()),
        };
        Project { dir, pg }
    }

    pub fn is_postgres(&self) -> bool {
        self.pg.is_some()
    }

    /// What `--store` would name: the redb file's path or the PostgreSQL URL.
    pub fn store_location(&self) -> String {
        self.pg
            .clone()
            .unwrap_or_else(|| self.store().display().to_string())
    }

    /// Everything the store holds, as text to search: the redb file's bytes, or a
    /// `pg_dump` of the schema's data.
    pub fn store_contents(&self) -> String {
        let Some(url) = &self.pg else {
            let bytes = std::fs::read(self.store()).expect("store");
            return String::from_utf8_lossy(&bytes).into_owned();
        };
        let (server, schema) = pg_schema::split(url);
        let out = Command::new("pg_dump")
            .args([server.as_str(), "--data-only", "--schema", schema.as_str()])
            .output()
            .expect("pg_dump runs");
        assert!(out.status.success(), "pg_dump: {}", stderr(&out));
        assert!(
            stdout(&out).contains("pipec_threads"),
            "the dump has the store's tables:\n{}",
            stdout(&out)
        );
        stdout(&out)
    }

    /// On PostgreSQL, the bytes of a table's records, uncompressed (`octet_length` of
    /// each row's `rec`, or `row` for the events): what the table holds, as redb's
    /// `stored_bytes` counts it, without the pages and the compression of the server.
    pub fn pg_record_bytes(&self, table: &str) -> u64 {
        let url = self.pg.as_deref().expect("a PostgreSQL store");
        let (server, schema) = pg_schema::split(url);
        let column = if table == "pipec_events" {
            "row"
        } else {
            "rec"
        };
        let out = Command::new("psql")
            .args([
                server.as_str(),
                "-tAc",
                &format!(
                    "SET search_path TO {schema}; SELECT coalesce(sum(octet_length({column})), 0) FROM {table}"
                ),
            ])
            .output()
            .expect("psql runs");
        stdout(&out)
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("the bytes of {table}: {}{}", stdout(&out), stderr(&out)))
    }

    /// Kills (`kill -9`) a pipec process that holds `thread`, and waits until the thread
    /// is free for another process. On redb the process's lock goes with it. On
    /// PostgreSQL its lease outlives it until the lease expires: seen at once, the thread
    /// is still running, held by the killed process; within the lease's time to live it
    /// is free.
    pub fn kill_holder(&self, child: &mut std::process::Child, thread: &str) {
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        let killed = std::time::Instant::now();
        if self.is_postgres() {
            let st = self.show_json(thread);
            // Only when the look was surely inside the lease's life (it was renewed at
            // most a third of its time to live before the kill).
            if killed.elapsed() < PG_LEASE_TTL / 2 && st["holder"]["pid"] == pid {
                assert_eq!(
                    st["status"], "running",
                    "the killed process's lease still holds the thread: {st}"
                );
            }
        }
        self.wait_not_held_by(thread, pid, PG_LEASE_TTL * 4);
        if !self.is_postgres() {
            assert!(
                killed.elapsed() < std::time::Duration::from_secs(2),
                "on redb the lock is released with the process"
            );
        }
    }

    /// Waits until process `pid` no longer holds `thread` (its lease, on PostgreSQL,
    /// expired), failing the test after `within`.
    pub fn wait_not_held_by(&self, thread: &str, pid: u32, within: std::time::Duration) {
        let start = std::time::Instant::now();
        loop {
            let st = self.show_json(thread);
            if st.is_null() || st["status"] != "running" || st["holder"]["pid"] != pid {
                return;
            }
            assert!(
                start.elapsed() < within,
                "process {pid} still holds {thread} after {within:?}: {st}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// `pipec show THREAD --json`, or null when there is no such thread (yet).
    pub fn show_json(&self, thread: &str) -> serde_json::Value {
        let out = self.run(&["show", thread, "--json"]);
        if code(&out) == 0 {
            show_shape::parse_show(&stdout(&out));
            json(&stdout(&out))
        } else {
            serde_json::Value::Null
        }
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, text).expect("write");
        p
    }

    pub fn script(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.write(rel, text);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755));
        }
        p
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.join(rel)).unwrap_or_default()
    }

    pub fn store(&self) -> PathBuf {
        self.dir.join(".pipec/runs.redb")
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(pipec_bin());
        // pipec's configuration folder (a served pipeline's state key, credentials) is the
        // project's own, not the user's.
        c.args(args)
            .current_dir(&self.dir)
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", self.dir.join(".config"));
        match &self.pg {
            Some(url) => {
                c.env("PIPEC_STORE", url)
                    .env("PIPEC_LEASE_TTL_MS", PG_LEASE_TTL.as_millis().to_string());
            }
            None => {
                c.env_remove("PIPEC_STORE");
            }
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        output(self.cmd(args))
    }

    /// [`Project::run`] with these variables set besides.
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = self.cmd(args);
        c.envs(env.iter().copied());
        output(c)
    }

    /// [`Project::run`] with pipec's clock `later` ahead (the test clock,
    /// `PIPEC_CLOCK_OFFSET_MS`): a gate's deadline passes without the test sleeping.
    pub fn run_later(&self, later: std::time::Duration, args: &[&str]) -> Output {
        let mut c = self.cmd(args);
        c.env("PIPEC_CLOCK_OFFSET_MS", later.as_millis().to_string());
        output(c)
    }
}

fn output(mut c: Command) -> Output {
    c.stdin(Stdio::null()).output().expect("pipec runs")
}

impl Drop for Project {
    fn drop(&mut self) {
        if std::env::var_os("PIPEC_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// The thread id in a pause or failure message.
pub fn thread_of(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.len() == 26 && w.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_string)
}

pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

pub fn crate_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A pipeline that fetches an item, waits at a gate, then applies an effect.
pub const GATED: &str = r#"type Item {
  id: string
  n: int
}

type Approval {
  approved: bool
}

type Done {
  done: bool
  id: string
}

input id: string
input n: int = 2

node fetch(id: string = input.id, n: int = input.n) -> Item {
  exec = ["./scripts/fetch.sh"]
  idempotent = true
}

gate review(item: Item = fetch) -> Approval {
  message = "Approve {{ item.id }}?"
}

node apply(ack: Approval = review, item: Item = fetch) -> Done {
  when = ack.approved
  exec = ["./scripts/effect.sh"]
}

node summary(item: Item = fetch, result: Done? = apply) -> Done {
  return = { id: item.id, done: result.done ?? false }
}

output summary = summary
"#;

/// An `exec` step that echoes its `token` parameter the ways a server may: in a JSON
/// text held by a string (`text`), escaped the way Go's encoder escapes `&`, `<` and `>`;
/// and base64-encoded on its own (`b64`), after `user:` as `Basic` credentials carry it
/// (`auth`), and after one byte in the URL-safe alphabet without padding (`url`).
pub const ECHO_ENCODED: &str = r#"#!/bin/sh
input=$(cat)
tok=$(printf '%s' "$input" | sed -n 's/^{"token":"\(.*\)"}$/\1/p')
go=$(printf '%s' "$tok" | sed 's/&/\\\\u0026/g; s/</\\\\u003c/g; s/>/\\\\u003e/g')
b64=$(printf '%s' "$tok" | base64 -w0)
basic=$(printf 'user:%s' "$tok" | base64 -w0)
url=$(printf 'x%s' "$tok" | base64 -w0 | tr '+/' '-_' | tr -d '=')
printf '{"text": "{\\"echo\\":\\"%s\\"}", "b64": "%s", "auth": "Basic %s", "url": "%s"}\n' "$go" "$b64" "$basic" "$url"
"#;

/// The `fetch` step of [`GATED`]: the item from its inputs.
pub const FETCH: &str = r#"#!/bin/sh
input=$(cat)
id=$(printf '%s' "$input" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
n=$(printf '%s' "$input" | sed -n 's/.*"n":\([0-9]*\).*/\1/p')
printf '{"id":"%s","n":%s}\n' "$id" "$n"
"#;

/// Waits until `path` exists (a command's marker that it started), failing the test
/// after `within`.
pub fn wait_for(path: &Path, within: std::time::Duration) {
    let start = std::time::Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < within,
            "{} did not appear within {within:?}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
