//! `pipec tools`: what MCP servers offer, as `.pipe` declarations. `pull.rs` is the
//! command (which server, reaching it, printing); `declarations.rs` writes the text,
//! `schema_types.rs` turns JSON Schemas into pipec types and `identifiers.rs` makes a
//! server's names into pipec's.

mod declarations;
mod identifiers;
mod pull;
mod schema_types;

use clap::Subcommand;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ToolsCommand,
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// Print declarations for what a server offers: types, tools, readers
    Pull(pull::Args),
}

pub fn run(args: Args) -> u8 {
    match args.command {
        ToolsCommand::Pull(a) => pull::run(a),
    }
}
