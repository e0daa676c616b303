//! A [`Catalogue`] made servable: each static resource and template becomes an entry of a
//! [`Registry`] with the handler its source calls for — the declared text or bytes, files
//! beneath a root, an HTTP backend, or a text rendered from the URI's variables. A
//! declaration without content answers a clear error when read, never an empty success.

use std::collections::BTreeMap;
use std::sync::Arc;

use pipec_mcp::server::{
    Body, Hints, IconInfo, ListedResource, ListedTemplate, ReadContent, ReadFailure, ServerIdentity,
};

use super::backend_fetch::{BackendClient, FetchError, FetchOptions};
use super::catalogue::{Catalogue, Content, ResourceMeta, TemplateSource};
use super::matcher::{Template, match_uri};
use super::registry::{CompleteHandler, ReadHandler, Registry, fixed, template_matcher};
use super::uri_build::{Backend, backend_url};

/// Choices of the command line that shape what is served.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// The backend of templates that name none (reShapr's): `--backend URL`.
    pub backend: Option<String>,
    /// Fetch `remoteContent` URLs (`--allow-remote-content`).
    pub allow_remote_content: bool,
}

/// A template served from files, which a watcher may follow.
#[derive(Clone)]
pub struct FileTemplate {
    pub template: Arc<Template>,
    pub root: std::path::PathBuf,
}

/// What a catalogue became: the registry, and the templates whose content is files.
pub struct Built {
    pub registry: Registry,
    pub file_templates: Vec<FileTemplate>,
}

/// Every entry of `catalogues`, in their order, as one registry; or why one cannot be
/// served (a template that does not parse, a backend URL that is not one).
pub fn registry(
    identity: ServerIdentity,
    catalogues: &[Catalogue],
    options: &BuildOptions,
) -> Result<Built, String> {
    let registry = Registry::new(identity);
    let mut file_templates = Vec::new();
    let client = Arc::new(
        BackendClient::new(FetchOptions::default())
            .map_err(|e| format!("cannot make the HTTP client for backends: {e}"))?,
    );
    for catalogue in catalogues {
        for r in &catalogue.resources {
            let listed = listed_resource(&r.uri, &r.meta);
            let mime = r.meta.mime_type.clone();
            let read = match &r.content {
                Some(Content::Text(t)) => fixed(vec![ReadContent {
                    uri: r.uri.clone(),
                    mime_type: Some(mime.unwrap_or_else(|| "text/plain".into())),
                    body: Body::Text(t.clone()),
                }]),
                Some(Content::Blob(b)) => fixed(vec![ReadContent {
                    uri: r.uri.clone(),
                    mime_type: Some(mime.unwrap_or_else(|| "application/octet-stream".into())),
                    body: Body::Blob(b.clone()),
                }]),
                Some(Content::Remote(url)) if options.allow_remote_content => {
                    remote(url, mime, client.clone())?
                }
                Some(Content::Remote(url)) => failing(format!(
                    "the content of {} is remote ({url}), and remote content is off: start pipec serve with --allow-remote-content to fetch it",
                    r.uri
                )),
                None => failing(format!(
                    "{} declares no content (no `text`, `blob` or `remoteContent`)",
                    r.uri
                )),
            };
            registry.add_resource(listed, read);
        }
        for t in &catalogue.templates {
            let template = Arc::new(Template::parse(&t.uri_template).map_err(|e| {
                format!(
                    "the template {} cannot be served: {}",
                    t.uri_template, e.message
                )
            })?);
            let listed = listed_template(&t.uri_template, &t.meta);
            let matcher = template_matcher(template.clone());
            let (read, complete) = match &t.source {
                TemplateSource::Root(dir) => {
                    file_templates.push(FileTemplate {
                        template: template.clone(),
                        root: dir.clone(),
                    });
                    files(template.clone(), dir, t.meta.mime_type.clone())
                }
                TemplateSource::Backend(url) => {
                    match url.clone().or_else(|| options.backend.clone()) {
                        Some(url) => (
                            backend(
                                template.clone(),
                                &url,
                                t.meta.mime_type.clone(),
                                client.clone(),
                            )?,
                            None,
                        ),
                        None => (
                            failing(format!(
                                "no backend is configured for the template {}: start pipec serve with --backend URL",
                                t.uri_template
                            )),
                            None,
                        ),
                    }
                }
                TemplateSource::Render(text) => {
                    (render(text.clone(), t.meta.mime_type.clone())?, None)
                }
            };
            registry.add_template(listed, matcher, read, complete);
        }
        for p in &catalogue.prompts {
            let (spec, get, complete) = crate::prompts::served(p.clone());
            registry.add_prompt(spec, get, Some(complete));
        }
    }
    Ok(Built {
        registry,
        file_templates,
    })
}

