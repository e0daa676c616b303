//! `pipec replay THREAD [--plan FILE] [--from NODE]`: the thread run again into a new one
//! under its pipeline as it is now (or `--plan`), every call answered from what the thread
//! recorded; prints which node values differ. Exit 0 when none does, 1 when one does, 2
//! when the replay could not run.

use std::path::PathBuf;

use super::common;

#[derive(clap::Args)]
pub(super) struct Args {
    /// The thread (its id, or a unique prefix)
    thread: String,
    #[arg(long)]
    store: Option<PathBuf>,
    /// Replay under this plan or .pipe (default: the thread's source as it is now, else
    /// the plan the thread ran)
    #[arg(long)]
    plan: Option<PathBuf>,
    /// Replay from this node: the nodes it does not reach keep their recorded values
    #[arg(long, value_name = "NODE")]
    from: Option<String>,
    /// Print the comparison as JSON
    #[arg(long)]
    json: bool,
}

pub(super) fn run(args: Args) -> u8 {
    let root = common::default_root();
    let store_path = common::store_path(&args.store, &root);
    let (rt, store) = match common::runtime_and_existing_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let rec = match rt.block_on(store.load(&args.thread)) {
        Ok(state) => match state.thread {
            Some(rec) => rec,
            None => {
                super::err(&format!("error: there is no thread {}", args.thread));
                return super::EXIT_USAGE;
            }
        },
        Err(e) => {
            common::print_error(&e.into());
            return super::EXIT_USAGE;
        }
    };
    let loaded = match common::plan_of_thread(&rt, &store, &rec, args.plan.as_deref()) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if let Some(from) = &args.from
        && loaded.plan.node(from).is_none()
    {
        super::err(&format!(
            "error: `--from {from}`: the pipeline has no such node"
        ));
        return super::EXIT_USAGE;
    }
    let report = rt.block_on(pipec_test::replay(pipec_test::Replay {
        store: store.clone(),
        thread: rec.id.clone(),
        plan: loaded.plan,
        root: loaded.root,
        source: loaded.source,
        from: args.from.clone(),
    }));
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    if args.json {
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ));
    } else {
        super::out(&human(&report));
    }
    if report.differ == 0 {
        super::EXIT_OK
    } else {
        super::EXIT_FINDINGS
    }
}

fn human(r: &pipec_test::ReplayReport) -> String {
    let mut out = format!("replayed {} into {} ({})\n", r.thread, r.replay, r.status);
    if let Some(e) = &r.error {
        out.push_str(&format!("  {e}\n"));
    }
    let width = r.nodes.iter().map(|n| n.node.len()).max().unwrap_or(0);
    for n in &r.nodes {
        let what = match n.change.as_str() {
            "same" if n.computed => "same".to_string(),
            "same" => "same (recorded)".to_string(),
            "differs" => "differs (- recorded, + replayed)".to_string(),
            "state" => format!(
                "was {}, now {}",
                n.was.as_deref().unwrap_or("not run"),
                n.now.as_deref().unwrap_or("not run")
            ),
            "changed" => "changed in the pipeline: the recorded result was used; run it again to see what it gives now".to_string(),
            "added" => format!(
                "added to the pipeline ({})",
                n.now.as_deref().unwrap_or("not run")
            ),
            "removed" => "removed from the pipeline".to_string(),
            other => other.to_string(),
        };
        out.push_str(&format!("  {:width$}  {what}\n", n.node));
        if let Some(diff) = &n.diff {
            for line in diff.lines() {
                out.push_str(&format!("      {line}\n"));
            }
        }
    }
    out.push_str(&format!(
        "{} of {} nodes differ; the replay is thread {} (`pipec show {}`)\n",
        r.differ,
        r.nodes.len(),
        r.replay,
        r.replay
    ));
    out
}
