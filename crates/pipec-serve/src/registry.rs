//! The embeddable resource provider: a program (or `pipec serve`) registers resources
//! and templates, each with an async content handler, and the registry lists them with
//! no I/O, routes a read to the first definition whose URI or template matches (static
//! URIs first, then templates in registration order; a refusal stops the search rather
//! than falling through to a later, more permissive template), answers explicit errors,
//! and passes change notices on to subscribers. It is an [`mcp::server::Provider`], so
//! it is served over stdio or HTTP as it is.
//!
//! [`mcp::server::Provider`]: pipec_mcp::server::Provider

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use pipec_base::uri::normal_form;
use pipec_mcp::server::{
    Abilities, Block, Body, CallContext, CallFailure, ListedResource, ListedTemplate,
    PromptFailure, PromptMessageOut, PromptSpec, Provider, ProviderFuture, ReadContent,
    ReadFailure, ServerIdentity, TaskFailure, TaskView, ToolAnswer, ToolSpec, Updates,
};

/// What a content handler is asked for: the URI as the client wrote it and, for a
/// template, the values of its variables (decoded once).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadRequest {
    pub uri: String,
    pub vars: BTreeMap<String, String>,
}

/// Makes the content of a read.
pub type ReadHandler = Arc<
    dyn Fn(ReadRequest) -> ProviderFuture<'static, Result<Vec<ReadContent>, ReadFailure>>
        + Send
        + Sync,
>;

/// Values for one variable of a template: `(variable, typed so far, other variables)`.
pub type CompleteHandler =
    Arc<dyn Fn(&str, &str, &BTreeMap<String, String>) -> Vec<String> + Send + Sync>;

/// Whether a URI is one a template serves.
#[derive(Clone, Debug, PartialEq)]
pub enum MatchOutcome {
    NoMatch,
    Matched(BTreeMap<String, String>),
    /// It has the template's shape, but a value is refused (say, a `..` segment).
    Refused(String),
}

/// Decides whether a URI matches a template.
pub type Matcher = Arc<dyn Fn(&str) -> MatchOutcome + Send + Sync>;

/// The matcher of a parsed template: its variables decoded once and checked, a refused
/// value an outcome of its own.
pub fn template_matcher(template: Arc<super::matcher::Template>) -> Matcher {
    Arc::new(
        move |uri: &str| match super::matcher::match_uri(&template, uri) {
            Ok(Some(captures)) => MatchOutcome::Matched(captures.pairs().into_iter().collect()),
            Ok(None) => MatchOutcome::NoMatch,
            Err(e) => MatchOutcome::Refused(e.to_string()),
        },
    )
}

/// Runs a tool call, reporting its progress where the client asked to hear it, and
/// asking the client where it can.
pub type ToolHandler = Arc<
    dyn Fn(
            serde_json::Map<String, serde_json::Value>,
            CallContext,
        ) -> ProviderFuture<'static, Result<ToolAnswer, CallFailure>>
        + Send
        + Sync,
>;

/// One message of a prompt before the resources it places are read: its text, or the
/// URI of a resource this registry serves.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptPiece {
    Text(String),
    Resource(String),
}

/// Makes a prompt's messages from its arguments: `(assistant, piece)`, in order.
pub type PromptHandler = Arc<
    dyn Fn(BTreeMap<String, String>) -> Result<Vec<(bool, PromptPiece)>, PromptFailure>
        + Send
        + Sync,
>;

/// At most this many resources are placed in one prompt.
pub const MAX_PROMPT_RESOURCES: usize = 64;

#[derive(Clone)]
struct PromptEntry {
    spec: PromptSpec,
    get: PromptHandler,
    complete: Option<CompleteHandler>,
}

#[derive(Clone)]
struct StaticEntry {
    listed: ListedResource,
    normal: String,
    read: ReadHandler,
}

#[derive(Clone)]
struct TemplateEntry {
    listed: ListedTemplate,
    /// Shown by `resources/templates/list` (a hidden one is read by links it gave out).
    shown: bool,
    matcher: Matcher,
    read: ReadHandler,
    complete: Option<CompleteHandler>,
}

