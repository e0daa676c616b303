//! `exec` nodes: a subprocess, never through a shell. The node's parameters go to stdin
//! as one JSON object; stdout is one JSON value; stderr's tail goes into errors. The
//! command runs in its own process group (a terminal's Ctrl-C reaches only pipec, which
//! drains) that dies with pipec, `kill -9` included (`pipec_process`). A command is done
//! when it has exited: its pipes get a short grace to reach their end, then whatever it
//! left in its group is killed, and a timeout kills the whole group.

use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use pipec_process::{self as process, Child, Environment, ReaperId, SpawnError, Spawned};

/// The most a command may print on stdout.
const MAX_STDOUT: u64 = 16 * 1024 * 1024;
/// How much of stderr an error message quotes.
const STDERR_TAIL: usize = 2048;
/// How much of stderr is kept while the command runs (its end): more than is quoted, so
/// that the quoted tail is cut from text that was scrubbed of secrets whole.
const STDERR_KEPT: usize = 64 * 1024;
/// How long stdout and stderr may stay open after the command exited. What the command
/// wrote is in the pipe by then and is read in microseconds; a pipe still open after this
/// is held by a process the command left behind, which is killed with the group (and then
/// once more this long for its last bytes). Short enough not to be noticed at the end of
/// a node; long enough for a loaded machine to schedule the reader.
pub const GRACE_AFTER_EXIT: Duration = Duration::from_millis(200);

pub struct ExecRequest<'a> {
    pub argv: &'a [String],
    pub project_root: &'a Path,
    pub stdin: &'a Value,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
}

/// A command that ran to its end: its value, the process group it ran in (gone now), and
/// the reaper that watched that group.
#[derive(Debug)]
pub struct Ran {
    pub value: Value,
    pub group: u32,
    pub reaper: Option<ReaperId>,
}

#[derive(Debug)]
pub enum ExecError {
    /// It could not start.
    Spawn(String),
    /// It was not started, because its process group could not be watched by the reaper
    /// that was to watch it (that reaper died); nothing ran.
    Unwatched(String),
    /// It exited non-zero (or was killed by a signal).
    Exit {
        status: String,
        stderr: Stderr,
    },
    TimedOut {
        after: Duration,
        stderr: Stderr,
    },
    /// Its stdout is not one JSON value.
    Output {
        message: String,
        stderr: Stderr,
    },
}

/// The kept end of a command's stderr.
#[derive(Debug, Default)]
pub struct Stderr {
    pub text: String,
    /// Its start was dropped: it may begin inside a secret.
    pub cut: bool,
}

impl ExecError {
    /// The same error with its stderr's text passed through `f` (the secret scrubber).
    pub fn map_stderr(self, f: impl Fn(&Stderr) -> String) -> ExecError {
        let map = |stderr: Stderr| Stderr {
            text: f(&stderr),
            cut: stderr.cut,
        };
        match self {
            ExecError::Exit { status, stderr } => ExecError::Exit {
                status,
                stderr: map(stderr),
            },
            ExecError::TimedOut { after, stderr } => ExecError::TimedOut {
                after,
                stderr: map(stderr),
            },
            ExecError::Output { message, stderr } => ExecError::Output {
                message,
                stderr: map(stderr),
            },
            other => other,
        }
    }
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |s: &Stderr| {
            let s = s.text.trim_end();
            if s.trim().is_empty() {
                return String::new();
            }
            format!(
                "; stderr ends with:\n{}",
                crate::secrets::tail(s, STDERR_TAIL)
            )
        };
        match self {
            ExecError::Spawn(m) => write!(f, "cannot start the command: {m}"),
            ExecError::Unwatched(m) => write!(f, "the command was not started: {m}"),
            ExecError::Exit { status, stderr } => write!(f, "the command {status}{}", tail(stderr)),
            ExecError::TimedOut { after, stderr } => write!(
                f,
                "the command ran longer than {}s and was killed{}",
                after.as_secs_f64(),
                tail(stderr)
            ),
            ExecError::Output { message, stderr } => write!(f, "{message}{}", tail(stderr)),
        }
    }
}

/// Runs the command, watched by this process's reaper; its value.
pub async fn run(req: ExecRequest<'_>) -> Result<Value, ExecError> {
    run_command(req, None).await.map(|ran| ran.value)
}

/// Runs the command only under `reaper` (the one whose identity was journaled before the
/// run): if that reaper is gone, nothing starts ([`ExecError::Unwatched`]).
pub async fn run_watched(req: ExecRequest<'_>, reaper: &ReaperId) -> Result<Ran, ExecError> {
    run_command(req, Some(reaper)).await
}

