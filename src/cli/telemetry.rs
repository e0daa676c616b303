//! Traces of the commands that run threads (`run`, `resume`, `answer`, `worker`,
//! `serve`), exported over OTLP when the standard `OTEL_*` variables ask for it
//! (`pipec_telemetry`): set up before the command runs, and what is left sent before
//! the process exits.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::runtime::trace::SpanSink;
use pipec_telemetry::Telemetry;

static TELEMETRY: OnceLock<Mutex<Option<Telemetry>>> = OnceLock::new();

/// How long the process waits at its end for the last spans to be sent.
const FLUSH: Duration = Duration::from_secs(5);

/// Sets traces up as the environment asks; a variable that is wrong is an error for the
/// person to fix (the command does not run).
pub(super) fn init() -> Result<(), String> {
    let telemetry = Telemetry::from_env(&|k| std::env::var(k).ok())?;
    let _ = TELEMETRY.set(Mutex::new(telemetry));
    Ok(())
}

/// Where the runtime's spans go, when traces are on.
pub(crate) fn spans() -> Option<SpanSink> {
    let slot = TELEMETRY.get()?;
    let guard = slot.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_ref().map(Telemetry::sink)
}

/// Sends what is left.
pub(super) fn shutdown() {
    if let Some(slot) = TELEMETRY.get()
        && let Some(t) = slot.lock().unwrap_or_else(|e| e.into_inner()).take()
    {
        t.shutdown(FLUSH);
    }
}
