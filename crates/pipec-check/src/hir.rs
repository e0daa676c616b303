//! The checked program: every name resolved, every type known, every binding typed.
//!
//! This is what the lint passes read and what lowering turns into a `Plan`. Declarations
//! live in arenas indexed by small ids; a declaration from an imported file keeps the
//! file it came from, so messages point at the right place.

use std::collections::HashSet;
use std::path::PathBuf;

use super::ty::{Ty, TypeBody, TypeEnv, TypeId};
use pipec_base::source::{FileId, Span};
use pipec_base::uri::UriTemplate;
use pipec_syntax::ast::{BinOp, NodeKind};

pub type ServerId = u32;
pub type ModelId = u32;
pub type LinkId = u32;
pub type ToolId = u32;
pub type InputId = u32;
pub type NodeId = u32;

/// What every declaration has: where it is and what it is called.
#[derive(Clone, Debug)]
pub struct DeclInfo {
    /// The name in its own file.
    pub name: String,
    /// The name as the checked file sees it (`tracker.Ticket` for a namespaced import).
    pub display: String,
    pub file: FileId,
    pub span: Span,
    pub name_span: Span,
    pub doc: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeclRef {
    Type(TypeId),
    Server(ServerId),
    Model(ModelId),
    Link(LinkId),
    Tool(ToolId),
    Input(InputId),
    Node(NodeId),
}

#[derive(Debug)]
pub struct TypeDef {
    pub info: DeclInfo,
    pub body: TypeBody,
    /// The unique name of its JSON Schema definition in the plan (`display`, unless
    /// two types would share it).
    pub key: String,
}

/// A value in a server's `env`: a literal, configuration, or a secret.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigValue {
    Literal(String),
    Env {
        var: String,
        default: Option<String>,
    },
    Secret {
        var: String,
    },
}

impl std::fmt::Display for ConfigValue {
    /// As it is written in `.pipe` source.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigValue::Literal(s) => write!(f, "{s}"),
            ConfigValue::Env { var, default: None } => write!(f, "env({var:?})"),
            ConfigValue::Env {
                var,
                default: Some(d),
            } => write!(f, "env({var:?}, default: {d:?})"),
            ConfigValue::Secret { var } => write!(f, "secret({var:?})"),
        }
    }
}

/// A server's `oauth` block.
#[derive(Debug)]
pub struct OAuthDef {
    pub client_id: Option<ConfigValue>,
    pub client_secret: Option<ConfigValue>,
    pub grant: pipec_plan::OAuthGrant,
    pub client_metadata_url: Option<String>,
    pub scopes: Vec<String>,
}

#[derive(Debug)]
pub struct ServerDef {
    pub info: DeclInfo,
    /// A literal or `env()` (never a secret: a command line is visible to every user of
    /// the machine), as are `args` and `url`.
    pub command: Option<ConfigValue>,
    pub args: Vec<ConfigValue>,
    pub env: Vec<(String, ConfigValue)>,
    /// Relative to the project root, or absolute as written.
    pub cwd: Option<String>,
    pub url: Option<ConfigValue>,
    /// HTTP headers sent with every request to a `url` server.
    pub headers: Vec<(String, ConfigValue)>,
    /// How pipec authorizes with a `url` server that asks for OAuth.
    pub oauth: Option<OAuthDef>,
    /// What pipec answers when the server asks for input during a call.
    pub elicitation: pipec_plan::Elicitation,
    /// The model that answers the server's sampling requests.
    pub sampling: Option<ModelId>,
    /// URI patterns the server serves, for routing.
    pub resources: Vec<UriTemplate>,
    pub startup_timeout_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// The folder of the declaring file, relative to the project root ("" for the root).
    pub base_dir: String,
}

#[derive(Debug)]
pub struct ModelDef {
    pub info: DeclInfo,
    pub provider: String,
    pub model_name: Option<String>,
    pub base_url: Option<ConfigValue>,
    pub api_key: Option<ConfigValue>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<i64>,
    pub timeout_ms: Option<u64>,
    pub retries: Option<i64>,
    pub max_reply_bytes: Option<u64>,
    pub replies: Option<String>,
    pub extra: serde_json::Value,
    pub prices: Option<pipec_plan::prices::Prices>,
    /// The prompt and reply together, in tokens, as declared (`context_window = 128000`);
    /// else pipec's table knows it by `model_name`, or nobody does.
    pub context_window: Option<u64>,
}

