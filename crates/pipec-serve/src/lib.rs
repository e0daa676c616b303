//! `pipec serve`: a project as an MCP server. What it serves is a [`Catalogue`] of static
//! resources, resource templates and prompts (`prompts`), gathered from the `serve` entries of compiled plans
//! (`from_plan`) and from reShapr Resources specifications (`spec`); templates are
//! matched against the URIs clients read (`matcher`), and their content comes from files
//! beneath a root (`files`), an HTTP backend (`uri_build`, `backend_fetch`), or a
//! rendered text. The protocol itself is spoken by `pipec_mcp`; this module uses it, the
//! plan and the public runner and store APIs.
#![warn(unreachable_pub)]

pub mod access;
pub mod backend_fetch;
pub mod build;
mod call_span;
pub mod catalogue;
// Watching folders needs the inotify calls; each block says why it is sound.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod file_events;
#[cfg(unix)]
pub mod files;
pub mod from_plan;
mod gate_forms;
pub mod lookup;
pub mod matcher;
pub mod mime_type;
pub mod pipelines;
pub mod prompts;
pub mod registry;
mod run_tasks;
pub mod spec;
// Opening beneath a folder needs `openat`/`openat2` and reading folders by descriptor;
// each block says why it is sound.
#[cfg(unix)]
#[allow(unsafe_code)]
mod open_beneath;
pub mod template_path;
pub mod uri_build;
pub mod value_check;
#[cfg(unix)]
pub mod watch;

pub use catalogue::{
    Annotations, Catalogue, Content, Icon, ResourceMeta, Service, StaticResource, TemplateDef,
    TemplateSource,
};
pub use from_plan::{ServeEntryError, catalogue_from_plan};
pub use registry::{MatchOutcome, Matcher, ReadHandler, ReadRequest, Registry, fixed};
pub use spec::{SpecLoad, is_spec_path, load_spec_file, load_spec_text};
