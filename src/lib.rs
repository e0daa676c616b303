//! pipec: a compiler and durable runtime for typed LLM and agent pipelines.
//!
//! A `.pipe` file declares typed data, MCP servers and tools, models, nodes and gates,
//! and where every node input comes from. pipec checks such files, lowers them to a
//! [`Plan`], and runs plans as durable threads on a store.
//!
//! This crate is the command line and the facade of the workspace: each layer is a crate
//! of its own (`pipec-check`, `pipec-runtime`, `pipec-store`, ...), re-exported here
//! under the name of its concept. Without default features it is the compiler and the
//! runtime on redb, without the command line, `pipec serve`, the language server or
//! PostgreSQL.
//!
//! # Compiling a pipeline
//!
//! ```
//! let source = r#"
//! input name: string
//!
//! node greet(name: string = input.name) -> { text: string } {
//!   return = { text: name }
//! }
//!
//! output greeting = greet
//! "#;
//! let plan = pipec::compile_str("hello.pipe", source).expect("checks clean");
//! assert_eq!(plan.nodes[0].name, "greet");
//! assert!(plan.hash.starts_with("sha256:"));
//! ```
//!
//! A file with problems gives every diagnostic at once:
//!
//! ```
//! let err = pipec::compile_str("bad.pipe", "node a() -> int { return = nope }").unwrap_err();
//! assert_eq!(err.diagnostics[0].rule.code, "P0101");
//! println!("{}", err.render(pipec::diagnostic::TerminalOptions::default()));
//! ```

pub use pipec_base::{base64, identifiers, names, nesting, source, uri};
pub use pipec_check as check;
pub use pipec_check::{
    Analysis, CompileError, analyze, compile_file, compile_str, compile_with, fix, lint,
    lower_analysis,
};
pub use pipec_diagnostic as diagnostic;
pub use pipec_diagnostic::rules;
pub use pipec_mcp as mcp;
pub use pipec_plan as plan;
pub use pipec_plan::{Plan, graph};
pub use pipec_process as process;
pub use pipec_runtime as runtime;
pub use pipec_runtime::{llm, prompt};
pub use pipec_schema as schema;
pub use pipec_store as store;
pub use pipec_syntax as syntax;
#[doc(hidden)]
pub use pipec_syntax::synth;

#[cfg(feature = "lsp")]
pub use pipec_lsp as lsp;
#[cfg(feature = "serve")]
pub use pipec_serve as serve;

#[cfg(feature = "cli")]
pub mod cli;
