//! The syntax tree of one `.pipe` file: what the parser builds and `fmt` prints.
//!
//! Every node carries a [`Span`] of byte offsets into its file. The tree is plain data:
//! no names are resolved here.

use pipec_base::source::Span;

/// A name as written, with where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A run of `///` lines, joined with newlines (one leading space of each line dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    pub text: String,
    pub span: Span,
}

/// A string literal: its decoded value and a map from value offsets back to the source,
/// so that a diagnostic about a template variable can point at the variable itself.
#[derive(Clone, Debug, PartialEq)]
pub struct StrLit {
    pub value: String,
    pub span: Span,
    /// `Some(n)` for a raw string with `n` hashes.
    pub raw_hashes: Option<usize>,
    /// Pairs (offset in `value`, offset in the file), sorted; each starts a run of
    /// characters copied verbatim.
    pub map: Vec<(u32, u32)>,
}

impl StrLit {
    /// The file offset of byte `offset` of the decoded value.
    pub fn source_offset(&self, offset: usize) -> u32 {
        let offset = offset as u32;
        let idx = self.map.partition_point(|(v, _)| *v <= offset);
        match idx.checked_sub(1).and_then(|i| self.map.get(i)) {
            Some((v, s)) => s + (offset - v),
            None => self.span.start,
        }
    }

