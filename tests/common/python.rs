//! The Python the MCP interop tests run their servers with: `PIPEC_TEST_PYTHON`, else
//! `python3`. Tests that need the official MCP SDK fail (never skip) when it is missing,
//! saying what to install.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The interpreter to use, as named (a path, or a name on `PATH`).
pub fn python() -> String {
    std::env::var("PIPEC_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// A Python that can import the MCP SDK and uvicorn; panics with the command to run
/// when there is none.
pub fn python_with_mcp() -> String {
    static CHECKED: OnceLock<Result<String, String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let python = python();
        let mut probe = Command::new(&python);
        probe.args(["-c", "import mcp.server.mcpserver, uvicorn"]);
        probed(&python, probe, "cannot import the MCP SDK")
    });
    match checked {
        Ok(python) => python.clone(),
        Err(why) => panic!(
            "{why}\nThe MCP interop tests need Python with the official MCP SDK. Install it with\n    \
             {} -m pip install -r tests/interop/requirements.txt\nor set PIPEC_TEST_PYTHON to a \
             Python that has it (.ci/run makes a venv under target/ and does that).",
            python()
        ),
    }
}

/// `python` when `probe` (a command of it) succeeds; else why not: `{python} {fails}`
/// and the last line of what it wrote to stderr, or why it could not be run.
pub fn probed(python: &str, mut probe: Command, fails: &str) -> Result<String, String> {
    match probe.output() {
        Ok(out) if out.status.success() => Ok(python.to_string()),
        Ok(out) => Err(format!(
            "`{python}` {fails} ({}).",
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("")
        )),
        Err(e) => Err(format!("`{python}` cannot be run ({e}).")),
    }
}

fn interop(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(file)
}

/// The CRM server script: `PIPEC_CRM_SERVER` (to run the same tests against another
/// implementation of it), else the fixture.
pub fn crm_server() -> PathBuf {
    std::env::var_os("PIPEC_CRM_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| interop("crm_server.py"))
}

/// The server whose tools have schemas to turn into types, speaking an old protocol
/// (standard library only).
pub fn schema_server() -> PathBuf {
    interop("schema_server.py")
}

/// The misbehaving server (standard library only).
pub fn fault_server() -> PathBuf {
    interop("fault_server.py")
}

/// The lax server: `{}` for what it does not know, `server/discover` among it; no
/// resources; a tool that runs only as a task (standard library only).
pub fn lax_server() -> PathBuf {
    interop("lax_server.py")
}

/// Quarterly reports as fixed resources, on the official Python SDK.
pub fn reports_server() -> PathBuf {
    interop("reports_server.py")
}

/// `name` resolved on `PATH` as an absolute path, as the runtime hands programs over.
pub fn on_path(name: &str) -> PathBuf {
    if name.contains('/') {
        return PathBuf::from(name);
    }
    pipec::process::find_program(name, std::path::Path::new("/"))
        .unwrap_or_else(|| panic!("`{name}` is not on PATH"))
}
