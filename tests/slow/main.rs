//! The heavy tests: `kill -9` tortures of runs and workers and the store corruption sweep.
//! By default they run smaller; `PIPEC_TEST_FULL=1` runs them at full size (CI does).
//!
//! One test binary (`cargo test --test slow`), a module per area; a module path
//! filters its tests (`cargo test --test slow store_corruption::`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod store_corruption;
mod torture;
mod worker_torture;
