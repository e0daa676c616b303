//! What an MCP server built on pipec offers, in pipec's own terms: the [`Provider`]
//! trait a server implements (its identity, its listings, reads, completions and tools)
//! and the plain types it answers with. The protocol adapter (`handler`) turns these
//! into MCP messages; nothing here names rmcp, so a provider is written without it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde_json::{Map, Value};

use super::updates::Updates;

/// A boxed future a provider answers with.
pub type ProviderFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who the server says it is in its handshake.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
    pub title: Option<String>,
    pub instructions: Option<String>,
}

/// An icon a listing shows.
#[derive(Clone, Debug, PartialEq)]
pub struct IconInfo {
    pub src: String,
    pub mime_type: Option<String>,
    pub sizes: Vec<String>,
}

/// Hints for clients about a resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hints {
    /// `"user"` and/or `"assistant"`.
    pub audience: Vec<String>,
    /// From 0 (least) to 1 (most important).
    pub priority: Option<f64>,
    /// An ISO 8601 timestamp.
    pub last_modified: Option<String>,
}

/// A resource as `resources/list` shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListedResource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub size: Option<u64>,
    pub icons: Vec<IconInfo>,
    pub hints: Option<Hints>,
}

/// A resource template as `resources/templates/list` shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListedTemplate {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub icons: Vec<IconInfo>,
    pub hints: Option<Hints>,
}

/// The bytes of one content of a read.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Text(String),
    /// Sent base64-encoded.
    Blob(Vec<u8>),
}

/// One content of a read.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadContent {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: Body,
}

/// Why a read has no content. Each becomes the JSON-RPC error MCP asks for: not found is
/// the resource-not-found code of the era the client negotiated.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadFailure {
    /// No resource has this URI (nothing declared matches it).
    NotFound(String),
    /// The URI matches, but what it asks for is refused (outside a root, a dotfile, a
    /// value that does not fit the template): invalid parameters.
    Refused(String),
    /// The resource exists but its content could not be made (a backend down, no backend
    /// configured, a file over the size cap): an internal error with this message.
    Failed(String),
}

/// A tool the server offers.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// A JSON Schema object.
    pub input_schema: Map<String, Value>,
    pub output_schema: Option<Map<String, Value>>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
    /// What the tool cannot run without asking the client: a client that did not declare
    /// it is refused before the tool runs.
    pub needs: Abilities,
    /// Whether a call may become a task, for a client that declared the tasks extension.
    pub task: TaskSupport,
}

/// Whether a tool's calls run as MCP tasks (the `io.modelcontextprotocol/tasks`
/// extension) for a client that declared it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum TaskSupport {
    /// Never: every call answers in the call.
    #[default]
    Forbidden,
    /// When the call outlives a moment: the server decides.
    Optional,
    /// Always: a client without the extension is refused (-32021).
    Required,
}

/// Where a task stands, as `tasks/get` shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskState {
    Working,
    /// Waiting for the client's answers to these questions (`tasks/update`).
    InputRequired(BTreeMap<String, Question>),
    /// Done: the call's result (a tool that reported an error too).
    Completed(ToolReply),
    /// The server could not carry the call out: why.
    Failed(String),
    Cancelled,
}

/// A task: the call that became one, as it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView {
    pub id: String,
    pub state: TaskState,
    /// A word for a person on where it stands.
    pub message: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// Why a task request was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskFailure {
    /// No task of this id (invalid params).
    Unknown(String),
    /// Answers that do not fit (invalid params).
    Invalid(String),
    /// The server failed (internal error).
    Failed(String),
}

/// A link a tool result carries.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkOut {
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// What a tool call answers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolReply {
    /// `structuredContent` (an object), when the tool has one.
    pub structured: Option<Value>,
    /// The text block (for clients that read text only).
    pub text: Option<String>,
    /// Images, audio and embedded resources, after the text.
    pub blocks: Vec<Block>,
    pub links: Vec<LinkOut>,
    /// The tool ran and failed: the client shows `text`.
    pub is_error: bool,
}

