//! A test that kills its run (`faults { kill_after = [...] }`): the thread runs from its
//! start in a process of its own, which ends as by `kill -9` right after the named
//! effect ran and before its result is committed; the test then resumes the thread in
//! its own process, as a person would after a crash, and meets the effect unfinished.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use pipec_plan::testing::TestCase;

use crate::{Context, Role, Setup, thread_id};

/// The tool calls the killed process made, one JSON line each, for the test's `calls`.
pub(crate) const CALLS: &str = "killed-run-calls.jsonl";

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
    let setup = Setup::new(cx, test, Role::Killed)?;
    let first = setup
        .start(cx, test, &thread_id(&cx.source, &test.name))
        .await?;
    setup.answer_gates(cx, test, first).await?;
    if let Some(tape) = setup.tape.as_ref().filter(|t| t.recording()) {
        tape.save()?;
    }
    Ok(())
}
