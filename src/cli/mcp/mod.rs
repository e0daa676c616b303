//! `pipec mcp`: talk to an MCP server by hand, as a run would (the server a `.pipe` file
//! declares, or one given with `--url` or `--command`; its secrets, timeouts, size limits
//! and redaction): list its tools, resources and prompts, call a tool, read a resource,
//! get a prompt; log in to a server that asks for OAuth (`login.rs`), and log out.

mod ask;
mod login;

use std::path::PathBuf;

use clap::Subcommand;

use crate::cli::server_arg::ServerArgs;

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(subcommand)]
    command: McpCommand,
}

/// The server, and how long a request to it may take.
#[derive(clap::Args)]
pub(super) struct Reach {
    #[command(flatten)]
    server: ServerArgs,
    /// The .pipe file that declares the server (default: the only .pipe file in this
    /// folder)
    #[arg(long, conflicts_with_all = ["command", "url"])]
    file: Option<PathBuf>,
    /// How long a request may take, in seconds (default: the server's `timeout`)
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
}

#[derive(Subcommand)]
enum McpCommand {
    /// List the server's tools, resources, resource templates and prompts, as it sent them
    List(ask::ListArgs),
    /// Call a tool and print its result
    Call(ask::CallArgs),
    /// Read a resource and print its contents
    Read(ask::ReadArgs),
    /// List the server's prompts
    Prompts(ask::PromptsArgs),
    /// Get a prompt with its arguments filled
    Get(ask::GetArgs),
    /// Authorize pipec with a server that asks for OAuth, in the browser; runs then use the
    /// stored tokens
    Login(login::LoginArgs),
    /// Forget the tokens stored for a server
    Logout(login::LogoutArgs),
}

pub(super) fn run(args: Args) -> u8 {
    match args.command {
        McpCommand::List(a) => ask::list(a),
        McpCommand::Call(a) => ask::call(a),
        McpCommand::Read(a) => ask::read(a),
        McpCommand::Prompts(a) => ask::prompts(a),
        McpCommand::Get(a) => ask::get(a),
        McpCommand::Login(a) => login::login(a),
        McpCommand::Logout(a) => login::logout(a),
    }
}
