//! `exec` nodes: a subprocess (started by `runtime/exec.rs`) with the node's parameters
//! as JSON on stdin and one JSON value on stdout. A non-idempotent command is journaled
//! before each try; it gets its call's idempotency key in `PIPEC_CALL_KEY`.

use serde_json::Value;

use super::{Executor, TryContext, TryError, TryFuture};
use crate::error::RuntimeError;
use crate::exec::{self, ExecError};
use crate::validate::Mode;
use pipec_diagnostic::{self as codes, Rule};
use pipec_plan::{Body, Node, Plan};
use pipec_process::ReaperId;
use pipec_store::{CallKind, Watcher};

pub(crate) struct Exec;

impl Executor for Exec {
    fn call_kind(&self) -> CallKind {
        CallKind::Exec
    }

    fn journaled(&self, _plan: &Plan, node: &Node) -> bool {
        matches!(
            node.body,
            Body::Exec {
                idempotent: false,
                ..
            }
        )
    }

    fn free_to_redo(&self, plan: &Plan, node: &Node) -> bool {
        !self.journaled(plan, node)
    }

    fn target(&self, node: &Node) -> String {
        match &node.body {
            Body::Exec { argv, .. } => argv.join(" "),
            _ => String::new(),
        }
    }

    fn failure_rule(&self) -> &'static Rule {
        &codes::EXEC_FAILED
    }

    fn watcher(&self) -> Option<Watcher> {
        // Started now if need be: the row names it before the command can run.
        let reaper = pipec_process::current_reaper().ok()?;
        Some(Watcher {
            reaper_pid: reaper.pid,
            reaper_start: reaper.start_time,
            owner_pid: std::process::id(),
        })
    }

    fn run<'a>(&'a self, cx: TryContext<'a>) -> TryFuture<'a> {
        Box::pin(run(self, cx))
    }
}

async fn run(this: &Exec, cx: TryContext<'_>) -> Result<Value, TryError> {
    let unit = cx.unit;
    let node = &unit.node;
    let Body::Exec { argv, .. } = &node.body else {
        return Err(super::fatal(
            &cx,
            &codes::INTERNAL_ERROR,
            format!("`{}` is not an `exec` node", node.name),
        ));
    };
    let shared = cx.shared;
    let env = vec![
        ("PIPEC_THREAD".to_string(), shared.thread_id.clone()),
        ("PIPEC_NODE".to_string(), node.name.clone()),
        (
            "PIPEC_ITEM".to_string(),
            if unit.is_item {
                unit.item.to_string()
            } else {
                String::new()
            },
        ),
        ("PIPEC_CALL_KEY".to_string(), cx.idem_key.clone()),
    ];
    let stdin = Value::Object(unit.params.clone().into_iter().collect());
    let request = exec::ExecRequest {
        argv,
        project_root: &shared.project_root,
        stdin: &stdin,
        env,
        timeout: None,
    };
    // A journaled try runs only under the reaper its `started` row names.
    let watched = cx.started.and_then(|r| r.watched_by).map(|w| ReaperId {
        pid: w.reaper_pid,
        start_time: w.reaper_start,
    });
    let result = match &watched {
        Some(reaper) => exec::run_watched(request, reaper)
            .await
            .map(|ran| ran.value),
        None => exec::run(request).await,
    };
    let idempotent = !this.journaled(&cx.shared.plan, node);
    let scrub = |s: String| shared.scrubber.scrub(&s);
    // A stderr tail is scrubbed before it is cut for a message, so no cut leaves half a
    // secret; one whose start was dropped while the command ran may begin inside one.
    let result = result.map_err(|e| {
        e.map_stderr(|s| match s.cut {
            true => shared.scrubber.scrub_tail(&s.text),
            false => shared.scrubber.scrub(&s.text),
        })
    });
    let fatal = |rule, message: String| {
        TryError::Fatal(RuntimeError::new(rule, scrub(message)).stored(Some(&node.name)))
    };
    match result {
        Ok(mut value) => {
            shared
                .validators
                .check(&node.output, &value, Mode::Open)
                .map_err(|e| {
                    fatal(
                        &codes::EXEC_OUTPUT_INVALID,
                        format!(
                            "`{}` printed a value that does not fit `{}`: {e}",
                            argv.join(" "),
                            node.output_type
                        ),
                    )
                })?;
            // What the type does not declare no node can read: it is not kept.
            shared.validators.keep_declared(&node.output, &mut value);
            Ok(value)
        }
        // Nothing ran: trying again is safe.
        Err(ExecError::Spawn(m) | ExecError::Unwatched(m)) => Err(TryError::Transient {
            rule: &codes::EXEC_FAILED,
            message: scrub(m),
        }),
        Err(e @ ExecError::Output { .. }) => Err(fatal(&codes::EXEC_OUTPUT_INVALID, e.to_string())),
        Err(e) if idempotent => Err(TryError::Transient {
            rule: &codes::EXEC_FAILED,
            message: scrub(e.to_string()),
        }),
        Err(e @ ExecError::TimedOut { .. }) => Err(TryError::Unknown(scrub(e.to_string()))),
        Err(e) => Err(fatal(&codes::EXEC_FAILED, e.to_string())),
    }
}
