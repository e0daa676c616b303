//! `pipec worker`: take runnable threads from a store and run them, up to
//! `--concurrency` at once, until SIGTERM or SIGINT. The first signal stops claiming and
//! lets the steps in flight finish, each thread going back to the queue, then exits 0;
//! a second one exits at once (the kernel frees the thread locks, and the reaper ends
//! the commands in flight).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::common;
use crate::runtime::{ServedPlan, Worker, WorkerOptions};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The store (default: .pipec/runs.redb in the project; or PIPEC_STORE)
    #[arg(long)]
    store: Option<PathBuf>,
    /// How many threads run at once
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// How many nodes of one thread run at once
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    node_concurrency: u32,
    /// Serve only the pipelines of the .pipe files in this folder, run in its project
    #[arg(long, value_name = "DIR")]
    pipelines: Option<PathBuf>,
    /// The longest wait between two looks at the store (e.g. `1s`, `500ms`)
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    poll: String,
    /// A line on stderr for every thread taken and every attempt that ends
    #[arg(long, short)]
    verbose: bool,
}

pub(super) fn run(args: Args) -> u8 {
    let poll = match crate::syntax::literal::decode_number(&args.poll) {
        Ok(crate::syntax::literal::Number::Duration(ms)) if ms > 0 => Duration::from_millis(ms),
        _ => {
            super::err(&format!(
                "error: `--poll {}` is not a duration such as 1s or 500ms",
                args.poll
            ));
            return super::EXIT_USAGE;
        }
    };
    let (plans, project_root) = match &args.pipelines {
        Some(dir) => match served_plans(dir) {
            Ok((plans, root)) => (Some(plans), Some(root)),
            Err(code) => return code,
        },
        None => (None, None),
    };
    let pipelines: Option<Vec<String>> = plans
        .as_ref()
        .map(|p| p.iter().map(|p| p.plan.name.clone()).collect());
    let root = project_root.clone().unwrap_or_else(common::default_root);
    let store_path = common::store_path(&args.store, &root);
    let (rt, store) = match common::runtime_and_existing_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let log: crate::runtime::WorkerLog =
        Arc::new(|line: &str| super::err(&format!("worker: {line}")));
    let opts = WorkerOptions {
        concurrency: args.concurrency as usize,
        node_concurrency: args.node_concurrency as usize,
        plans,
        project_root,
        poll,
        log: args.verbose.then(|| log.clone()),
        errors: Some(log),
        spans: super::telemetry::spans(),
        ..Default::default()
    };
    let worker = Worker::new(store, opts);
    let stop = worker.stop_signal();
    let served = match &pipelines {
        Some(p) => p.join(", "),
        None => "every pipeline".into(),
    };
    // The handlers are in place before the worker says it started and before it takes
    // anything: a SIGTERM from then on stops it gracefully, never by the default action.
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        let _in = rt.enter();
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(term), Ok(int)) => (term, int),
            (Err(e), _) | (_, Err(e)) => {
                super::err(&format!("error: cannot handle SIGTERM and SIGINT: {e}"));
                return super::EXIT_USAGE;
            }
        }
    };
    super::err(&format!(
        "worker {} on {}: {served}, {} at once",
        std::process::id(),
        common::shown(&store_path),
        args.concurrency
    ));
    let report = rt.block_on(async {
        let (mut term, mut int) = signals;
        let signals = tokio::spawn(async move {
            let first = tokio::select! {
                _ = term.recv() => 15,
                _ = int.recv() => 2,
            };
            super::err(&format!(
                "worker: stopping (signal {first}): no new threads; the steps in flight finish, then each thread goes back to the queue (a second signal stops at once)"
            ));
            stop.stop();
            let second = tokio::select! {
                _ = term.recv() => 15,
                _ = int.recv() => 2,
            };
            super::err(&format!("worker: stopped at once (signal {second})"));
            std::process::exit(128 + second);
        });
        let report = worker.run().await;
        signals.abort();
        report
    });
    let ended: Vec<String> = report
        .ended
        .iter()
        .map(|(how, n)| format!("{n} {how}"))
        .collect();
    super::err(&format!(
        "worker {} stopped{}",
        std::process::id(),
        if ended.is_empty() {
            String::new()
        } else {
            format!(": {}", ended.join(", "))
        }
    ));
    super::EXIT_OK
}

/// The plans of a folder's `.pipe` files (each compiled; one with errors refuses the
/// worker, and so do two files of one pipeline) and the project they belong to.
fn served_plans(dir: &std::path::Path) -> Result<(Vec<ServedPlan>, PathBuf), u8> {
    if !dir.is_dir() {
        super::err(&format!(
            "error: `--pipelines {}`: no such folder",
            dir.display()
        ));
        return Err(super::EXIT_USAGE);
    }
    let files = super::pipe_files::pipe_files(&[dir.to_path_buf()]).map_err(|p| {
        super::err(&p.message());
        super::EXIT_USAGE
    })?;
    let mut plans: Vec<ServedPlan> = Vec::new();
    let mut root = None;
    for f in files {
        let loaded = common::load_plan(&f)?;
        // Libraries (no nodes) are not pipelines of their own.
        if loaded.plan.nodes.is_empty() {
            continue;
        }
        root.get_or_insert(loaded.root);
        // A thread names its pipeline, not its file: two plans of one name would leave
        // the worker to guess which of them a thread is to run.
        if let Some(other) = plans.iter().find(|p| p.plan.name == loaded.plan.name) {
            super::err(&format!(
                "error: `--pipelines {}`: `{}` and `{}` both define the pipeline `{}`",
                dir.display(),
                other.source,
                loaded.source,
                loaded.plan.name
            ));
            return Err(super::EXIT_USAGE);
        }
        plans.push(ServedPlan {
            plan: loaded.plan,
            source: loaded.source,
        });
    }
    let Some(root) = root else {
        super::err(&format!(
            "error: `--pipelines {}`: its .pipe files define no pipeline",
            dir.display()
        ));
        return Err(super::EXIT_USAGE);
    };
    let root = std::path::absolute(&root).unwrap_or(root);
    Ok((plans, root))
}
