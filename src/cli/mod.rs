//! The command line: one file per subcommand. `main.rs` only calls [`main`].

mod answer;
mod budget;
mod cancel;
mod check;
mod check_fix;
mod check_online;
pub(crate) mod common;
mod compile;
mod completions;
mod explain;
mod fmt;
mod graph;
mod init;
mod lsp;
mod mcp;
mod pipe_files;
mod prune;
mod replay;
mod resume;
mod run;
mod runs;
mod serve;
mod server_arg;
mod show;
mod store;
mod store_copy;
mod telemetry;
mod test;
mod tools;
mod ui;
mod worker;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit codes: 0 clean (or warnings only), 1 findings or a failed run, 2 usage or I/O.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FINDINGS: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

#[derive(Parser)]
#[command(name = "pipec", version, about = "Check, compile and run typed LLM and agent pipelines", long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check .pipe files and report every problem
    Check(check::Args),
    /// Compile a .pipe file to a plan (JSON)
    Compile(compile::Args),
    /// Print the documentation of a diagnostic code or rule name
    Explain(explain::Args),
    /// Format .pipe files canonically
    Fmt(fmt::Args),
    /// Draw a pipeline as a Mermaid or Graphviz graph
    Graph(graph::Args),
    /// The worst-case prompt of each model node against its context window, and its cost
    Budget(budget::Args),
    /// Run a pipeline: start a thread and run it until it completes or pauses
    Run(run::Args),
    /// Run the tests of .pipe files (`test name { ... }`)
    Test(test::Args),
    /// Continue a thread: answer gates, decide on unfinished effects
    Resume(resume::Args),
    /// Run a stored thread again from its recorded results, calling nothing, and show
    /// which node values differ (after editing its pipeline)
    Replay(replay::Args),
    /// Answer pending gates (no lock needed)
    Answer(answer::Args),
    /// Cancel a thread
    Cancel(cancel::Args),
    /// Take queued and runnable threads from a store and run them
    Worker(worker::Args),
    /// List threads, newest first
    Runs(runs::Args),
    /// Show a thread: status, nodes, gates, errors
    Show(show::Args),
    /// Delete old finished threads
    Prune(prune::Args),
    /// Store maintenance: migrate, check, stats, copy
    Store(store::Args),
    /// What MCP servers offer, as .pipe declarations (`pipec tools pull SERVER`)
    Tools(tools::Args),
    /// Talk to an MCP server by hand: list, call, read, prompts; log in with OAuth
    Mcp(mcp::Args),
    /// Serve resources (`serve` blocks, reShapr specifications) as an MCP server
    Serve(serve::Args),
    /// Inspect a store's threads in a web page: graph, timeline, cost, gate forms, actions
    Ui(ui::Args),
    /// Make a new project that checks clean and runs offline
    Init(init::Args),
    /// Run the language server for editors (JSON-RPC over stdin and stdout)
    Lsp(lsp::Args),
    /// Print the shell completion script (bash, zsh, fish, powershell, elvish)
    Completions(completions::Args),
}

/// When to use colour.
#[derive(Clone, Copy, Debug, Default, ValueEnum)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stdout().is_terminal()
            }
        }
    }
}

/// Runs the command line and returns the process's exit code.
pub fn main() -> ExitCode {
    // A panic inside redb on a damaged store becomes R0410; its message is not printed.
    crate::store::quiet_contained_panics();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Traces, for the commands that run threads.
    if matches!(
        cli.command,
        Command::Run(_)
            | Command::Resume(_)
            | Command::Answer(_)
            | Command::Worker(_)
            | Command::Serve(_)
            | Command::Ui(_)
    ) && let Err(e) = telemetry::init()
    {
        err(&format!("error: {e}"));
        return ExitCode::from(EXIT_USAGE);
    }
    let code = match cli.command {
        Command::Check(a) => check::run(a),
        Command::Compile(a) => compile::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Fmt(a) => fmt::run(a),
        Command::Graph(a) => graph::run(a),
        Command::Budget(a) => budget::run(a),
        Command::Run(a) => run::run(a),
        Command::Test(a) => test::run(a),
        Command::Lsp(a) => lsp::run(a),
        Command::Resume(a) => resume::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Answer(a) => answer::run(a),
        Command::Cancel(a) => cancel::run(a),
        Command::Worker(a) => worker::run(a),
        Command::Runs(a) => runs::run(a),
        Command::Show(a) => show::run(a),
        Command::Prune(a) => prune::run(a),
        Command::Store(a) => store::run(a),
        Command::Tools(a) => tools::run(a),
        Command::Mcp(a) => mcp::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Ui(a) => ui::run(a),
        Command::Init(a) => init::run(a),
        Command::Completions(a) => completions::run(a),
    };
    telemetry::shutdown();
    ExitCode::from(code)
}

/// Prints to stdout, ignoring a closed pipe (`pipec check | head`).
pub(crate) fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Prints a value as indented JSON and a newline, written out as it is serialized (a
/// large output is not made into a string first).
pub(crate) fn out_json(value: &impl serde::Serialize) {
    use std::io::Write;
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let _ = serde_json::to_writer_pretty(&mut stdout, value);
    let _ = stdout.write_all(b"\n");
    let _ = stdout.flush();
}

pub(crate) fn err(text: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = writeln!(stderr);
}
