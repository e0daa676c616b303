//! The span of an MCP client's call of a served pipeline, when traces are on and the
//! client sent its `traceparent` in the request's `_meta`: a server span
//! `tools/call {tool}` in the client's trace, a child of the client's span, from the
//! call's arrival to its answer (OpenTelemetry's MCP conventions). The run it starts or
//! continues stays in the thread's own trace (every attempt of a thread, in any
//! process, is one trace), so the two are linked both ways: the call's span links to the
//! attempt, and the attempt's `invoke_workflow` span to the call's.

use std::time::{SystemTime, UNIX_EPOCH};

use pipec_mcp::server::{CallContext, CallFailure, ToolAnswer};
use pipec_runtime::trace::{Attr, SpanKind, SpanRec, SpanRef, SpanSink, span_id};

/// A client's call being answered, its span not yet sent.
pub(crate) struct CallSpan {
    sink: SpanSink,
    /// The client's span this call is a child of.
    parent: SpanRef,
    span: SpanRef,
    tool: String,
    started: SystemTime,
}

impl CallSpan {
    /// The span of a call of `tool`, when `spans` is on and the client sent a
    /// well-formed `traceparent`; `None` otherwise (a call without one is traced only
    /// in its thread's trace).
    pub(crate) fn start(
        spans: Option<&SpanSink>,
        context: &CallContext,
        tool: &str,
    ) -> Option<CallSpan> {
        let sink = spans?.clone();
        let parent = SpanRef::from_traceparent(context.traceparent.as_deref()?)?;
        let started = SystemTime::now();
        let nanos = started
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
            .to_string();
        let span = SpanRef {
            trace_id: parent.trace_id,
            span_id: span_id(
                &format!("{:032x}", parent.trace_id),
                &[
                    &format!("{:016x}", parent.span_id),
                    "tools/call",
                    tool,
                    &nanos,
                ],
            ),
        };
        Some(CallSpan {
            sink,
            parent,
            span,
            tool: tool.to_string(),
            started,
        })
    }

    /// The call's span, which the attempt it starts links to.
    pub(crate) fn id(&self) -> SpanRef {
        self.span
    }

    /// Sends the span: the call of `thread` answered `answer`; `attempt` is the attempt
    /// the call started or continued, when the thread is stored.
    pub(crate) fn end(
        self,
        thread: &str,
        attempt: Option<u32>,
        answer: &Result<ToolAnswer, CallFailure>,
    ) {
        let mut attributes: Vec<(&'static str, Attr)> = vec![
            ("mcp.method.name", "tools/call".into()),
            ("gen_ai.operation.name", "execute_tool".into()),
            ("gen_ai.tool.name", self.tool.as_str().into()),
            ("gen_ai.conversation.id", thread.into()),
        ];
        let (error_type, error) = match answer {
            Ok(ToolAnswer::Reply(r)) if r.is_error => (
                Some("tool_error"),
                Some(r.text.clone().unwrap_or_else(|| "the run failed".into())),
            ),
            Ok(_) => (None, None),
            Err(CallFailure::UnknownTool(name)) => {
                (Some("-32602"), Some(format!("unknown tool `{name}`")))
            }
            Err(CallFailure::InvalidArguments(m)) => (Some("-32602"), Some(m.clone())),
            Err(CallFailure::Failed(m)) => (Some("tool_error"), Some(m.clone())),
        };
        if let Some(t) = error_type {
            attributes.push(("error.type", t.into()));
        }
        let links = attempt
            .map(|n| vec![pipec_runtime::trace::attempt_ref(thread, n)])
            .unwrap_or_default();
        self.sink.emit(SpanRec {
            trace_id: self.span.trace_id,
            span_id: self.span.span_id,
            parent: Some(self.parent.span_id),
            name: format!("tools/call {}", self.tool),
            kind: SpanKind::Server,
            start: self.started,
            end: SystemTime::now(),
            attributes,
            links,
            parent_remote: true,
            error,
        });
    }
}
