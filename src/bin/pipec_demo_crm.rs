//! `pipec-demo-crm`: the demo CRM MCP server that pipec's examples and tests talk to. All
//! of it lives in `pipec::mcp::demo_crm`; this program only hands it the process.

fn main() -> std::process::ExitCode {
    pipec::mcp::demo_crm::main()
}
