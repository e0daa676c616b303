//! The values a session gives and takes: how to reach a server, what it offers, what a
//! tool call and a resource read return. Plain data, no rmcp types.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

/// Applied to every text a session puts into an error (a server's stderr tail, an HTTP
/// body): the caller's secret scrubber.
pub type Redact = Arc<dyn Redaction>;

/// The caller's secret scrubber, told whether a text is whole or the end of a longer
/// stream. A function of a text is one that treats both alike.
pub trait Redaction: Send + Sync {
    /// A whole text: a message, an HTTP body.
    fn whole(&self, text: &str) -> String;

    /// The end of a longer stream whose start was cut (a server's stderr tail), which
    /// may begin inside a secret.
    fn tail(&self, text: &str) -> String {
        self.whole(text)
    }
}

impl<F: Fn(&str) -> String + Send + Sync> Redaction for F {
    fn whole(&self, text: &str) -> String {
        self(text)
    }
}

/// How to reach one server.
#[derive(Clone)]
pub struct ServerConfig {
    /// The server's name in the pipeline, for messages.
    pub name: String,
    pub transport: TransportConfig,
    /// How long starting (spawning, the handshake) may take.
    pub startup_timeout: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// The largest message accepted from the server: a line over stdio, a body or an SSE
    /// event over HTTP. A longer one is read past, not kept, and fails its request.
    pub max_message_bytes: usize,
    pub redact: Redact,
    /// What the session answers when the server asks for input during a request.
    pub elicitation: super::Elicitation,
    /// The model that answers the server's requests for a model's reply (sampling);
    /// `None` declines them (and does not declare the capability).
    pub sampler: Option<Arc<dyn super::Sampler>>,
    /// How to authorize when a server over HTTP asks for OAuth; `None` sends only the
    /// configured headers, and a refusal fails the request.
    pub authorization: Option<super::Authorization>,
}

impl ServerConfig {
    /// The server's URL as messages show it, for a server reached over HTTP.
    pub(super) fn url(&self) -> Option<String> {
        match &self.transport {
            TransportConfig::Http { url, .. } => {
                Some(self.redact.whole(&super::http::shown_url(url)))
            }
            TransportConfig::Stdio { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum TransportConfig {
    /// A process speaking MCP on its stdin and stdout, started with a cleared environment
    /// plus the allowlist of `pipec_process` and `env`, in a process group of its own
    /// that dies with pipec.
    Stdio {
        program: PathBuf,
        args: Vec<String>,
        cwd: PathBuf,
        env: Vec<(String, String)>,
    },
    /// Streamable HTTP, with headers on every request (secrets may be among them).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// A tool as the server lists it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// The annotations, when the server gives them.
    pub read_only: Option<bool>,
    pub idempotent: Option<bool>,
    pub destructive: Option<bool>,
    pub open_world: Option<bool>,
    /// Whether the tool runs as an MCP task (its `execution.taskSupport`).
    pub task_support: TaskSupport,
    /// The listing's entry as the server sent it (`pipec tools pull --format json`).
    pub raw: Value,
}

/// Whether a tool may, or must, be called as an MCP task (MCP 2025-11-25's
/// `execution.taskSupport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never as a task (also when the listing says nothing).
    #[default]
    Forbidden,
    /// With a task or without.
    Optional,
    /// Only as a task: a call without one fails.
    Required,
}

/// What a server said it offers when the session started (its capabilities).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offers {
    pub tools: bool,
    pub resources: bool,
    pub prompts: bool,
}

/// A fixed resource as the server lists it (`resources/list`).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceInfo {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime: Option<String>,
    /// The listing's entry as the server sent it.
    pub raw: Value,
}

/// A resource template as the server lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateInfo {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime: Option<String>,
    /// The listing's entry as the server sent it.
    pub raw: Value,
}

/// A prompt as the server lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptInfo {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Its arguments' names, with whether each is required.
    pub arguments: Vec<(String, bool)>,
    /// The listing's entry as the server sent it.
    pub raw: Value,
}

/// What a tool call returned.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResult {
    /// `structuredContent`, as sent.
    pub structured: Option<Value>,
    pub content: Vec<Content>,
    /// `isError`: the tool ran and reports a failure.
    pub is_error: bool,
}

/// One content block of a tool result.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    /// An image or audio block: its type (`image` or `audio`), its MIME type and its
    /// data, decoded.
    Media {
        kind: String,
        mime: String,
        data: Vec<u8>,
    },
    Link(Link),
    /// An embedded resource.
    Resource(ResourceContent),
    /// A block pipec could not read (a type it does not know, a `resource_link` without
    /// a `uri`, a blob that is not base64), kept in its place so that the rest of the
    /// result is not lost with it.
    Malformed {
        /// Its `type`, when it has one.
        kind: Option<String>,
        /// What is wrong with it.
        problem: String,
    },
}

/// A `resource_link`.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime: Option<String>,
    pub size: Option<u64>,
}

/// One of the contents a resource read returned.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceContent {
    pub uri: String,
    pub mime: Option<String>,
    pub body: Body,
}

/// A resource's content, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Text(String),
    /// A base64 `blob`, decoded.
    Blob(Vec<u8>),
}

impl ResourceContent {
    /// Its decoded size in bytes.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Text(t) => t.len(),
            Body::Blob(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
