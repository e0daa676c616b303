//! `pipec test [PATH...]`: run the tests of .pipe files (`test name { ... }`), each on a
//! throwaway store under `.pipec/test/` in its project, several at once; exit 0 when all
//! pass, 1 when one fails or a file does not check.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pipec_diagnostic::TerminalOptions;

use super::pipe_files::pipe_files;

#[derive(clap::Args)]
pub(super) struct Args {
    /// .pipe files, or folders searched for them (default: the current folder)
    paths: Vec<PathBuf>,
    /// Run only the tests whose `FILE::NAME` contains this text
    #[arg(long)]
    filter: Option<String>,
    /// With --filter: only the tests named exactly so (or whose `FILE::NAME` is exactly so)
    #[arg(long, requires = "filter")]
    exact: bool,
    /// How many tests run at once (default: the number of CPUs)
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Print the results as JSON on stdout
    #[arg(long)]
    json: bool,
    /// Also write the results as JUnit XML to this file
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// List the tests without running them
    #[arg(long)]
    list: bool,
    /// Record the tapes of the tests that name one (`tape = "FILE"`), calling the real
    /// models and MCP servers with this shell's keys, instead of answering from them
    #[arg(long)]
    record: bool,
    /// Write the snapshots (`snapshot = "FILE"`) of the tests whose outputs differ from
    /// theirs, or have none yet, instead of failing them
    #[arg(long)]
    update: bool,
    /// Run this test's thread until its `kill_after` fault kills the process (what
    /// `pipec test` starts for such a test; not for people)
    #[arg(long, hide = true, value_name = "TEST")]
    killed_run: Option<String>,
}

/// A test to run, with what it needs.
struct Planned {
    cx: Arc<pipec_test::Context>,
    case: pipec_plan::testing::TestCase,
}

/// Where a test run's clock starts: 2026-01-01T00:00:00Z. Every time a test records
/// (threads, attempts, events, gate deadlines) counts from it, whatever the day.
const TEST_CLOCK_ORIGIN_MS: u64 = 1_767_225_600_000;

pub(super) fn run(args: Args) -> u8 {
    crate::store::ids::start_clock_at(TEST_CLOCK_ORIGIN_MS);
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = match pipe_files(&paths) {
        Ok(f) => f,
        Err(p) => {
            super::err(&p.message());
            return super::EXIT_USAGE;
        }
    };
    let mut planned = Vec::new();
    let mut broken = 0;
    for file in &files {
        let name = file.to_string_lossy().into_owned();
        let analysis = crate::analyze(&crate::source::FsLoader, file, &name);
        if analysis.hir.tests.is_empty() {
            continue;
        }
        if analysis.has_errors() {
            super::common::print_errors(&analysis);
            super::err(&format!(
                "error: the tests of `{name}` do not run until it checks clean"
            ));
            broken += 1;
            continue;
        }
        let tests = analysis.hir.tests.clone();
        let root = std::path::absolute(&analysis.hir.project_root)
            .unwrap_or_else(|_| analysis.hir.project_root.clone());
        let plan = match crate::lower_analysis(analysis, file) {
            Ok(p) => p,
            Err(e) => {
                super::err(&e.render(TerminalOptions::default()));
                broken += 1;
                continue;
            }
        };
        // The file's path in the project, without `.pipe`: two files of one name in
        // different folders have stores of their own.
        let abs = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        let stem = abs
            .strip_prefix(&root)
            .unwrap_or_else(|_| Path::new(abs.file_name().unwrap_or_default()))
            .with_extension("");
        for case in tests {
            if let Some(f) = &args.filter {
                let full = format!("{name}::{}", case.name);
                let selected = if args.exact {
                    case.name == *f || full == *f
                } else {
                    full.contains(f.as_str())
                };
                if !selected {
                    continue;
                }
            }
            if args.killed_run.as_ref().is_some_and(|n| *n != case.name) {
                continue;
            }
            let work = root.join(".pipec/test").join(&stem).join(&case.name);
            // The test's name is appended last, as `--killed-run`'s value.
            let mut child: Vec<std::ffi::OsString> = vec![
                std::env::current_exe()
                    .unwrap_or_else(|_| "pipec".into())
                    .into(),
                "test".into(),
                file.clone().into(),
            ];
            if args.record {
                child.push("--record".into());
            }
            child.push("--killed-run".into());
            planned.push(Planned {
                cx: Arc::new(pipec_test::Context {
                    plan: plan.clone(),
                    root: root.clone(),
                    source: name.clone(),
                    work,
                    child: Some(child),
                    update: args.update,
                    record: args.record,
                }),
                case,
            });
        }
    }
    if args.killed_run.is_some() {
        return killed_run(planned);
    }
    if args.list {
        for p in &planned {
            super::out(&format!("{}::{}\n", p.cx.source, p.case.name));
        }
        return if broken > 0 {
            super::EXIT_FINDINGS
        } else {
            super::EXIT_OK
        };
    }
    if planned.is_empty() && broken == 0 {
        super::err("pipec test: no tests found (a test is `test name { ... }` in a pipeline file)");
        return super::EXIT_OK;
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
        .max(1);
    let rt = match super::common::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            super::err(&e);
            return super::EXIT_USAGE;
        }
    };
    let results = rt.block_on(async {
        let permits = Arc::new(tokio::sync::Semaphore::new(jobs));
        let mut handles = Vec::new();
        for p in planned {
            let permits = permits.clone();
            handles.push(tokio::spawn(async move {
                let _permit = permits.acquire_owned().await;
                pipec_test::run(&p.cx, &p.case).await
            }));
        }
        let mut results = Vec::new();
        for h in handles {
            if let Ok(r) = h.await {
                results.push(r);
            }
        }
        results
    });
    if let Some(path) = &args.junit {
        let written = pipec_test::junit(&results)
            .and_then(|xml| std::fs::write(path, xml).map_err(|e| e.to_string()));
        if let Err(e) = written {
            super::err(&format!("error: cannot write `{}`: {e}", path.display()));
            return super::EXIT_USAGE;
        }
    }
    if args.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&pipec_test::json(&results, broken)).unwrap_or_default()
        ));
    } else {
        super::out(&pipec_test::human(&results, broken));
    }
    if broken > 0 || results.iter().any(|r| !r.passed) {
        super::EXIT_FINDINGS
    } else {
        super::EXIT_OK
    }
}

/// `--killed-run TEST`: the test's thread until its fault kills this process; exit 0 only
/// when no kill came.
fn killed_run(planned: Vec<Planned>) -> u8 {
    let Some(p) = planned.first() else {
        super::err(
            "error: the file has no test of that name (`pipec test FILE --list` lists them)",
        );
        return super::EXIT_USAGE;
    };
    let rt = match super::common::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            super::err(&e);
            return super::EXIT_USAGE;
        }
    };
    match rt.block_on(pipec_test::run_killed(&p.cx, &p.case)) {
        Ok(()) => super::EXIT_OK,
        Err(e) => {
            super::err(&format!("error: {e}"));
            super::EXIT_USAGE
        }
    }
}
