//! `pipec serve`: a project as an MCP server. What it serves is a [`Catalogue`] of static
//! resources and resource templates, gathered from `.pipe` `serve` blocks and from
//! reShapr Resources specifications (`spec`); templates are matched against the URIs
//! clients read (`matcher`), and their content comes from files beneath a root
//! (`files`), an HTTP backend, or a rendered text. The protocol itself is spoken by
//! `crate::mcp`; this module uses it, the plan and the public runner and store APIs.

pub mod catalogue;
pub mod spec;

pub use catalogue::{
    Annotations, Catalogue, Content, Icon, ResourceMeta, Service, StaticResource, TemplateDef,
    TemplateSource,
};
