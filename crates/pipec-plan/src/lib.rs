//! The Plan: a checked pipeline lowered to data, the only thing the runtime reads.
//!
//! These are the compiler's only serde types. The format is versioned
//! (`format_version`), has a JSON Schema (`pipec compile --schema`), and a content hash
//! that ignores formatting and `//` comments but covers `///` docs (they reach models).
//! Every node carries a fingerprint of its closure, so a resume can tell which finished
//! nodes a changed plan would compute differently.
#![warn(unreachable_pub)]

pub mod graph;
mod hash;
mod load;
pub mod prices;
pub mod served;
pub mod testing;
mod validate;
pub mod windows;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use hash::{hash_plan, node_fingerprint};
pub use load::PlanLoadError;
pub use validate::Violation;

/// The current plan format. A reader refuses plans of another version.
pub const FORMAT_VERSION: u32 = 1;

/// A compiled pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The plan format; see [`FORMAT_VERSION`].
    pub format_version: u32,
    /// `sha256:<hex>` of the plan's content (everything but `hash` and `compiler`).
    pub hash: String,
    /// The compiler that wrote it, e.g. `pipec 0.1.0` (not part of the hash).
    pub compiler: String,
    /// The pipeline's name: the file name without `.pipe`.
    pub name: String,
    /// The `//!` documentation of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    /// Named types as JSON Schemas, referred to as `#/$defs/<name>`.
    #[serde(rename = "$defs")]
    pub defs: BTreeMap<String, Value>,
    pub servers: Vec<Server>,
    pub models: Vec<Model>,
    pub link_kinds: Vec<LinkKind>,
    pub tools: Vec<Tool>,
    /// Nodes in a topological order: every node after the nodes it depends on.
    pub nodes: Vec<Node>,
    /// Every environment variable and secret the plan reads, so a missing one fails
    /// before any node runs.
    pub config: Vec<ConfigVar>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve: Vec<ServeEntry>,
    /// The prompts `pipec serve` offers (`prompt` entries of the `serve` block).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serve_prompts: Vec<ServePrompt>,
    /// How `pipec serve` offers the pipeline as a tool (the `tool` entry of the `serve`
    /// block), when the file says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_tool: Option<ServeTool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub name: String,
    pub schema: Value,
    /// The type as written in `.pipe` source, for messages.
    #[serde(rename = "type")]
    pub type_name: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Value>,
    /// Whether a run may leave it out (it has a default or is `T?`).
    pub optional: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Output {
    pub name: String,
    pub schema: Value,
    #[serde(rename = "type")]
    pub type_name: String,
    /// A skipped output prints `null`.
    pub optional: bool,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
}

/// A value that is a literal, configuration, or a secret (never the secret itself).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ConfigValue {
    Literal {
        value: String,
    },
    Env {
        var: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
    Secret {
        var: String,
    },
}

/// A server's `command`, one of its `args`, or its `url`: a literal, written as a plain
/// string (so plans that use no `env()` there read as they always did), or `env("NAME")`,
/// read when a run starts. Never a secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServerValue {
    Literal(String),
    Config(ConfigValue),
}

impl From<String> for ServerValue {
    fn from(s: String) -> ServerValue {
        ServerValue::Literal(s)
    }
}

impl ServerValue {
    /// The value as written in `.pipe` source, for messages (`env("MCP_URL")`).
    pub fn written(&self) -> String {
        match self {
            ServerValue::Literal(s) | ServerValue::Config(ConfigValue::Literal { value: s }) => {
                s.clone()
            }
            ServerValue::Config(ConfigValue::Env { var, default: None }) => format!("env({var:?})"),
            ServerValue::Config(ConfigValue::Env {
                var,
                default: Some(d),
            }) => format!("env({var:?}, default: {d:?})"),
            ServerValue::Config(ConfigValue::Secret { var }) => format!("secret({var:?})"),
        }
    }

