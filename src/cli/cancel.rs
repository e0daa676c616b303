//! `pipec cancel THREAD`.

use std::path::PathBuf;

use super::common;
use crate::store::CancelOutcome;

#[derive(clap::Args)]
pub(super) struct Args {
    thread: String,
    #[arg(long)]
    store: Option<PathBuf>,
    /// Print the events the cancel wrote, as JSON lines on stdout
    #[arg(long, value_enum)]
    events: Option<super::run::EventsFormat>,
}

pub(super) fn run(args: Args) -> u8 {
    let store_path = common::store_path(&args.store, &common::default_root());
    let (rt, store) = match common::runtime_and_existing_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let result = rt.block_on(store.request_cancel(&args.thread));
    if let (Ok((_, events)), Some(_)) = (&result, args.events) {
        let sink = common::event_printer();
        events.iter().for_each(|e| sink(e));
    }
    match result.map(|(outcome, _)| outcome) {
        Ok(CancelOutcome::Cancelled) => {
            super::err("cancelled");
            super::EXIT_OK
        }
        Ok(CancelOutcome::Requested) => {
            super::err(
                "a process is running the thread; it stops at its next step and records the cancellation",
            );
            super::EXIT_OK
        }
        Ok(CancelOutcome::AlreadyEnded(s)) => {
            super::err(&format!("the thread has already ended ({})", s.as_str()));
            super::EXIT_FINDINGS
        }
        Err(e) => {
            common::print_error(&e.into());
            super::EXIT_FINDINGS
        }
    }
}
