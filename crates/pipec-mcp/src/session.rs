//! A session with one server: started (a process over stdio, or streamable HTTP), the
//! protocol negotiated, then shared by every task of an attempt for listing, calling and
//! reading, each request under its timeout and size limit, until it is closed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, CustomRequest, GetExtensions, GetPromptRequest, GetPromptRequestParams,
    InputRequiredResult, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
    ListToolsRequest, PaginatedRequestParams, ProtocolVersion, ReadResourceRequest,
    ReadResourceRequestParams, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{
    ClientCacheConfig, ClientInitializeError, ClientLifecycleMode, ClientServiceExt,
    PeerRequestOptions, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{Peer, RoleClient, ServiceError};
use serde_json::{Map, Value};

use super::asks::{Asked, Asks, Called, Elicitation, InFlight, Resumption, Round};
use super::auth::{self, Authorizer};
use super::convert::{self, Unusable};
use super::discover_probe::DiscoverProbe;
use super::failure::{self, Context};
use super::garbage::GarbageLines;
use super::request_slot::{Found, RequestSlot, SlotMarker};
use super::stderr::StderrTail;
use super::stdio::{self, Launch, ServerProcess};
use super::tasks;
use super::{
    McpError, Offers, PromptInfo, ResourceContent, ResourceInfo, ServerConfig, TemplateInfo,
    ToolInfo, ToolResult, TransportConfig, http,
};

/// Per-request settings; `None` takes the server's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestOptions {
    /// How long the request may take (else the server's `request_timeout`).
    pub timeout: Option<Duration>,
    /// The largest answer accepted, in bytes of the message as sent. A larger one is read
    /// past, never held whole in memory, and the request fails with
    /// [`McpError::TooLarge`]. The server's `max_message_bytes` still bounds it.
    pub limit: Option<usize>,
    /// A tool call: ask a 2025-11-25 server to run it as a task (as it does anyway for a
    /// tool it runs only as one).
    pub task: bool,
}

/// How long a stdio server is given to exit once its stdin is closed, before its group
/// is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long rmcp is given to wind the connection down (an HTTP session's DELETE).
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long a failure waits for a dying server's last words on stderr.
const LAST_WORDS: Duration = Duration::from_millis(300);
/// Listings stop after this many pages: a server that repeats itself must not loop.
const MAX_PAGES: usize = 1000;
/// A tool call stops after this many `input_required` rounds.
const MAX_INPUT_ROUNDS: usize = 8;

/// Empties the session's call in flight when dropped.
struct ClearInFlight<'a>(&'a std::sync::Mutex<Option<InFlight>>);

impl Drop for ClearInFlight<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The names of the tools a listing says run only as tasks.
fn task_tools(tools: &[ToolInfo]) -> HashSet<String> {
    tools
        .iter()
        .filter(|t| t.task_support == super::TaskSupport::Required)
        .map(|t| t.name.clone())
        .collect()
}

/// A connection to one server, shared by every node of an attempt: `Send + Sync`, and
/// every method takes `&self`, so it can sit behind an `Arc` and be used by many tasks
/// at once.
pub struct Session {
    config: ServerConfig,
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Asks>>>,
    process: Option<ServerProcess>,
    stderr: Arc<StderrTail>,
    garbage: Arc<GarbageLines>,
    largest_read_buffer: Arc<AtomicUsize>,
    protocol_version: String,
    offers: Offers,
    pub(super) asks: Asks,
    /// Taken by a call that may be asked on a 2025-11-25 session ([`Session::call`]).
    asking: tokio::sync::Mutex<()>,
    /// The tools the server runs only as tasks (2025-11-25), as it last listed them.
    task_tools: std::sync::Mutex<HashSet<String>>,
    /// Over HTTP with OAuth: what authorizes again when the server refuses.
    authorizer: Option<Authorizer>,
    closed: AtomicBool,
}

