//! How the runtime reaches MCP servers: one trait, [`Servers`] (servers by name: call a
//! tool, read a URI, list tools), so tests and embedding programs can supply their own,
//! and its default, [`McpServers`]: one session per declared server per attempt, started
//! on first use and shared by every node, closed when the attempt ends.
//!
//! An embedder may also replace single operations of a server ([`Fetcher`] for reads,
//! [`Replayer`] for the replays that heal dead links) while everything else goes to the
//! server itself.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Mutex;

use super::sampling::ModelSampler;
use crate::RuntimeError;
use crate::config;
use crate::credentials;
use crate::llm::Model;
use crate::secrets::Scrubber;
use pipec_mcp::{
    Body, Called, Elicitation, McpError, RequestOptions, ResourceContent, Resumption, ServerConfig,
    Session, TaskRef, ToolInfo, ToolResult, TransportConfig,
};
use pipec_plan::{ConfigValue, Plan, Server, ServerValue};

/// A boxed future of a server operation.
pub type ServerFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, McpError>> + Send + 'a>>;

/// MCP servers by the names a plan gives them.
pub trait Servers: Send + Sync {
    /// Calls a tool by the server's name for it; `meta` goes in the request's `_meta`.
    fn call_tool<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult>;

    /// Calls a tool carrying what an earlier call the server asked during needs to go
    /// on ([`Resumption`]); the server's questions for a person end it with
    /// [`Called::Asked`]. By default a plain [`Servers::call_tool`]: servers that never
    /// ask need nothing else.
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        let _ = resumption;
        Box::pin(async move {
            self.call_tool(server, tool, arguments, meta, options)
                .await
                .map(Called::Result)
        })
    }

    /// Polls a task a call became ([`Called::Task`]) until it ends. By default an error:
    /// servers that never answer with tasks need nothing else.
    fn await_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        let _ = (options, resumption);
        Box::pin(async move {
            Err(McpError::Protocol {
                server: server.to_string(),
                message: format!(
                    "the call became the task {}, which these servers cannot poll",
                    task.id
                ),
            })
        })
    }

    /// Asks the server to cancel a task a call became; what it answers does not matter.
    /// By default nothing: servers that never answer with tasks need nothing else.
    fn cancel_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        let _ = (server, task);
        Box::pin(async {})
    }

    /// Reads a resource.
    fn read<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>>;

    /// The tools a server offers (checked against the declarations when a run starts).
    fn list_tools<'a>(&'a self, server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>>;

    /// Ends every session (the attempt is over).
    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }
}

/// An embedder's reader for one server: `uri → (bytes, MIME type)`.
pub type Fetcher = Arc<
    dyn Fn(
            String,
        )
            -> Pin<Box<dyn Future<Output = Result<(Vec<u8>, Option<String>), String>> + Send>>
        + Send
        + Sync,
>;

/// An embedder's replayer for one server: `(tool, arguments) → the raw MCP tool result`
/// (a `CallToolResult` as JSON), used to re-derive a dead link.
pub type Replayer = Arc<
    dyn Fn(String, Value) -> Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>
        + Send
        + Sync,
>;

/// The default start-up and request timeouts, and the largest message accepted.
pub(crate) const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The servers of a plan reached over MCP, one session each for an attempt.
pub(crate) struct McpServers {
    configs: HashMap<String, ServerConfig>,
    sessions: HashMap<String, Mutex<Option<Arc<Session>>>>,
}

impl McpServers {
    /// The servers of `plan`, with their `env` and headers filled from the attempt's
    /// configuration and secrets.
    pub(crate) fn new(
        plan: &Plan,
        project_root: &Path,
        config: &BTreeMap<String, String>,
        secrets: &BTreeMap<String, String>,
        scrubber: &Scrubber,
        models: &HashMap<String, Arc<dyn Model>>,
    ) -> McpServers {
        let mut configs = HashMap::new();
        for s in &plan.servers {
            let mut server = server_config(s, project_root, config, secrets, scrubber);
            // The model its declaration names answers its sampling requests.
            server.sampler = s.sampling.as_ref().and_then(|name| {
                let model = models.get(name)?.clone();
                let decl = plan.models.iter().find(|m| &m.name == name);
                Some(Arc::new(ModelSampler {
                    server: s.name.clone(),
                    model,
                    temperature: decl.and_then(|m| m.temperature),
                    max_tokens: decl.and_then(|m| m.max_tokens),
                    turns: Default::default(),
                }) as Arc<dyn pipec_mcp::Sampler>)
            });
            configs.insert(s.name.clone(), server);
        }
        let sessions = configs
            .keys()
            .map(|k| (k.clone(), Mutex::new(None)))
            .collect();
        McpServers { configs, sessions }
    }

