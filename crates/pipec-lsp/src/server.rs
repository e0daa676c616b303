//! The server loop: initialize, then requests and notifications until `exit`.
//!
//! Edits are applied as they arrive; checking waits until no edit has come for
//! [`DEBOUNCE`], so a burst of keystrokes is checked once. A request first brings every
//! program up to date, so answers always match the text the editor sent.

use std::io::BufReader;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument,
    Notification as _, PublishDiagnostics,
};
use lsp_types::{
    CodeActionKind, CodeActionProviderCapability, CompletionOptions, HoverProviderCapability,
    OneOf, PublishDiagnosticsParams, RenameOptions, SemanticTokensFullOptions,
    SemanticTokensOptions, SemanticTokensServerCapabilities, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, Url, WorkDoneProgressOptions,
};
use serde_json::Value;

use super::documents::{apply_change, path_uri, uri_path};
use super::transport::{Incoming, Writer, spawn_reader};
use super::workspace::Workspace;
use super::{actions, completion, hover, navigation, symbols, test_runs};

/// How long after the last edit the buffers are checked.
pub const DEBOUNCE: Duration = Duration::from_millis(20);

/// A request that could not be answered: a JSON-RPC error code and what to do.
pub(crate) struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            code: ErrorCode::InvalidParams as i32,
            message: message.into(),
        }
    }

    pub(crate) fn refused(message: impl Into<String>) -> Failure {
        Failure {
            code: ErrorCode::RequestFailed as i32,
            message: message.into(),
        }
    }
}

pub(crate) type Answer = Result<Value, Failure>;

/// Where the session stands, beside what the workspace knows.
struct Session {
    initialized: bool,
    shutting_down: bool,
    /// The editor redraws code lenses when asked (`workspace/codeLens/refresh`).
    lens_refresh: bool,
    /// Where work done on other threads (a test run) comes back to the loop.
    back: std::sync::mpsc::Sender<Incoming>,
}

/// Runs the server on stdin and stdout until the editor says `exit` or goes away.
pub fn run_stdio() -> u8 {
    let (back, incoming) = std::sync::mpsc::channel();
    spawn_reader(BufReader::new(std::io::stdin()), back.clone());
    let mut out = Writer::stdout();
    let mut ws = Workspace::default();
    let mut session = Session {
        initialized: false,
        shutting_down: false,
        lens_refresh: false,
        back,
    };
    let mut deadline: Option<Instant> = None;
    loop {
        let next = match deadline {
            Some(d) => match incoming.recv_timeout(d.saturating_duration_since(Instant::now())) {
                Ok(m) => Some(m),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Some(Incoming::Closed),
            },
            None => Some(incoming.recv().unwrap_or(Incoming::Closed)),
        };
        let Some(next) = next else {
            // Quiet for DEBOUNCE: take whatever else is queued, then check once.
            while let Ok(more) = incoming.try_recv() {
                match more {
                    Incoming::Message(Message::Notification(n))
                        if n.method == DidChangeTextDocument::METHOD =>
                    {
                        notification(&mut ws, &mut out, n);
                    }
                    other => {
                        flush(&mut ws, &mut out);
                        if handle(&mut ws, &mut out, other, &mut session, &mut deadline) {
                            return 0;
                        }
                    }
                }
            }
            flush(&mut ws, &mut out);
            deadline = None;
            continue;
        };
        if handle(&mut ws, &mut out, next, &mut session, &mut deadline) {
            return 0;
        }
    }
}