/// The versions `server/discover` proposes.
fn discover_versions() -> Vec<ProtocolVersion> {
    vec![ProtocolVersion::V_2026_07_28]
}

/// `server/discover` with 2026-07-28 first, else the `initialize` handshake of
/// 2025-11-25 (never the default version there, which has no handshake).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: discover_versions(),
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    }
}

type Handshake = Result<RunningService<RoleClient, Asks>, ClientInitializeError>;

impl Session {
    /// Starts or reaches the server and negotiates the protocol, all within the server's
    /// `startup_timeout`: `server/discover` (2026-07-28) first, then the `initialize`
    /// handshake (2025-11-25) when the server answers the probe with an error, or with
    /// anything but a discover result that offers 2026-07-28 (`discover_probe.rs`). A server
    /// that does not answer the probe at all is tried with `initialize` after rmcp's fixed
    /// 10 s, so such a server needs a startup timeout above that. Over HTTP with an
    /// authorization, reading the stored tokens (and the authorization server's metadata
    /// for refreshing them) comes before, and authorizing between handshakes, each under
    /// its own limits: a person may take minutes to approve.
    pub async fn connect(config: ServerConfig) -> Result<Session, McpError> {
        let garbage = Arc::new(GarbageLines::default());
        let largest_read_buffer = Arc::new(AtomicUsize::new(0));
        let asks = Asks::new(config.elicitation.clone(), config.sampler.clone());
        let mut authorizing = None;
        let (handshake, process, stderr, refusal) = match &config.transport {
            TransportConfig::Stdio {
                program,
                args,
                cwd,
                env,
            } => {
                let launch = Launch {
                    server: &config.name,
                    program,
                    args,
                    cwd,
                    env,
                    max_message_bytes: config.max_message_bytes,
                };
                let started = stdio::start(&launch, garbage.clone(), largest_read_buffer.clone())?;
                let transport = DiscoverProbe::new(started.transport, discover_versions());
                let handshake = Self::handshake(
                    &config,
                    &garbage,
                    asks.clone().serve_with_lifecycle(transport, lifecycle()),
                )
                .await;
                (handshake, Some(started.process), started.stderr, None)
            }
            TransportConfig::Http { url, headers } => {
                let http = http::transport(&config.name, url, headers, config.max_message_bytes)?;
                let refusal = http.client.refusal();
                let handshake = match &config.authorization {
                    None => {
                        let transport = DiscoverProbe::new(http.transport(), discover_versions());
                        Self::handshake(
                            &config,
                            &garbage,
                            asks.clone().serve_with_lifecycle(transport, lifecycle()),
                        )
                        .await
                    }
                    Some(authorization) => {
                        let (authorizer, client) = Authorizer::start(
                            &config.name,
                            url,
                            authorization.clone(),
                            config.redact.clone(),
                            http.client.clone(),
                        )
                        .await?;
                        // A handshake the server refuses for want of a token (or of a
                        // scope) is tried again once pipec has authorized.
                        let handshake = loop {
                            let generation = authorizer.generation();
                            let transport = DiscoverProbe::new(
                                StreamableHttpClientTransport::with_client(
                                    client.clone(),
                                    http.config.clone(),
                                ),
                                discover_versions(),
                            );
                            let handshake = Self::handshake(
                                &config,
                                &garbage,
                                asks.clone().serve_with_lifecycle(transport, lifecycle()),
                            )
                            .await;
                            let refused = match &handshake {
                                Ok(Err(Some(error))) => failure::refused_handshake(error),
                                _ => None,
                            };
                            match refused {
                                Some((status, challenge))
                                    if auth::curable(status, challenge.as_deref()) =>
                                {
                                    refusal.take();
                                    authorizer
                                        .authorize(generation, challenge.as_deref())
                                        .await?;
                                }
                                _ => break handshake,
                            }
                        };
                        authorizing = Some(authorizer);
                        handshake
                    }
                };
                (
                    handshake,
                    None,
                    Arc::new(StderrTail::empty()),
                    Some(refusal),
                )
            }
        };
        let failed = |error: McpError| async {
            if let Some(process) = &process {
                process.end(Duration::ZERO).await;
            }
            Err(error)
        };
        let service = match handshake {
            Ok(Ok(service)) => service,
            Ok(Err(Some(error))) => {
                stderr.wait_ended(LAST_WORDS).await;
                let context = Context {
                    server: &config.name,
                    url: config.url(),
                    refusal: refusal.as_deref(),
                    redact: &config.redact,
                    stderr: stderr.text(&*config.redact),
                };
                return failed(context.start(error)).await;
            }
            Ok(Err(None)) => {
                let (lines, sample) = garbage.seen().unwrap_or_default();
                return failed(McpError::Garbage {
                    server: config.name.clone(),
                    lines,
                    sample: config.redact.whole(&sample),
                })
                .await;
            }
            Err(_elapsed) => {
                return failed(McpError::StartTimeout {
                    server: config.name.clone(),
                    after: config.startup_timeout,
                    stderr: stderr.text(&*config.redact),
                })
                .await;
            }
        };
        // The cache would answer a re-read with a stale copy when the server fails it,
        // hiding an expired link: pipec reads what the server says, every time.
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let peer = service.peer().clone();
        let info = peer.peer_info();
        let protocol_version = info
            .as_ref()
            .map(|info| info.protocol_version.as_str().to_string())
            .unwrap_or_default();
        let offers = info
            .map(|info| Offers {
                tools: info.capabilities.tools.is_some(),
                resources: info.capabilities.resources.is_some(),
                prompts: info.capabilities.prompts.is_some(),
            })
            .unwrap_or_default();
        Ok(Session {
            config,
            peer,
            service: tokio::sync::Mutex::new(Some(service)),
            process,
            stderr,
            garbage,
            largest_read_buffer,
            protocol_version,
            offers,
            asks,
            asking: tokio::sync::Mutex::new(()),
            task_tools: std::sync::Mutex::default(),
            authorizer: authorizing,
            closed: AtomicBool::new(false),
        })
    }