fn hints(meta: &ResourceMeta) -> Option<Hints> {
    meta.annotations.as_ref().map(|a| Hints {
        audience: a.audience.clone(),
        priority: a.priority,
        last_modified: a.last_modified.clone(),
    })
}

fn icons(meta: &ResourceMeta) -> Vec<IconInfo> {
    meta.icons
        .iter()
        .map(|i| IconInfo {
            src: i.src.clone(),
            mime_type: i.mime_type.clone(),
            sizes: i.sizes.clone(),
        })
        .collect()
}

fn listed_resource(uri: &str, meta: &ResourceMeta) -> ListedResource {
    ListedResource {
        uri: uri.to_string(),
        name: meta.name.clone(),
        title: meta.title.clone(),
        description: meta.description.clone(),
        mime_type: meta.mime_type.clone(),
        size: meta.size,
        icons: icons(meta),
        hints: hints(meta),
    }
}

fn listed_template(uri_template: &str, meta: &ResourceMeta) -> ListedTemplate {
    ListedTemplate {
        uri_template: uri_template.to_string(),
        name: meta.name.clone(),
        title: meta.title.clone(),
        description: meta.description.clone(),
        mime_type: meta.mime_type.clone(),
        icons: icons(meta),
        hints: hints(meta),
    }
}

/// A handler that fails every read with `message`.
fn failing(message: String) -> ReadHandler {
    Arc::new(move |_| {
        let message = message.clone();
        Box::pin(async move { Err(ReadFailure::Failed(message)) })
    })
}

/// The captures of a URI a matcher accepted (matched again: the handler gets the URI).
fn captures_of(template: &Template, uri: &str) -> Result<super::matcher::Captures, ReadFailure> {
    match match_uri(template, uri) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(ReadFailure::NotFound(format!(
            "no resource has the URI {uri}"
        ))),
        Err(e) => Err(ReadFailure::Refused(e.to_string())),
    }
}

#[cfg(unix)]
fn files(
    template: Arc<Template>,
    dir: &std::path::Path,
    declared_mime: Option<String>,
) -> (ReadHandler, Option<CompleteHandler>) {
    use super::files::{Body as FileBody, FileError, FileOptions, FileRoot};
    let root = Arc::new(FileRoot::new(dir.to_path_buf(), FileOptions::default()));
    let (t, r) = (template.clone(), root.clone());
    let read: ReadHandler = Arc::new(move |request| {
        let (t, r, declared) = (t.clone(), r.clone(), declared_mime.clone());
        Box::pin(async move {
            let captures = captures_of(&t, &request.uri)?;
            // File reads are short and bounded by the size cap: done on a blocking thread.
            let uri = request.uri.clone();
            let read = tokio::task::spawn_blocking(move || r.read(&t, &captures))
                .await
                .map_err(|e| ReadFailure::Failed(format!("reading {uri} stopped: {e}")))?;
            match read {
                // A declared type wins over the one the extension gives, as it does
                // over a backend's: it is what the listing promised.
                Ok(file) => Ok(vec![match declared {
                    Some(mime) => {
                        let bytes = match file.body {
                            FileBody::Text(t) => t.into_bytes(),
                            FileBody::Blob(b) => b,
                        };
                        typed_content(request.uri, bytes, mime)
                    }
                    None => ReadContent {
                        uri: request.uri,
                        mime_type: Some(file.mime_type),
                        body: match file.body {
                            FileBody::Text(t) => Body::Text(t),
                            FileBody::Blob(b) => Body::Blob(b),
                        },
                    },
                }]),
                Err(e @ FileError::NotFound { .. }) => Err(ReadFailure::NotFound(e.to_string())),
                Err(e @ FileError::Refused { .. }) => Err(ReadFailure::Refused(e.to_string())),
                Err(e) => Err(ReadFailure::Failed(e.to_string())),
            }
        })
    });
    let complete: CompleteHandler = Arc::new(move |argument, typed, _context| {
        root.complete_argument(&template, argument, typed).values
    });
    (read, Some(complete))
}

