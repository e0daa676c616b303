//! `pipec answer THREAD gate=JSON`: answer pending gates without taking the thread (so it
//! works while another process runs it). Answers are checked against the thread's own
//! plan, as `resume --answer` checks them.

use std::path::PathBuf;

use super::common;
use crate::runtime::{DEFAULT_MAX_ANSWER_BYTES, Runner, RuntimeError};

#[derive(clap::Args)]
pub(super) struct Args {
    thread: String,
    /// `gate=JSON`, `gate=@file.json`, `gate=-`
    #[arg(required = true, value_name = "GATE=JSON")]
    answers: Vec<String>,
    #[arg(long)]
    store: Option<PathBuf>,
    /// The largest answer accepted, in bytes of JSON
    #[arg(long, default_value_t = DEFAULT_MAX_ANSWER_BYTES)]
    max_answer_bytes: usize,
    /// Print the events the answers wrote, as JSON lines on stdout
    #[arg(long, value_enum)]
    events: Option<super::run::EventsFormat>,
}

pub(super) fn run(args: Args) -> u8 {
    let store_path = common::store_path(&args.store, &common::default_root());
    let answers = match common::parse_answers(&args.answers) {
        Ok(a) => a,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    let (rt, store) = match common::runtime_and_existing_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let result = rt.block_on(async {
        let state = store.load(&args.thread).await?;
        let Some(rec) = state.thread else {
            return Err(RuntimeError::new(
                &crate::diagnostic::THREAD_NOT_FOUND,
                format!("no thread `{}`", args.thread),
            ));
        };
        let plan = crate::runtime::stored_plan(&*store, &rec).await?;
        let mut runner =
            Runner::with_store(plan, store.clone()).max_answer_bytes(args.max_answer_bytes);
        if args.events.is_some() {
            runner = runner.events(common::event_printer());
        }
        if let Some(sink) = super::telemetry::spans() {
            runner = runner.spans(sink);
        }
        runner.answer(&rec.id, answers).await
    });
    match result {
        Ok(id) => {
            super::err(&format!(
                "answered; `pipec resume {id}` continues the thread"
            ));
            super::EXIT_OK
        }
        Err(e) => {
            common::print_error(&e);
            super::EXIT_FINDINGS
        }
    }
}