    /// The file span of a byte range of the decoded value, clamped to the literal.
    pub fn source_span(&self, start: usize, end: usize) -> Span {
        let s = self
            .source_offset(start)
            .clamp(self.span.start, self.span.end);
        let e = self
            .source_offset(end.max(start))
            .clamp(s, self.span.end.max(s));
        Span::new(s, e)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub items: Vec<Item>,
    /// `///` runs that document nothing (reported as dangling).
    pub stray_docs: Vec<Doc>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub doc: Option<Doc>,
    pub kind: ItemKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    Import(Import),
    Type(TypeDecl),
    Enum(EnumDecl),
    Input(InputDecl),
    Output(OutputDecl),
    Server(BlockDecl),
    Model(BlockDecl),
    Link(LinkDecl),
    Tool(ToolDecl),
    Reader(ToolDecl),
    Node(NodeDecl),
    Serve(ServeDecl),
    /// `test name { settings }`: a test of the file's pipeline.
    Test(BlockDecl),
}

impl ItemKind {
    /// The word that introduces the declaration, for messages.
    pub fn keyword(&self) -> &'static str {
        match self {
            ItemKind::Import(_) => "import",
            ItemKind::Type(_) => "type",
            ItemKind::Enum(_) => "enum",
            ItemKind::Input(_) => "input",
            ItemKind::Output(_) => "output",
            ItemKind::Server(_) => "server",
            ItemKind::Model(_) => "model",
            ItemKind::Link(_) => "link",
            ItemKind::Tool(_) => "tool",
            ItemKind::Reader(_) => "reader",
            ItemKind::Node(n) => n.kind.keyword(),
            ItemKind::Serve(_) => "serve",
            ItemKind::Test(_) => "test",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    pub path: StrLit,
    pub alias: Option<Ident>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TypeDecl {
    pub name: Ident,
    pub body: TypeDeclBody,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeDeclBody {
    Record(RecordType),
    Alias(TypeExpr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct EnumDecl {
    pub name: Ident,
    pub variants: Vec<Variant>,
    pub stray_docs: Vec<Doc>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub doc: Option<Doc>,
    pub name: String,
    /// Whether it was written as a string (`"needs-changes"`).
    pub quoted: bool,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct InputDecl {
    pub name: Ident,
    pub ty: TypeExpr,
    pub default: Option<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OutputDecl {
    pub name: Ident,
    pub ty: Option<TypeExpr>,
    pub value: Expr,
}

/// `server name { ... }` and `model name { ... }`.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockDecl {
    pub name: Ident,
    pub body: Block,
}

#[derive(Clone, Debug, PartialEq)]
pub struct LinkDecl {
    pub kind: StrLit,
    pub ty: TypeExpr,
    pub template: StrLit,
}

/// `tool` and `reader` declarations share a shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDecl {
    pub name: Ident,
    pub params: Params,
    pub returns: Option<TypeExpr>,
    pub server: Ident,
    pub body: Option<Block>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    Node,
    Think,
    Agent,
    Act,
    Gate,
}

impl NodeKind {
    pub fn keyword(self) -> &'static str {
        match self {
            NodeKind::Node => "node",
            NodeKind::Think => "think",
            NodeKind::Agent => "agent",
            NodeKind::Act => "act",
            NodeKind::Gate => "gate",
        }
    }

    pub fn from_keyword(word: &str) -> Option<NodeKind> {
        Some(match word {
            "node" => NodeKind::Node,
            "think" => NodeKind::Think,
            "agent" => NodeKind::Agent,
            "act" => NodeKind::Act,
            "gate" => NodeKind::Gate,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeDecl {
    pub kind: NodeKind,
    pub kind_span: Span,
    pub name: Ident,
    pub params: Params,
    pub returns: Option<TypeExpr>,
    pub body: Block,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub params: Vec<Param>,
    pub stray_docs: Vec<Doc>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub doc: Option<Doc>,
    pub name: Ident,
    pub ty: TypeExpr,
    /// `as "wireName"` on tool parameters.
    pub wire_name: Option<StrLit>,
    /// The source of a node parameter, or the default of a tool parameter.
    pub value: Option<Expr>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub settings: Vec<Setting>,
    pub stray_docs: Vec<Doc>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    pub doc: Option<Doc>,
    pub name: Ident,
    pub value: SettingValue,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SettingValue {
    Expr(Expr),
    Block(Block),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServeDecl {
    pub entries: Vec<ServeEntry>,
    pub prompts: Vec<ServePrompt>,
    /// `tool { settings }`: how the file's pipeline is served as a tool (one a file).
    pub tools: Vec<ServeTool>,
    pub stray_docs: Vec<Doc>,
}

/// `tool { settings }` in a `serve` block: how the file's pipeline is served as an MCP
/// tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeTool {
    pub doc: Option<Doc>,
    /// The keyword `tool`.
    pub keyword: Span,
    pub body: Block,
    pub span: Span,
}

/// `prompt name(params) { settings }` in a `serve` block: a prompt served over MCP.
#[derive(Clone, Debug, PartialEq)]
pub struct ServePrompt {
    pub doc: Option<Doc>,
    pub name: Ident,
    pub params: Params,
    pub body: Block,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServeEntryKind {
    Resource,
    Template,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServeEntry {
    pub doc: Option<Doc>,
    pub kind: ServeEntryKind,
    pub uri: StrLit,
    pub body: Block,
    pub span: Span,
}

// ---------------------------------------------------------------- types

#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub kind: TypeExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TypeExprKind {
    /// `string`, `Deal`, `tracker.Ticket`.
    Name(Vec<Ident>),
    /// `ref<T>`, `map<T>` (and unknown generics, reported by the checker).
    Generic(Ident, Box<TypeExpr>),
    Record(RecordType),
    /// A string literal type, member of a union.
    Literal(StrLit),
    List(Box<TypeExpr>),
    Optional(Box<TypeExpr>),
    Union(Vec<TypeExpr>),
    /// `( T )`, kept so that `fmt` prints what was written.
    Paren(Box<TypeExpr>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordType {
    pub fields: Vec<Field>,
    pub stray_docs: Vec<Doc>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub doc: Option<Doc>,
    pub name: Ident,
    pub ty: TypeExpr,
    pub span: Span,
}

// ---------------------------------------------------------------- expressions

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Str(StrLit),
    Int(i64),
    Float(f64),
    /// A size in bytes (`200kb`), an int; the text is kept for `fmt`.
    Size(u64, String),
    /// A duration in milliseconds (`30s`); the text is kept for `fmt`.
    Duration(u64, String),
    Bool(bool),
    Null,
    Name(Ident),
    Field(Box<Expr>, Ident),
    /// `list[*].field`
    Splat(Box<Expr>, Ident),
    Call(Box<Expr>, Vec<Arg>),
    Record(Vec<RecordEntry>),
    List(Vec<Expr>),
    Not(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Paren(Box<Expr>),
    /// What the parser put where it could not read a value (already reported).
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Coalesce,
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Coalesce => "??",
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordEntry {
    pub key: Ident,
    /// Whether the key was written as a string (`"x-y": 1`).
    pub quoted: bool,
    pub value: Expr,
    pub span: Span,
}

impl Expr {
    /// `a.b.c` as a list of names, if the expression is exactly such a path.
    pub fn as_path(&self) -> Option<Vec<&Ident>> {
        match &self.kind {
            ExprKind::Name(id) => Some(vec![id]),
            ExprKind::Field(base, field) => {
                let mut path = base.as_path()?;
                path.push(field);
                Some(path)
            }
            _ => None,
        }
    }
}