    /// The configuration it reads, when it is not a literal.
    pub fn config(&self) -> Option<&ConfigValue> {
        match self {
            ServerValue::Config(c) => Some(c),
            ServerValue::Literal(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigVar {
    pub var: String,
    pub secret: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Server {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<ServerValue>,
    pub args: Vec<ServerValue>,
    pub env: BTreeMap<String, ConfigValue>,
    /// The folder a `command` runs in (relative to `base_dir`); `base_dir` itself when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<ServerValue>,
    /// HTTP headers on every request to a `url` server (values may be secrets).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, ConfigValue>,
    /// How pipec authorizes with a `url` server that asks for OAuth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuth>,
    /// What pipec answers when the server asks for input during a tool call.
    #[serde(default, skip_serializing_if = "Elicitation::is_decline")]
    pub elicitation: Elicitation,
    /// The declared model that answers the server's requests for a model's reply
    /// (sampling); none declines them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<String>,
    /// URI patterns it serves (routing).
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The declaring file's folder, relative to the project root: relative `command`
    /// and `cwd` paths resolve against it.
    pub base_dir: String,
}

/// A server's `oauth`: who pipec is to the server's authorization server. Tokens are
/// never in a plan; they live in the user's credentials store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuth {
    /// A client registered with the authorization server beforehand (else pipec
    /// registers itself: a client ID metadata document, or dynamic registration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<ConfigValue>,
    /// Its secret: always a `secret()`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<ConfigValue>,
    #[serde(default, skip_serializing_if = "OAuthGrant::is_default")]
    pub grant: OAuthGrant,
    /// The HTTPS URL of the client ID metadata document pipec names itself by, where the
    /// authorization server takes those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for first (else those the server's challenge or metadata names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// What pipec answers when a server asks for input (a form) during a tool call: MCP's
/// elicitation (2025-11-25), or the form requests of an `input_required` result
/// (2026-07-28).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Elicitation {
    /// Says no to every form (and does not tell the server it may ask).
    #[default]
    Decline,
    /// The thread waits at a gate whose answer is the form; the call is made again
    /// with the answer, in this process or another, however long after.
    Ask,
    /// Fills a form with the defaults it declares; says no when a required field has
    /// none.
    Defaults,
    /// Fills every form with these fields (those it has); says no when they lack a
    /// field it requires.
    Answer(BTreeMap<String, serde_json::Value>),
}

impl Elicitation {
    fn is_decline(&self) -> bool {
        *self == Elicitation::Decline
    }
}

/// Whether a tool runs as an MCP task (`execution.taskSupport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolTask {
    /// Never (also when nothing is said).
    #[default]
    Forbidden,
    /// With a task or without: pipec asks for one.
    Optional,
    /// Only as a task.
    Required,
}

impl ToolTask {
    fn is_forbidden(&self) -> bool {
        *self == ToolTask::Forbidden
    }
}

/// How pipec obtains tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// A person approves once, with `pipec mcp login SERVER`; runs use and refresh the
    /// tokens stored then.
    #[default]
    AuthorizationCode,
    /// The client authenticates as itself (the MCP client-credentials extension): for
    /// unattended workers.
    ClientCredentials,
}

impl OAuthGrant {
    fn is_default(&self) -> bool {
        *self == OAuthGrant::AuthorizationCode
    }

    /// As `.pipe` source writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            OAuthGrant::AuthorizationCode => "authorization_code",
            OAuthGrant::ClientCredentials => "client_credentials",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Model {
    pub name: String,
    /// `openai` or `scripted`.
    pub provider: String,
    /// The model name the endpoint serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<ConfigValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ConfigValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<i64>,
    /// The largest reply read, in bytes (the runtime's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reply_bytes: Option<u64>,
    /// Scripted models: the replies file, relative to the project root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub extra: Value,
    /// The prices declared on the model (`prices { ... }`); without them, the built-in
    /// table's for its name ([`prices::table_prices`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<prices::Prices>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkKind {
    pub kind: String,
    pub schema: Value,
    #[serde(rename = "type")]
    pub type_name: String,
    /// The RFC 6570 template that recognises its URIs.
    pub template: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Tool,
    Reader,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolParam {
    /// The name the model sees.
    pub name: String,
    /// The name the server takes.
    pub wire_name: String,
    pub schema: Value,
    pub required: bool,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub name: String,
    pub kind: ToolKind,
    /// The server's name for it.
    pub wire_name: String,
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub params: Vec<ToolParam>,
    /// The parameters as one JSON Schema object, as a model sees the tool.
    pub input_schema: Value,
    pub output_schema: Value,
    pub read_only: bool,
    pub idempotent: bool,
    pub destructive: bool,
    /// Link kinds its results carry.
    pub links: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_result_bytes: Option<u64>,
    /// Whether the server runs the tool as an MCP task (its `execution.taskSupport`):
    /// pipec asks for one, and polls it.
    #[serde(default, skip_serializing_if = "ToolTask::is_forbidden")]
    pub task: ToolTask,
    /// Readers: the resource template they read, its cap and expected MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Node,
    Think,
    Agent,
    Act,
    Gate,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    pub params: Vec<Param>,
    /// The `each` parameter: the node runs once per item and its value is a list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each: Option<String>,
    /// The output per item.
    pub output: Value,
    pub output_type: String,
    pub body: Body,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Expr>,
    /// Resource parameters `when` reads: hydrated before `when`, the rest after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when_reads: Vec<String>,
    /// Nodes this one waits for (bindings, `from:`, `after`).
    pub deps: Vec<String>,
    /// Whether a `when` (its own or upstream) can skip it.
    pub skippable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
    /// `each` nodes: drop a failed item instead of failing the node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_failed_items: bool,
    /// `sha256:<hex>` of everything the node's result depends on in the plan.
    pub fingerprint: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Param {
    pub name: String,
    pub schema: Value,
    #[serde(rename = "type")]
    pub type_name: String,
    /// `T?`: receives `null` when its source is skipped or missing.
    pub optional: bool,
    /// `ref<T>` or `ref<T>[]`: the references are kept, not fetched.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_ref: bool,
    pub source: Source,
}

/// One step of a path into a value: `.field` or `[*].field`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    Field(String),
    Splat(String),
}

/// Where a parameter's value comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    Input {
        input: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        path: Vec<Step>,
    },
    Node {
        node: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        path: Vec<Step>,
    },
    /// The first side that is neither skipped nor null.
    Join {
        sides: Vec<Source>,
    },
    Const {
        value: Value,
    },
    Record {
        fields: BTreeMap<String, Source>,
    },
    List {
        items: Vec<Source>,
    },
    Env {
        var: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
    Secret {
        var: String,
    },
    Resource {
        /// RFC 6570 template; its variables are the node's other parameters
        /// (dotted for fields: `{file.path}`).
        uri: String,
        server: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime: Option<String>,
    },
    Link {
        link_kind: String,
        /// `resources(ref: ...)`: every link of the kind, in call order.
        many: bool,
        /// The node whose manifest holds the link.
        producer: String,
        #[serde(rename = "where", default, skip_serializing_if = "BTreeMap::is_empty")]
        where_: BTreeMap<String, Expr>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_total: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime: Option<String>,
    },
    Each {
        list: Box<Source>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<u64>,
    },
}

/// A body expression; it reads only the node's parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Expr {
    Param {
        name: String,
    },
    Field {
        of: Box<Expr>,
        name: String,
    },
    Splat {
        of: Box<Expr>,
        name: String,
    },
    Const {
        value: Value,
    },
    Duration {
        ms: u64,
    },
    Record {
        fields: BTreeMap<String, Expr>,
    },
    List {
        items: Vec<Expr>,
    },
    Not {
        of: Box<Expr>,
    },
    /// `??`, `||`, `&&`, `==`, `!=`, `<`, `<=`, `>`, `>=`.
    Binary {
        operator: String,
        left: Box<Expr>,
        right: Box<Expr>,
    },
    Len {
        of: Box<Expr>,
    },
}

/// A template with everything it includes, keyed by name (paths under `prompts/`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Template {
    pub entry: String,
    pub sources: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Body {
    Return {
        value: Expr,
    },
    Call {
        tool: String,
        args: BTreeMap<String, Expr>,
    },
    /// A subprocess: parameters as JSON on stdin, one JSON value on stdout.
    Exec {
        argv: Vec<String>,
        idempotent: bool,
    },
    /// A function the embedding program registers.
    Host {
        function: String,
    },
    /// `think` (one call), `agent` and `act` (tool loops).
    Model {
        model: String,
        prompt: Template,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        limits: BTreeMap<String, u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        approve: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_steps: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_timeout_ms: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        repairs: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<i64>,
        /// Whether the reply is structured (JSON validated against `output`); a
        /// `-> string` node takes the plain completion.
        structured: bool,
    },
    Gate {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Template>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
        #[serde(
            default,
            deserialize_with = "present",
            skip_serializing_if = "Option::is_none"
        )]
        on_timeout: Option<Value>,
        /// Who answers the gate when not a person: `"roots"`, the roots of the client
        /// that runs the pipeline (MCP `roots/list`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ask: Option<String>,
        /// The answer a person is offered, filled in: all or some of a record's fields,
        /// or the one value (a form's defaults).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        suggest: Option<Value>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServeEntry {
    /// `resource` (a fixed URI) or `template`.
    pub kind: String,
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// An ISO 8601 time, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// A fixed resource's bytes, in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<ServeIcon>,
}

/// A prompt `pipec serve` offers: its arguments (text, as MCP prompt arguments are) and
/// the template that renders its messages. `role("user")` and `role("assistant")` split
/// the text into messages; `resource(URI)` places a served resource there (a message of
/// its own: an image, audio, or an embedded resource, by its MIME type).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServePrompt {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    pub template: Template,
}

