//! The `pipec` binary: everything happens in the library's `cli` module.

fn main() -> std::process::ExitCode {
    pipec::cli::main()
}
