//! `pipec store copy --from STORE --to STORE [--thread ID]...`: whole threads moved
//! between stores (a redb file and a PostgreSQL database, either way), exactly as the
//! source has them: rows, journal, gates, attempts, heals, events with their numbers and
//! times, and the plans they name.
//!
//! Everything is checked before anything is written, so a refused copy leaves the target
//! as it was (and creates no store where there was none): the threads named exist in the
//! source, no live process holds one (it would be changing under the copy), the target
//! has none of them (unless `--skip-existing`). The source is opened read-only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use super::common;
use crate::diagnostic as codes;
use crate::runtime::RuntimeError;
use crate::store::{Export, ListQuery, OpenMode, Store, StoreError};

#[derive(clap::Args)]
pub struct Args {
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

/// A store location as messages show it: a URL without its password.
fn shown(location: &Path) -> String {
    let text = location.to_string_lossy();
    if common::is_database(location) {
        crate::store::redact(&text)
    } else {
        text.into_owned()
    }
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

pub fn run(args: Args) -> u8 {
    let (from, to) = (shown(&args.from), shown(&args.to));
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
    let exports = match rt.block_on(read_source(source.as_ref(), &args.threads, &from)) {
        Ok(x) => x,
        Err(errors) => return refuse(&errors),
    };
    let plans = match rt.block_on(plans_of(source.as_ref(), &exports)) {
        Ok(p) => p,
        Err(e) => return refuse(&[e.into()]),
    };
    let existing = match rt.block_on(already_in_target(&args.to, &exports)) {
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
    let (to_copy, skipped): (Vec<Export>, Vec<Export>) = exports
        .into_iter()
        .partition(|e| e.rec().is_some_and(|r| !existing.contains(&r.id)));
    let skipped: Vec<String> = skipped
        .iter()
        .filter_map(|e| e.rec().map(|r| r.id.clone()))
        .collect();
    let needed: BTreeMap<String, String> = plans
        .into_iter()
        .filter(|(hash, _)| to_copy.iter().any(|e| e.plans().contains(hash)))
        .collect();
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
            &needed,
            &to_copy,
        )) {
            Ok(copied) => copied,
            Err((copied, e)) => {
                let mut error = RuntimeError::from(e);
                if !copied.is_empty() {
                    error.message.push_str(&format!(
                        "; the {} threads before it were copied: {}",
                        copied.len(),
                        copied.join(", ")
                    ));
                }
                common::print_error(&error);
                return super::EXIT_FINDINGS;
            }
        }
    };
    summary(&args, &from, &to, &to_copy, &copied, &skipped, needed.len());
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

/// The threads to copy, each read whole; every problem of every thread named, at once.
async fn read_source(
    source: &dyn Store,
    named: &[String],
    from: &str,
) -> Result<Vec<Export>, Vec<RuntimeError>> {
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
    let mut exports = Vec::new();
    let mut errors = Vec::new();
    for id in ids {
        match crate::store::export(source, &id).await {
            Ok(export) => {
                // A live process's thread is changing: its copy would be out of date at
                // once, and both stores would then run it.
                if source.is_held(&id) {
                    let holder = export.rec().and_then(|r| r.holder.clone());
                    let mut error = RuntimeError::from(StoreError::Locked {
                        thread: id.clone(),
                        holder,
                    });
                    error.help = Some(
                        "a thread is copied while no process runs it: wait until it pauses or ends, or stop that process (a worker stopped with SIGTERM gives its threads back)"
                            .into(),
                    );
                    errors.push(error);
                } else {
                    exports.push(export);
                }
            }
            Err(e) => errors.push(e.into()),
        }
    }
    if errors.is_empty() {
        Ok(exports)
    } else {
        Err(errors)
    }
}

/// The plans the threads name, as the source keeps them. A plan the source lacks is
/// left out with a warning: the thread cannot run there either.
async fn plans_of(
    source: &dyn Store,
    exports: &[Export],
) -> Result<BTreeMap<String, String>, StoreError> {
    let mut out = BTreeMap::new();
    for export in exports {
        for hash in export.plans() {
            if out.contains_key(&hash) {
                continue;
            }
            match source.get_plan(&hash).await? {
                Some(plan) => {
                    out.insert(hash, plan);
                }
                None => super::err(&format!(
                    "warning: the store {} has no copy of the plan {hash} that thread {} names; it is copied without it",
                    source.location(),
                    export.rec().map_or("?", |r| r.id.as_str())
                )),
            }
        }
    }
    Ok(out)
}

/// The threads among `exports` the target has. A target that does not exist yet has
/// none, and is not created by the look.
async fn already_in_target(to: &Path, exports: &[Export]) -> Result<Vec<String>, StoreError> {
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
    for export in exports {
        let Some(rec) = export.rec() else { continue };
        match target.load(&rec.id).await {
            Ok(_) => found.push(rec.id.clone()),
            Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// The plans, then each thread in a transaction of its own. On an error, the threads
/// copied before it. A thread that changed in the source since it was read (a process
/// took it, or answered or cancelled it meanwhile) is copied as it was read, and said so:
/// the copy cannot be taken back here, and the person should know which side is current.
async fn write_target(
    source: &dyn Store,
    target: &dyn Store,
    plans: &BTreeMap<String, String>,
    exports: &[Export],
) -> Result<Vec<String>, (Vec<String>, StoreError)> {
    for (hash, plan) in plans {
        target
            .put_plan(hash, plan)
            .await
            .map_err(|e| (Vec::new(), e))?;
    }
    let mut copied = Vec::new();
    for export in exports {
        let id = export.rec().map(|r| r.id.clone()).unwrap_or_default();
        if let Err(e) = target
            .import(export.state.clone(), export.events.clone())
            .await
        {
            return Err((copied, e));
        }
        let now = source.load(&id).await.ok().and_then(|st| st.thread);
        if now.as_ref() != export.rec() || source.is_held(&id) {
            super::err(&format!(
                "warning: thread {id} changed in {} while it was copied; {} has it as it was before",
                source.location(),
                target.location()
            ));
        }
        copied.push(id);
    }
    Ok(copied)
}

fn summary(
    args: &Args,
    from: &str,
    to: &str,
    exports: &[Export],
    copied: &[String],
    skipped: &[String],
    plans: usize,
) {
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    for e in exports {
        if let Some(r) = e.rec() {
            *by_status.entry(r.status.as_str()).or_default() += 1;
        }
    }
    let events: usize = exports.iter().map(|e| e.events.len()).sum();
    if args.json {
        let threads: Vec<_> = exports
            .iter()
            .filter_map(|e| {
                e.rec().map(|r| {
                    json!({ "thread": r.id, "status": r.status.as_str(), "events": e.events.len() })
                })
            })
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
