//! A file's tests in the editor: a code lens above each `test` block runs it (and one
//! above the first runs them all) with the `pipec.runTest` command; the test runs in a
//! `pipec test --json` process of its own, so the server goes on answering meanwhile and
//! knows nothing of the runtime. When it ends, the editor is told how it went, the lenses
//! show the last result, and a failed condition's line and message are logged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

use lsp_server::{Notification, Request, RequestId};
use lsp_types::{
    CodeLens, CodeLensParams, Command, ExecuteCommandParams, LogMessageParams, MessageType,
    ShowMessageParams, Url,
};
use pipec_syntax::ast::ItemKind;
use serde_json::{Value, json};

use super::documents::{path_uri, range};
use super::server::{Answer, Failure, known_path};
use super::transport::{Incoming, Writer};
use super::workspace::Workspace;

/// The command a lens runs: `[uri, test name]`, or `[uri]` for every test of the file.
pub(crate) const RUN_TEST: &str = "pipec.runTest";

/// How the last run of a test went.
#[derive(Clone, Debug)]
pub(crate) struct Outcome {
    passed: bool,
    ms: u64,
    /// Each failure as `FILE:LINE: what` and its message.
    failures: Vec<String>,
}

/// The last outcome of each test, by file and name.
#[derive(Default)]
pub(crate) struct TestResults {
    by_test: HashMap<(PathBuf, String), Outcome>,
    /// Tests running now.
    running: HashMap<(PathBuf, String), ()>,
    refreshes: u64,
}

/// What a finished `pipec test` process said.
pub(crate) struct Finished {
    path: PathBuf,
    /// The tests asked for (all of the file's when empty).
    asked: Vec<String>,
    /// The tests the run covered, marked running while it went on.
    covered: Vec<String>,
    result: Result<Vec<(String, Outcome)>, String>,
}

/// The lenses of a document: one per test, and one that runs every test of the file.
pub(crate) fn code_lens(ws: &mut Workspace, p: CodeLensParams) -> Answer {
    let path = known_path(ws, &p.text_document.uri)?;
    let Some((snap, file)) = ws.snapshot_for(&path) else {
        return Ok(Value::Null);
    };
    let text = &snap.analysis.db.get(file).text;
    let Some(sf) = snap.analysis.syntax.iter().find(|s| s.file == file) else {
        return Ok(json!([]));
    };
    let uri = p.text_document.uri.to_string();
    let mut lenses = Vec::new();
    let tests: Vec<_> = sf
        .ast
        .items
        .iter()
        .filter_map(|i| match &i.kind {
            ItemKind::Test(t) => Some(t),
            _ => None,
        })
        .collect();
    for (n, t) in tests.iter().enumerate() {
        let at = range(text, t.name.span);
        let key = (path.clone(), t.name.name.clone());
        let title = if ws.tests.running.contains_key(&key) {
            "⧗ running…".to_string()
        } else {
            match ws.tests.by_test.get(&key) {
                None => "▶ Run test".to_string(),
                Some(o) if o.passed => format!("✓ passed ({} ms) · ▶ Run again", o.ms),
                Some(o) => format!(
                    "✗ failed: {} · ▶ Run again",
                    o.failures
                        .first()
                        .and_then(|f| f.lines().next())
                        .unwrap_or("see the log")
                ),
            }
        };
        lenses.push(CodeLens {
            range: at,
            command: Some(Command {
                title,
                command: RUN_TEST.into(),
                arguments: Some(vec![json!(uri), json!(t.name.name)]),
            }),
            data: None,
        });
        if n == 0 && tests.len() > 1 {
            lenses.push(CodeLens {
                range: at,
                command: Some(Command {
                    title: format!("▶ Run the {} tests of this file", tests.len()),
                    command: RUN_TEST.into(),
                    arguments: Some(vec![json!(uri)]),
                }),
                data: None,
            });
        }
    }
    serde_json::to_value(lenses).map_err(|e| Failure::refused(e.to_string()))
}

/// `workspace/executeCommand` of [`RUN_TEST`]: starts the run and answers at once; the
/// result comes as [`Incoming::TestsFinished`].
pub(crate) fn execute(
    ws: &mut Workspace,
    p: ExecuteCommandParams,
    done: &Sender<Incoming>,
) -> Answer {
    if p.command != RUN_TEST {
        return Err(Failure::invalid(format!(
            "pipec's language server has no command `{}` (it has `{RUN_TEST}`)",
            p.command
        )));
    }
    let uri = p
        .arguments
        .first()
        .and_then(Value::as_str)
        .and_then(|u| Url::parse(u).ok())
        .ok_or_else(|| Failure::invalid(format!("`{RUN_TEST}` takes the file's URI first")))?;
    let path = known_path(ws, &uri)?;
    let asked: Vec<String> = match p.arguments.get(1) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(name)) => vec![name.clone()],
        Some(_) => {
            return Err(Failure::invalid(format!(
                "`{RUN_TEST}` takes a test's name second"
            )));
        }
    };
    let names: Vec<String> = if asked.is_empty() {
        tests_of(ws, &path)
    } else {
        asked.clone()
    };
    // Two runs of one test would share its store, which a run empties first.
    if let Some(busy) = names
        .iter()
        .find(|n| ws.tests.running.contains_key(&(path.clone(), (*n).clone())))
    {
        return Err(Failure::refused(format!(
            "the test `{busy}` is running; run it again once it ends"
        )));
    }
    for name in &names {
        ws.tests.running.insert((path.clone(), name.clone()), ());
    }
    let done = done.clone();
    std::thread::spawn(move || {
        let result = run(&path, asked.first().map(String::as_str));
        let _ = done.send(Incoming::TestsFinished(Finished {
            path,
            asked,
            covered: names,
            result,
        }));
    });
    Ok(Value::Null)
}