/// Handles one incoming frame; `true` when the server should stop.
fn handle(
    ws: &mut Workspace,
    out: &mut Writer,
    incoming: Incoming,
    session: &mut Session,
    deadline: &mut Option<Instant>,
) -> bool {
    match incoming {
        Incoming::Closed => true,
        Incoming::TestsFinished(f) => {
            test_runs::finished(ws, out, f, session.lens_refresh);
            false
        }
        Incoming::Malformed(why) => {
            out.parse_error(&why);
            false
        }
        Incoming::Message(Message::Request(req)) => {
            if req.method == "initialize" {
                session.initialized = true;
                session.lens_refresh =
                    req.params["capabilities"]["workspace"]["codeLens"]["refreshSupport"]
                        .as_bool()
                        .unwrap_or(false);
                out.send(Response::new_ok(req.id, initialize_result()));
                return false;
            }
            if !session.initialized {
                out.send(Response::new_err(
                    req.id,
                    ErrorCode::ServerNotInitialized as i32,
                    "the server is not initialized: send `initialize` first".into(),
                ));
                return false;
            }
            if req.method == "shutdown" {
                session.shutting_down = true;
                out.send(Response::new_ok(req.id, Value::Null));
                return false;
            }
            if session.shutting_down {
                out.send(Response::new_err(
                    req.id,
                    ErrorCode::InvalidRequest as i32,
                    "the server is shutting down".into(),
                ));
                return false;
            }
            if ws.is_dirty() {
                flush(ws, out);
                *deadline = None;
            }
            let id = req.id.clone();
            let back = &session.back;
            let answer = std::panic::catch_unwind(AssertUnwindSafe(|| request(ws, req, back)))
                .unwrap_or_else(|_| {
                    Err(Failure {
                        code: ErrorCode::InternalError as i32,
                        message: "pipec's language server failed on this request (a bug in pipec; please report it with the file)".into(),
                    })
                });
            respond(out, id, answer);
            false
        }
        Incoming::Message(Message::Notification(n)) => {
            if n.method == "exit" {
                return true;
            }
            if !session.initialized {
                return false;
            }
            let is_change = n.method == DidChangeTextDocument::METHOD;
            notification(ws, out, n);
            if ws.is_dirty() {
                if is_change {
                    *deadline = Some(Instant::now() + DEBOUNCE);
                } else {
                    flush(ws, out);
                    *deadline = None;
                }
            }
            false
        }
        // The server's requests (a lens refresh) need nothing from their answers.
        Incoming::Message(Message::Response(_)) => false,
    }
}

fn respond(out: &mut Writer, id: RequestId, answer: Answer) {
    match answer {
        Ok(v) => out.send(Response::new_ok(id, v)),
        Err(f) => out.send(Response::new_err(id, f.code, f.message)),
    }
}

/// Checks what is dirty and sends the diagnostics that changed.
fn flush(ws: &mut Workspace, out: &mut Writer) {
    let changes = match std::panic::catch_unwind(AssertUnwindSafe(|| ws.refresh())) {
        Ok(c) => c,
        Err(_) => return,
    };
    for (path, diagnostics) in changes {
        let Some(uri) = path_uri(&path) else { continue };
        let version = ws.documents.get(&path).map(|d| d.version);
        let params = PublishDiagnosticsParams {
            uri,
            diagnostics,
            version,
        };
        out.send(Notification::new(PublishDiagnostics::METHOD.into(), params));
    }
    ws.release_retired();
}

fn notification(ws: &mut Workspace, out: &mut Writer, n: Notification) {
    match n.method.as_str() {
        DidOpenTextDocument::METHOD => {
            let Ok(p) = serde_json::from_value::<lsp_types::DidOpenTextDocumentParams>(n.params)
            else {
                return;
            };
            let Some(path) = uri_path(&p.text_document.uri) else {
                return;
            };
            ws.documents
                .open(path.clone(), p.text_document.text, p.text_document.version);
            ws.touched(&path);
        }
        DidChangeTextDocument::METHOD => {
            let Ok(p) = serde_json::from_value::<lsp_types::DidChangeTextDocumentParams>(n.params)
            else {
                return;
            };
            let Some(path) = uri_path(&p.text_document.uri) else {
                return;
            };
            let Some(doc) = ws.documents.get_mut(&path) else {
                return;
            };
            for change in p.content_changes {
                apply_change(&mut doc.text, change.range, &change.text);
            }
            doc.version = p.text_document.version;
            ws.touched(&path);
        }
        DidCloseTextDocument::METHOD => {
            let Ok(p) = serde_json::from_value::<lsp_types::DidCloseTextDocumentParams>(n.params)
            else {
                return;
            };
            if let Some(path) = uri_path(&p.text_document.uri) {
                ws.closed(&path);
                // A closed root's problems go with it.
                flush(ws, out);
            }
        }
        DidSaveTextDocument::METHOD => {}
        _ => {}
    }
}