    /// The handshake under the startup timeout; garbage on stdout ends it at once
    /// (`Err(None)`).
    async fn handshake(
        config: &ServerConfig,
        garbage: &GarbageLines,
        handshake: impl Future<Output = Handshake>,
    ) -> Result<
        Result<RunningService<RoleClient, Asks>, Option<ClientInitializeError>>,
        tokio::time::error::Elapsed,
    > {
        tokio::time::timeout(config.startup_timeout, async {
            // Garbage wins a tie: a server whose first line was not a message fails
            // its start even when its answer to `initialize` came in the same read.
            tokio::select! {
                biased;
                _ = garbage.spoiled() => Err(None),
                result = handshake => match result {
                    Ok(_) if garbage.seen().is_some() => Err(None),
                    other => other.map_err(Some),
                },
            }
        })
        .await
    }

    /// Every tool the server lists, page after page, but those rmcp's HTTP transport
    /// refused for invalid `x-mcp-header` annotations (2026-07-28: an empty or
    /// duplicated header name, a non-token character, a header on a non-primitive or a
    /// `number` parameter), which a client must not call.
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, McpError> {
        let tools = self
            .list(
                "tools/list",
                convert::tools_page,
                |cursor| {
                    ClientRequest::ListToolsRequest(ListToolsRequest::with_param(
                        PaginatedRequestParams::default().with_cursor(cursor),
                    ))
                },
                |typed, tool| match typed {
                    ServerResult::ListToolsResult(kept) => {
                        kept.tools.iter().any(|t| t.name == tool.name.as_str())
                    }
                    _ => true,
                },
            )
            .await?;
        *self.task_tools.lock().unwrap_or_else(|e| e.into_inner()) = task_tools(&tools);
        Ok(tools)
    }

