//! The compiler and the command line: the plan format, the bounded fuzz run of the front
//! end, `pipec` end to end, `pipec init` and `pipec lsp`.
//!
//! One test binary (`cargo test --test cli`), a module per area; a module path
//! filters its tests (`cargo test --test cli cli::`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod budget;
mod cli;
mod fuzz;
mod init;
mod lsp;
mod plan;
mod replay;
mod test_cmd;
mod ui;
