//! `pipec run FILE|PLAN.json`: start a thread and run it until it completes, pauses or
//! fails; with `--submit`, create it for the workers (`pipec worker`) and print its id.

use std::path::PathBuf;

use clap::ValueEnum;

use super::common::{self, Loaded};
use crate::runtime::{RunOptions, Runner};

#[derive(clap::Args)]
pub(super) struct Args {
    /// A .pipe file (compiled first) or a plan (.json)
    file: PathBuf,
    /// An input: `name=value` (JSON unless the input is a string), `name=@file.json`,
    /// `name=@-` (standard input); `name=@@v` for a value that starts with `@`
    #[arg(long = "input", value_name = "NAME=VALUE")]
    inputs: Vec<String>,
    /// A JSON file of inputs
    #[arg(long = "inputs", value_name = "FILE")]
    input_files: Vec<PathBuf>,
    /// Answer a gate in advance: `gate=JSON`, `gate=@file.json`
    #[arg(long = "answer", value_name = "GATE=JSON")]
    answers: Vec<String>,
    /// The store (default: .pipec/runs.redb in the project; or PIPEC_STORE)
    #[arg(long)]
    store: Option<PathBuf>,
    /// Replace a model: `NAME=scripted:FILE`
    #[arg(long = "model", value_name = "NAME=scripted:FILE")]
    models: Vec<String>,
    /// Stream events on stdout
    #[arg(long, value_enum)]
    events: Option<EventsFormat>,
    /// Use this id for the new thread (an id that exists is refused: `pipec resume` it)
    #[arg(long)]
    thread: Option<String>,
    /// How many nodes may run at once
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Exit 3 when paused and 4 when blocked (for scripts); without it, blocked exits 1
    #[arg(long)]
    detailed_exitcode: bool,
    /// No progress lines on stderr
    #[arg(long, short)]
    quiet: bool,
    /// The largest gate answer accepted, in bytes of JSON
    #[arg(long, default_value_t = crate::runtime::DEFAULT_MAX_ANSWER_BYTES)]
    max_answer_bytes: usize,
    /// Queue the thread for `pipec worker` instead of running it; prints its id
    #[arg(long)]
    submit: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(super) enum EventsFormat {
    Jsonl,
}

/// `NAME=scripted:FILE`, with FILE made absolute (a resume may run elsewhere).
pub(super) fn parse_model_overrides(specs: &[String]) -> Result<Vec<(String, String)>, String> {
    specs
        .iter()
        .map(|spec| {
            let (name, what) = spec
                .split_once('=')
                .ok_or_else(|| format!("`--model {spec}`: write `--model NAME=scripted:FILE`"))?;
            let file = what.strip_prefix("scripted:").ok_or_else(|| {
                format!("`--model {spec}`: only `scripted:FILE` models can be swapped in")
            })?;
            let abs = std::path::absolute(file).unwrap_or_else(|_| PathBuf::from(file));
            if !abs.is_file() {
                return Err(format!("the replies file `{file}` does not exist"));
            }
            Ok((name.to_string(), format!("scripted:{}", abs.display())))
        })
        .collect()
}

pub(super) fn run(args: Args) -> u8 {
    let Loaded { plan, root, source } = match common::load_plan(&args.file) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let inputs = match common::parse_inputs(&plan, &args.inputs, &args.input_files) {
        Ok(v) => v,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    let answers = match common::parse_answers(&args.answers) {
        Ok(a) => a,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    let overrides = match parse_model_overrides(&args.models) {
        Ok(o) => o,
        Err(e) => {
            super::err(&format!("error: {e}"));
            return super::EXIT_USAGE;
        }
    };
    let store_path = common::store_path(&args.store, &root);
    let store_flag = common::store_flag(&args.store, &store_path);
    let (rt, store) = match common::runtime_and_store(&store_path) {
        Ok(pair) => pair,
        Err(code) => return code,
    };
    let mut runner = Runner::with_store(plan, store)
        .project_root(root)
        .source(&source)
        .concurrency(args.concurrency)
        .max_answer_bytes(args.max_answer_bytes);
    for (name, spec) in overrides {
        runner = runner.model_override(&name, &spec);
    }
    let events = args.events.is_some();
    runner = common::with_output(runner, events, args.quiet);
    let opts = RunOptions {
        thread_id: args.thread.clone(),
        pre_answers: answers,
        concurrency: Some(args.concurrency),
        ..Default::default()
    };
    if args.submit {
        return match rt.block_on(runner.submit_with(inputs, opts)) {
            Ok(id) => {
                if !events {
                    super::out(&format!("{id}\n"));
                }
                if !args.quiet {
                    super::err(&format!("queued: thread {id} waits for a worker"));
                }
                super::EXIT_OK
            }
            Err(e) => {
                common::print_error(&e);
                super::EXIT_FINDINGS
            }
        };
    }
    match rt.block_on(runner.start_with(inputs, opts)) {
        Ok(outcome) => common::report(&outcome, &store_flag, args.detailed_exitcode, events),
        Err(e) => {
            common::print_error(&e);
            super::EXIT_FINDINGS
        }
    }
}