/// The names of a file's tests.
fn tests_of(ws: &Workspace, path: &Path) -> Vec<String> {
    let Some((snap, file)) = ws.snapshot_for(path) else {
        return Vec::new();
    };
    snap.analysis
        .syntax
        .iter()
        .filter(|s| s.file == file)
        .flat_map(|s| s.ast.items.iter())
        .filter_map(|i| match &i.kind {
            ItemKind::Test(t) => Some(t.name.name.clone()),
            _ => None,
        })
        .collect()
}

/// Runs `pipec test FILE --json`, one test (`--filter NAME --exact`) or all of the file.
fn run(path: &Path, name: Option<&str>) -> Result<Vec<(String, Outcome)>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find pipec: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("test").arg(path).arg("--json");
    if let Some(name) = name {
        cmd.args(["--filter", name, "--exact"]);
    }
    if let Some(dir) = path.parent() {
        cmd.current_dir(dir);
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `pipec test`: {e}"))?;
    let report: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        format!(
            "`pipec test` gave no report ({}): {}",
            out.status,
            stderr.lines().take(20).collect::<Vec<_>>().join("\n")
        )
    })?;
    // A file that does not check runs nothing: its errors are on stderr.
    if report["tests"].as_array().is_none_or(Vec::is_empty) && !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(stderr.lines().take(20).collect::<Vec<_>>().join("\n"));
    }
    Ok(report["tests"]
        .as_array()
        .map(|tests| {
            tests
                .iter()
                .map(|t| {
                    let failures = t["failures"]
                        .as_array()
                        .map(|fs| {
                            fs.iter()
                                .map(|f| {
                                    format!(
                                        "{}:{}: {}\n{}",
                                        t["file"].as_str().unwrap_or_default(),
                                        f["line"],
                                        f["what"].as_str().unwrap_or_default(),
                                        f["message"].as_str().unwrap_or_default()
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    (
                        t["name"].as_str().unwrap_or_default().to_string(),
                        Outcome {
                            passed: t["passed"].as_bool().unwrap_or(false),
                            ms: t["ms"].as_u64().unwrap_or(0),
                            failures,
                        },
                    )
                })
                .collect()
        })
        .unwrap_or_default())
}

/// A run ended: keep its outcomes, tell the editor, and ask it to draw the lenses again.
pub(crate) fn finished(ws: &mut Workspace, out: &mut Writer, f: Finished, refresh: bool) {
    for name in &f.covered {
        ws.tests.running.remove(&(f.path.clone(), name.clone()));
    }
    let file = f
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (kind, message, log) = match f.result {
        Err(e) => (
            MessageType::ERROR,
            format!("{file}: the tests did not run: {e}"),
            e,
        ),
        Ok(outcomes) => {
            let mut failed = Vec::new();
            let mut log = String::new();
            for (name, o) in &outcomes {
                if !o.passed {
                    failed.push(name.clone());
                    for failure in &o.failures {
                        log.push_str(failure);
                        log.push('\n');
                    }
                }
                ws.tests
                    .by_test
                    .insert((f.path.clone(), name.clone()), o.clone());
            }
            let what = match f.asked.as_slice() {
                [one] => format!("test `{one}`"),
                _ => format!("{} tests of {file}", outcomes.len()),
            };
            if outcomes.is_empty() {
                (MessageType::WARNING, format!("{what}: nothing ran"), log)
            } else if failed.is_empty() {
                (MessageType::INFO, format!("{what}: passed"), log)
            } else {
                let first = outcomes
                    .iter()
                    .find(|(_, o)| !o.passed)
                    .and_then(|(_, o)| o.failures.first())
                    .map(|f| f.replace('\n', " — "))
                    .unwrap_or_default();
                (
                    MessageType::ERROR,
                    format!("{what}: {} failed: {first}", failed.join(", ")),
                    log,
                )
            }
        }
    };
    if !log.is_empty() {
        out.send(Notification::new(
            "window/logMessage".into(),
            LogMessageParams {
                typ: kind,
                message: log,
            },
        ));
    }
    out.send(Notification::new(
        "window/showMessage".into(),
        ShowMessageParams { typ: kind, message },
    ));
    if refresh && path_uri(&f.path).is_some() {
        ws.tests.refreshes += 1;
        out.send(Request::new(
            RequestId::from(format!("pipec-lens-refresh-{}", ws.tests.refreshes)),
            "workspace/codeLens/refresh".into(),
            Value::Null,
        ));
    }
}
