//! MCP, protocol and transport only: a session with one server (stdio or streamable
//! HTTP), listing its tools and resource templates, calling a tool, reading a resource,
//! and the values and typed errors those give. rmcp's types stay inside this module; it
//! knows nothing of plans, the runtime or the store. What a tool result *means* to a
//! pipeline (structured output, links of a kind, hydration, healing) is the runtime's.
//!
//! - `session.rs` the session: connecting, the requests, their timeouts, closing;
//!   `discover_probe.rs` the answer to `server/discover` that calls for `initialize`.
//! - `stdio.rs` a server process; `line_transport.rs` MCP over its stdin and stdout,
//!   `line_reader.rs` its lines under their size limits, `message_id.rs` the `id` of a
//!   message found while it streams in, `garbage.rs` lines that are not messages,
//!   `stderr.rs` the tail of its stderr.
//! - `http.rs` a server over streamable HTTP; `http_client.rs` the HTTP client that
//!   reads each answer under its request's limit; `auth.rs` OAuth when the server asks
//!   for it, `tokens.rs` where its tokens are kept (`keyring_tokens.rs` in the OS keyring).
//! - `request_slot.rs` what a request in flight expects and what its transport found.
//! - `asks.rs` what pipec answers when a server asks during a request (elicitation);
//!   `tasks.rs` tool calls a server runs as tasks, polled to their end; `sampling.rs` a
//!   server's requests for a model's reply.
//! - `convert.rs` the server's JSON as pipec's values (`base64.rs` for blobs);
//!   `failure.rs` rmcp's errors as pipec's.
#![warn(unreachable_pub)]

mod asks;
mod auth;
mod convert;
mod discover_probe;
mod error;
mod failure;
mod garbage;
mod http;
mod http_client;
#[cfg(all(feature = "keyring", any(target_os = "linux", target_os = "macos")))]
mod keyring_tokens;
mod line_reader;
mod line_transport;
mod message_id;
mod raw;
mod request_slot;
mod sampling;
#[cfg(feature = "server")]
pub mod server;
mod session;
mod stderr;
mod stdio;
mod tasks;
mod tokens;
mod types;
mod wire;

pub use asks::{Answer, Asked, Called, Elicitation, Question, Resumption};
pub use auth::{Authorization, Consent, Identity, MAX_AUTHORIZATIONS, Unattended};
pub use error::McpError;
#[cfg(all(feature = "keyring", any(target_os = "linux", target_os = "macos")))]
pub use keyring_tokens::KeyringTokens;
pub use sampling::{SampleFuture, Sampler, SamplingMessage, SamplingReply, SamplingRequest};
pub use session::{RequestOptions, Session};
pub use tasks::{TaskForm, TaskRef};
pub use tokens::{FileTokens, MemoryTokens, TokenStore};
pub use types::*;
pub use wire::{Wire, observed};