/// How `pipec serve` offers the pipeline as an MCP tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServeTool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool's description, in place of the file's `//!` comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Inputs a client mirrors into an HTTP header, `Mcp-Param-{header}` (MCP's
    /// `x-mcp-header`, SEP-2243), by input name; each a string, integer or boolean input.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Whether a call runs as an MCP task for a client that declared the tasks
    /// extension: `"optional"` (when the run outlives a moment; the default),
    /// `"required"` (always; other clients are refused) or `"forbidden"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// An argument of a served prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptArgument {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The client must give it (it is neither optional nor defaulted).
    pub required: bool,
    /// The values it takes (an enum's, or a union of literals), offered as completions
    /// and checked; empty: any text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Its value when the client gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// An icon a served resource or template is listed with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServeIcon {
    pub src: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<String>,
}

/// Reads a field that is present as `Some`, `null` included: a default or an
/// `on_timeout` of `null` is a value, and must read back as the `Some(null)` it was
/// written from (serde would read `null` as `None`, and the hash would no longer match).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Plan {
    /// The links some node reads (`resource(ref: KIND, from: NODE)`, `resources(...)`):
    /// by producing node, the kinds read of it. Only those links are kept in a `call`
    /// node's manifest; no node can read any other.
    pub fn links_read(&self) -> BTreeMap<String, std::collections::BTreeSet<String>> {
        type Read = BTreeMap<String, std::collections::BTreeSet<String>>;
        fn collect(s: &Source, out: &mut Read) {
            match s {
                Source::Link {
                    producer,
                    link_kind,
                    ..
                } => {
                    out.entry(producer.clone())
                        .or_default()
                        .insert(link_kind.clone());
                }
                Source::Join { sides } => sides.iter().for_each(|x| collect(x, out)),
                Source::Record { fields } => fields.values().for_each(|x| collect(x, out)),
                Source::List { items } => items.iter().for_each(|x| collect(x, out)),
                Source::Each { list, .. } => collect(list, out),
                Source::Input { .. }
                | Source::Node { .. }
                | Source::Const { .. }
                | Source::Env { .. }
                | Source::Secret { .. }
                | Source::Resource { .. } => {}
            }
        }
        let mut out = Read::new();
        for n in &self.nodes {
            n.params.iter().for_each(|p| collect(&p.source, &mut out));
        }
        self.outputs
            .iter()
            .for_each(|o| collect(&o.source, &mut out));
        out
    }

    /// The plan as pretty JSON, ending in a newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Reads a plan and checks it before anything uses it: its format version, its shape,
    /// its hash, and the structural invariants `compile` guarantees (every name it uses
    /// declared once, nodes in topological order, ...). Every refusal has the code R0004.
    pub fn from_json(text: &str) -> Result<Plan, PlanLoadError> {
        load::from_json(text)
    }

    /// The JSON Schema of the plan format.
    pub fn json_schema() -> String {
        let schema = schemars::schema_for!(Plan);
        let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
        s.push('\n');
        s
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }
}