fn request(ws: &mut Workspace, req: Request, back: &std::sync::mpsc::Sender<Incoming>) -> Answer {
    let Request { method, params, .. } = req;
    match method.as_str() {
        "textDocument/hover" => hover::hover(ws, parse(params)?),
        "textDocument/definition" => navigation::definition(ws, parse(params)?),
        "textDocument/references" => navigation::references(ws, parse(params)?),
        "textDocument/prepareRename" => navigation::prepare_rename(ws, parse(params)?),
        "textDocument/rename" => navigation::rename(ws, parse(params)?),
        "textDocument/completion" => completion::completion(ws, parse(params)?),
        "textDocument/codeAction" => actions::code_actions(ws, parse(params)?),
        "textDocument/formatting" => actions::formatting(ws, parse(params)?),
        "textDocument/documentSymbol" => symbols::document_symbols(ws, parse(params)?),
        "textDocument/semanticTokens/full" => symbols::semantic_tokens(ws, parse(params)?),
        "textDocument/codeLens" => test_runs::code_lens(ws, parse(params)?),
        "workspace/executeCommand" => test_runs::execute(ws, parse(params)?, back),
        other => Err(Failure {
            code: ErrorCode::MethodNotFound as i32,
            message: format!("pipec's language server has no method `{other}`"),
        }),
    }
}

fn parse<P: serde::de::DeserializeOwned>(params: Value) -> Result<P, Failure> {
    serde_json::from_value(params).map_err(|e| Failure::invalid(format!("bad params: {e}")))
}

/// The path of a request's document, refused unless the server knows the file (open, or
/// part of an open file's program).
pub(crate) fn known_path(ws: &Workspace, uri: &Url) -> Result<std::path::PathBuf, Failure> {
    let path =
        uri_path(uri).ok_or_else(|| Failure::invalid(format!("`{uri}` is not a file: URI")))?;
    if ws.documents.get(&path).is_some() || ws.snapshot_for(&path).is_some() {
        Ok(path)
    } else {
        Err(Failure::invalid(format!(
            "`{uri}` is not open: send textDocument/didOpen for it (or for a .pipe file that uses it) first"
        )))
    }
}

fn initialize_result() -> Value {
    let caps = ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(
            TextDocumentSyncKind::INCREMENTAL,
        )),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        rename_provider: Some(OneOf::Right(RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: WorkDoneProgressOptions::default(),
        })),
        completion_provider: Some(CompletionOptions {
            trigger_characters: Some(vec![".".into(), "\"".into(), "[".into(), " ".into()]),
            ..CompletionOptions::default()
        }),
        code_action_provider: Some(CodeActionProviderCapability::Options(
            lsp_types::CodeActionOptions {
                code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                ..Default::default()
            },
        )),
        document_formatting_provider: Some(OneOf::Left(true)),
        code_lens_provider: Some(lsp_types::CodeLensOptions {
            resolve_provider: Some(false),
        }),
        execute_command_provider: Some(lsp_types::ExecuteCommandOptions {
            commands: vec![test_runs::RUN_TEST.into()],
            work_done_progress_options: WorkDoneProgressOptions::default(),
        }),
        document_symbol_provider: Some(OneOf::Left(true)),
        semantic_tokens_provider: Some(SemanticTokensServerCapabilities::SemanticTokensOptions(
            SemanticTokensOptions {
                legend: symbols::legend(),
                full: Some(SemanticTokensFullOptions::Bool(true)),
                range: None,
                work_done_progress_options: WorkDoneProgressOptions::default(),
            },
        )),
        ..ServerCapabilities::default()
    };
    serde_json::json!({
        "capabilities": caps,
        "serverInfo": ServerInfo { name: "pipec".into(), version: Some(env!("CARGO_PKG_VERSION").into()) },
    })
}