    /// Every fixed resource the server lists, page after page.
    pub async fn list_resources(&self) -> Result<Vec<ResourceInfo>, McpError> {
        self.list(
            "resources/list",
            convert::resources_page,
            |cursor| {
                ClientRequest::ListResourcesRequest(ListResourcesRequest::with_param(
                    PaginatedRequestParams::default().with_cursor(cursor),
                ))
            },
            |_, _| true,
        )
        .await
    }

    /// Every resource template the server lists, page after page.
    pub async fn list_resource_templates(&self) -> Result<Vec<TemplateInfo>, McpError> {
        self.list(
            "resources/templates/list",
            convert::templates_page,
            |cursor| {
                ClientRequest::ListResourceTemplatesRequest(
                    ListResourceTemplatesRequest::with_param(
                        PaginatedRequestParams::default().with_cursor(cursor),
                    ),
                )
            },
            |_, _| true,
        )
        .await
    }

    /// Every prompt the server lists, page after page.
    pub async fn list_prompts(&self) -> Result<Vec<PromptInfo>, McpError> {
        self.list(
            "prompts/list",
            convert::prompts_page,
            |cursor| {
                ClientRequest::ListPromptsRequest(ListPromptsRequest::with_param(
                    PaginatedRequestParams::default().with_cursor(cursor),
                ))
            },
            |_, _| true,
        )
        .await
    }

