//! What a server offers, whatever declared it: static resources with their content and
//! resource templates with where their content comes from, each with the metadata MCP
//! lists (name, title, description, MIME type, icons, annotations, size). The `.pipe`
//! `serve` block and reShapr Resources files both become a [`Catalogue`].

use std::path::PathBuf;

use pipec_base::source::{FileId, Span};

/// The service a reShapr file names (`service.name`, `service.version`); served as the
/// server's name and version when only specifications are served.
#[derive(Clone, Debug, PartialEq)]
pub struct Service {
    pub name: String,
    pub version: String,
}

/// An icon of a resource or template, as MCP lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Icon {
    pub src: String,
    pub mime_type: Option<String>,
    pub sizes: Vec<String>,
}

/// Hints for clients: who the content is for, how much it matters (0 to 1), when it
/// last changed (an ISO 8601 text, kept as written).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    pub audience: Vec<String>,
    pub priority: Option<f64>,
    pub last_modified: Option<String>,
}

/// The metadata a listing shows for a resource or a template.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceMeta {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub icons: Vec<Icon>,
    pub annotations: Option<Annotations>,
    /// The size in bytes the declaration gives (a hint to clients).
    pub size: Option<u64>,
}

/// The content of a static resource.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    /// Bytes (a reShapr `blob`, decoded from its base64 once, at load).
    Blob(Vec<u8>),
    /// A reShapr `remoteContent` URL; fetched only when remote content is allowed.
    Remote(String),
}

/// A resource at a fixed URI.
#[derive(Clone, Debug, PartialEq)]
pub struct StaticResource {
    pub uri: String,
    pub meta: ResourceMeta,
    /// `None`: declared without content; reading it is an error, never an empty success.
    pub content: Option<Content>,
    /// Where it was declared (a `.pipe` or a spec file), for diagnostics.
    pub at: Option<(FileId, Span)>,
}

/// Where a template's content comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum TemplateSource {
    /// Files beneath this folder (already resolved against the declaring file's folder).
    Root(PathBuf),
    /// An HTTP base URL; `None` for a reShapr template, whose backend is given to
    /// `pipec serve --backend` (reading without one is a clear error).
    Backend(Option<String>),
    /// A text rendered from the URI's variables.
    Render(String),
}

/// A resource template: an RFC 6570 URI template and the source of its content.
#[derive(Clone, Debug, PartialEq)]
pub struct TemplateDef {
    pub uri_template: String,
    pub meta: ResourceMeta,
    pub source: TemplateSource,
    pub at: Option<(FileId, Span)>,
}

/// Everything one server offers, in declaration order (listings keep it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalogue {
    pub service: Option<Service>,
    pub resources: Vec<StaticResource>,
    pub templates: Vec<TemplateDef>,
    /// The prompts of the `serve` blocks (specifications declare none).
    pub prompts: Vec<pipec_plan::ServePrompt>,
}
