//! The syntax of `.pipe` files: lexer pre-pass, grammar (a recursive-descent parser),
//! syntax tree, printer.
#![warn(unreachable_pub)]

pub mod ast;
mod grammar;
pub mod lexer;
pub mod literal;
mod parser;
pub mod printer;
#[doc(hidden)]
pub mod synth;

pub use parser::{Parsed, parse};
pub use printer::format_source;
