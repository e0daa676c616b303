//! `pipec store copy --from STORE --to STORE [--thread ID]...`: whole threads moved
//! between stores (a redb file and a PostgreSQL database, either way), exactly as the
//! source has them: rows, journal, gates, attempts, heals, events with their numbers and
//! times, and the plans they name.
//!
//! Everything is checked before anything is written, so a refused copy leaves the target
//! as it was (and creates no store where there was none): the threads named exist in the
//! source and read whole, no live process holds one (it would be changing under the
//! copy), the target has none of them (unless `--skip-existing`). The source is opened
//! read-only.
//!
//! The copy streams: the check reads each thread and keeps only its id, status and plans;
//! the write reads each thread again and writes it before it reads the next. So a copy
//! holds one thread in memory at a time, however many the store has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::common;
use crate::diagnostic as codes;
use crate::runtime::RuntimeError;
use crate::store::{Export, ListQuery, OpenMode, Status, Store, StoreError};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The store to copy from (a redb file or a postgres:// URL); it is only read
    #[arg(long, value_name = "STORE")]
    from: PathBuf,
    /// The store to copy to (a redb file, created when there is none, or a postgres:// URL)
    #[arg(long, value_name = "STORE")]
    to: PathBuf,
    /// Copy only this thread (its id or a unique prefix); repeat for more. Default: all
    #[arg(long = "thread", value_name = "ID")]
    threads: Vec<String>,
    /// Leave out the threads the target already has, instead of refusing the copy
    #[arg(long)]
    skip_existing: bool,
    /// Print the summary as JSON on stdout
    #[arg(long)]
    json: bool,
}

