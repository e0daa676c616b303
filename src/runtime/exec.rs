//! `exec` nodes: a subprocess, never through a shell. The node's parameters go to stdin
//! as one JSON object; stdout is one JSON value; stderr's tail goes into errors. The
//! child runs in its own process group (a terminal's Ctrl-C reaches only pipec, which
//! drains), dies with pipec on Linux, and a timeout kills its whole group.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most a command may print on stdout.
const MAX_STDOUT: u64 = 16 * 1024 * 1024;
/// How much of stderr is kept for error messages.
const STDERR_TAIL: usize = 2048;

pub struct ExecRequest<'a> {
    pub argv: &'a [String],
    pub project_root: &'a Path,
    pub stdin: &'a Value,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
}

#[derive(Debug)]
pub enum ExecError {
    /// It could not start.
    Spawn(String),
    /// It exited non-zero (or was killed by a signal).
    Exit {
        status: String,
        stderr: String,
    },
    TimedOut {
        after: Duration,
        stderr: String,
    },
    /// Its stdout is not one JSON value.
    Output {
        message: String,
        stderr: String,
    },
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |s: &str| {
            if s.trim().is_empty() {
                String::new()
            } else {
                format!("; stderr ends with:\n{}", s.trim_end())
            }
        };
        match self {
            ExecError::Spawn(m) => write!(f, "cannot start the command: {m}"),
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

/// Where argv[0] is: on PATH unless it contains `/`, then relative to the project root.
/// Made absolute, since the child changes into the root before it starts the program.
fn program(argv0: &str, root: &Path) -> std::path::PathBuf {
    if argv0.contains('/') && !Path::new(argv0).is_absolute() {
        let joined = root.join(argv0);
        std::path::absolute(&joined).unwrap_or(joined)
    } else {
        std::path::PathBuf::from(argv0)
    }
}

/// Kills a process group.
#[allow(unsafe_code)]
fn kill_group(pgid: u32) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has no memory effects.
    unsafe {
        libc::kill(-(pgid as i32), libc::SIGKILL);
    }
}

/// The fork path's way of arming the parent-death signal (`spawn.rs` arms it on the usual
/// path). Linux delivers the signal when the *thread* that started the child ends, not
/// the process: children are therefore started from long-lived threads (the thread
/// driving the attempt, or the runtime's workers), never from a blocking-pool thread that
/// may retire while its child runs.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag on the child and getppid reads
        // its parent; both are async-signal-safe, and the closure allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // pipec died before the signal was armed: do not start the effect.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                super::spawn::default_reserved_signals();
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// A running child, however it was started.
enum Proc {
    Tokio(tokio::process::Child),
    #[cfg(target_os = "linux")]
    Direct(super::spawn::Child),
}

impl Proc {
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Proc::Tokio(c) => c.wait().await,
            #[cfg(target_os = "linux")]
            Proc::Direct(c) => c.wait().await,
        }
    }
}

type Writer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;
type Reader = Box<dyn tokio::io::AsyncRead + Unpin + Send>;

/// A started child: the process, its process group, and its stdin, stdout and stderr.
type Started = (Proc, u32, Option<Writer>, Option<Reader>, Option<Reader>);

fn start(req: &ExecRequest<'_>, argv0: &str) -> std::io::Result<Started> {
    let program = program(argv0, req.project_root);
    #[cfg(target_os = "linux")]
    if super::spawn::available() {
        let s = super::spawn::spawn(&program, req.argv, req.project_root, &req.env)?;
        let pgid = s.child.id();
        return Ok((
            Proc::Direct(s.child),
            pgid,
            Some(Box::new(s.stdin)),
            Some(Box::new(s.stdout)),
            Some(Box::new(s.stderr)),
        ));
    }
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg0(argv0)
        .args(&req.argv[1..])
        .current_dir(req.project_root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for (k, v) in &req.env {
        cmd.env(k, v);
    }
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn()?;
    let pgid = child.id().unwrap_or(0);
    let stdin = child.stdin.take().map(|s| Box::new(s) as Writer);
    let stdout = child.stdout.take().map(|s| Box::new(s) as Reader);
    let stderr = child.stderr.take().map(|s| Box::new(s) as Reader);
    Ok((Proc::Tokio(child), pgid, stdin, stdout, stderr))
}

/// Kills a child's process group when dropped before the child was waited for: a node's
/// timeout or a cancelled attempt drops the future running the command, and whatever the
/// command started in its group goes with it.
struct GroupGuard {
    pgid: u32,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed && self.pgid != 0 {
            kill_group(self.pgid);
        }
    }
}

pub async fn run(req: ExecRequest<'_>) -> Result<Value, ExecError> {
    let Some(argv0) = req.argv.first() else {
        return Err(ExecError::Spawn("empty command".into()));
    };
    let (mut child, pgid, mut stdin, mut stdout, mut stderr) =
        start(&req, argv0).map_err(|e| ExecError::Spawn(format!("{argv0}: {e}")))?;
    let mut guard = GroupGuard { pgid, armed: true };
    let input = serde_json::to_vec(req.stdin).unwrap_or_default();
    let work = async {
        let write = async {
            if let Some(s) = stdin.as_mut() {
                let _ = s.write_all(&input).await;
                let _ = s.shutdown().await;
            }
            drop(stdin.take());
        };
        let read_out = async {
            let mut buf = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.as_mut().take(MAX_STDOUT + 1).read_to_end(&mut buf).await;
                // Past the limit the rest is drained, not kept: a command blocked on a
                // full pipe would never exit.
                let _ = tokio::io::copy(s, &mut tokio::io::sink()).await;
            }
            buf
        };
        let read_err = async {
            let mut buf = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_end(&mut buf).await;
            }
            buf
        };
        let ((), out, err) = tokio::join!(write, read_out, read_err);
        let status = child.wait().await;
        guard.armed = false;
        (out, err, status)
    };
    let (out, err, status) = match req.timeout {
        Some(t) => match tokio::time::timeout(t, work).await {
            Ok(r) => r,
            // The guard kills the group as this returns.
            Err(_) => {
                return Err(ExecError::TimedOut {
                    after: t,
                    stderr: String::new(),
                });
            }
        },
        None => work.await,
    };
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
    serde_json::from_str(text.trim()).map_err(|e| ExecError::Output {
        message: format!(
            "the command's stdout is not one JSON value ({e}): {}",
            text.chars().take(200).collect::<String>()
        ),
        stderr: stderr_text,
    })
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let start = text.len().saturating_sub(STDERR_TAIL);
    let start = crate::source::floor_char_boundary(&text, start);
    text[start..].to_string()
}
