//! A session with one server.

use serde_json::{Map, Value};

use std::time::Duration;

use super::{McpError, ResourceContent, ServerConfig, TemplateInfo, ToolInfo, ToolResult};

/// Per-request settings; `None` takes the server's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestOptions {
    /// How long the request may take (else the server's `request_timeout`).
    pub timeout: Option<Duration>,
    /// The largest answer accepted, in bytes of the message as sent. A larger one is read
    /// past, never held whole in memory, and the request fails with
    /// [`McpError::TooLarge`].
    pub limit: Option<usize>,
}

/// A connection to one server, shared by every node of an attempt.
pub struct Session {
    config: ServerConfig,
}

impl Session {
    /// Starts or reaches the server and negotiates the protocol.
    pub async fn connect(config: ServerConfig) -> Result<Session, McpError> {
        Err(McpError::Start {
            server: config.name.clone(),
            message: "this build of pipec has no MCP client".into(),
            stderr: String::new(),
        })
    }

    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        Err(self.unavailable())
    }

    pub async fn list_resource_templates(&self) -> Result<Vec<TemplateInfo>, McpError> {
        Err(self.unavailable())
    }

    /// Calls a tool; `meta` goes in the request's `_meta` (the idempotency key).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<ToolResult, McpError> {
        let _ = (name, arguments, meta, options);
        Err(self.unavailable())
    }

    /// Reads a resource.
    pub async fn read_resource(
        &self,
        uri: &str,
        options: RequestOptions,
    ) -> Result<Vec<ResourceContent>, McpError> {
        let _ = (uri, options);
        Err(self.unavailable())
    }

    /// The protocol version the session speaks.
    pub fn protocol_version(&self) -> Option<String> {
        None
    }

    /// The end of what the server wrote to stderr, redacted.
    pub fn stderr_tail(&self) -> String {
        String::new()
    }

    /// Ends the session: asks the server to stop, then stops it.
    pub async fn close(&self) {}

    fn unavailable(&self) -> McpError {
        McpError::Closed {
            server: self.config.name.clone(),
            stderr: String::new(),
        }
    }
}
