//! `pipec runs`: threads of the store, newest first, a page at a time.

use std::path::PathBuf;

use super::common;
use crate::runtime::show::{listed, listed_json};
use crate::store::{ListQuery, Status};

#[derive(clap::Args)]
pub(super) struct Args {
    #[arg(long)]
    store: Option<PathBuf>,
    /// Only threads with this status (running, paused, completed, failed, blocked, cancelled, queued)
    #[arg(long)]
    status: Option<String>,
    /// Only threads of this pipeline
    #[arg(long)]
    pipeline: Option<String>,
    /// How many to show
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Threads older than this one (the next page)
    #[arg(long)]
    before: Option<String>,
    #[arg(long)]
    json: bool,
}

pub(super) fn fmt_time(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a calendar date (civil from days).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

pub(super) fn run(args: Args) -> u8 {
    let status = match &args.status {
        Some(s) => match Status::parse(s) {
            Some(s) => Some(s),
            None => {
                let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
                let hint = crate::names::suggest(s, names.iter().copied())
                    .map(|n| format!("did you mean `{n}`? "))
                    .unwrap_or_default();
                super::err(&format!(
                    "error: `{s}` is not a status; {hint}use one of {}",
                    Status::names()
                ));
                return super::EXIT_USAGE;
            }
        },
        None => None,
    };
    let store_path = common::store_path(&args.store, &common::default_root());
    // Before the first run there is no store at the default place, and no threads; a
    // path given with `--store` must name a store.
    if !common::is_database(&store_path) && !store_path.exists() && args.store.is_none() {
        if args.json {
            super::out("[]\n");
        } else {
            super::err(&format!(
                "no runs yet (no store at {})",
                common::shown(&store_path)
            ));
        }
        return super::EXIT_OK;
    }
    let (rt, store) = match common::runtime_and_store_to_read(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let listed = match rt.block_on(listed(
        &*store,
        ListQuery {
            status,
            before: args.before.clone(),
            limit: args.limit,
            pipeline: args.pipeline.clone(),
        },
    )) {
        Ok(l) => l,
        Err(e) => {
            common::print_error(&e.into());
            return super::EXIT_FINDINGS;
        }
    };
    if args.json {
        let rows: Vec<serde_json::Value> = listed.iter().map(|(t, u)| listed_json(t, u)).collect();
        super::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        ));
        return super::EXIT_OK;
    }
    let mut text = format!(
        "{:<26}  {:<9}  {:<20}  {:<19}  {:<19}  {:<10}  {}\n",
        "THREAD", "STATUS", "PIPELINE", "CREATED (UTC)", "UPDATED (UTC)", "COST", "HOLDER"
    );
    for (t, u) in &listed {
        let cost = if u.model_calls == 0 {
            "-".to_string()
        } else if u.unpriced_calls == u.model_calls {
            "?".to_string()
        } else {
            format!(
                "${:.4}{}",
                u.cost_usd,
                if u.unpriced_calls > 0 { "+" } else { "" }
            )
        };
        let status = if t.stale { "stale" } else { t.status.as_str() };
        // Who runs it: process@host and the attempt's run id (a stale holder is gone).
        let holder = match &t.holder {
            Some(h) if !t.stale => format!("{}@{} (run {})", h.pid, h.host, h.run_id),
            _ => String::new(),
        };
        text.push_str(
            format!(
                "{:<26}  {:<9}  {:<20}  {:<19}  {:<19}  {cost:<10}  {holder}",
                t.id,
                status,
                t.pipeline,
                fmt_time(t.created_ms),
                fmt_time(t.updated_ms)
            )
            .trim_end(),
        );
        text.push('\n');
    }
    if listed.len() == args.limit
        && let Some((last, _)) = listed.last()
    {
        text.push_str(&format!("(more: pipec runs --before {})\n", last.id));
    }
    super::out(&text);
    super::EXIT_OK
}
