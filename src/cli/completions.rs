//! `pipec completions SHELL`: the completion script of pipec's command line for bash,
//! zsh, fish, PowerShell or elvish, made by clap from the same definitions the command
//! line parses with, printed on stdout.

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, EXIT_OK};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The shell to complete in
    #[arg(value_enum)]
    shell: Shell,
}

pub(super) fn run(args: Args) -> u8 {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, "pipec", &mut out);
    super::out(&String::from_utf8_lossy(&out));
    EXIT_OK
}
