//! A server pipec starts and talks to over its stdin and stdout: started through
//! `pipec_process` (a cleared environment plus the allowlist and the declared
//! variables, a process group of its own that dies with pipec), its stderr drained into
//! a tail, and ended — stdin closed first, a short wait for it to exit, then its whole
//! group killed. A server dropped without being ended is killed with its group, by
//! `process::Child`'s own drop.

use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::unix::pipe;

use pipec_process::{self as process, Child, Environment, SpawnError};

use super::McpError;
use super::garbage::GarbageLines;
use super::line_transport::LineTransport;
use super::stderr::StderrTail;

/// The transport over the server's stdin and stdout.
pub(super) type StdioTransport = LineTransport<pipe::Receiver, pipe::Sender>;

/// The started server process.
pub(super) struct ServerProcess {
    child: Mutex<Option<Child>>,
}

/// What starting gives: the process, its transport, its stderr.
pub(super) struct Started {
    pub process: ServerProcess,
    pub transport: StdioTransport,
    pub stderr: Arc<StderrTail>,
}

/// What to start.
pub(super) struct Launch<'a> {
    pub server: &'a str,
    pub program: &'a Path,
    pub args: &'a [String],
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    pub max_message_bytes: usize,
}

/// Starts the server. Nothing is started when the program cannot be (`Start`, naming
/// it).
pub(super) fn start(
    launch: &Launch<'_>,
    garbage: Arc<GarbageLines>,
    largest_buffer: Arc<AtomicUsize>,
) -> Result<Started, McpError> {
    let fail = |message: String| McpError::Start {
        server: launch.server.to_string(),
        message,
        stderr: String::new(),
        url: None,
        help: None,
    };
    let Some(program) = launch.program.to_str() else {
        return Err(fail(format!(
            "the program path {} is not UTF-8",
            launch.program.display()
        )));
    };
    let mut argv = Vec::with_capacity(launch.args.len() + 1);
    argv.push(program.to_string());
    argv.extend(launch.args.iter().cloned());
    let command =
        process::Command::new(&argv, launch.cwd).environment(Environment::Cleared(launch.env));
    let spawned = process::spawn(&command).map_err(|e| match e {
        SpawnError::Start(e) => fail(format!("`{program}` could not be started: {e}")),
        unwatched @ SpawnError::Unwatched(_) => fail(format!("`{program}` was {unwatched}")),
    })?;
    let stderr = StderrTail::drain(spawned.stderr);
    let transport = LineTransport::new(
        spawned.stdout,
        spawned.stdin,
        launch.max_message_bytes,
        garbage,
        largest_buffer,
    );
    Ok(Started {
        process: ServerProcess {
            child: Mutex::new(Some(spawned.child)),
        },
        transport,
        stderr,
    })
}

impl ServerProcess {
    /// Ends the server: waits up to `grace` for it to exit (its stdin should be closed
    /// by then, which is how MCP asks a stdio server to stop), then kills its group and
    /// waits until none of it is left. Later calls do nothing.
    pub(crate) async fn end(&self, grace: Duration) {
        let child = match self.child.lock() {
            Ok(mut c) => c.take(),
            Err(p) => p.into_inner().take(),
        };
        if let Some(mut child) = child {
            if !grace.is_zero() {
                let _ = tokio::time::timeout(grace, child.wait()).await;
            }
            child.end().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_program_that_does_not_exist_is_a_start_error_naming_it() {
        let launch = Launch {
            server: "crm",
            program: Path::new("/no/such/mcp-server"),
            args: &[],
            cwd: Path::new("/"),
            env: &[],
            max_message_bytes: 1 << 20,
        };
        let got = start(&launch, Arc::default(), Arc::default());
        match got {
            Err(McpError::Start {
                server, message, ..
            }) => {
                assert_eq!(server, "crm");
                assert!(message.contains("/no/such/mcp-server"), "{message}");
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("started"),
        }
    }
}
