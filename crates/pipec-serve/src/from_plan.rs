//! A compiled plan's `serve` entries and prompts as a [`Catalogue`]: the same model reShapr Resources
//! files load into, so `pipec serve` serves both alike. A template's `root` is already
//! relative to the project root in the plan (lowering joined it to its file's folder);
//! here it is made a path beneath the project root the server runs in.

use std::fmt;
use std::path::Path;

use crate::catalogue::{
    Annotations, Catalogue, Content, Icon, ResourceMeta, StaticResource, TemplateDef,
    TemplateSource,
};
use pipec_base::source::normalize_path;
use pipec_diagnostic::{PLAN_INVALID, Rule};
use pipec_plan::{Plan, ServeEntry};

/// A serve entry `pipec compile` would not have written (a plan edited by hand): an
/// unknown kind, or a template without exactly one source. Code R0004, as for every plan
/// that is not one pipec compiled.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeEntryError {
    pub uri: String,
    pub message: String,
}

impl ServeEntryError {
    pub fn rule(&self) -> &'static Rule {
        &PLAN_INVALID
    }
}

impl fmt::Display for ServeEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the serve entry `{}` {}", self.uri, self.message)
    }
}

impl std::error::Error for ServeEntryError {}

/// Every serve entry of the plan, in the order the `serve` block declares them; `root`
/// folders are resolved against `project_root`.
pub fn catalogue_from_plan(plan: &Plan, project_root: &Path) -> Result<Catalogue, ServeEntryError> {
    let mut catalogue = Catalogue {
        prompts: plan.serve_prompts.clone(),
        ..Catalogue::default()
    };
    for entry in &plan.serve {
        match entry.kind.as_str() {
            "resource" => catalogue.resources.push(StaticResource {
                uri: entry.uri.clone(),
                meta: meta(entry),
                content: content(entry)?,
                at: None,
            }),
            "template" => catalogue.templates.push(TemplateDef {
                uri_template: entry.uri.clone(),
                meta: meta(entry),
                source: source(entry, project_root)?,
                at: None,
            }),
            other => {
                return Err(ServeEntryError {
                    uri: entry.uri.clone(),
                    message: format!(
                        "has the kind `{other}`; a serve entry is a `resource` or a `template`"
                    ),
                });
            }
        }
    }
    Ok(catalogue)
}

fn meta(entry: &ServeEntry) -> ResourceMeta {
    let annotations =
        (!entry.audience.is_empty() || entry.priority.is_some() || entry.last_modified.is_some())
            .then(|| Annotations {
                audience: entry.audience.clone(),
                priority: entry.priority,
                last_modified: entry.last_modified.clone(),
            });
    ResourceMeta {
        name: entry.name.clone().unwrap_or_default(),
        title: entry.title.clone(),
        description: entry.description.clone(),
        mime_type: entry.mime_type.clone(),
        icons: entry
            .icons
            .iter()
            .map(|i| Icon {
                src: i.src.clone(),
                mime_type: i.mime_type.clone(),
                sizes: i.sizes.clone(),
            })
            .collect(),
        annotations,
        size: None,
    }
}

/// A fixed resource's content: its text, or its blob decoded (a plan edited by hand may
/// hold one that is not base64: R0004).
fn content(entry: &ServeEntry) -> Result<Option<Content>, ServeEntryError> {
    match (&entry.text, &entry.blob) {
        (Some(t), _) => Ok(Some(Content::Text(t.clone()))),
        (None, Some(b)) => pipec_base::base64::decode(b)
            .map(|bytes| Some(Content::Blob(bytes)))
            .map_err(|why| ServeEntryError {
                uri: entry.uri.clone(),
                message: format!("has a blob that is not base64: {why}"),
            }),
        (None, None) => Ok(None),
    }
}

