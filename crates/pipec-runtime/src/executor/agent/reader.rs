//! Readers: tools that read a resource template. The model's arguments expand the
//! template; the resource is read through the attempt's cache within the reader's
//! `max_bytes` and parsed into its type. The row keeps the URI and the size, not the
//! content: a rebuilt conversation reads it again.

use serde_json::{Map, Value, json};

use super::super::{TryError, fatal};
use super::tool_call::ToolCall;
use super::transcript::{Outcome, Rows};
use crate::hydrate::{Caps, Reader};
use pipec_diagnostic as codes;
use pipec_store::{CallKind, CallState, ResourceRef, Write, ids};

impl ToolCall<'_, '_> {
    /// The read the model asked for, with `args` under the server's names.
    pub(super) async fn read(
        &self,
        args: &Map<String, Value>,
        rows: &mut Rows<'_>,
        writes: &mut Vec<Write>,
    ) -> Result<Outcome, TryError> {
        let cx = self.cx;
        let tool = self.tool;
        let template = tool.uri.clone().unwrap_or_default();
        let lookup = |name: &str| {
            let wire = tool
                .params
                .iter()
                .find(|p| p.name == name)
                .map_or(name, |p| p.wire_name.as_str());
            args.get(wire).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        };
        let uri = match pipec_base::uri::parse(&template).map(|t| t.expand(&lookup)) {
            Ok(Ok(u)) => u,
            Ok(Err(e)) => return Ok(Outcome::told(format!("The read was not made: {e}."))),
            Err(e) => {
                return Err(fatal(
                    cx,
                    &codes::PLAN_INVALID,
                    format!(
                        "the reader `{}` has a broken template: {}",
                        tool.name, e.message
                    ),
                ));
            }
        };
        let caps = Caps {
            max_bytes: tool.max_bytes,
            max_total: None,
            mime: tool.mime.clone(),
        };
        let r = ResourceRef {
            uri: uri.clone(),
            server: tool.server.clone(),
            kind: None,
            captures: Default::default(),
            name: tool.name.clone(),
            mime: tool.mime.clone(),
            size: None,
            producing_call: None,
            origin: None,
            produced_ms: ids::now_ms(),
            max_bytes: None,
            embedded: None,
        };
        let mut events = Vec::new();
        let mut reader = Reader {
            shared: cx.shared,
            node: &cx.unit.node,
            generation: cx.unit.generation,
            item: cx.unit.item,
            step: cx.unit.step,
            writes: &mut events,
        };
        let read = reader
            .read_value(&tool.name, &r, &caps, &tool.output_schema)
            .await;
        writes.extend(events);
        let (state, text, bytes) = match read {
            Ok((value, bytes)) => (
                CallState::Ok,
                serde_json::to_string(&value).unwrap_or_default(),
                bytes,
            ),
            // A transport failure is the node's, and tried again.
            Err(e @ TryError::Transient { .. }) => return Err(e),
            // Anything else the model is told, so it can ask differently (a smaller range).
            Err(TryError::Fatal(e)) => (
                CallState::ToolError,
                format!("The read failed: {}", e.message),
                0,
            ),
            Err(e) => return Err(e),
        };
        let for_model = if state == CallState::Ok {
            Value::Null
        } else {
            Value::String(text.clone())
        };
        let rec = self.row(
            CallKind::Read,
            state,
            Some(json!({ "uri": uri, "bytes": bytes, "for_model": for_model })),
            None,
        );
        writes.push(Write::Call(self.key.clone(), rec.clone()));
        rows.insert((self.key.seq, self.key.call), rec);
        Ok(Outcome::told(text))
    }
}