#[derive(Debug)]
pub struct LinkDef {
    pub info: DeclInfo,
    pub kind: String,
    pub ty: Ty,
    pub template: UriTemplate,
    /// Whether the template can be matched against URIs (reported otherwise).
    pub matchable: bool,
}

#[derive(Clone, Debug)]
pub struct ToolParam {
    pub name: String,
    pub wire_name: String,
    pub ty: Ty,
    pub doc: Option<String>,
    pub default: Option<serde_json::Value>,
    pub span: Span,
}

impl ToolParam {
    pub fn required(&self) -> bool {
        self.default.is_none() && !self.ty.is_optional()
    }
}

/// A tool or a reader.
#[derive(Debug)]
pub struct ToolDef {
    pub info: DeclInfo,
    pub is_reader: bool,
    pub wire_name: String,
    pub params: Vec<ToolParam>,
    pub returns: Ty,
    pub returns_declared: bool,
    pub server: Option<ServerId>,
    pub read_only: bool,
    pub idempotent: bool,
    pub destructive: bool,
    pub links: Vec<(LinkId, Span)>,
    pub timeout_ms: Option<u64>,
    pub max_result_bytes: Option<u64>,
    /// Whether the server runs it as an MCP task.
    pub task: pipec_plan::ToolTask,
    /// Readers: the URI template and cap.
    pub uri: Option<UriTemplate>,
    pub max_bytes: Option<u64>,
    pub mime: Option<String>,
}

#[derive(Debug)]
pub struct InputDef {
    pub info: DeclInfo,
    pub ty: Ty,
    pub default: Option<serde_json::Value>,
}

#[derive(Debug)]
pub struct OutputDef {
    pub info: DeclInfo,
    pub ty: Ty,
    pub declared_optional: bool,
    pub source: Source,
    pub value_span: Span,
}

/// One step of a field path: `.field` or `[*].field`.
#[derive(Clone, Debug, PartialEq)]
pub enum PathSeg {
    Field(String),
    Splat(String),
}

/// Where a parameter's value comes from.
#[derive(Clone, Debug)]
pub struct Source {
    pub kind: SourceKind,
    pub span: Span,
    /// The type of the value the source produces (before any hydration).
    pub ty: Ty,
}

#[derive(Clone, Debug)]
pub enum SourceKind {
    Input {
        input: InputId,
        path: Vec<PathSeg>,
    },
    Node {
        node: NodeId,
        path: Vec<PathSeg>,
    },
    /// `a ?? b`: the first side that is neither skipped nor null.
    Join(Vec<Source>),
    Const(serde_json::Value),
    Record(Vec<(String, Source)>),
    List(Vec<Source>),
    Env {
        var: String,
        default: Option<String>,
    },
    Secret {
        var: String,
    },
    /// `resource("uri", ...)`.
    Resource(ResourceBinding),
    /// `resource(ref: "kind", ...)` (`many = false`) or `resources(ref: ...)`.
    Link(LinkBinding),
    Each {
        inner: Box<Source>,
        max: Option<u64>,
    },
    /// Already reported.
    Error,
}

#[derive(Clone, Debug)]
pub struct ResourceBinding {
    pub uri: UriTemplate,
    pub server: Option<ServerId>,
    pub max_bytes: Option<u64>,
    pub mime: Option<String>,
}

#[derive(Clone, Debug)]
pub struct LinkBinding {
    pub link: LinkId,
    pub many: bool,
    /// `from:` as written, when it names a node.
    pub from: Option<(NodeId, Span)>,
    /// Whether `from:` is written (naming a node or not).
    pub from_written: bool,
    /// The producing ancestor, once the graph is known.
    pub producer: Option<NodeId>,
    pub where_: Vec<(String, Expr)>,
    pub max_bytes: Option<u64>,
    pub max_total: Option<u64>,
    pub mime: Option<String>,
}

/// A parameter of a node.
#[derive(Clone, Debug)]
pub struct ParamDef {
    pub name: String,
    pub span: Span,
    pub name_span: Span,
    /// The declared type; per item for an `each` parameter.
    pub ty: Ty,
    pub doc: Option<String>,
    pub source: Source,
    /// Whether anything in the node reads it (prompt, `return`, `when`, URI, ...).
    pub used: bool,
    /// What its source is, as written (known before sources are checked): a resource
    /// or link binding, or a secret.
    pub binds_resource: bool,
    pub binds_secret: bool,
}

