//! MCP, protocol and transport only: a session with one server (stdio or streamable
//! HTTP), listing its tools and resource templates, calling a tool, reading a resource,
//! and the values and typed errors those give. rmcp's types stay inside this module; it
//! knows nothing of plans, the runtime or the store. What a tool result *means* to a
//! pipeline (structured output, links of a kind, hydration, healing) is the runtime's.

pub mod demo_crm;
mod error;
mod raw;
mod session;
mod types;

pub use error::McpError;
pub use session::{RequestOptions, Session};
pub use types::*;
