//! `pipec prune`: delete whole terminal threads (completed, failed, cancelled) older
//! than a duration. Never a paused, blocked or running one.

use std::path::PathBuf;

use super::common;
use crate::store::Status;

#[derive(clap::Args)]
pub(super) struct Args {
    #[arg(long)]
    store: Option<PathBuf>,
    /// Only threads last updated longer ago than this (e.g. `30d`, `12h`, `0s`)
    #[arg(long, default_value = "30d")]
    older_than: String,
    /// Which terminal statuses (default: all of completed, failed, cancelled)
    #[arg(long = "status")]
    statuses: Vec<String>,
}

pub(super) fn run(args: Args) -> u8 {
    let ms = match crate::syntax::literal::decode_number(&args.older_than) {
        Ok(crate::syntax::literal::Number::Duration(ms)) => ms,
        _ => {
            super::err(&format!(
                "error: `{}` is not a duration such as 30d or 12h",
                args.older_than
            ));
            return super::EXIT_USAGE;
        }
    };
    let mut statuses = Vec::new();
    for s in &args.statuses {
        match Status::parse(s).filter(|s| s.is_terminal()) {
            Some(s) => statuses.push(s),
            None => {
                super::err(&format!(
                    "error: `{s}` is not a terminal status (completed, failed, cancelled)"
                ));
                return super::EXIT_USAGE;
            }
        }
    }
    if statuses.is_empty() {
        statuses = vec![Status::Completed, Status::Failed, Status::Cancelled];
    }
    let store_path = common::store_path(&args.store, &common::default_root());
    let (rt, store) = match common::runtime_and_existing_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let before = crate::store::ids::now_ms().saturating_sub(ms);
    match rt.block_on(store.prune(before, statuses)) {
        Ok(n) => {
            super::err(&format!(
                "pruned {n} thread{}",
                if n == 1 { "" } else { "s" }
            ));
            super::EXIT_OK
        }
        Err(e) => {
            common::print_error(&e.into());
            super::EXIT_FINDINGS
        }
    }
}
