//! MCP: the client against real servers and faults, hydration, tools, `pipec serve` with
//! the official SDK, its security and specifications, and the embedding API's MCP seams.
//!
//! One test binary (`cargo test --test mcp`), a module per area; a module path
//! filters its tests (`cargo test --test mcp embed_mcp::`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod embed_mcp;
mod hydration;
mod mcp_cli;
mod mcp_client;
mod mcp_elicitation;
mod mcp_faults;
mod mcp_oauth;
mod mcp_scenario;
mod mcp_tasks;
mod phoenix_harness;
mod reference_servers;
mod serve_asks;
mod serve_card;
mod serve_headers;
mod serve_interop;
mod serve_keepalive;
mod serve_security;
mod serve_spec;
mod serve_tasks;
mod serve_traces;
mod serve_ts;
mod tools;
mod traces;
