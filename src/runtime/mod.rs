//! The runtime: runs a plan on the store. `Runner` is the embedding API; an attempt
//! (`attempt.rs`) schedules nodes as data arrives; `tasks.rs` runs the nodes that are not
//! pure; `exec.rs` subprocesses (`spawn.rs` starts them on Linux); `eval.rs` expressions and sources.

mod attempt;
pub mod eval;
pub mod exec;
pub mod progress;
mod runner;
pub mod secrets;
// Spawning `exec` children on Linux: clone, signal and descriptor set-up in the child
// before `execve`; every block says why it is sound.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod spawn;
mod tasks;
pub mod validate;

pub use progress::{Progress, StderrProgress, Step};
pub use runner::{
    Decision, EventSink, HostFn, Outcome, PendingGate, RunOptions, Runner, RuntimeError,
};
