//! Helpers shared by the runtime tests: temporary projects, running the real binary.

#![allow(dead_code)]

pub mod chat_server;
pub mod lsp_client;
pub mod pg_schema;
pub mod python;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The binary under test: this build's, or `PIPEC_TEST_BIN` (to run a regression test
/// against an older build and see it fail there).
pub fn pipec_bin() -> String {
    std::env::var("PIPEC_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pipec").to_string())
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A temporary project folder, removed on drop.
pub struct Project {
    pub dir: PathBuf,
}

impl Project {
    pub fn new(tag: &str) -> Project {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("pipec-rt-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("prompts")).expect("mkdir");
        Project { dir }
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
        c.args(args)
            .current_dir(&self.dir)
            .env("NO_COLOR", "1")
            .env_remove("PIPEC_STORE");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args)
            .stdin(Stdio::null())
            .output()
            .expect("pipec runs")
    }
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