#[derive(Clone)]
struct ToolEntry {
    spec: ToolSpec,
    call: ToolHandler,
}

#[derive(Clone, Default)]
struct Entries {
    resources: Vec<StaticEntry>,
    templates: Vec<TemplateEntry>,
    tools: Vec<ToolEntry>,
    prompts: Vec<PromptEntry>,
}

/// A set of resource, template and tool definitions with their handlers.
pub struct Registry {
    identity: ServerIdentity,
    entries: RwLock<Entries>,
    generation: AtomicU64,
    updates: Updates,
    /// What the state of a call that asks its client is sealed with.
    state_key: Option<Vec<u8>>,
    /// The tasks the tools' calls became, when tools run as tasks.
    tasks: RwLock<Option<Arc<dyn Tasks>>>,
}

/// Where the tasks that tool calls became are kept (the runs of served pipelines).
pub trait Tasks: Send + Sync {
    /// The task `id` as it stands; its questions those a client that `can` is asked.
    fn task<'a>(
        &'a self,
        id: &'a str,
        can: Abilities,
    ) -> ProviderFuture<'a, Result<TaskView, TaskFailure>>;
    /// The client's answers to the task's questions, keyed as asked.
    fn update<'a>(
        &'a self,
        id: &'a str,
        answers: BTreeMap<String, serde_json::Value>,
    ) -> ProviderFuture<'a, Result<(), TaskFailure>>;
    /// Cancels the task; one that ended is left as it is.
    fn cancel<'a>(&'a self, id: &'a str) -> ProviderFuture<'a, Result<(), TaskFailure>>;
}

impl Registry {
    pub fn new(identity: ServerIdentity) -> Registry {
        Registry {
            identity,
            entries: RwLock::new(Entries::default()),
            generation: AtomicU64::new(0),
            updates: Updates::new(),
            state_key: None,
            tasks: RwLock::new(None),
        }
    }

    /// Where the tasks of the tools' calls are kept.
    pub fn set_tasks(&self, tasks: Arc<dyn Tasks>) {
        *self.tasks.write().unwrap_or_else(|p| p.into_inner()) = Some(tasks);
    }