    /// A prompt with its arguments filled: the result (`description`, `messages`) as the
    /// server sent it.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<Value, McpError> {
        let slot = RequestSlot::new(options.limit);
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(
            GetPromptRequestParams::new(name).with_arguments(arguments),
        ));
        let timeout = options.timeout.unwrap_or(self.config.request_timeout);
        let (result, found) = self
            .request(
                &format!("prompts/get {name}"),
                request,
                Some(slot),
                timeout,
                timeout,
            )
            .await?;
        convert::prompt_result(self.raw(result, found)?).map_err(|u| self.unusable(u))
    }

    /// A listing, page after page, all within one request timeout; a cursor seen before
    /// (or a thousand pages) is the server's fault, not a reason to loop. `keep` is told
    /// what rmcp made of each page (its own value of a listing it reads, else a stand-in).
    async fn list<T>(
        &self,
        method: &str,
        page: fn(Value) -> convert::Page<T>,
        request: impl Fn(Option<String>) -> ClientRequest,
        keep: impl Fn(&ServerResult, &T) -> bool,
    ) -> Result<Vec<T>, McpError> {
        let deadline = Instant::now() + self.config.request_timeout;
        let mut all = Vec::new();
        let mut cursors = std::collections::HashSet::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let left = deadline.saturating_duration_since(Instant::now());
            // The slot keeps the page as the server sent it: rmcp's types drop what they
            // do not know (a tool's `execution`), and `tools pull --format json` passes
            // listings through whole. rmcp reads it too (a shared slot).
            let (typed, found) = self
                .request(
                    method,
                    request(cursor.clone()),
                    Some(RequestSlot::shared()),
                    left,
                    self.config.request_timeout,
                )
                .await?;
            let raw = match found {
                Some(Found::Result(raw)) => raw,
                _ => serde_json::to_value(&typed).map_err(|e| self.protocol(e.to_string()))?,
            };
            let (items, next) = page(raw).map_err(|u| self.unusable(u))?;
            all.extend(items.into_iter().filter(|item| keep(&typed, item)));
            match next {
                None => return Ok(all),
                Some(next) if !cursors.insert(next.clone()) => {
                    return Err(
                        self.protocol(format!("{method} gave the cursor `{next}` a second time"))
                    );
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(self.protocol(format!("{method} has more than {MAX_PAGES} pages")))
    }

    /// Calls a tool; `meta` goes in the request's `_meta` (the idempotency key). A server
    /// that answers `input_required` (2026-07-28) is answered by the session's policy
    /// and the call sent again, with its `requestState` as given, up to eight times, all
    /// within the one timeout; a question the policy leaves to a person, or a request it
    /// does not answer (sampling), fails the call with [`McpError::InputRequired`]
    /// ([`Session::call`] gives the questions instead).
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<ToolResult, McpError> {
        match self
            .call(name, arguments, meta, options, &Resumption::default())
            .await?
        {
            Called::Result(result) => Ok(result),
            Called::Asked(_) => Err(self.unusable(Unusable::InputRequired)),
            Called::Task(task) => match self
                .await_task(&task, options, &Resumption::default())
                .await?
            {
                Called::Result(result) => Ok(result),
                _ => Err(self.unusable(Unusable::InputRequired)),
            },
        }
    }

    /// Whether a call of `name` to this 2025-11-25 server goes as a task: `asked` for,
    /// or a tool its listing (when the session listed its tools) says runs only as one.
    /// A 2026-07-28 server decides itself, answering with a task when it runs one.
    fn runs_as_task(&self, name: &str, asked: bool) -> bool {
        self.protocol_version.as_str() < ProtocolVersion::V_2026_07_28.as_str()
            && (asked
                || self
                    .task_tools
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(name))
    }

    /// A 2025-11-25 `tools/call` with `task`: answered with the task at once.
    async fn call_as_task(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
    ) -> Result<Called, McpError> {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name.to_string()));
        params.insert("arguments".into(), Value::Object(arguments));
        if !meta.is_empty() {
            params.insert("_meta".into(), Value::Object(meta));
        }
        params.insert(
            "task".into(),
            serde_json::json!({ "ttl": tasks::TASK_TTL_MS }),
        );
        let what = format!("tools/call {name}");
        let raw = self
            .raw_request(&what, "tools/call", Value::Object(params), options)
            .await?;
        match tasks::created(&raw) {
            Some(task) => Ok(Called::Task(task)),
            // A server may answer at once after all.
            None => convert::tool_result(raw)
                .map(Called::Result)
                .map_err(|u| self.unusable(u)),
        }
    }

    /// A request pipec sends as JSON, and the result as the server sent it.
    pub(crate) async fn raw_request(
        &self,
        what: &str,
        method: &str,
        params: Value,
        options: RequestOptions,
    ) -> Result<Value, McpError> {
        let slot = RequestSlot::new(options.limit);
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let timeout = options.timeout.unwrap_or(self.config.request_timeout);
        let (result, found) = self
            .request(what, request, Some(slot), timeout, timeout)
            .await?;
        self.raw(result, found)
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    pub(crate) fn redacted(&self, text: &str) -> String {
        self.config.redact.whole(text)
    }

    pub(crate) fn protocol_error(&self, message: String) -> McpError {
        self.protocol(message)
    }

    pub(crate) fn unusable_error(&self, unusable: Unusable) -> McpError {
        self.unusable(unusable)
    }

    /// The answers the session's policy gives a task's input requests (2026-07-28).
    pub(crate) async fn answer_requests(
        &self,
        requests: &rmcp::model::InputRequests,
        answers: &mut Vec<super::Answer>,
    ) -> Round {
        let sampled = self.asks.sample(requests).await;
        self.asks.answer(requests, answers, &sampled)
    }

    /// Calls a tool, carrying what an earlier call that was asked needs to go on (the
    /// answers; for 2026-07-28 its round's `requestState` and other responses). With
    /// [`Elicitation::Ask`], questions end the call with [`Called::Asked`]: an
    /// `input_required` result's forms (2026-07-28), or the `elicitation/create` requests
    /// that came while it ran (2025-11-25), each told `cancel` and asked again when the
    /// call is made again, when its stored answer is given. Those requests do not say
    /// which call they belong to, so on a 2025-11-25 session with that policy the calls
    /// are made one at a time.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
        resumption: &Resumption,
    ) -> Result<Called, McpError> {
        self.asks.calling();
        if self.runs_as_task(name, options.task) {
            return self.call_as_task(name, arguments, meta, options).await;
        }
        let asks_during = self.asks.elicitation == Elicitation::Ask
            && self.protocol_version.as_str() < ProtocolVersion::V_2026_07_28.as_str();
        let _turn = match asks_during {
            true => Some(self.asking.lock().await),
            false => None,
        };
        let in_flight = |call: Option<InFlight>| {
            let mut slot = self
                .asks
                .in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *slot, call)
        };
        if asks_during {
            in_flight(Some(InFlight {
                answers: resumption.answers.clone(),
                asked: Vec::new(),
            }));
        }
        // A call dropped mid-way (its node's timeout, a cancel) leaves no questions or
        // answers for the next one.
        let _clear = asks_during.then(|| ClearInFlight(&self.asks.in_flight));
        let mut outcome = self
            .rounds(name, arguments.clone(), meta.clone(), options, resumption)
            .await;
        if resumption.request_state.is_some() && matches!(outcome, Err(McpError::Server { .. })) {
            // A server that no longer takes the round's state (it expired, or the
            // server restarted with new keys) is asked from the start: each question it
            // asks again is answered as before.
            let afresh = Resumption {
                answers: resumption.answers.clone(),
                ..Resumption::default()
            };
            outcome = self.rounds(name, arguments, meta, options, &afresh).await;
        }
        if asks_during
            && let Some(call) = in_flight(None)
            && !call.asked.is_empty()
        {
            // What the server did with the cancelled form does not count: the call is
            // made again once a person answered.
            return Ok(Called::Asked(Asked {
                questions: call.asked,
                request_state: None,
                responses: Map::new(),
            }));
        }
        outcome
    }

    /// The rounds of one tool call: sent, and sent again while the server answers
    /// `input_required` and the policy answers its requests.
    async fn rounds(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        options: RequestOptions,
        resumption: &Resumption,
    ) -> Result<Called, McpError> {
        let mut params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        if !meta.is_empty() {
            params.meta = Some(RequestMetaObject::from(meta));
        }
        if let Some(state) = &resumption.request_state {
            let responses = resumption.responses.clone();
            params.input_responses =
                (!responses.is_empty()).then(|| responses.into_iter().collect());
            params.request_state = Some(state.clone());
        }
        // The answers a question asked again gets: with the round's state the server
        // has the answers already, and a question it asks again is a new one; asked
        // afresh, each answer goes to its question once more, in turn.
        let mut unspent = match resumption.request_state {
            Some(_) => Vec::new(),
            None => resumption.answers.clone(),
        };
        let timeout = options.timeout.unwrap_or(self.config.request_timeout);
        let deadline = Instant::now() + timeout;
        let what = format!("tools/call {name}");
        for _ in 0..MAX_INPUT_ROUNDS {
            let slot = RequestSlot::new(options.limit);
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            let left = deadline.saturating_duration_since(Instant::now());
            let (result, found) = self
                .request(&what, request, Some(slot), left, timeout)
                .await?;
            let raw = self.raw(result, found)?;
            if let Some(task) = tasks::created(&raw) {
                return Ok(Called::Task(task));
            }
            if raw.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return convert::tool_result(raw)
                    .map(Called::Result)
                    .map_err(|u| self.unusable(u));
            }
            let asked: InputRequiredResult = serde_json::from_value(raw).map_err(|e| {
                self.protocol(format!(
                    "{what}: an input_required result pipec cannot read: {e}"
                ))
            })?;
            let requests = asked.input_requests.unwrap_or_default();
            if requests.is_empty() && asked.request_state.is_none() {
                return Err(self.protocol(format!(
                    "{what}: an input_required result with neither input requests nor a requestState"
                )));
            }
            let sampled = self.asks.sample(&requests).await;
            match self.asks.answer(&requests, &mut unspent, &sampled) {
                Round::Answered(answers) => {
                    params.input_responses = (!answers.is_empty()).then_some(answers);
                    params.request_state = asked.request_state;
                }
                Round::Asked(questions, responses) => {
                    return Ok(Called::Asked(Asked {
                        questions,
                        request_state: asked.request_state,
                        responses,
                    }));
                }
                Round::Unanswerable => return Err(self.unusable(Unusable::InputRequired)),
            }
        }
        Err(self.protocol(format!(
            "{what}: still input_required after {MAX_INPUT_ROUNDS} rounds"
        )))
    }

    /// Reads a resource: every content it returned, blobs decoded.
    pub async fn read_resource(
        &self,
        uri: &str,
        options: RequestOptions,
    ) -> Result<Vec<ResourceContent>, McpError> {
        let slot = RequestSlot::new(options.limit);
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let timeout = options.timeout.unwrap_or(self.config.request_timeout);
        let (result, found) = self
            .request(
                &format!("resources/read {uri}"),
                request,
                Some(slot),
                timeout,
                timeout,
            )
            .await?;
        convert::read_result(self.raw(result, found)?).map_err(|u| self.unusable(u))
    }

    /// One request: sent with its slot, answered within `wait` (reported as `timeout`),
    /// failed at once when the server writes garbage. Dropping the future cancels the
    /// request at the server.
    async fn request(
        &self,
        what: &str,
        request: ClientRequest,
        mut slot: Option<Arc<RequestSlot>>,
        wait: Duration,
        timeout: Duration,
    ) -> Result<(ServerResult, Option<Found>), McpError> {
        let Some(authorizer) = &self.authorizer else {
            return self.send(what, request, slot, wait, timeout).await;
        };
        // A request the server refuses for want of a token or a scope changed nothing
        // there: it is sent again once pipec has authorized (which fails after a few
        // rounds, so this ends).
        loop {
            let generation = authorizer.generation();
            let answer = self
                .send(what, request.clone(), slot.clone(), wait, timeout)
                .await;
            match &answer {
                Err(McpError::Http {
                    status, challenge, ..
                }) if auth::curable(*status, challenge.as_deref()) => {
                    authorizer
                        .authorize(generation, challenge.as_deref())
                        .await?;
                    slot = slot.map(|s| s.again());
                }
                Ok(_) => {
                    authorizer.settled();
                    return answer;
                }
                _ => return answer,
            }
        }
    }

    /// One request, sent once.
    async fn send(
        &self,
        what: &str,
        mut request: ClientRequest,
        slot: Option<Arc<RequestSlot>>,
        wait: Duration,
        timeout: Duration,
    ) -> Result<(ServerResult, Option<Found>), McpError> {
        if let Some(error) = self.spoiled() {
            return Err(error);
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed_error());
        }
        if let Some(slot) = &slot {
            request.extensions_mut().insert(SlotMarker(slot.clone()));
        }
        let peer = &self.peer;
        let exchange = async {
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await?;
            crate::wire::note(
                handle.id.to_string(),
                &self.protocol_version,
                match self.config.transport {
                    TransportConfig::Http { .. } => "tcp",
                    TransportConfig::Stdio { .. } => "pipe",
                },
            );
            let mut abandon = AbandonGuard {
                peer: peer.clone(),
                id: Some(handle.id.clone()),
            };
            let answer = handle.await_response().await;
            abandon.id = None;
            answer
        };
        let answer = tokio::select! {
            answer = tokio::time::timeout(wait, exchange) => answer,
            _ = self.garbage.spoiled() => return Err(self.spoiled().unwrap_or_else(|| self.closed_error())),
        };
        let found = slot.as_ref().and_then(|s| s.take());
        match answer {
            Err(_elapsed) => Err(McpError::Timeout {
                server: self.config.name.clone(),
                request: what.to_string(),
                after: timeout,
            }),
            Ok(Ok(result)) => Ok((result, found)),
            Ok(Err(error)) => Err(self.failure(error, found).await),
        }
    }

    async fn failure(&self, error: ServiceError, found: Option<Found>) -> McpError {
        if let Some(spoiled) = self.spoiled() {
            return spoiled;
        }
        if matches!(error, ServiceError::TransportClosed) {
            self.stderr.wait_ended(LAST_WORDS).await;
        }
        self.context().request(error, found)
    }

    /// The answer's result as the server sent it: from the slot, or (for requests
    /// without one, and answers that reached rmcp another way) from rmcp's value.
    fn raw(&self, result: ServerResult, found: Option<Found>) -> Result<Value, McpError> {
        match found {
            Some(Found::Result(raw)) => Ok(raw),
            _ => serde_json::to_value(&result).map_err(|e| self.protocol(e.to_string())),
        }
    }

    fn context(&self) -> Context<'_> {
        Context {
            server: &self.config.name,
            url: self.config.url(),
            refusal: None,
            redact: &self.config.redact,
            stderr: self.stderr_tail(),
        }
    }

    fn spoiled(&self) -> Option<McpError> {
        self.garbage
            .seen()
            .map(|(lines, sample)| McpError::Garbage {
                server: self.config.name.clone(),
                lines,
                sample: self.config.redact.whole(&sample),
            })
    }

    fn closed_error(&self) -> McpError {
        McpError::Closed {
            server: self.config.name.clone(),
            stderr: self.stderr_tail(),
        }
    }

    fn protocol(&self, message: String) -> McpError {
        McpError::Protocol {
            server: self.config.name.clone(),
            message: self.config.redact.whole(&message),
        }
    }

    fn unusable(&self, unusable: Unusable) -> McpError {
        match unusable {
            Unusable::InputRequired => McpError::InputRequired {
                server: self.config.name.clone(),
            },
            Unusable::Protocol(message) => self.protocol(message),
        }
    }

    /// The protocol version the session speaks (`2026-07-28`, `2025-11-25`, ...).
    pub fn protocol_version(&self) -> Option<String> {
        (!self.protocol_version.is_empty()).then(|| self.protocol_version.clone())
    }

    /// What the server said it offers when the session started.
    pub fn offers(&self) -> Offers {
        self.offers
    }

    /// The end of what the server wrote to stderr, redacted (empty over HTTP).
    pub fn stderr_tail(&self) -> String {
        self.stderr.text(&*self.config.redact)
    }

    /// The most memory one message from the server has taken in the transport, in
    /// bytes (stdio only): what the size limits hold down.
    #[doc(hidden)]
    pub fn largest_read_buffer(&self) -> usize {
        self.largest_read_buffer.load(Ordering::Relaxed)
    }

    /// Ends the session: over stdio the server's stdin is closed, it is given a moment
    /// to exit, then its process group is killed; over HTTP the session is deleted.
    /// Requests after it fail with `Closed`; a second call does nothing.
    pub async fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let service = self.service.lock().await.take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(CLOSE_WAIT).await;
        }
        if let Some(process) = &self.process {
            process.end(EXIT_GRACE).await;
        }
    }
}

/// Sends `notifications/cancelled` for a request whose future was dropped before its
/// answer came (a timeout, a cancelled task), so the server can stop working on it.
struct AbandonGuard {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        runtime.spawn(async move {
            let cancelled = CancelledNotification::new(CancelledNotificationParam::new(
                Some(id),
                Some("pipec no longer waits for the answer".to_string()),
            ));
            let _ = peer.send_notification(cancelled.into()).await;
        });
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("server", &self.config.name)
            .field("protocol_version", &self.protocol_version)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_protocol_first_then_the_2025_11_25_handshake() {
        assert_eq!(
            lifecycle(),
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            }
        );
    }
}
