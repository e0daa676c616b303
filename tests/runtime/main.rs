//! The runtime: durable runs, workers, control-plane regressions, `exec` and process
//! control, the scheduler, the store's files, the embedding API, agents and models.
//!
//! One test binary (`cargo test --test runtime`), a module per area; a module path
//! filters its tests (`cargo test --test runtime agent::`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod agent;
mod claim_race;
mod client_model;
mod embed;
mod exec;
mod hardening;
mod openai;
mod process;
mod run;
mod scheduler;
mod store;
mod store_copy;
mod usage;
mod worker;