    fn tasks(&self) -> Option<Arc<dyn Tasks>> {
        self.tasks.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The key that seals the state of calls that ask their client in the 2026-07-28
    /// era (at least 32 bytes); without one, such clients are not asked.
    pub fn with_state_key(mut self, key: Vec<u8>) -> Registry {
        self.state_key = Some(key);
        self
    }

    fn change(&self, f: impl FnOnce(&mut Entries)) {
        {
            let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
            f(&mut entries);
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.updates.list_changed();
    }

    fn entries(&self) -> Entries {
        self.entries
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Adds a resource at a fixed URI; a resource already at that URI is replaced.
    pub fn add_resource(&self, listed: ListedResource, read: ReadHandler) {
        let normal = normal_form(&listed.uri);
        self.change(|e| {
            e.resources.retain(|r| r.normal != normal);
            e.resources.push(StaticEntry {
                listed,
                normal,
                read,
            });
        });
    }

    /// Adds a template: `matcher` says which URIs it serves, `read` makes their content.
    pub fn add_template(
        &self,
        listed: ListedTemplate,
        matcher: Matcher,
        read: ReadHandler,
        complete: Option<CompleteHandler>,
    ) {
        self.put_template(listed, matcher, read, complete, true);
    }

    /// Adds a template that is read but never listed (the runs a tool links to).
    pub fn add_hidden_template(&self, listed: ListedTemplate, matcher: Matcher, read: ReadHandler) {
        self.put_template(listed, matcher, read, None, false);
    }

    fn put_template(
        &self,
        listed: ListedTemplate,
        matcher: Matcher,
        read: ReadHandler,
        complete: Option<CompleteHandler>,
        shown: bool,
    ) {
        self.change(|e| {
            e.templates
                .retain(|t| t.listed.uri_template != listed.uri_template);
            e.templates.push(TemplateEntry {
                listed,
                shown,
                matcher,
                read,
                complete,
            });
        });
    }

    /// Adds a tool.
    pub fn add_tool(&self, spec: ToolSpec, call: ToolHandler) {
        self.change(|e| {
            e.tools.retain(|t| t.spec.name != spec.name);
            e.tools.push(ToolEntry { spec, call });
        });
    }

    /// Adds a prompt; `complete` gives values for its arguments.
    pub fn add_prompt(
        &self,
        spec: PromptSpec,
        get: PromptHandler,
        complete: Option<CompleteHandler>,
    ) {
        self.change(|e| {
            e.prompts.retain(|p| p.spec.name != spec.name);
            e.prompts.push(PromptEntry {
                spec,
                get,
                complete,
            });
        });
    }

    /// Removes the resource at `uri` (and tells list listeners); whether there was one.
    pub fn remove_resource(&self, uri: &str) -> bool {
        let normal = normal_form(uri);
        let mut found = false;
        self.change(|e| {
            let before = e.resources.len();
            e.resources.retain(|r| r.normal != normal);
            found = e.resources.len() != before;
        });
        found
    }

    /// Empties the registry.
    pub fn clear(&self) {
        self.change(|e| *e = Entries::default());
    }

    /// Takes the resources, listed templates and prompts of `other` in place of its own, as one
    /// change (one new generation, one list-changed notice). Tools and hidden templates
    /// (a served pipeline's, which no specification declares) and subscriptions stay.
    pub fn replace_with(&self, other: Registry) {
        let entries = other.entries();
        self.change(|e| {
            e.resources = entries.resources;
            e.prompts = entries.prompts;
            e.templates.retain(|t| !t.shown);
            let kept = std::mem::take(&mut e.templates);
            e.templates = entries.templates.into_iter().filter(|t| t.shown).collect();
            e.templates.extend(kept);
        });
    }

    /// Tells the subscribers of `uri` that its content changed.
    pub fn notify_updated(&self, uri: &str) {
        self.updates.resource_updated(uri);
    }
}

impl Provider for Registry {
    fn identity(&self) -> ServerIdentity {
        self.identity.clone()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn resources(&self) -> Vec<ListedResource> {
        self.entries()
            .resources
            .into_iter()
            .map(|r| r.listed)
            .collect()
    }

    fn templates(&self) -> Vec<ListedTemplate> {
        self.entries()
            .templates
            .into_iter()
            .filter(|t| t.shown)
            .map(|t| t.listed)
            .collect()
    }

    fn read<'a>(
        &'a self,
        uri: &'a str,
    ) -> ProviderFuture<'a, Result<Vec<ReadContent>, ReadFailure>> {
        let entries = self.entries();
        let normal = normal_form(uri);
        if let Some(r) = entries.resources.iter().find(|r| r.normal == normal) {
            let read = r.read.clone();
            let request = ReadRequest {
                uri: uri.to_string(),
                vars: BTreeMap::new(),
            };
            return Box::pin(async move { read(request).await });
        }
        for t in &entries.templates {
            match (t.matcher)(uri) {
                MatchOutcome::NoMatch => continue,
                MatchOutcome::Refused(why) => {
                    return Box::pin(async move { Err(ReadFailure::Refused(why)) });
                }
                MatchOutcome::Matched(vars) => {
                    let read = t.read.clone();
                    let request = ReadRequest {
                        uri: uri.to_string(),
                        vars,
                    };
                    return Box::pin(async move { read(request).await });
                }
            }
        }
        let message = format!("no resource has the URI {uri}");
        Box::pin(async move { Err(ReadFailure::NotFound(message)) })
    }

    fn complete<'a>(
        &'a self,
        template: &'a str,
        argument: &'a str,
        value: &'a str,
        context: &'a BTreeMap<String, String>,
    ) -> ProviderFuture<'a, Vec<String>> {
        let entries = self.entries();
        let values = entries
            .templates
            .iter()
            .find(|t| t.listed.uri_template == template)
            .and_then(|t| t.complete.as_ref())
            .map(|c| c(argument, value, context))
            .unwrap_or_default();
        Box::pin(async move { values })
    }