/// How far a tool call has come, for a client that asked to hear (`progressToken`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressUpdate {
    /// Grows with each update.
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a tool call reports its progress; cheap to call, and it never blocks.
pub type Progress = std::sync::Arc<dyn Fn(ProgressUpdate) + Send + Sync>;

/// What a client can be asked during a call, by the capabilities it declared.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Abilities {
    /// Forms a person fills in (elicitation).
    pub forms: bool,
    /// Its model's replies (sampling).
    pub model: bool,
    /// Its roots (`roots/list`).
    pub roots: bool,
}

/// A question a call puts to its client.
#[derive(Clone, Debug, PartialEq)]
pub enum Question {
    /// A form a person fills in: `schema` is a flat object of simple fields.
    Form {
        message: String,
        schema: Map<String, Value>,
    },
    /// A reply of the client's model: `params` are `sampling/createMessage`'s.
    Model { params: Map<String, Value> },
    /// The client's roots (`roots/list`); the answer is a `ListRootsResult`.
    Roots,
}

/// What a call needs before it can answer: its questions by key, and what the provider
/// keeps meanwhile. The state comes back with the answers, unchanged (the client holds
/// it sealed, or it never leaves the server).
#[derive(Clone, Debug, PartialEq)]
pub struct InputNeeded {
    pub questions: BTreeMap<String, Question>,
    pub state: Vec<u8>,
}

/// What a call brings beside its arguments.
#[derive(Clone, Default)]
pub struct CallContext {
    /// Where to report how far the call came, when the client asked to hear.
    pub progress: Option<Progress>,
    /// What the client can be asked.
    pub abilities: Abilities,
    /// The client's answers, by the key of each question, on a call made again (or
    /// given up front), as it sent them: a provider checks each.
    pub answers: BTreeMap<String, Value>,
    /// The state of the [`InputNeeded`] these answers answer, when they answer one.
    pub state: Option<Vec<u8>>,
    /// The client declared the tasks extension: a call of a task-supporting tool may
    /// answer [`ToolAnswer::Task`].
    pub tasks: bool,
    /// The W3C `traceparent` the client sent in the request's `_meta`: the client's span
    /// of this call, which a traced provider makes its own span a child of.
    pub traceparent: Option<String>,
}

/// What a tool call answers: its result, or questions for the client first.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolAnswer {
    Reply(ToolReply),
    Ask(InputNeeded),
    /// The call goes on as a task, which the client follows with `tasks/get`.
    Task(TaskView),
}

impl From<ToolReply> for ToolAnswer {
    fn from(reply: ToolReply) -> ToolAnswer {
        ToolAnswer::Reply(reply)
    }
}

/// Why a tool call was not made.
#[derive(Clone, Debug, PartialEq)]
pub enum CallFailure {
    UnknownTool(String),
    InvalidArguments(String),
    Failed(String),
}

/// A prompt the server offers, as `prompts/list` shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptSpec {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub arguments: Vec<PromptArgumentSpec>,
}

/// An argument of a prompt (text, as MCP prompt arguments are).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptArgumentSpec {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    /// The values it may take, when it is one of a set (an enum).
    pub values: Vec<String>,
}

/// A block of content: one message of a prompt, or one block of a tool's result.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    Text(String),
    /// An image or audio (by its MIME type), sent base64-encoded.
    Media {
        mime_type: String,
        data: Vec<u8>,
    },
    /// A resource's content, embedded.
    Resource(ReadContent),
}

/// One message of a prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptMessageOut {
    /// The assistant's, else the user's.
    pub assistant: bool,
    pub content: Block,
}

/// Why a prompt has no messages. Each becomes invalid parameters except `Failed`, an
/// internal error.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptFailure {
    UnknownPrompt(String),
    InvalidArguments(String),
    Failed(String),
}