async fn run_command(req: ExecRequest<'_>, reaper: Option<&ReaperId>) -> Result<Ran, ExecError> {
    let Some(argv0) = req.argv.first() else {
        return Err(ExecError::Spawn("empty command".into()));
    };
    let mut cmd = process::Command::new(req.argv, req.project_root)
        .environment(Environment::Inherited(&req.env));
    if let Some(reaper) = reaper {
        cmd = cmd.watched_by(reaper);
    }
    let Spawned {
        mut child,
        stdin,
        stdout,
        stderr,
    } = process::spawn(&cmd).map_err(|e| match e {
        SpawnError::Start(e) => ExecError::Spawn(format!("{argv0}: {e}")),
        SpawnError::Unwatched(e) => ExecError::Unwatched(format!("{argv0}: {e}")),
    })?;
    let group = child.group();
    let reaper = child.reaper();
    let input = serde_json::to_vec(req.stdin).unwrap_or_default();
    let exchange = exchange(&mut child, stdin, stdout, stderr, &input);
    let (out, err, status) = match req.timeout {
        Some(t) => match tokio::time::timeout(t, exchange).await {
            Ok(r) => r,
            // `child` drops as this returns, which kills its group.
            Err(_) => {
                return Err(ExecError::TimedOut {
                    after: t,
                    stderr: Stderr::default(),
                });
            }
        },
        None => exchange.await,
    };
    // What the command left in its group ends with it.
    child.end().await;
    let stderr_text = tail(&err);
    let status = status.map_err(|e| ExecError::Spawn(e.to_string()))?;
    if !status.success() {
        let status = match status.code() {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_string(),
        };
        return Err(ExecError::Exit {
            status,
            stderr: stderr_text,
        });
    }
    if out.len() as u64 > MAX_STDOUT {
        return Err(ExecError::Output {
            message: format!("the command printed more than {MAX_STDOUT} bytes"),
            stderr: stderr_text,
        });
    }
    let text = String::from_utf8_lossy(&out);
    let value = serde_json::from_str(text.trim()).map_err(|e| ExecError::Output {
        message: format!(
            "the command's stdout is not one JSON value ({e}): {}",
            text.chars().take(200).collect::<String>()
        ),
        stderr: stderr_text,
    })?;
    Ok(Ran {
        value,
        group,
        reaper,
    })
}

/// Feeds stdin, reads stdout and stderr, and waits for the command to exit; once it has,
/// the pipes get [`GRACE_AFTER_EXIT`] to reach their end, and a pipe still held open by
/// something the command left behind is cut short by killing the group. What was read
/// until then is the command's output.
async fn exchange(
    child: &mut Child,
    mut stdin: pipe::Sender,
    mut stdout: pipe::Receiver,
    mut stderr: pipe::Receiver,
    input: &[u8],
) -> (Vec<u8>, Vec<u8>, io::Result<ExitStatus>) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let status = {
        let write = async move {
            let _ = stdin.write_all(input).await;
            let _ = stdin.shutdown().await;
        };
        let read_out = async {
            let _ = (&mut stdout)
                .take(MAX_STDOUT + 1)
                .read_to_end(&mut out)
                .await;
            // Past the limit the rest is drained, not kept: a command blocked on a full
            // pipe would never exit.
            let _ = tokio::io::copy(&mut stdout, &mut tokio::io::sink()).await;
        };
        let read_err = async {
            // Only the end is kept: a command that writes gigabytes to stderr must not
            // take pipec's memory with it.
            let mut chunk = vec![0u8; 8192];
            loop {
                match stderr.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        err.extend_from_slice(&chunk[..n]);
                        if err.len() > 2 * STDERR_KEPT {
                            err.drain(..err.len() - STDERR_KEPT);
                        }
                    }
                }
            }
        };
        let pipes = async {
            tokio::join!(write, read_out, read_err);
        };
        tokio::pin!(pipes);
        let mut pipes_done = false;
        let status = loop {
            tokio::select! {
                () = &mut pipes, if !pipes_done => pipes_done = true,
                status = child.wait() => break status,
            }
        };
        if !pipes_done
            && tokio::time::timeout(GRACE_AFTER_EXIT, &mut pipes)
                .await
                .is_err()
        {
            child.kill();
            let _ = tokio::time::timeout(GRACE_AFTER_EXIT, &mut pipes).await;
        }
        status
    };
    (out, err, status)
}

/// The kept end of stderr, as text.
fn tail(bytes: &[u8]) -> Stderr {
    let text = String::from_utf8_lossy(bytes);
    let start = text.len().saturating_sub(STDERR_KEPT);
    let start = pipec_base::source::floor_char_boundary(&text, start);
    Stderr {
        text: text[start..].to_string(),
        cut: start > 0 || bytes.len() >= STDERR_KEPT,
    }
}