    fn tools(&self) -> Vec<ToolSpec> {
        self.entries().tools.into_iter().map(|t| t.spec).collect()
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: serde_json::Map<String, serde_json::Value>,
        context: CallContext,
    ) -> ProviderFuture<'a, Result<ToolAnswer, CallFailure>> {
        let entries = self.entries();
        match entries.tools.iter().find(|t| t.spec.name == name) {
            Some(t) => {
                let call = t.call.clone();
                Box::pin(async move { call(arguments, context).await })
            }
            None => {
                let name = name.to_string();
                Box::pin(async move { Err(CallFailure::UnknownTool(name)) })
            }
        }
    }

    fn prompts(&self) -> Vec<PromptSpec> {
        self.entries().prompts.into_iter().map(|p| p.spec).collect()
    }

    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: BTreeMap<String, String>,
    ) -> ProviderFuture<'a, Result<Vec<PromptMessageOut>, PromptFailure>> {
        let entries = self.entries();
        let pieces = match entries.prompts.iter().find(|p| p.spec.name == name) {
            Some(p) => (p.get)(arguments),
            None => Err(PromptFailure::UnknownPrompt(name.to_string())),
        };
        Box::pin(async move {
            let pieces = pieces?;
            let placed = pieces
                .iter()
                .filter(|(_, p)| matches!(p, PromptPiece::Resource(_)))
                .count();
            if placed > MAX_PROMPT_RESOURCES {
                return Err(PromptFailure::Failed(format!(
                    "the prompt `{name}` places {placed} resources, more than the {MAX_PROMPT_RESOURCES} one prompt may hold"
                )));
            }
            let mut out = Vec::new();
            for (assistant, piece) in pieces {
                let uri = match piece {
                    PromptPiece::Text(t) => {
                        out.push(PromptMessageOut {
                            assistant,
                            content: Block::Text(t),
                        });
                        continue;
                    }
                    PromptPiece::Resource(uri) => uri,
                };
                let contents = self.read(&uri).await.map_err(|e| match e {
                    ReadFailure::NotFound(m) | ReadFailure::Refused(m) => {
                        PromptFailure::InvalidArguments(format!(
                            "the prompt `{name}` places {uri}, which cannot be read: {m}"
                        ))
                    }
                    ReadFailure::Failed(m) => PromptFailure::Failed(format!(
                        "the prompt `{name}` places {uri}, which cannot be read: {m}"
                    )),
                })?;
                out.extend(contents.into_iter().map(|c| PromptMessageOut {
                    assistant,
                    content: placed_content(c),
                }));
            }
            Ok(out)
        })
    }

    fn complete_prompt<'a>(
        &'a self,
        name: &'a str,
        argument: &'a str,
        value: &'a str,
        context: &'a BTreeMap<String, String>,
    ) -> ProviderFuture<'a, Vec<String>> {
        let values = self
            .entries()
            .prompts
            .iter()
            .find(|p| p.spec.name == name)
            .and_then(|p| p.complete.as_ref())
            .map(|c| c(argument, value, context))
            .unwrap_or_default();
        Box::pin(async move { values })
    }

    fn state_key(&self) -> Option<Vec<u8>> {
        self.state_key.clone()
    }

    fn task<'a>(
        &'a self,
        id: &'a str,
        can: Abilities,
    ) -> ProviderFuture<'a, Result<TaskView, TaskFailure>> {
        Box::pin(async move {
            match self.tasks() {
                Some(tasks) => tasks.task(id, can).await,
                None => Err(TaskFailure::Unknown(id.to_string())),
            }
        })
    }

    fn update_task<'a>(
        &'a self,
        id: &'a str,
        answers: BTreeMap<String, serde_json::Value>,
    ) -> ProviderFuture<'a, Result<(), TaskFailure>> {
        Box::pin(async move {
            match self.tasks() {
                Some(tasks) => tasks.update(id, answers).await,
                None => Err(TaskFailure::Unknown(id.to_string())),
            }
        })
    }

    fn cancel_task<'a>(&'a self, id: &'a str) -> ProviderFuture<'a, Result<(), TaskFailure>> {
        Box::pin(async move {
            match self.tasks() {
                Some(tasks) => tasks.cancel(id).await,
                None => Err(TaskFailure::Unknown(id.to_string())),
            }
        })
    }

    fn updates(&self) -> &Updates {
        &self.updates
    }
}

