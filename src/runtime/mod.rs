//! The runtime: runs a plan on the store.

pub mod eval;
pub mod secrets;
pub mod validate;
