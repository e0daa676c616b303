//! `pipec tools pull SERVER [FILE]`: reach a server (`server_arg.rs`: one a `.pipe` file
//! declares, or one given with `--command` or `--url`), take its listings in one short session, and print
//! them as declarations (or, with `--format json`, as the server sent them).

use std::path::PathBuf;

use clap::ValueEnum;
use serde_json::json;

use super::declarations::{Pull, declarations};
use crate::cli::common::{self, print_error};
use crate::cli::server_arg::{self, ServerArgs};
use crate::cli::{EXIT_FINDINGS, EXIT_OK};
use crate::diagnostic as codes;
use crate::identifiers::Taken;
use crate::runtime::{RuntimeError, ServerListing};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    server: ServerArgs,
    /// The .pipe file that declares the server (default: the only .pipe file in this
    /// folder)
    #[arg(conflicts_with_all = ["command", "url"])]
    file: Option<PathBuf>,
    /// `pipe` prints declarations; `json` the listings as the server sent them
    #[arg(long, value_enum, default_value_t = Format::Pipe)]
    format: Format,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(super) enum Format {
    Pipe,
    Json,
}

pub(super) fn run(args: Args) -> u8 {
    let target = match server_arg::target(&args.server, args.file.as_deref(), "tools pull") {
        Ok(target) => target,
        Err(code) => return code,
    };
    let config = match target.config() {
        Ok(config) => config,
        Err(code) => return code,
    };
    let runtime = match common::runtime_or_exit() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let listing = match runtime.block_on(crate::runtime::take_listing(config)) {
        Ok(listing) => listing,
        Err(e) => {
            let help = e.help().unwrap_or_else(|| {
                "check the server's `command` (or `url`) and run it by hand to see what it says"
                    .to_string()
            });
            print_error(&RuntimeError::new(&codes::MCP_SERVER_FAILED, e.to_string()).help(help));
            return EXIT_FINDINGS;
        }
    };
    let text = match args.format {
        Format::Json => raw_listing(&args.server.server, &listing),
        Format::Pipe => {
            let names = target.file.unwrap_or_default();
            // The server's own name is a value too; a tool may not take it.
            let values = Taken::new(names.values.into_iter().chain([args.server.server.clone()]));
            declarations(Pull {
                server: &args.server.server,
                listing: &listing,
                server_block: target.block,
                values,
                types: Taken::new(names.types),
                declared_tools: names.tools,
                declared_uris: names.uris,
            })
        }
    };
    crate::cli::out(&text);
    EXIT_OK
}

/// The listings as the server sent them.
fn raw_listing(server: &str, listing: &ServerListing) -> String {
    let doc = json!({
        "server": server,
        "protocolVersion": listing.protocol_version,
        "tools": listing.tools.iter().map(|t| t.raw.clone()).collect::<Vec<_>>(),
        "resourceTemplates": listing.templates.iter().map(|t| t.raw.clone()).collect::<Vec<_>>(),
        "resources": listing.resources.iter().map(|r| r.raw.clone()).collect::<Vec<_>>(),
    });
    format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    )
}