/// A resource placed in a prompt: an image or audio as itself, anything else embedded.
fn placed_content(c: ReadContent) -> Block {
    let media = c
        .mime_type
        .as_deref()
        .is_some_and(|m| m.starts_with("image/") || m.starts_with("audio/"));
    match (media, c.body) {
        (true, Body::Blob(data)) => Block::Media {
            mime_type: c.mime_type.unwrap_or_default(),
            data,
        },
        (_, body) => Block::Resource(ReadContent {
            uri: c.uri,
            mime_type: c.mime_type,
            body,
        }),
    }
}

/// A handler that always answers `contents`.
pub fn fixed(contents: Vec<ReadContent>) -> ReadHandler {
    Arc::new(move |_request| {
        let contents = contents.clone();
        Box::pin(async move { Ok(contents) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_mcp::server::Body;

    fn registry() -> Registry {
        Registry::new(ServerIdentity {
            name: "t".into(),
            version: "1".into(),
            title: None,
            instructions: None,
        })
    }

    fn text(uri: &str, t: &str) -> Vec<ReadContent> {
        vec![ReadContent {
            uri: uri.into(),
            mime_type: Some("text/plain".into()),
            body: Body::Text(t.into()),
        }]
    }

    fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("a runtime: {e}"))
    }

    #[test]
    fn static_uris_first_then_templates_in_order_and_a_refusal_stops_the_search() {
        let r = registry();
        r.add_resource(
            ListedResource {
                uri: "file:///a/readme".into(),
                name: "readme".into(),
                ..ListedResource::default()
            },
            fixed(text("file:///a/readme", "static")),
        );
        let prefix = |p: &'static str, refuse: bool| -> Matcher {
            Arc::new(move |uri: &str| match uri.strip_prefix(p) {
                Some(rest) if refuse && rest.contains("..") => {
                    MatchOutcome::Refused("dot segments".into())
                }
                Some(rest) => MatchOutcome::Matched(BTreeMap::from([("path".into(), rest.into())])),
                None => MatchOutcome::NoMatch,
            })
        };
        let echo: ReadHandler = Arc::new(|req: ReadRequest| {
            Box::pin(async move {
                Ok(text(
                    &req.uri,
                    req.vars.get("path").map_or("", String::as_str),
                ))
            })
        });
        r.add_template(
            ListedTemplate {
                uri_template: "file:///a/{+path}".into(),
                name: "files".into(),
                ..ListedTemplate::default()
            },
            prefix("file:///a/", true),
            echo.clone(),
            None,
        );
        r.add_template(
            ListedTemplate {
                uri_template: "file:///{+path}".into(),
                name: "everything".into(),
                ..ListedTemplate::default()
            },
            prefix("file:///", false),
            echo,
            None,
        );
        let body = |uri: &str| match block_on(r.read(uri)) {
            Ok(c) => match &c[0].body {
                Body::Text(t) => t.clone(),
                Body::Blob(_) => "blob".into(),
            },
            Err(e) => format!("{e:?}"),
        };
        assert_eq!(body("file:///a/readme"), "static");
        assert_eq!(
            body("FILE:///a/%72eadme"),
            "static",
            "one URI, two spellings"
        );
        assert_eq!(body("file:///a/x/y"), "x/y");
        assert!(
            body("file:///a/../etc").contains("Refused"),
            "no fall-through"
        );
        assert_eq!(body("file:///b"), "b");
        assert!(body("other:x").contains("NotFound"));
        assert_eq!(r.templates().len(), 2);
        let g = r.generation();
        assert!(r.remove_resource("file:///a/readme"));
        assert!(r.generation() > g, "a change makes a new generation");
        assert!(r.resources().is_empty());
    }
}
