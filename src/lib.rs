//! pipec: a compiler and durable runtime for typed LLM and agent pipelines.

pub mod check;
pub mod diagnostic;
pub mod lint;
pub mod source;
pub mod syntax;

#[doc(hidden)]
pub mod synth;
