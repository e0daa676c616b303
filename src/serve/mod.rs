//! `pipec serve`: a project as an MCP server. What it serves is a [`Catalogue`] of static
//! resources and resource templates, gathered from the `serve` entries of compiled plans
//! (`from_plan`) and from reShapr Resources specifications (`spec`); templates are
//! matched against the URIs clients read (`matcher`), and their content comes from files
//! beneath a root (`files`), an HTTP backend, or a rendered text. The protocol itself is
//! spoken by `crate::mcp`; this module uses it, the plan and the public runner and store
//! APIs.

pub mod catalogue;
pub mod from_plan;
pub mod spec;

pub use catalogue::{
    Annotations, Catalogue, Content, Icon, ResourceMeta, Service, StaticResource, TemplateDef,
    TemplateSource,
};
pub use from_plan::{ServeEntryError, catalogue_from_plan};
pub use spec::{SpecLoad, is_spec_path, load_spec_file, load_spec_text};
