//! A [`Provider`] spoken as MCP: one [`Served`] per connection (per session over HTTP,
//! per request in HTTP's stateless 2026-07-28 era) answers listings page by page, reads
//! with the error codes of the negotiated era, completions, tool calls, and both eras'
//! subscriptions: the legacy `resources/subscribe` and `unsubscribe`, and the 2026-07-28
//! `subscriptions/listen`, whose queue is made before the acknowledgement is sent so no
//! change is lost between. A subscription past a limit is refused with a JSON-RPC error
//! that names the limit.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    Annotations, CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
    CompleteResult, CompletionInfo, ContentBlock, ErrorCode, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Icon, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, Role, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool, ToolAnnotations,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use tokio::sync::mpsc;

use super::ask::Asked;
use super::provider::{
    Block, Body, CallFailure, Hints, IconInfo, ListedResource, ListedTemplate, Progress,
    ProgressUpdate, PromptFailure, PromptMessageOut, PromptSpec, Provider, ReadContent,
    ReadFailure, ToolReply, ToolSpec,
};
use super::updates::{Change, LimitReached, Listener, SessionCount};

/// Items per page of a listing.
const PAGE: usize = 100;

/// The JSON-RPC code of a request refused because a limit is reached (subscriptions,
/// sessions): one of the codes JSON-RPC leaves to servers (-32000 to -32099), as MCP
/// defines none for it.
pub const LIMIT_REACHED: i32 = -32000;

/// One connection's view of a provider.
pub struct Served {
    pub(super) provider: Arc<dyn Provider>,
    /// The subscriptions this session holds, counted against its limit.
    session: SessionCount,
    /// The legacy era's one listener of this connection (made at `initialized`).
    legacy: Mutex<Option<Arc<Listener>>>,
    /// `subscriptions/listen` requests decided on but whose delivery has not started
    /// yet, oldest first, by the filter each asked for.
    admitted: Mutex<VecDeque<Admission>>,
    /// The least severity this session's client asked to hear (`logging/setLevel`, the
    /// 2025-11-25 era), as a rank of [`severity`]; [`SILENT`] until it asks.
    log_floor: std::sync::atomic::AtomicU8,
}

/// No log notifications: the client did not ask for them.
const SILENT: u8 = u8::MAX;

