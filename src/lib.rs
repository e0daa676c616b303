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
#![warn(unreachable_pub)]

#[doc(hidden)]
pub use pipec_base::base64;
/// Leaves every layer shares: source files and spans, names and identifiers, URI templates,
/// nesting limits.
pub use pipec_base::{identifiers, names, nesting, source, uri};
/// The checker: names, types, templates, links, lints, fixes, and lowering to a [`Plan`].
pub use pipec_check as check;
/// Compiling in one call: a file or a string to a [`Plan`], or to every diagnostic.
pub use pipec_check::{
    Analysis, CompileError, analyze, compile_file, compile_str, compile_with, fix, lint,
    lower_analysis,
};
/// Diagnostics: rules with stable codes, spans, rendering for terminals, JSON and SARIF.
pub use pipec_diagnostic as diagnostic;
/// Every rule the checker and the runtime report, with its code and documentation.
pub use pipec_diagnostic::rules;
/// The MCP client (and, with the `serve` feature, the server side): sessions over stdio and
/// streamable HTTP.
pub use pipec_mcp as mcp;
/// The plan: the versioned, hashed, validated form a checked pipeline is lowered to.
pub use pipec_plan as plan;
/// A plan and its dependency graph.
pub use pipec_plan::{Plan, graph};
/// Child processes for MCP servers and workers: started without copying pipec's memory,
/// reaped, stopped with their process group.
pub use pipec_process as process;
/// The durable runtime: runs a plan as a thread on a store, pauses at gates, resumes, heals.
pub use pipec_runtime as runtime;
/// Model providers and prompt rendering, as the runtime uses them.
pub use pipec_runtime::{llm, prompt};
/// JSON Schema: the schemas pipec writes, reading a server's schemas as pipec types, fits,
/// examples and (with the runtime) validation.
pub use pipec_schema as schema;
/// Durable stores: redb (embedded) and, with the `postgres` feature, PostgreSQL.
pub use pipec_store as store;
/// The `.pipe` language: syntax tree, parser, formatter.
pub use pipec_syntax as syntax;
#[doc(hidden)]
pub use pipec_syntax::synth;

/// The language server (`pipec lsp`).
#[cfg(feature = "lsp")]
pub use pipec_lsp as lsp;
/// `pipec serve`: a project's `serve` blocks and reShapr specifications as an MCP server.
#[cfg(feature = "serve")]
pub use pipec_serve as serve;

// The command line: `main.rs` calls `cli::main`. Public for the binary, not an interface.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