    /// The server's session, started if it has none (one start at a time per server).
    async fn session(&self, server: &str) -> Result<Arc<Session>, McpError> {
        let (Some(config), Some(slot)) = (self.configs.get(server), self.sessions.get(server))
        else {
            return Err(McpError::Start {
                server: server.to_string(),
                message: "the plan declares no such server".into(),
                stderr: String::new(),
                url: None,
                help: None,
            });
        };
        let mut slot = slot.lock().await;
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let session = Arc::new(Session::connect(config.clone()).await?);
        *slot = Some(session.clone());
        Ok(session)
    }

    /// After a failure that leaves the session unusable (the server went away, wrote
    /// garbage), the next request starts a new one.
    async fn forget_if_dead(&self, server: &str, error: &McpError) {
        let dead = matches!(
            error,
            McpError::Closed { .. } | McpError::Garbage { .. } | McpError::Protocol { .. }
        );
        if !dead {
            return;
        }
        if let Some(slot) = self.sessions.get(server)
            && let Some(old) = slot.lock().await.take()
        {
            old.close().await;
        }
    }

    /// What a session gave, once a dead session is forgotten (the next use starts
    /// another).
    async fn kept<T>(&self, server: &str, result: Result<T, McpError>) -> Result<T, McpError> {
        if let Err(e) = &result {
            self.forget_if_dead(server, e).await;
        }
        result
    }
}

impl Servers for McpServers {
    fn call_tool<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult> {
        Box::pin(async move {
            let session = self.session(server).await?;
            self.kept(
                server,
                session.call_tool(tool, arguments, meta, options).await,
            )
            .await
        })
    }

    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        Box::pin(async move {
            let session = self.session(server).await?;
            self.kept(
                server,
                session
                    .call(tool, arguments, meta, options, resumption)
                    .await,
            )
            .await
        })
    }

    fn await_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        Box::pin(async move {
            let session = self.session(server).await?;
            self.kept(server, session.await_task(task, options, resumption).await)
                .await
        })
    }

    fn read<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>> {
        Box::pin(async move {
            let session = self.session(server).await?;
            self.kept(server, session.read_resource(uri, options).await)
                .await
        })
    }

    fn list_tools<'a>(&'a self, server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>> {
        Box::pin(async move {
            let session = self.session(server).await?;
            self.kept(server, session.list_tools().await).await
        })
    }

    fn cancel_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if let Ok(session) = self.session(server).await {
                session.cancel_task(task).await;
            }
        })
    }

    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            for slot in self.sessions.values() {
                if let Some(s) = slot.lock().await.take() {
                    s.close().await;
                }
            }
        })
    }
}

/// A server's connection settings with its `env()` values and secrets read through
/// `environment` alone, as a run would read them when it starts (`pipec check
/// --online`, `pipec tools pull`): every variable that is missing, and has no default,
/// is in the error (`R0002`), with an `env()` url that is not an http(s) URL (`R0109`),
/// and then nothing is started.
pub fn server_config_from_environment(
    s: &Server,
    project_root: &Path,
    environment: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, RuntimeError> {
    let mut needs = config::Needs::default();
    needs.server(s);
    let values = config::read(&needs, &BTreeMap::new(), environment)?;
    let mut scrubber = Scrubber::default();
    for (k, v) in &values.secrets {
        scrubber.add(k, v);
    }
    Ok(server_config(
        s,
        project_root,
        &values.config,
        &values.secrets,
        &scrubber,
    ))
}

/// A server's connection settings for this attempt.
fn server_config(
    s: &Server,
    project_root: &Path,
    config: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, String>,
    scrubber: &Scrubber,
) -> ServerConfig {
    let value = |v: &ConfigValue| -> String {
        match v {
            ConfigValue::Literal { value } => value.clone(),
            ConfigValue::Env { var, default } => config
                .get(var)
                .cloned()
                .or_else(|| default.clone())
                .unwrap_or_default(),
            ConfigValue::Secret { var } => secrets.get(var).cloned().unwrap_or_default(),
        }
    };
    let text = |v: &ServerValue| -> String {
        match v {
            ServerValue::Literal(s) => s.clone(),
            ServerValue::Config(c) => value(c),
        }
    };
    let base = project_root.join(&s.base_dir);
    let transport = match (&s.url, &s.command) {
        (Some(url), _) => TransportConfig::Http {
            url: text(url),
            headers: s
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), value(v)))
                .collect(),
        },
        (None, command) => {
            let command = command.as_ref().map(text).unwrap_or_default();
            let program = pipec_process::find_program(&command, &base)
                .unwrap_or_else(|| PathBuf::from(&command));
            let cwd = match &s.cwd {
                Some(c) => base.join(c),
                None => base.clone(),
            };
            TransportConfig::Stdio {
                program,
                args: s.args.iter().map(text).collect(),
                cwd,
                env: s.env.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
            }
        }
    };
    let scrubber = scrubber.clone();
    ServerConfig {
        name: s.name.clone(),
        transport,
        startup_timeout: s
            .startup_timeout_ms
            .map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_millis),
        request_timeout: s
            .timeout_ms
            .map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_millis),
        max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        redact: Arc::new(scrubber),
        elicitation: match &s.elicitation {
            pipec_plan::Elicitation::Decline => Elicitation::Decline,
            pipec_plan::Elicitation::Ask => Elicitation::Ask,
            pipec_plan::Elicitation::Defaults => Elicitation::Defaults,
            pipec_plan::Elicitation::Answer(fields) => {
                Elicitation::Answer(fields.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            }
        },
        sampler: None,
        authorization: credentials::authorization(
            s,
            &transport_url(&s.url, &text),
            &value,
            credentials::store,
        ),
    }
}

