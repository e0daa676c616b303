//! The syntax of `.pipe` files: lexer pre-pass, pest grammar, syntax tree, printer.
//!
//! pest stays inside this module: nothing outside it sees a `Pair`.
#![warn(unreachable_pub)]

pub mod ast;
pub mod lexer;
pub mod literal;
mod parser;
pub mod printer;
mod reuse;
#[doc(hidden)]
pub mod synth;

pub use parser::{Parsed, parse};
pub use printer::format_source;
pub use reuse::reuse_unchanged_pieces;
