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
    // Any failure to load the plan means the replay could not run: 2, not 1 (1 says a
    // node differs).
    let loaded = match common::plan_of_thread(&rt, &store, &rec, args.plan.as_deref()) {
        Ok(l) => l,
        Err(_) => return super::EXIT_USAGE,
    };
    // The replay runs in a store of its own, emptied first, so that nothing that resumes
    // or works the user's threads ever runs it for real.
    let into_path = root.join(".pipec/replay").join(&rec.id).join("runs.redb");
    let into = match fresh_store(&into_path) {
        Ok(s) => s,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
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
        into,
        thread: rec.id.clone(),
        plan: loaded.plan,
        root: loaded.root,
        source: loaded.source,
        from: args.from.clone(),
    }));
    let mut report = match report {
        Ok(r) => r,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    report.store = common::shown(&into_path);
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

/// An empty redb store at `path` (what was there before goes).
fn fresh_store(path: &std::path::Path) -> Result<std::sync::Arc<dyn crate::store::Store>, String> {
    if let Some(dir) = path.parent() {
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|e| format!("cannot empty {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    }
    crate::store::RedbStore::open(path)
        .map(|s| std::sync::Arc::new(s) as std::sync::Arc<dyn crate::store::Store>)
        .map_err(|e| format!("cannot make the replay's store {}: {e}", path.display()))
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
            "inputs" => "reads what changed upstream: the recorded result was used; run it again to see what it gives now".to_string(),
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
        "{} of {} nodes differ; the replay is thread {} (`pipec show {} --store {}`)\n",
        r.differ,
        r.nodes.len(),
        r.replay,
        r.replay,
        r.store
    ));
    out
}
