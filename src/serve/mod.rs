//! `pipec serve`: a project as an MCP server. What it serves is a [`Catalogue`] of static
//! resources and resource templates, gathered from `.pipe` `serve` blocks and from
//! reShapr Resources specifications (`spec`); templates are matched against the URIs
//! clients read (`matcher`), and their content comes from files beneath a root
//! (`files`), an HTTP backend (`uri_build`, `backend_fetch`), or a rendered text. The
//! protocol itself is spoken by `crate::mcp`; this module uses it, the plan and the
//! public runner and store APIs.

pub mod access;
pub mod backend_fetch;
pub mod catalogue;
#[cfg(unix)]
pub mod files;
pub mod lookup;
pub mod matcher;
pub mod mime_type;
pub mod registry;
// Opening beneath a folder needs `openat`/`openat2` and reading folders by descriptor;
// each block says why it is sound.
#[cfg(unix)]
#[allow(unsafe_code)]
mod open_beneath;
pub mod template_path;
pub mod uri_build;
pub mod value_check;

pub use catalogue::{
    Annotations, Catalogue, Content, Icon, ResourceMeta, Service, StaticResource, TemplateDef,
    TemplateSource,
};
pub use registry::{MatchOutcome, Matcher, ReadHandler, ReadRequest, Registry, fixed};
