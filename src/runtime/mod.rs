//! The runtime: runs a plan on the store. `Runner` is the embedding API; an attempt
//! (`attempt.rs`) schedules nodes as data arrives; `tasks.rs` runs the nodes that are not
//! pure; `exec.rs` subprocesses (started through `crate::process`); `eval.rs` expressions and sources.

mod attempt;
pub mod eval;
pub mod exec;
pub mod progress;
mod runner;
pub mod secrets;
mod tasks;
pub mod validate;

pub use progress::{Progress, StderrProgress, Step};
pub use runner::{
    Decision, EventSink, HostFn, Outcome, PendingGate, RunOptions, Runner, RuntimeError,
};