/// A server's content and tools. Listings do no I/O; reads, completions and calls may.
pub trait Provider: Send + Sync + 'static {
    fn identity(&self) -> ServerIdentity;

    /// A number that changes whenever the listings change, so a page cursor of an older
    /// listing is refused rather than read against the new one.
    fn generation(&self) -> u64 {
        0
    }

    /// The static resources, in the order they are listed.
    fn resources(&self) -> Vec<ListedResource>;

    /// The resource templates, in the order they are listed.
    fn templates(&self) -> Vec<ListedTemplate>;

    fn read<'a>(
        &'a self,
        uri: &'a str,
    ) -> ProviderFuture<'a, Result<Vec<ReadContent>, ReadFailure>>;

    /// Values for `argument` of `template` that start like `value`, with the values of
    /// other arguments already given (`context`). At most 100 are sent.
    fn complete<'a>(
        &'a self,
        _template: &'a str,
        _argument: &'a str,
        _value: &'a str,
        _context: &'a BTreeMap<String, String>,
    ) -> ProviderFuture<'a, Vec<String>> {
        Box::pin(async { Vec::new() })
    }

    fn tools(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    /// The prompts, in the order they are listed.
    fn prompts(&self) -> Vec<PromptSpec> {
        Vec::new()
    }

    /// The messages of the prompt `name` with these arguments.
    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        _arguments: BTreeMap<String, String>,
    ) -> ProviderFuture<'a, Result<Vec<PromptMessageOut>, PromptFailure>> {
        Box::pin(async move { Err(PromptFailure::UnknownPrompt(name.to_string())) })
    }

    /// Values for `argument` of the prompt `name` that start like `value`.
    fn complete_prompt<'a>(
        &'a self,
        _name: &'a str,
        _argument: &'a str,
        _value: &'a str,
        _context: &'a BTreeMap<String, String>,
    ) -> ProviderFuture<'a, Vec<String>> {
        Box::pin(async { Vec::new() })
    }

    /// Runs a tool. It may answer questions for the client instead of a result; the
    /// client's answers then come in `context` on a call made again.
    fn call<'a>(
        &'a self,
        name: &'a str,
        _arguments: Map<String, Value>,
        _context: CallContext,
    ) -> ProviderFuture<'a, Result<ToolAnswer, CallFailure>> {
        Box::pin(async move { Err(CallFailure::UnknownTool(name.to_string())) })
    }

    /// The task `id` (a call that answered [`ToolAnswer::Task`]) as it stands, its
    /// questions those a client that `can` answer them is asked.
    fn task<'a>(
        &'a self,
        id: &'a str,
        _can: Abilities,
    ) -> ProviderFuture<'a, Result<TaskView, TaskFailure>> {
        Box::pin(async move { Err(TaskFailure::Unknown(id.to_string())) })
    }

    /// The client's answers to the questions of the task `id`, keyed as asked; the task
    /// goes on with them.
    fn update_task<'a>(
        &'a self,
        id: &'a str,
        _answers: BTreeMap<String, Value>,
    ) -> ProviderFuture<'a, Result<(), TaskFailure>> {
        Box::pin(async move { Err(TaskFailure::Unknown(id.to_string())) })
    }

    /// Cancels the task `id`; one that has ended is left as it is.
    fn cancel_task<'a>(&'a self, id: &'a str) -> ProviderFuture<'a, Result<(), TaskFailure>> {
        Box::pin(async move { Err(TaskFailure::Unknown(id.to_string())) })
    }

    /// Whether any tool may run as a task (the server then declares the extension).
    fn offers_tasks(&self) -> bool {
        self.tools()
            .iter()
            .any(|t| t.task != TaskSupport::Forbidden)
    }

    /// The key `requestState` is sealed with when a call asks its client in the
    /// 2026-07-28 era (at least 32 bytes; a state sealed with another key is refused).
    /// None: calls do not ask such clients.
    fn state_key(&self) -> Option<Vec<u8>> {
        None
    }

    /// Where the provider announces changes: subscribers of a URI hear of its updates,
    /// every listener of the lists hears when they change.
    fn updates(&self) -> &Updates;
}