/// The rank of a log level, from debug (0) to emergency (7).
#[allow(deprecated)] // SEP-2577 deprecates logging; 2025-11-25 clients ask for it
fn severity(level: rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

/// A listen's listener and queue, or why it was refused.
type Outcome = Result<(Arc<Listener>, mpsc::UnboundedReceiver<Change>), LimitReached>;

struct Admission {
    uris: Vec<String>,
    lists: bool,
    outcome: Outcome,
}

/// A request refused for a limit, as the client is told.
fn limit_error(reached: LimitReached) -> ErrorData {
    let (scope, limit) = match reached {
        LimitReached::Session { limit } => ("session", limit),
        LimitReached::Server { limit } => ("server", limit),
    };
    ErrorData::new(
        ErrorCode(LIMIT_REACHED),
        reached.to_string(),
        Some(json!({ "limit": limit, "scope": scope })),
    )
}

/// The URIs and the list flag a listen asked for.
fn asked(filter: &SubscriptionFilter) -> (Vec<String>, bool) {
    (
        filter.resource_subscriptions.clone().unwrap_or_default(),
        filter.resources_list_changed == Some(true),
    )
}

impl Served {
    pub fn new(provider: Arc<dyn Provider>) -> Served {
        Served {
            provider,
            session: SessionCount::default(),
            legacy: Mutex::new(None),
            admitted: Mutex::new(VecDeque::new()),
            log_floor: std::sync::atomic::AtomicU8::new(SILENT),
        }
    }

    /// The legacy listener, made (with its delivery task) on first use.
    fn legacy_listener(&self, peer: &Peer<RoleServer>) -> Result<Arc<Listener>, ErrorData> {
        let mut legacy = self.legacy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = legacy.as_ref() {
            return Ok(l.clone());
        }
        let (listener, queue) = self
            .provider
            .updates()
            .listen(&self.session, &[], true)
            .map_err(limit_error)?;
        tokio::spawn(deliver_legacy(
            Arc::downgrade(&listener),
            queue,
            peer.clone(),
        ));
        *legacy = Some(listener.clone());
        Ok(listener)
    }
}

/// Sends a legacy connection's changes until its listener is gone.
async fn deliver_legacy(
    listener: std::sync::Weak<Listener>,
    mut queue: mpsc::UnboundedReceiver<Change>,
    peer: Peer<RoleServer>,
) {
    while let Some(change) = queue.recv().await {
        let Some(l) = listener.upgrade() else { break };
        let sent = match change {
            Change::Updated(uri) if l.covers(&uri) => {
                peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
            }
            Change::Updated(_) => Ok(()),
            Change::ListChanged => peer.notify_resource_list_changed().await,
        };
        drop(l);
        if sent.is_err() {
            break;
        }
    }
}

fn icons(list: &[IconInfo]) -> Vec<Icon> {
    list.iter()
        .map(|i| {
            let mut icon = Icon::new(i.src.clone());
            icon.mime_type = i.mime_type.clone();
            icon.sizes = (!i.sizes.is_empty()).then(|| i.sizes.clone());
            icon
        })
        .collect()
}

fn annotations(h: &Hints) -> Annotations {
    let audience: Vec<Role> = h
        .audience
        .iter()
        .filter_map(|a| match a.as_str() {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        })
        .collect();
    let mut a = Annotations::default();
    a.audience = (!audience.is_empty()).then_some(audience);
    a.priority = h.priority.map(|p| p as f32);
    a.last_modified = h.last_modified.clone();
    a
}

fn resource(r: &ListedResource) -> Resource {
    let mut out = Resource::new(r.uri.clone(), r.name.clone());
    out.title = r.title.clone();
    out.description = r.description.clone();
    out.mime_type = r.mime_type.clone();
    out.size = r.size;
    out.icons = (!r.icons.is_empty()).then(|| icons(&r.icons));
    out.annotations = r.hints.as_ref().map(annotations);
    out
}

fn template(t: &ListedTemplate) -> ResourceTemplate {
    let mut out = ResourceTemplate::new(t.uri_template.clone(), t.name.clone());
    out.title = t.title.clone();
    out.description = t.description.clone();
    out.mime_type = t.mime_type.clone();
    out.icons = (!t.icons.is_empty()).then(|| icons(&t.icons));
    out.annotations = t.hints.as_ref().map(annotations);
    out
}

fn prompt(p: &PromptSpec) -> Prompt {
    let arguments = p
        .arguments
        .iter()
        .map(|a| {
            let mut out = PromptArgument::new(&a.name).with_required(a.required);
            out.description = a.description.clone();
            out
        })
        .collect::<Vec<_>>();
    let mut out = Prompt::new(
        &p.name,
        p.description.clone(),
        (!arguments.is_empty()).then_some(arguments),
    );
    out.title = p.title.clone();
    out
}

/// A resource's content as MCP has it.
fn contents(c: ReadContent) -> ResourceContents {
    let content = match c.body {
        Body::Text(t) => ResourceContents::text(t, c.uri),
        Body::Blob(b) => ResourceContents::blob(pipec_base::base64::encode(&b), c.uri),
    };
    match c.mime_type {
        Some(m) => content.with_mime_type(m),
        None => content,
    }
}

fn content_block(b: Block) -> ContentBlock {
    match b {
        Block::Text(t) => ContentBlock::text(t),
        Block::Media { mime_type, data } if mime_type.starts_with("audio/") => {
            ContentBlock::audio(pipec_base::base64::encode(&data), mime_type)
        }
        Block::Media { mime_type, data } => {
            ContentBlock::image(pipec_base::base64::encode(&data), mime_type)
        }
        Block::Resource(c) => ContentBlock::resource(contents(c)),
    }
}

fn prompt_message(m: PromptMessageOut) -> PromptMessage {
    let role = if m.assistant {
        Role::Assistant
    } else {
        Role::User
    };
    PromptMessage::new(role, content_block(m.content))
}

/// The rank of `info`, the level pipec logs a run's steps at.
#[allow(deprecated)] // SEP-2577 deprecates logging; 2025-11-25 clients ask for it
fn severity_info() -> u8 {
    severity(rmcp::model::LoggingLevel::Info)
}

/// What a tool reports while it runs, sent to the client in order as
/// `notifications/progress` for its token and, when it asked to hear logs, as
/// `notifications/message` at info, by a task of its own (a report never waits).
struct ProgressReporter {
    queue: mpsc::UnboundedSender<Report>,
    sent: tokio::task::JoinHandle<()>,
}

enum Report {
    Update(ProgressUpdate),
    /// Everything before it is sent: say so.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// How long the result waits for the reports before it to be sent.
const PROGRESS_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

impl ProgressReporter {
    #[allow(deprecated)] // SEP-2577 deprecates logging; 2025-11-25 clients ask for it
    fn start(token: Option<ProgressToken>, logs: bool, peer: Peer<RoleServer>) -> ProgressReporter {
        let (queue, mut reports) = mpsc::unbounded_channel::<Report>();
        let sent = tokio::spawn(async move {
            let mut last = f64::NEG_INFINITY;
            while let Some(report) = reports.recv().await {
                match report {
                    // Progress only grows: an update that does not is not sent.
                    Report::Update(u) if u.progress > last => {
                        last = u.progress;
                        if logs && let Some(message) = &u.message {
                            let log = rmcp::model::LoggingMessageNotificationParam::new(
                                rmcp::model::LoggingLevel::Info,
                                serde_json::Value::String(message.clone()),
                            )
                            .with_logger("pipec");
                            if peer.notify_logging_message(log).await.is_err() {
                                break;
                            }
                        }
                        let Some(token) = &token else { continue };
                        let mut param = ProgressNotificationParam::new(token.clone(), u.progress);
                        param.total = u.total;
                        param.message = u.message;
                        if peer.notify_progress(param).await.is_err() {
                            break;
                        }
                    }
                    Report::Update(_) => {}
                    // Everything before the result is sent; nothing after it is.
                    Report::Flush(done) => {
                        let _ = done.send(());
                        break;
                    }
                }
            }
        });
        ProgressReporter { queue, sent }
    }

    fn progress(&self) -> Progress {
        let queue = self.queue.clone();
        Arc::new(move |update| {
            let _ = queue.send(Report::Update(update));
        })
    }

    /// Sends what was reported, and stops: reports after the result are dropped.
    async fn finish(self) {
        let (done, flushed) = tokio::sync::oneshot::channel();
        if self.queue.send(Report::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(PROGRESS_FLUSH, flushed).await;
        }
        self.sent.abort();
    }
}

/// A tool's reply as MCP's result: its text (else its structured content as text, when
/// it has no other block), its blocks, then its links.
pub(super) fn tool_result(reply: ToolReply) -> CallToolResult {
    let mut blocks = Vec::new();
    if let Some(t) = reply.text {
        blocks.push(ContentBlock::text(t));
    } else if reply.blocks.is_empty()
        && let Some(s) = &reply.structured
    {
        blocks.push(ContentBlock::text(s.to_string()));
    }
    blocks.extend(reply.blocks.into_iter().map(content_block));
    for l in reply.links {
        let mut r = Resource::new(l.uri, l.name);
        r.description = l.description;
        r.mime_type = l.mime_type;
        blocks.push(ContentBlock::resource_link(r));
    }
    let mut result = if reply.is_error {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    result.structured_content = reply.structured;
    result
}

fn tool(t: &ToolSpec) -> Tool {
    let mut tool = Tool::new(
        t.name.clone(),
        t.description.clone().unwrap_or_default(),
        Arc::new(t.input_schema.clone()),
    );
    if let Some(title) = &t.title {
        tool = tool.with_title(title.clone());
    }
    if let Some(out) = &t.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(out.clone()));
    }
    let mut a = ToolAnnotations::new();
    a.read_only_hint = t.read_only;
    a.destructive_hint = t.destructive;
    a.idempotent_hint = t.idempotent;
    a.open_world_hint = t.open_world;
    tool.with_annotations(a)
}

/// A page cursor: the listing's generation and the offset of the page's first item.
fn cursor(generation: u64, offset: usize) -> String {
    pipec_base::base64::encode(format!("{generation}:{offset}").as_bytes())
}

/// The offset a cursor names; a cursor of another generation, or not one of ours, is
/// invalid parameters.
fn offset_of(
    request: Option<&PaginatedRequestParams>,
    generation: u64,
) -> Result<usize, ErrorData> {
    let Some(c) = request.and_then(|r| r.cursor.as_deref()) else {
        return Ok(0);
    };
    let invalid = || {
        ErrorData::invalid_params(
            "invalid cursor: list again from the first page",
            Some(json!({ "cursor": c })),
        )
    };
    let text = pipec_base::base64::decode(c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(invalid)?;
    let (g, o) = text.split_once(':').ok_or_else(invalid)?;
    if g.parse::<u64>().ok() != Some(generation) {
        return Err(invalid());
    }
    o.parse().map_err(|_| invalid())
}

/// One page of `items` from `offset`, and the cursor of the next page if there is one.
fn page<T: Clone>(items: &[T], offset: usize, generation: u64) -> (Vec<T>, Option<String>) {
    let start = offset.min(items.len());
    let end = (start + PAGE).min(items.len());
    let next = (end < items.len()).then(|| cursor(generation, end));
    (items[start..end].to_vec(), next)
}

impl ServerHandler for Served {
    #[allow(deprecated)] // SEP-2577 deprecates logging; 2025-11-25 clients set its level
    fn get_info(&self) -> ServerConfig {
        let id = self.provider.identity();
        // Tools and prompts are listed even when there are none (the capability says
        // the methods answer): a client that lists them gets a list, not an error.
        let caps = ServerCapabilities::builder()
            .enable_prompts()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_completions()
            .enable_logging();
        let mut caps = caps.build();
        if self.provider.offers_tasks() {
            caps.extensions.get_or_insert_with(Default::default).insert(
                rmcp::model::TASKS_EXTENSION_ID.to_string(),
                JsonObject::new(),
            );
        }
        let mut implementation = Implementation::new(id.name, id.version);
        if let Some(title) = id.title {
            implementation = implementation.with_title(title);
        }
        let config = ServerConfig::new(caps).with_server_info(implementation);
        match id.instructions {
            Some(i) => config.with_instructions(i),
            None => config,
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A legacy client hears of list changes without asking; a listener of no URIs
        // is within every limit.
        let _ = self.legacy_listener(&context.peer);
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let generation = self.provider.generation();
        let offset = offset_of(request.as_ref(), generation)?;
        let all: Vec<Resource> = self.provider.resources().iter().map(resource).collect();
        let (items, next) = page(&all, offset, generation);
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let generation = self.provider.generation();
        let offset = offset_of(request.as_ref(), generation)?;
        let all: Vec<ResourceTemplate> = self.provider.templates().iter().map(template).collect();
        let (items, next) = page(&all, offset, generation);
        let mut result = ListResourceTemplatesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let data = Some(json!({ "uri": uri }));
        match self.provider.read(&uri).await {
            Ok(contents) => {
                let contents = contents.into_iter().map(self::contents).collect();
                Ok(ReadResourceResult::new(contents).into())
            }
            Err(ReadFailure::NotFound(m)) => Err(ErrorData::resource_not_found(m, data)),
            Err(ReadFailure::Refused(m)) => Err(ErrorData::invalid_params(m, data)),
            Err(ReadFailure::Failed(m)) => Err(ErrorData::internal_error(m, data)),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let context: BTreeMap<String, String> = request
            .context
            .as_ref()
            .and_then(|c| c.arguments.clone())
            .map(|m| m.into_iter().collect())
            .unwrap_or_default();
        let (argument, value) = (&request.argument.name, &request.argument.value);
        let mut values = match &request.r#ref {
            Reference::Resource(r) => {
                self.provider
                    .complete(&r.uri, argument, value, &context)
                    .await
            }
            Reference::Prompt(p) => {
                self.provider
                    .complete_prompt(&p.name, argument, value, &context)
                    .await
            }
            _ => Vec::new(),
        };
        let total = values.len();
        values.truncate(CompletionInfo::MAX_VALUES);
        let mut info = CompletionInfo::default();
        info.has_more = Some(total > values.len());
        info.total = Some(u32::try_from(total).unwrap_or(u32::MAX));
        info.values = values;
        Ok(CompleteResult::new(info))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.provider.tools().iter().map(tool).collect(),
        ))
    }

    /// A tool by name: rmcp's HTTP transport holds a `tools/call` against its input
    /// schema's `x-mcp-header` properties, refusing (-32020) a call whose
    /// `Mcp-Param-*` headers are missing, malformed or differ from the arguments.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.provider
            .tools()
            .iter()
            .find(|t| t.name == name)
            .map(tool)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let generation = self.provider.generation();
        let offset = offset_of(request.as_ref(), generation)?;
        let all: Vec<Prompt> = self.provider.prompts().iter().map(prompt).collect();
        let (items, next) = page(&all, offset, generation);
        let mut result = ListPromptsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let mut arguments: BTreeMap<String, String> = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, text)
            })
            .collect();
        let data = Some(json!({ "prompt": request.name }));
        let spec = self
            .provider
            .prompts()
            .into_iter()
            .find(|p| p.name == request.name);
        if let Some(spec) = &spec
            && let Some(asked) = self
                .prompt_arguments(
                    spec,
                    &mut arguments,
                    &context,
                    request.input_responses.as_ref(),
                )
                .await?
        {
            return Ok(GetPromptResponse::InputRequired(asked));
        }
        let messages = match self.provider.get_prompt(&request.name, arguments).await {
            Ok(messages) => messages,
            Err(PromptFailure::UnknownPrompt(name)) => {
                return Err(ErrorData::invalid_params(
                    format!("no prompt is named `{name}`"),
                    data,
                ));
            }
            Err(PromptFailure::InvalidArguments(m)) => {
                return Err(ErrorData::invalid_params(m, data));
            }
            Err(PromptFailure::Failed(m)) => return Err(ErrorData::internal_error(m, data)),
        };
        let messages = messages.into_iter().map(prompt_message).collect();
        let mut result = GetPromptResult::new(messages);
        result.description = spec.and_then(|p| p.description);
        Ok(result.into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments: JsonObject = request.arguments.unwrap_or_default();
        // Log notifications at info: for a level the request carries (2026-07-28), else
        // the one the session set (2025-11-25); none when neither asks.
        let floor = context
            .meta
            .log_level()
            .map(severity)
            .unwrap_or_else(|| self.log_floor.load(std::sync::atomic::Ordering::Relaxed));
        let logs = floor <= severity_info();
        let token = context.meta.get_progress_token();
        let reporter = (token.is_some() || logs)
            .then(|| ProgressReporter::start(token, logs, context.peer.clone()));
        let progress = reporter.as_ref().map(ProgressReporter::progress);
        let outcome = self
            .asked_call(
                &request.name,
                arguments,
                progress,
                &context,
                request.input_responses,
                request.request_state,
            )
            .await;
        // What was reported goes out before the result, and nothing after it.
        if let Some(reporter) = reporter {
            reporter.finish().await;
        }
        match outcome? {
            Asked::Done(Ok(reply)) => Ok(tool_result(reply).into()),
            Asked::Done(Err(CallFailure::UnknownTool(name))) => Err(ErrorData::invalid_params(
                format!("unknown tool `{name}`"),
                Some(json!({ "tool": name })),
            )),
            Asked::Done(Err(CallFailure::InvalidArguments(m))) => {
                Err(ErrorData::invalid_params(m, None))
            }
            Asked::Done(Err(CallFailure::Failed(m))) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(m)]).into())
            }
            Asked::Rounds(needed) => Ok(CallToolResponse::InputRequired(needed)),
            Asked::Task(view) => Ok(CallToolResponse::Task(super::tasks::created(&view))),
        }
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        self.task_of(request, &context).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_answered(request).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.task_cancelled(request).await
    }

    #[allow(deprecated)] // SEP-2577 deprecates logging; 2025-11-25 clients ask for it
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.log_floor.store(
            severity(request.level),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.legacy_listener(&context.peer)?
            .add(&request.uri)
            .map_err(limit_error)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.legacy_listener(&context.peer)?.remove(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The listener and its queue start now, before the acknowledgement goes out;
        // its limits are checked now too. rmcp acknowledges whatever is returned here
        // before `listen` can refuse, so a listen past a limit is acknowledged with
        // nothing honored and then ends with the limit's error.
        let (uris, lists) = asked(requested);
        let outcome = self.provider.updates().listen(&self.session, &uris, lists);
        let mut accepted = SubscriptionFilter::new();
        if outcome.is_ok() {
            if !uris.is_empty() {
                accepted.resource_subscriptions = Some(uris.clone());
            }
            if lists {
                accepted.resources_list_changed = Some(true);
            }
        }
        self.admitted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(Admission {
                uris,
                lists,
                outcome,
            });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let (uris, lists) = asked(context.requested());
        let found = {
            let mut pending = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
            let at = pending
                .iter()
                .position(|a| a.uris == uris && a.lists == lists);
            at.and_then(|i| pending.remove(i))
        };
        let outcome = match found {
            Some(a) => a.outcome,
            None => self.provider.updates().listen(&self.session, &uris, lists),
        };
        let (listener, mut queue) = outcome.map_err(limit_error)?;
        let sink = context.sink().clone();
        loop {
            tokio::select! {
                () = context.cancelled() => break,
                change = queue.recv() => {
                    let Some(change) = change else { break };
                    let sent = match change {
                        Change::Updated(uri) if listener.covers(&uri) => sink.notify_resource_updated(uri).await,
                        Change::Updated(_) => Ok(()),
                        Change::ListChanged => sink.notify_resource_list_changed().await,
                    };
                    if sent.is_err() {
                        break;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_name_their_generation_and_offset() {
        let items: Vec<u32> = (0..250).collect();
        let (first, next) = page(&items, 0, 7);
        assert_eq!(first.len(), 100);
        let next = next.expect("a second page");
        let request = PaginatedRequestParams::default().with_cursor(Some(next.clone()));
        let offset = offset_of(Some(&request), 7).expect("valid");
        assert_eq!(offset, 100);
        assert!(offset_of(Some(&request), 8).is_err(), "another generation");
        let bad = PaginatedRequestParams::default().with_cursor(Some("!!".into()));
        assert!(offset_of(Some(&bad), 7).is_err());
        let (last, none) = page(&items, 200, 7);
        assert_eq!(last.len(), 50);
        assert!(none.is_none());
    }

    #[test]
    fn priorities_and_audiences_reach_the_listing() {
        let r = resource(&ListedResource {
            uri: "file:///a".into(),
            name: "a".into(),
            hints: Some(Hints {
                audience: vec!["user".into()],
                priority: Some(0.8),
                last_modified: None,
            }),
            icons: vec![IconInfo {
                src: "file:///i.png".into(),
                mime_type: Some("image/png".into()),
                sizes: vec!["48x48".into()],
            }],
            ..ListedResource::default()
        });
        // As it goes on the wire: an f32 written as text keeps its shortest form.
        let text = serde_json::to_string(&r).unwrap_or_default();
        assert!(text.contains(r#""priority":0.8"#), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(v["annotations"]["audience"], json!(["user"]));
        assert_eq!(v["icons"][0]["sizes"], json!(["48x48"]));
    }
}
