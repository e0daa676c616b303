//! `pipec resume THREAD`: continue a paused, failed, blocked or crashed thread, with
//! answers and decisions. `pipec resume --due` resumes every paused thread whose gate
//! deadline has passed.

use std::path::PathBuf;
use std::sync::Arc;

use super::common;
use crate::runtime::{Decision, RunOptions, Runner};
use crate::store::{ListQuery, Status};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The thread (its id, or a unique prefix)
    #[arg(required_unless_present = "due")]
    thread: Option<String>,
    /// Answer a gate: `gate=JSON`, `gate=@file.json`, `gate=-`
    #[arg(long = "answer", value_name = "GATE=JSON")]
    answers: Vec<String>,
    #[arg(long)]
    store: Option<PathBuf>,
    /// Run this plan or .pipe instead of the thread's source
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Make an unfinished call again (its key, `node:g0:i0:s1:c0`, or `all`)
    #[arg(long = "retry-unfinished", value_name = "CALL")]
    retry: Vec<String>,
    /// Record that an unfinished call happened, with its result: `CALL=JSON`
    #[arg(long = "resolve", value_name = "CALL=JSON")]
    resolve: Vec<String>,
    /// Keep the old result of a finished node whose definition changed
    #[arg(long = "keep", value_name = "NODE")]
    keep: Vec<String>,
    /// Run a node again, and everything after it
    #[arg(long = "rerun-from", value_name = "NODE")]
    rerun_from: Vec<String>,
    /// A node was renamed: `old=new` keeps its result
    #[arg(long = "rename", value_name = "OLD=NEW")]
    renames: Vec<String>,
    /// Resume every paused thread whose gate deadline has passed
    #[arg(long)]
    due: bool,
    #[arg(long, value_enum)]
    events: Option<super::run::EventsFormat>,
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    #[arg(long)]
    detailed_exitcode: bool,
    #[arg(long, short)]
    quiet: bool,
    /// The largest gate answer accepted, in bytes of JSON
    #[arg(long, default_value_t = crate::runtime::DEFAULT_MAX_ANSWER_BYTES)]
    max_answer_bytes: usize,
}

pub(super) fn run(args: Args) -> u8 {
    let root = common::default_root();
    let store_path = common::store_path(&args.store, &root);
    let store_flag = common::store_flag(&args.store, &store_path);
    let (rt, store) = match common::runtime_and_existing_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let answers = match common::parse_answers(&args.answers) {
        Ok(a) => a,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    let mut decisions: Vec<(String, Decision)> = args
        .retry
        .iter()
        .map(|c| (c.clone(), Decision::Retry))
        .collect();
    for r in &args.resolve {
        let Some((call, json)) = r.split_once('=') else {
            super::err(&format!(
                "error: `--resolve {r}`: write `--resolve CALL=JSON`"
            ));
            return super::EXIT_USAGE;
        };
        match serde_json::from_str(json) {
            Ok(v) => decisions.push((call.to_string(), Decision::Performed(v))),
            Err(e) => {
                super::err(&format!(
                    "error: the result given for `{call}` is not JSON: {e}"
                ));
                return super::EXIT_USAGE;
            }
        }
    }
    let mut renames = Vec::new();
    for r in &args.renames {
        match r.split_once('=') {
            Some((a, b)) => renames.push((a.to_string(), b.to_string())),
            None => {
                super::err(&format!("error: `--rename {r}`: write `--rename old=new`"));
                return super::EXIT_USAGE;
            }
        }
    }
    let threads: Vec<String> = match (&args.thread, args.due) {
        (Some(t), _) => vec![t.clone()],
        (None, _) => {
            let now = crate::store::ids::now_ms();
            let listed = rt.block_on(async {
                let mut out = Vec::new();
                let mut before = None;
                loop {
                    let page = store
                        .list(ListQuery {
                            status: Some(Status::Paused),
                            before: before.clone(),
                            limit: 500,
                            pipeline: None,
                        })
                        .await?;
                    if page.is_empty() {
                        break;
                    }
                    before = page.last().map(|s| s.id.clone());
                    for s in page {
                        let state = store.load(&s.id).await?;
                        if state
                            .thread
                            .as_ref()
                            .and_then(|t| t.due_ms)
                            .is_some_and(|d| d <= now)
                        {
                            out.push(s.id);
                        }
                    }
                }
                Ok::<_, crate::store::StoreError>(out)
            });
            match listed {
                Ok(t) => t,
                Err(e) => {
                    common::print_error(&e.into());
                    return super::EXIT_FINDINGS;
                }
            }
        }
    };
    if threads.is_empty() {
        super::err("no paused thread is due");
        return super::EXIT_OK;
    }
    let mut worst = super::EXIT_OK;
    for thread in threads {
        let code = resume_one(
            &rt,
            &store,
            &store_flag,
            &thread,
            &args,
            answers.clone(),
            decisions.clone(),
            renames.clone(),
        );
        worst = worst.max(code);
    }
    worst
}

#[allow(clippy::too_many_arguments)]
fn resume_one(
    rt: &tokio::runtime::Runtime,
    store: &Arc<dyn crate::store::Store>,
    store_flag: &str,
    thread: &str,
    args: &Args,
    answers: Vec<(String, serde_json::Value)>,
    decisions: Vec<(String, Decision)>,
    renames: Vec<(String, String)>,
) -> u8 {
    // The plan: `--plan`, else the thread's source (compiled again), else the stored plan.
    let rec = match rt.block_on(store.load(thread)) {
        Ok(st) => st.thread,
        Err(e) => {
            common::print_error(&e.into());
            return super::EXIT_FINDINGS;
        }
    };
    let Some(rec) = rec else {
        return super::EXIT_FINDINGS;
    };
    let loaded = match common::plan_of_thread(rt, store, &rec, args.plan.as_deref()) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let mut runner = Runner::with_store(loaded.plan, store.clone())
        .project_root(loaded.root)
        .source(&loaded.source)
        .concurrency(args.concurrency)
        .max_answer_bytes(args.max_answer_bytes);
    let events = args.events.is_some();
    runner = common::with_output(runner, events, args.quiet);
    let opts = RunOptions {
        concurrency: Some(args.concurrency),
        decisions,
        keep: args.keep.clone(),
        rerun_from: args.rerun_from.clone(),
        renames,
        ..Default::default()
    };
    match rt.block_on(runner.resume_with(&rec.id, answers, opts)) {
        Ok(outcome) => common::report(&outcome, store_flag, args.detailed_exitcode, events),
        Err(e) => {
            common::print_error(&e);
            super::EXIT_FINDINGS
        }
    }
}