#[cfg(not(unix))]
fn files(
    _template: Arc<Template>,
    dir: &std::path::Path,
    _declared_mime: Option<String>,
) -> (ReadHandler, Option<CompleteHandler>) {
    (
        failing(format!(
            "serving the files under {} needs a Unix system",
            dir.display()
        )),
        None,
    )
}

fn fetch_failure(uri: &str, e: FetchError) -> ReadFailure {
    match e {
        FetchError::NotFound => ReadFailure::NotFound(format!("the backend has nothing at {uri}")),
        other => ReadFailure::Failed(format!("reading {uri} from the backend failed: {other}")),
    }
}

/// Bytes served under `mime`: text when the type is a text type and the bytes are
/// UTF-8, a blob otherwise (so a client decodes them as the type it is told).
fn typed_body(bytes: Vec<u8>, mime: &str) -> Body {
    let text = super::mime_type::is_text(mime);
    match String::from_utf8(bytes) {
        Ok(t) if text => Body::Text(t),
        Ok(t) => Body::Blob(t.into_bytes()),
        Err(e) => Body::Blob(e.into_bytes()),
    }
}

/// Bytes read from a backend or a file, served as the content of `uri` under `mime`.
fn typed_content(uri: String, bytes: Vec<u8>, mime: String) -> ReadContent {
    ReadContent {
        uri,
        body: typed_body(bytes, &mime),
        mime_type: Some(mime),
    }
}

fn backend(
    template: Arc<Template>,
    url: &str,
    declared_mime: Option<String>,
    client: Arc<BackendClient>,
) -> Result<ReadHandler, String> {
    let backend = Arc::new(
        Backend::parse(url).map_err(|e| format!("the backend {url} cannot be used: {e}"))?,
    );
    Ok(Arc::new(move |request| {
        let (template, backend, client, declared) = (
            template.clone(),
            backend.clone(),
            client.clone(),
            declared_mime.clone(),
        );
        Box::pin(async move {
            let captures = captures_of(&template, &request.uri)?;
            let target = backend_url(&backend, &template, &captures)
                .map_err(|e| ReadFailure::Refused(e.to_string()))?;
            fetch(&client, &target, request.uri, declared).await
        })
    }))
}

/// The content at `target` as the content of `uri`. Its MIME type is the declared one
/// when there is one: that is what the listing promised clients, and what a consuming
/// pipeline decodes by, whatever type the backend labels its answer with. Only an
/// undeclared type is taken from the backend's `Content-Type`.
async fn fetch(
    client: &BackendClient,
    target: &url::Url,
    uri: String,
    declared: Option<String>,
) -> Result<Vec<ReadContent>, ReadFailure> {
    let got = client
        .fetch(target)
        .await
        .map_err(|e| fetch_failure(&uri, e))?;
    let mime = declared
        .or(got.mime_type)
        .unwrap_or_else(|| "application/octet-stream".into());
    Ok(vec![typed_content(uri, got.bytes, mime)])
}

fn remote(
    url: &str,
    declared_mime: Option<String>,
    client: Arc<BackendClient>,
) -> Result<ReadHandler, String> {
    let target = url::Url::parse(url)
        .map_err(|e| format!("the remote content URL {url} is not one: {e}"))?;
    Ok(Arc::new(move |request| {
        let (target, client, declared) = (target.clone(), client.clone(), declared_mime.clone());
        Box::pin(async move { fetch(&client, &target, request.uri, declared).await })
    }))
}