fn transport_url(url: &Option<ServerValue>, text: &dyn Fn(&ServerValue) -> String) -> String {
    url.as_ref().map(text).unwrap_or_default()
}

/// Servers with some of their operations replaced by the embedder's functions.
pub(crate) struct WithOverrides {
    pub inner: Arc<dyn Servers>,
    pub fetchers: HashMap<String, Fetcher>,
    pub replayers: HashMap<String, Replayer>,
}

impl WithOverrides {
    /// A heal's replay: the embedder's replayer when it gave one for the server.
    pub(crate) async fn replay(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<ToolResult, McpError> {
        match self.replayers.get(server) {
            Some(f) => {
                let raw = f(tool.to_string(), Value::Object(arguments))
                    .await
                    .map_err(|message| McpError::Protocol {
                        server: server.to_string(),
                        message: format!("the replayer failed: {message}"),
                    })?;
                ToolResult::from_json(&raw).map_err(|message| McpError::Protocol {
                    server: server.to_string(),
                    message: format!("the replayer's result is not a tool result: {message}"),
                })
            }
            None => {
                self.inner
                    .call_tool(server, tool, arguments, meta, options)
                    .await
            }
        }
    }
}

impl Servers for WithOverrides {
    fn call_tool<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> ServerFuture<'a, ToolResult> {
        self.inner.call_tool(server, tool, arguments, meta, options)
    }

    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        self.inner
            .call(server, tool, arguments, meta, options, resumption)
    }

    fn await_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
        options: RequestOptions,
        resumption: &'a Resumption,
    ) -> ServerFuture<'a, Called> {
        self.inner.await_task(server, task, options, resumption)
    }

    fn cancel_task<'a>(
        &'a self,
        server: &'a str,
        task: &'a TaskRef,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        self.inner.cancel_task(server, task)
    }

    fn read<'a>(
        &'a self,
        server: &'a str,
        uri: &'a str,
        options: RequestOptions,
    ) -> ServerFuture<'a, Vec<ResourceContent>> {
        match self.fetchers.get(server) {
            Some(f) => {
                let f = f.clone();
                Box::pin(async move {
                    let (bytes, mime) =
                        f(uri.to_string())
                            .await
                            .map_err(|message| McpError::Server {
                                server: server.to_string(),
                                code: 0,
                                message,
                                data: None,
                            })?;
                    if let Some(limit) = options.limit
                        && bytes.len() > limit
                    {
                        return Err(McpError::TooLarge {
                            server: server.to_string(),
                            limit,
                            size: Some(bytes.len() as u64),
                        });
                    }
                    let body = match String::from_utf8(bytes) {
                        Ok(text) => Body::Text(text),
                        Err(e) => Body::Blob(e.into_bytes()),
                    };
                    Ok(vec![ResourceContent {
                        uri: uri.to_string(),
                        mime,
                        body,
                    }])
                })
            }
            None => self.inner.read(server, uri, options),
        }
    }

    fn list_tools<'a>(&'a self, server: &'a str) -> ServerFuture<'a, Vec<ToolInfo>> {
        self.inner.list_tools(server)
    }

    fn close(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.inner.close()
    }
}