/// Whether two locations name one store (the same URL, or the same file).
fn same_store(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    if common::is_database(a) || common::is_database(b) {
        return false;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

pub(super) fn run(args: Args) -> u8 {
    let (from, to) = (common::shown(&args.from), common::shown(&args.to));
    if same_store(&args.from, &args.to) {
        super::err(&format!(
            "error: `--from` and `--to` name the same store, {from}\n  help: copy to another store file or database"
        ));
        return super::EXIT_USAGE;
    }
    let rt = match common::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            super::err(&e);
            return super::EXIT_USAGE;
        }
    };
    let source = match crate::store::open(&args.from.to_string_lossy(), OpenMode::Read) {
        Ok(s) => s,
        Err(e) => {
            common::print_store_error(e, &args.from);
            return super::EXIT_FINDINGS;
        }
    };
    // Every check first: nothing below writes until they all pass.
    let planned = match rt.block_on(check_source(source.as_ref(), &args.threads, &from)) {
        Ok(x) => x,
        Err(errors) => return refuse(&errors),
    };
    let plans = match rt.block_on(plans_of(source.as_ref(), &planned)) {
        Ok(p) => p,
        Err(e) => return refuse(&[e.into()]),
    };
    let existing = match rt.block_on(already_in_target(&args.to, &planned)) {
        Ok(x) => x,
        Err(e) => {
            common::print_store_error(e, &args.to);
            return super::EXIT_FINDINGS;
        }
    };
    if !existing.is_empty() && !args.skip_existing {
        let n = existing.len();
        return refuse(&[RuntimeError::new(
            &codes::THREAD_EXISTS,
            format!(
                "the store {to} already has {} of the threads to copy: {}; nothing was copied",
                if n == 1 {
                    "one".to_string()
                } else {
                    n.to_string()
                },
                existing.join(", ")
            ),
        )
        .help(
            "`--skip-existing` copies the others and leaves these as the target has them; or copy to another store",
        )]);
    }
    let (to_copy, skipped): (Vec<Planned>, Vec<Planned>) =
        planned.into_iter().partition(|t| !existing.contains(&t.id));
    let skipped: Vec<String> = skipped.into_iter().map(|t| t.id).collect();
    let copied = if to_copy.is_empty() {
        // Nothing to write: no store is created at the target.
        Vec::new()
    } else {
        let target = match crate::store::open(&args.to.to_string_lossy(), OpenMode::Create) {
            Ok(s) => s,
            Err(e) => {
                common::print_store_error(e, &args.to);
                return super::EXIT_FINDINGS;
            }
        };
        match rt.block_on(write_target(
            source.as_ref(),
            target.as_ref(),
            &plans,
            &to_copy,
        )) {
            Ok(copied) => copied,
            Err((copied, mut error)) => {
                if !copied.is_empty() {
                    error.message.push_str(&format!(
                        "; the {} threads before it were copied: {}",
                        copied.len(),
                        copied
                            .iter()
                            .map(|c| c.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                common::print_error(&error);
                return super::EXIT_FINDINGS;
            }
        }
    };
    let plans_copied = copied
        .iter()
        .flat_map(|c| c.plans.iter())
        .collect::<BTreeSet<_>>()
        .len();
    summary(&args, &from, &to, &copied, &skipped, plans_copied);
    super::EXIT_OK
}

fn refuse(errors: &[RuntimeError]) -> u8 {
    for e in errors {
        common::print_error(e);
    }
    super::EXIT_FINDINGS
}

/// Every thread of the store, oldest first.
async fn all_threads(store: &dyn Store) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list(ListQuery {
                status: None,
                before: before.clone(),
                limit: 500,
                pipeline: None,
            })
            .await?;
        let Some(last) = page.last() else { break };
        before = Some(last.id.clone());
        out.extend(page.into_iter().map(|t| t.id));
    }
    out.reverse();
    Ok(out)
}

/// A thread the check passed, as the copy keeps it until it writes it: not its rows.
struct Planned {
    id: String,
    plans: BTreeSet<String>,
}

/// A thread written to the target.
struct Copied {
    id: String,
    status: Status,
    events: usize,
    /// The plans it names that went with it.
    plans: BTreeSet<String>,
}

/// Reads a whole thread for the copy, refusing one a live process holds: it is changing,
/// its copy would be out of date at once, and both stores would then run it.
async fn read_whole(source: &dyn Store, id: &str) -> Result<Export, RuntimeError> {
    let export = crate::store::export(source, id).await?;
    if source.is_held(id) {
        let holder = export.rec().and_then(|r| r.holder.clone());
        let mut error = RuntimeError::from(StoreError::Locked {
            thread: id.to_string(),
            holder,
        });
        error.help = Some(
            "a thread is copied while no process runs it: wait until it pauses or ends, or stop that process (a worker stopped with SIGTERM gives its threads back)"
                .into(),
        );
        return Err(error);
    }
    // What every import checks before it writes, checked before anything is written.
    export.check()?;
    Ok(export)
}

/// The threads to copy, each read whole and let go; every problem of every thread named,
/// at once.
async fn check_source(
    source: &dyn Store,
    named: &[String],
    from: &str,
) -> Result<Vec<Planned>, Vec<RuntimeError>> {
    let one = |e: StoreError| vec![RuntimeError::from(e)];
    let ids = if named.is_empty() {
        all_threads(source).await.map_err(one)?
    } else {
        let mut ids = Vec::new();
        let mut errors = Vec::new();
        let mut known: Option<Vec<String>> = None;
        for name in named {
            match source.load(name).await {
                Ok(state) => {
                    if let Some(rec) = state.thread
                        && !ids.contains(&rec.id)
                    {
                        ids.push(rec.id);
                    }
                }
                Err(e @ StoreError::NotFound { .. }) => {
                    if known.is_none() {
                        known = Some(all_threads(source).await.map_err(one)?);
                    }
                    let candidates = known.as_deref().unwrap_or_default();
                    let mut error = RuntimeError::from(e);
                    error.help = Some(
                        match crate::names::suggest(name, candidates.iter().map(String::as_str)) {
                            Some(close) => format!("did you mean `{close}`?"),
                            None => format!("`pipec runs --store {from}` lists its threads"),
                        },
                    );
                    errors.push(error);
                }
                Err(e) => errors.push(e.into()),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        ids
    };
    let mut planned = Vec::new();
    let mut errors = Vec::new();
    for id in ids {
        match read_whole(source, &id).await {
            Ok(export) => planned.push(Planned {
                plans: export.plans(),
                id,
            }),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(planned)
    } else {
        Err(errors)
    }
}

/// The plans the threads name, as the source keeps them. A plan the source lacks is
/// left out with a warning: the thread cannot run there either.
async fn plans_of(
    source: &dyn Store,
    planned: &[Planned],
) -> Result<BTreeMap<String, String>, StoreError> {
    let mut out = BTreeMap::new();
    let mut missing = BTreeSet::new();
    for thread in planned {
        for hash in &thread.plans {
            if out.contains_key(hash) || missing.contains(hash) {
                continue;
            }
            match source.get_plan(hash).await? {
                Some(plan) => {
                    out.insert(hash.clone(), plan);
                }
                None => {
                    super::err(&format!(
                        "warning: the store {} has no copy of the plan {hash} that thread {} names; it is copied without it",
                        source.location(),
                        thread.id
                    ));
                    missing.insert(hash.clone());
                }
            }
        }
    }
    Ok(out)
}

/// The threads among `planned` the target has. A target that does not exist yet has
/// none, and is not created by the look.
async fn already_in_target(to: &Path, planned: &[Planned]) -> Result<Vec<String>, StoreError> {
    let target: Arc<dyn Store> = if common::is_database(to) {
        match crate::store::open(&to.to_string_lossy(), OpenMode::Read) {
            Ok(s) => s,
            Err(StoreError::Missing { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        }
    } else if !to.exists() {
        return Ok(Vec::new());
    } else {
        crate::store::open(&to.to_string_lossy(), OpenMode::Read)?
    };
    let mut found = Vec::new();
    for thread in planned {
        match target.load(&thread.id).await {
            Ok(_) => found.push(thread.id.clone()),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// Each thread read again and written in a transaction of its own, after the plans it
/// names that the target does not have yet. On an error, the threads copied before it.
///
/// A thread that changed since the check (an answer or a cancel came) is copied as it is
/// now. One that changed in the source after it was read (a process took it, or answered
/// or cancelled it meanwhile) is copied as it was read, and said so: the copy cannot be
/// taken back here, and the person should know which side is current.
async fn write_target(
    source: &dyn Store,
    target: &dyn Store,
    plans: &BTreeMap<String, String>,
    threads: &[Planned],
) -> Result<Vec<Copied>, (Vec<Copied>, RuntimeError)> {
    let mut written: BTreeSet<String> = BTreeSet::new();
    let mut copied = Vec::new();
    for thread in threads {
        let export = match read_whole(source, &thread.id).await {
            Ok(export) => export,
            Err(e) => return Err((copied, e)),
        };
        let mut with = BTreeSet::new();
        for hash in export.plans() {
            let text = match plans.get(&hash) {
                Some(text) => Some(text.clone()),
                // A plan the thread took up since the check.
                None => match source.get_plan(&hash).await {
                    Ok(text) => text,
                    Err(e) => return Err((copied, e.into())),
                },
            };
            let Some(text) = text else { continue };
            if written.insert(hash.clone())
                && let Err(e) = target.put_plan(&hash, &text).await
            {
                return Err((copied, e.into()));
            }
            with.insert(hash);
        }
        let Some(rec) = export.rec().cloned() else {
            continue;
        };
        let events = export.events.len();
        if let Err(e) = target.import(export.state, export.events).await {
            return Err((copied, e.into()));
        }
        let now = source.load(&rec.id).await.ok().and_then(|st| st.thread);
        if now.as_ref() != Some(&rec) || source.is_held(&rec.id) {
            super::err(&format!(
                "warning: thread {} changed in {} while it was copied; {} has it as it was before",
                rec.id,
                source.location(),
                target.location()
            ));
        }
        copied.push(Copied {
            id: rec.id,
            status: rec.status,
            events,
            plans: with,
        });
    }
    Ok(copied)
}

fn summary(args: &Args, from: &str, to: &str, copied: &[Copied], skipped: &[String], plans: usize) {
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    for c in copied {
        *by_status.entry(c.status.as_str()).or_default() += 1;
    }
    let events: usize = copied.iter().map(|c| c.events).sum();
    if args.json {
        let threads: Vec<_> = copied
            .iter()
            .map(|c| json!({ "thread": c.id, "status": c.status.as_str(), "events": c.events }))
            .collect();
        let doc = json!({
            "from": from, "to": to, "copied": threads, "skipped": skipped,
            "statuses": by_status, "threads": copied.len(), "events": events, "plans": plans,
        });
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        return;
    }
    let plural = |n: usize, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    let mut text = if copied.is_empty() {
        format!("nothing to copy from {from} to {to}")
    } else {
        let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
        format!(
            "copied {} from {from} to {to} ({}): {}, {}",
            plural(copied.len(), "thread"),
            statuses.join(", "),
            plural(events, "event"),
            plural(plans, "plan")
        )
    };
    if !skipped.is_empty() {
        text.push_str(&format!(
            "\nskipped {} the target already has: {}",
            plural(skipped.len(), "thread"),
            skipped.join(", ")
        ));
    }
    super::err(&text);
}
