//! `pipec-demo-crm`: a small CRM served over MCP (stdio or streamable HTTP) for pipec's
//! examples and tests. A tool looks deals up and links their activity and email
//! history as `resource_link`s, two templates read them, and the environment arms
//! expired links and injects faults (`faults.rs`), so pipec's error handling can be
//! tested against a real server. The binary (`src/main.rs`) calls [`main`].
//!
//! A request goes: transport (`stdio.rs`, `http.rs`) → `intercept.rs` (call log, faults)
//! → the rmcp handler (`server.rs`) → `tools.rs` / `resources.rs` → `mailboxes.rs` (histories made once) → `data.rs`.
#![warn(unreachable_pub)]

mod calls;
mod crm;
mod data;
mod dates;
mod expiry;
mod faults;
mod http;
mod intercept;
mod locked_file;
mod mailboxes;
mod options;
mod resources;
mod server;
mod stdio;
mod tools;
mod uris;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use crm::Crm;
use expiry::Expiry;
use options::{Args, Listen};

/// Runs the server as the command line and environment say: 0 when the client closed
/// stdin, 1 when serving failed, 2 for a command line or environment that is refused.
pub fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let settings = match options::settings(args, &|name| std::env::var(name).ok()) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("pipec-demo-crm: error: {}\n  help: {}", e.message, e.help);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("pipec-demo-crm: error: could not start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let crm = Arc::new(Crm {
        corpus: settings.corpus,
        mailboxes: mailboxes::Mailboxes::new(settings.corpus),
        expiry: Expiry::new(settings.expire_emails, settings.expire_file),
        fault_file: settings.fault_file,
        call_log: settings.call_log,
    });
    let served = runtime.block_on(async move {
        match settings.listen {
            Listen::Stdio => stdio::serve(crm).await,
            Listen::Http(addr) => {
                let options = http::HttpOptions {
                    addr,
                    port_file: settings.port_file,
                    header_log: settings.header_log,
                    bearer_token: settings.bearer_token,
                };
                http::serve(crm, options).await
            }
        }
    });
    // Tasks still parked (a hung request) must not keep the process alive.
    runtime.shutdown_background();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pipec-demo-crm: error: {message}");
            ExitCode::from(1)
        }
    }
}