/// A `render` template: its text rendered over the URI's variables; in a JSON MIME type
/// each value is escaped as the inside of a JSON string.
fn render(text: String, mime: Option<String>) -> Result<ReadHandler, String> {
    let json = mime.as_deref().is_some_and(|m| m.contains("json"));
    // minijinja recurses once per level: a text nested past the limit is refused first.
    if let Some(deep) = pipec_base::nesting::template_too_deep(&text) {
        return Err(format!("a render text nests too deep: {}", deep.what));
    }
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_template_owned("render", text)
        .map_err(|e| format!("a render text does not parse: {e}"))?;
    let env = Arc::new(env);
    let mime = mime.unwrap_or_else(|| "text/plain".into());
    Ok(Arc::new(move |request| {
        let (env, mime) = (env.clone(), mime.clone());
        Box::pin(async move {
            let vars: BTreeMap<String, String> = request
                .vars
                .iter()
                .map(|(k, v)| {
                    let v = if json { json_inside(v) } else { v.clone() };
                    (k.clone(), v)
                })
                .collect();
            let text = env
                .get_template("render")
                .and_then(|t| t.render(&vars))
                .map_err(|e| {
                    ReadFailure::Failed(format!("rendering {} failed: {e}", request.uri))
                })?;
            Ok(vec![ReadContent {
                uri: request.uri,
                mime_type: Some(mime),
                body: Body::Text(text),
            }])
        })
    }))
}

/// `value` escaped for the inside of a JSON string (no quotes around it).
fn json_inside(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::{StaticResource, TemplateDef};
    use pipec_mcp::server::Provider;

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("a runtime: {e}"))
    }

    fn identity() -> ServerIdentity {
        ServerIdentity {
            name: "t".into(),
            version: "1".into(),
            title: None,
            instructions: None,
        }
    }

    fn meta(name: &str, mime: Option<&str>) -> ResourceMeta {
        ResourceMeta {
            name: name.into(),
            mime_type: mime.map(str::to_string),
            ..ResourceMeta::default()
        }
    }

    #[test]
    fn each_source_answers_its_content_or_a_clear_error() {
        let catalogue = Catalogue {
            service: None,
            prompts: Vec::new(),
            resources: vec![
                StaticResource {
                    uri: "file:///readme".into(),
                    meta: meta("readme", Some("text/markdown")),
                    content: Some(Content::Text("# hi".into())),
                    at: None,
                },
                StaticResource {
                    uri: "file:///empty".into(),
                    meta: meta("empty", None),
                    content: None,
                    at: None,
                },
                StaticResource {
                    uri: "file:///far".into(),
                    meta: meta("far", None),
                    content: Some(Content::Remote("http://127.0.0.1:9/x".into())),
                    at: None,
                },
            ],
            templates: vec![
                TemplateDef {
                    uri_template: "cat://{name}".into(),
                    meta: meta("cat", Some("application/json")),
                    source: TemplateSource::Render(r#"{"name": "{{ name }}"}"#.into()),
                    at: None,
                },
                TemplateDef {
                    uri_template: "file:///project/src/{path}?mode=raw".into(),
                    meta: meta("src", None),
                    source: TemplateSource::Backend(None),
                    at: None,
                },
            ],
        };
        let r = registry(identity(), &[catalogue], &BuildOptions::default())
            .expect("builds")
            .registry;
        let read = |uri: &str| block_on(r.read(uri));
        match read("file:///readme").as_deref() {
            Ok([c]) => {
                assert_eq!(c.body, Body::Text("# hi".into()));
                assert_eq!(c.mime_type.as_deref(), Some("text/markdown"));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(read("file:///empty"), Err(ReadFailure::Failed(m)) if m.contains("no content"))
        );
        assert!(
            matches!(read("file:///far"), Err(ReadFailure::Failed(m)) if m.contains("--allow-remote-content"))
        );
        match read("cat://a%22b").as_deref() {
            Ok([c]) => {
                let Body::Text(t) = &c.body else {
                    panic!("text")
                };
                let v: serde_json::Value = serde_json::from_str(t).expect("valid JSON");
                assert_eq!(v["name"], "a\"b");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            read("file:///project/src/a.md?mode=raw"),
            Err(ReadFailure::Failed(m)) if m.contains("--backend")
        ));
        assert!(matches!(
            read("nothing://here"),
            Err(ReadFailure::NotFound(_))
        ));
    }
}