fn source(entry: &ServeEntry, project_root: &Path) -> Result<TemplateSource, ServeEntryError> {
    match (&entry.root, &entry.backend, &entry.render) {
        (Some(root), None, None) => Ok(TemplateSource::Root(normalize_path(
            &project_root.join(root),
        ))),
        (None, Some(url), None) => Ok(TemplateSource::Backend(Some(url.clone()))),
        (None, None, Some(text)) => Ok(TemplateSource::Render(text.clone())),
        _ => Err(ServeEntryError {
            uri: entry.uri.clone(),
            message: "needs exactly one of `root`, `backend` and `render`".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r##"
serve {
  resource "file:///triage/README.md" {
    name = "README.md"
    title = "How support triage runs"
    description = "the handbook"
    mime_type = "text/markdown"
    text = "# Support triage"
    annotations {
      audience = ["user", "assistant"]
      priority = 0.9
    }
  }
  template "file:///triage/prompts/{+path}" {
    name = "Triage prompt"
    mime_type = "text/plain"
    root = "../prompts/triage"
  }
  template "tracker://tickets/{ticket_id}" {
    name = "Ticket"
    backend = "http://127.0.0.1:8088/api"
  }
  template "triage://categories/{category}" {
    name = "Triage category"
    render = "{{ category }}"
  }
}
"##;

    fn plan() -> Plan {
        // `pipec.toml` marks the project root, one folder above the pipeline's.
        let loader = pipec_base::source::MemoryLoader::new()
            .with("proj/pipec.toml", "")
            .with("proj/pipelines/triage.pipe", SOURCE);
        match pipec_check::compile_with(&loader, Path::new("proj/pipelines/triage.pipe")) {
            Ok(plan) => plan,
            Err(e) => panic!("{}", e.render(Default::default())),
        }
    }

    #[test]
    fn every_entry_and_field_reaches_the_catalogue_in_order() {
        let catalogue =
            catalogue_from_plan(&plan(), Path::new("/srv/project")).expect("a compiled plan");
        assert_eq!(catalogue.service, None);
        assert_eq!(catalogue.resources.len(), 1);
        let readme = &catalogue.resources[0];
        assert_eq!(readme.uri, "file:///triage/README.md");
        assert_eq!(readme.meta.name, "README.md");
        assert_eq!(
            readme.meta.title.as_deref(),
            Some("How support triage runs")
        );
        assert_eq!(readme.meta.description.as_deref(), Some("the handbook"));
        assert_eq!(readme.meta.mime_type.as_deref(), Some("text/markdown"));
        assert_eq!(
            readme.content,
            Some(Content::Text("# Support triage".into()))
        );
        assert_eq!(
            readme.meta.annotations,
            Some(Annotations {
                audience: vec!["user".into(), "assistant".into()],
                priority: Some(0.9),
                last_modified: None,
            })
        );
        let uris: Vec<&str> = catalogue
            .templates
            .iter()
            .map(|t| t.uri_template.as_str())
            .collect();
        assert_eq!(
            uris,
            [
                "file:///triage/prompts/{+path}",
                "tracker://tickets/{ticket_id}",
                "triage://categories/{category}"
            ]
        );
        // `root` is written relative to `pipelines/`, so it names `prompts/triage` of the
        // project.
        assert_eq!(
            catalogue.templates[0].source,
            TemplateSource::Root(Path::new("/srv/project/prompts/triage").to_path_buf())
        );
        assert_eq!(
            catalogue.templates[0].meta.mime_type.as_deref(),
            Some("text/plain")
        );
        assert_eq!(catalogue.templates[0].meta.annotations, None);
        assert_eq!(
            catalogue.templates[1].source,
            TemplateSource::Backend(Some("http://127.0.0.1:8088/api".into()))
        );
        assert_eq!(
            catalogue.templates[2].source,
            TemplateSource::Render("{{ category }}".into())
        );
    }

    #[test]
    fn a_hand_edited_entry_is_refused_with_plan_invalid() {
        let mut edited = plan();
        edited.serve[1].backend = Some("http://x".into());
        let e = catalogue_from_plan(&edited, Path::new("/p")).expect_err("two sources");
        assert_eq!(e.rule().code, "R0004");
        assert_eq!(e.uri, "file:///triage/prompts/{+path}");
        let mut edited = plan();
        edited.serve[0].kind = "prompt".into();
        let e = catalogue_from_plan(&edited, Path::new("/p")).expect_err("unknown kind");
        assert!(e.to_string().contains("kind `prompt`"), "{e}");
    }
}