impl ParamDef {
    pub fn is_each(&self) -> bool {
        matches!(self.source.kind, SourceKind::Each { .. })
    }

    /// A resource or link binding that will be fetched (not a `ref<T>` or `ref<T>[]`).
    pub fn fetches(&self) -> bool {
        let direct = match &self.source.kind {
            SourceKind::Resource(_) | SourceKind::Link(_) => true,
            SourceKind::Each { inner, .. } => {
                matches!(inner.kind, SourceKind::Resource(_) | SourceKind::Link(_))
            }
            _ => false,
        };
        let keeps_refs = match self.ty.strip_optional() {
            Ty::Ref(_) => true,
            Ty::List(inner) => matches!(inner.strip_optional(), Ty::Ref(_)),
            _ => false,
        };
        direct && !keeps_refs
    }
}

/// A body expression: sees only the node's parameters.
#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
    pub ty: Ty,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Param(usize),
    Field(Box<Expr>, String),
    Splat(Box<Expr>, String),
    Const(serde_json::Value),
    Duration(u64),
    Record(Vec<(String, Expr)>),
    List(Vec<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Len(Box<Expr>),
    Error,
}

/// A prompt or message template, with everything it includes.
#[derive(Clone, Debug)]
pub struct Template {
    /// `file("x/y")` → `Some("x/y")`; inline templates have none.
    pub file: Option<String>,
    /// The entry template's name in `sources`.
    pub entry: String,
    /// Every template text the entry needs, by name (the entry and what it includes).
    pub sources: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub enum Body {
    Return(Expr),
    Call {
        tool: ToolId,
        args: Vec<(String, Expr)>,
    },
    Exec {
        argv: Vec<String>,
        idempotent: bool,
    },
    Host {
        name: String,
    },
    /// `think`, `agent` and `act` loops.
    Model {
        model: ModelId,
        prompt: Template,
        tools: Vec<ToolId>,
        limits: Vec<(ToolId, u64)>,
        approve: Vec<ToolId>,
        max_steps: Option<u64>,
        tool_timeout_ms: Option<u64>,
        repairs: Option<u64>,
        temperature: Option<f64>,
        max_tokens: Option<i64>,
    },
    Gate {
        message: Option<Template>,
        on_timeout: Option<serde_json::Value>,
        /// Who answers it when not a person: `"roots"`, the client's roots.
        ask: Option<String>,
        /// The answer a person is offered, filled in (all or some of a record's fields).
        suggest: Option<serde_json::Value>,
    },
    /// Reported missing or contradictory.
    Invalid,
}

#[derive(Debug)]
pub struct NodeDef {
    pub info: DeclInfo,
    pub kind: NodeKind,
    pub kind_span: Span,
    pub params: Vec<ParamDef>,
    /// The output per item (for `each` nodes); the declared or inferred type.
    pub output: Ty,
    pub output_span: Span,
    pub output_declared: bool,
    pub body: Body,
    pub when: Option<Expr>,
    pub after: Vec<(NodeId, Span)>,
    pub timeout_ms: Option<u64>,
    pub retries: Option<u64>,
    pub backoff_ms: Option<u64>,
    pub concurrency: Option<u64>,
    pub drop_failed_items: bool,
    /// Gates: how long a person has.
    pub gate_timeout_ms: Option<u64>,
    /// Index of the `each` parameter.
    pub each: Option<usize>,
    /// Direct dependencies (data edges, `from:`, `after`), deduplicated, sorted.
    pub deps: Vec<NodeId>,
    /// Whether a `when` somewhere can skip it.
    pub skippable: bool,
    /// The span of the body block.
    pub body_span: Span,
}

impl NodeDef {
    /// The type downstream nodes see: `T[]` for an `each` node.
    pub fn value_ty(&self) -> Ty {
        // A gate cannot fan out (reported); its answer stays one value.
        if self.each.is_some() && self.kind != NodeKind::Gate {
            self.output.clone().list()
        } else {
            self.output.clone()
        }
    }

