//! The MCP reference servers from npm the interop tests run (`@modelcontextprotocol/
//! server-*`), installed under `target/reference-servers` on first use, at the versions
//! pinned here. Without npm (or the registry) a test says so and passes, unless
//! `PIPEC_REQUIRE_NPM=1` (as in CI), which makes it fail.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use super::crate_root;

/// The pinned reference servers: package, version, the program it installs.
pub const EVERYTHING: (&str, &str, &str) = (
    "@modelcontextprotocol/server-everything",
    "2026.8.31",
    "mcp-server-everything",
);
pub const FILESYSTEM: (&str, &str, &str) = (
    "@modelcontextprotocol/server-filesystem",
    "2026.8.31",
    "mcp-server-filesystem",
);
pub const MEMORY: (&str, &str, &str) = (
    "@modelcontextprotocol/server-memory",
    "2026.8.31",
    "mcp-server-memory",
);

/// The program of a reference server, installed when it is not (one install at a time:
/// npm does not share a folder between processes).
pub fn reference_server((package, version, program): (&str, &str, &str)) -> Option<PathBuf> {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
    let dir = crate_root().join("target/reference-servers");
    let bin = dir.join("node_modules/.bin").join(program);
    let installed = || {
        std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
            .is_ok_and(|p| p.contains(&format!("\"version\": \"{version}\"")))
    };
    if bin.exists() && installed() {
        return Some(bin);
    }
    let _ = std::fs::create_dir_all(&dir);
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(format!("{package}@{version}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if status.is_ok_and(|s| s.success()) && bin.exists() && installed() {
        return Some(bin);
    }
    let required = std::env::var("PIPEC_REQUIRE_NPM").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "PIPEC_REQUIRE_NPM=1 but `npm install {package}@{version}` failed"
    );
    eprintln!("skipped: npm could not install {package} (set PIPEC_REQUIRE_NPM=1 to fail instead)");
    None
}
