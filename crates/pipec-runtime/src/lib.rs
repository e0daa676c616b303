//! The runtime: runs a plan on the store. `Runner` (`runner/`) is the embedding API;
//! before anything is written it checks inputs, options and answers
//! (`runner/preflight.rs`), the plan against the thread (`plan_change.rs`) and
//! configuration (`config.rs`). An attempt (`attempt/`) schedules nodes as data arrives;
//! nodes that are not pure run through their kind's executor (`executor/`) with retries
//! and timeouts (`executor/tries.rs`), journaled as `journal.rs` says, reading their
//! references first (`hydrate/`). What an attempt's tasks share, and the one way they
//! write, is the `AttemptContext` (`context.rs`). `bind.rs` is how every node enters;
//! `eval.rs` the expressions and sources; `exec.rs` the subprocess of an `exec` node
//! (started through `pipec_process`). `worker.rs` is `pipec worker`: runnable threads
//! taken from the store and run through the resume path, a few at once.
//!
//! Dependencies between these modules go one way, from the top of this list down:
//! `worker` → `runner` → `attempt` → `executor` → `hydrate` → `context` → `resources`
//! → `bind`, `journal`, and the leaves (`eval`, `error`, `secrets`, `progress`, ...).
#![warn(unreachable_pub)]

mod attempt;
mod bind;
mod client_ask;
mod config;
mod context;
pub mod credentials;
mod deferred;
mod error;
pub mod eval;
pub mod exec;
mod executor;
mod hosts;
mod hydrate;
mod journal;
pub mod llm;
mod models;
mod options;
mod outcome;
mod plan_change;
pub mod progress;
pub mod prompt;
mod replay;
mod resources;
mod runner;
pub mod secrets;
pub mod show;
mod stored_plan;
mod tap;
pub mod trace;
mod value;
/// Validating values against the plan's schemas (`pipec-schema`'s).
pub use pipec_schema::validate;
mod worker;

pub use client_ask::ClientAsk;
pub use config::secret_names;
pub use context::EventSink;
pub use error::RuntimeError;
pub use hosts::HostFn;
pub use options::{Decision, RunOptions, StopSignal};
pub use outcome::{Outcome, PendingGate};
pub use progress::{Progress, StderrProgress, Step};
pub use replay::Recorded;
pub use resources::online_check::{Finding, LINKS_PROTOCOL, Subject, check_online};
pub use resources::results::{MediaShape, media_shape};
pub use resources::server_listing::{ServerListing, take_listing};
pub use resources::servers::{
    Fetcher, Replayer, ServerFuture, Servers, server_config_from_environment,
};
pub use runner::DEFAULT_MAX_ANSWER_BYTES;
pub use runner::{Environment, Runner};
pub use stored_plan::stored_plan;
pub use tap::Tap;
pub use value::Outputs;
pub use worker::{ServedPlan, Worker, WorkerLog, WorkerOptions, WorkerReport};
