//! `pipec lsp`: the language server for `.pipe` files and their prompt templates.
//!
//! The checker already knows every name, type, source and link kind with its span; this
//! module gives an editor those answers as the user types. It reads the buffers the editor
//! has open before the disk (`documents.rs`), checks each open `.pipe` file as a root
//! (`workspace.rs`), and answers over stdio JSON-RPC (`transport.rs`, `server.rs`):
//! diagnostics, hover, definition, references, rename, completion, code actions,
//! formatting, the outline and semantic tokens, one file each, and code lenses that run a
//! file's tests in a `pipec test` process (`test_runs.rs`). It sits above the
//! compiler (`check`, `syntax`, `diagnostic`) and below the command line, and knows
//! nothing of the runtime, the store or MCP.
#![warn(unreachable_pub)]

mod actions;
mod checkers;
mod completion;
mod diagnostics;
mod documents;
mod hover;
mod index;
mod navigation;
mod server;
mod symbols;
mod templates;
mod test_runs;
mod transport;
mod workspace;

pub use server::{DEBOUNCE, run_stdio};
