//! The CRM of one server process: its corpus sizes, its armed expiries and the files it
//! is told about, shared by the MCP handler and both transports; and the one way a call
//! is answered, which the handler and the fault injection both use.

use std::io::Write;
use std::path::PathBuf;

use rmcp::ErrorData;
use rmcp::model::ServerResult;

use super::calls::Call;
use super::data::Corpus;
use super::expiry::Expiry;
use super::faults::Fault;
use super::mailboxes::Mailboxes;
use super::{resources, tools};

pub(crate) struct Crm {
    pub(crate) corpus: Corpus,
    /// The email histories made so far, kept (`mailboxes.rs`).
    pub(crate) mailboxes: Mailboxes,
    pub(crate) expiry: Expiry,
    pub(crate) fault_file: Option<PathBuf>,
    pub(crate) call_log: Option<PathBuf>,
}

impl Crm {
    /// What the CRM answers to a call, faults aside.
    pub(crate) fn answer(&self, call: &Call) -> Result<ServerResult, ErrorData> {
        match call {
            Call::Tool {
                name, arguments, ..
            } => tools::call(self, name, arguments).map(ServerResult::CallToolResult),
            Call::Read { uri } => resources::read(self, uri).map(ServerResult::ReadResourceResult),
        }
    }

    /// Appends the call's line to `CRM_CALL_LOG`, in one write so that the lines of
    /// several processes sharing the file do not mix.
    pub(crate) fn log_call(&self, call: &Call, fault: Option<Fault>) {
        let Some(path) = &self.call_log else {
            return;
        };
        let mut line = call.log_line(fault);
        line.push('\n');
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!(
                "pipec-demo-crm: could not append to CRM_CALL_LOG {}: {e}",
                path.display()
            );
        }
    }
}
