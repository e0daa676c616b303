//! `pipec-demo-crm`: the demo CRM MCP server that pipec's examples and tests talk to. All
//! of it lives in the library of this package; this program only hands it the process.

fn main() -> std::process::ExitCode {
    pipec_demo_crm::main()
}