    pub fn is_prompted(&self) -> bool {
        matches!(self.body, Body::Model { .. })
    }
}

/// A `serve` entry.
#[derive(Clone, Debug)]
pub struct ServeEntryDef {
    pub template: bool,
    pub uri: String,
    pub span: Span,
    pub name: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub text: Option<String>,
    pub root: Option<String>,
    pub backend: Option<String>,
    pub render: Option<String>,
    pub audience: Vec<String>,
    pub priority: Option<f64>,
    pub last_modified: Option<String>,
    /// The content as written: base64, checked to decode.
    pub blob: Option<String>,
    pub icons: Vec<ServeIcon>,
}

/// An icon of a serve entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeIcon {
    pub src: String,
    pub mime_type: Option<String>,
    pub sizes: Vec<String>,
}

/// Per file of the program.
#[derive(Debug)]
pub struct FileInfo {
    pub id: FileId,
    pub path: PathBuf,
    /// The `//!` text.
    pub doc: Option<String>,
    pub is_root: bool,
}

/// The whole checked program.
#[derive(Debug, Default)]
pub struct Hir {
    pub files: Vec<FileInfo>,
    pub root: Option<FileId>,
    /// The folder that holds `prompts/` (or `pipec.toml`).
    pub project_root: PathBuf,
    /// A library file: declarations only, checked without unused warnings.
    pub is_library: bool,
    pub types: Vec<TypeDef>,
    pub servers: Vec<ServerDef>,
    pub models: Vec<ModelDef>,
    pub links: Vec<LinkDef>,
    pub tools: Vec<ToolDef>,
    pub inputs: Vec<InputDef>,
    pub outputs: Vec<OutputDef>,
    pub nodes: Vec<NodeDef>,
    pub serve: Vec<ServeEntryDef>,
    /// The served prompts, as the plan has them, with where each was declared.
    pub serve_prompts: Vec<(pipec_plan::ServePrompt, FileId, Span)>,
    /// How the pipeline is served as a tool (the `tool` entry of its `serve` block).
    pub serve_tool: Option<pipec_plan::ServeTool>,
    /// The file's tests (`test name { ... }`); not part of the plan.
    pub tests: Vec<pipec_plan::testing::TestCase>,
    /// Declarations something refers to.
    pub used: HashSet<DeclRef>,
    /// A topological order of the nodes (empty when there is a cycle).
    pub order: Vec<NodeId>,
}

impl TypeEnv for Hir {
    fn type_name(&self, id: TypeId) -> &str {
        self.types
            .get(id as usize)
            .map_or("{unknown}", |t| t.info.display.as_str())
    }
    fn type_body(&self, id: TypeId) -> &TypeBody {
        static ERROR: TypeBody = TypeBody::Alias(Ty::Error);
        self.types.get(id as usize).map_or(&ERROR, |t| &t.body)
    }
}

impl Hir {
    pub fn node(&self, id: NodeId) -> &NodeDef {
        &self.nodes[id as usize]
    }

    pub fn tool(&self, id: ToolId) -> &ToolDef {
        &self.tools[id as usize]
    }

    pub fn is_root_file(&self, file: FileId) -> bool {
        self.root == Some(file)
    }

    /// Link kinds a node can produce: those its tools list, or its `call`'s tool.
    pub fn produced_links(&self, node: &NodeDef) -> Vec<LinkId> {
        let mut kinds = Vec::new();
        let tools: Vec<ToolId> = match &node.body {
            Body::Call { tool, .. } => vec![*tool],
            Body::Model { tools, .. } if node.kind != NodeKind::Think => tools.clone(),
            _ => Vec::new(),
        };
        for t in tools {
            let tool = self.tool(t);
            if tool.is_reader {
                continue;
            }
            for (k, _) in &tool.links {
                if !kinds.contains(k) {
                    kinds.push(*k);
                }
            }
        }
        kinds
    }

    /// The tools of a node that list a link kind.
    pub fn producing_tools(&self, node: &NodeDef, link: LinkId) -> Vec<ToolId> {
        let tools: Vec<ToolId> = match &node.body {
            Body::Call { tool, .. } => vec![*tool],
            Body::Model { tools, .. } => tools.clone(),
            _ => Vec::new(),
        };
        tools
            .into_iter()
            .filter(|t| {
                let tool = self.tool(*t);
                !tool.is_reader && tool.links.iter().any(|(k, _)| *k == link)
            })
            .collect()
    }
}

/// "the node `x`", "the `think` node `x`": how messages name a node.
pub fn describe_node(kind: NodeKind, name: &str) -> String {
    match kind {
        NodeKind::Node => format!("the node `{name}`"),
        other => format!("the `{}` node `{name}`", other.keyword()),
    }
}
