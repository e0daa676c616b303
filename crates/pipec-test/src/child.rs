//! A test that kills its run (`faults { kill_after = [...] }`): the thread runs from its
//! start in a process of its own, which ends as by `kill -9` right after the named
//! effect ran and before its result is committed; the test then resumes the thread in
//! its own process, as a person would after a crash, and meets the effect unfinished.
//!
//! What the killed process learned about the test, rather than the thread, goes on in
//! the test's process: it writes a line for each as it happens (a tool call made, a
//! tape's answer given or missed or recorded, a fault fired, time skipped), and the test
//! takes them all before it resumes.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use pipec_plan::testing::TestCase;

use crate::{Context, Role, Setup, thread_id};

/// What the killed process learned, one JSON object a line, in the test's folder.
pub(crate) const LOG: &str = "killed-run.jsonl";

/// Where this process writes what it learns, when it is a test's killed process.
static LOG_PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Writes what this process learns to `path` from now on (the killed process).
pub(crate) fn log_to(path: std::path::PathBuf) {
    let _ = LOG_PATH.set(path);
}

/// Writes `what` as a line of the log, when this is a test's killed process. A line is
/// appended whole in one write, so a kill leaves whole lines.
pub(crate) fn note(what: serde_json::Value) {
    let Some(path) = LOG_PATH.get() else {
        return;
    };
    let line = what.to_string() + "\n";
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
}

/// Takes what the killed process learned into the test's own process.
pub(crate) fn take_over(setup: &Setup, work: &std::path::Path) {
    let Ok(text) = std::fs::read_to_string(work.join(LOG)) else {
        return;
    };
    for line in text.lines() {
        let Ok(serde_json::Value::Object(what)) = serde_json::from_str(line) else {
            continue;
        };
        for (kind, v) in what {
            match (kind.as_str(), &setup.tape) {
                ("call", _) => {
                    if let Ok((tool, args)) = serde_json::from_value(v) {
                        setup.calls.push(tool, args);
                    }
                }
                ("fault", _) => setup.faults.forget(&v),
                ("skipped", _) => {
                    let ms = v.as_u64().unwrap_or(0);
                    setup
                        .skipped
                        .fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
                }
                ("answered", Some(tape)) => tape.consume(v.as_str().unwrap_or_default()),
                ("miss", Some(tape)) => tape.add_miss(v.as_str().unwrap_or_default().into()),
                ("recorded", Some(tape)) if tape.recording() => {
                    tape.add_recorded(v["request"].clone(), v["answer"].clone());
                }
                ("listing", Some(tape)) if tape.recording() => {
                    if let Ok((server, tools)) =
                        serde_json::from_value::<(String, Vec<serde_json::Value>)>(v)
                    {
                        tape.add_listing(&server, tools);
                    }
                }
                _ => {}
            }
        }
    }
}

/// The signal `kill -9` sends.
const SIGKILL: i32 = 9;

/// Runs the test's thread in another process until a `kill_after` effect kills it.
pub(crate) async fn run_until_killed(cx: &Context, test: &TestCase) -> Result<(), String> {
    let Some((program, args)) = cx.child.as_ref().and_then(|c| c.split_first()) else {
        return Err(
            "a test with `kill_after` needs a process to kill, and this runner of tests cannot start one (`pipec test` can)"
                .into(),
        );
    };
    let out = tokio::process::Command::new(program)
        .args(args)
        .arg(&test.name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot start the process to kill: {e}"))?;
    match out.status.signal() {
        Some(SIGKILL) => Ok(()),
        _ if out.status.success() => Err(format!(
            "the run never finished an effect of {}, so nothing was killed: the thread ended before it, or the node is not an effect (an `exec` that is not idempotent, an `act`, a `call` of a tool that is not read-only)",
            test.faults
                .kill_after
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            Err(format!(
                "the process that runs until the kill failed ({}): {}",
                out.status,
                pipec_runtime::secrets::tail(stderr.trim(), 2000)
            ))
        }
    }
}

/// What `pipec test FILE --killed-run NAME` runs: the test's thread from its start, its
/// gates answered, with the `kill_after` faults armed. It returns only when no kill came.
pub async fn run_killed(cx: &Context, test: &TestCase) -> Result<(), String> {
    log_to(cx.work.join(LOG));
    let setup = Setup::new(cx, test, Role::Killed)?;
    let first = setup
        .start(cx, test, &thread_id(&cx.source, &test.name))
        .await?;
    setup.answer_gates(cx, test, first).await?;
    Ok(())
}
