//! The inspector's JSON API, which its page calls: threads (filtered, a page at a time), a
//! thread (its `show --json` view, its pipeline's graph, the forms of its pending gates),
//! its events, and the actions (answer, cancel, resume, run again from a node).

use std::time::Duration;

use hyper::StatusCode;
use serde_json::{Map, Value, json};

use pipec_plan::{Body, Plan};
use pipec_runtime::show::Stored;
use pipec_runtime::{RunOptions, Runner, RuntimeError};
use pipec_store::{CancelOutcome, GateState, ListQuery, Status, ThreadRec};

use super::http::App;

/// How long an action waits for a resume to end before answering that it runs on.
const RESUME_WAIT: Duration = Duration::from_millis(500);
/// The most threads a page lists.
const MAX_PAGE: usize = 200;
/// The most events one request reads.
const MAX_EVENTS: usize = 2000;

/// A refused request: its status, a code and what to do.
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
    pub(crate) help: Option<String>,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, code: &str, message: String) -> Problem {
        Problem {
            status,
            code: code.to_string(),
            message,
            help: None,
        }
    }
}

impl From<RuntimeError> for Problem {
    fn from(e: RuntimeError) -> Problem {
        let status = if e.code == pipec_diagnostic::THREAD_NOT_FOUND.code {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::CONFLICT
        };
        Problem {
            status,
            code: e.code.to_string(),
            message: e.message,
            help: e.help,
        }
    }
}

impl From<pipec_store::StoreError> for Problem {
    fn from(e: pipec_store::StoreError) -> Problem {
        RuntimeError::from(e).into()
    }
}

type Answer = Result<(StatusCode, Value), Problem>;

/// A query string's parameters (`a=1&b=x`), percent-decoded (`+` is a space).
fn params(query: &str) -> Map<String, Value> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| {
            let v = v.replace('+', " ");
            let decoded = percent_encoding::percent_decode_str(&v).decode_utf8_lossy();
            (k.to_string(), Value::String(decoded.into_owned()))
        })
        .collect()
}

/// `GET /api/threads?status=&pipeline=&before=&limit=`: newest first, each with its
/// model calls' usage; `next` is the cursor of the next page.
pub(crate) async fn threads(app: &App, query: &str) -> Answer {
    let p = params(query);
    let text = |k: &str| p.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let status = match text("status") {
        Some(s) => Some(Status::parse(s).ok_or_else(|| Problem {
            status: StatusCode::BAD_REQUEST,
            code: pipec_diagnostic::OPTION_INVALID.code.into(),
            message: format!("`{s}` is not a status"),
            help: Some(format!("use one of {}", Status::names())),
        })?),
        None => None,
    };
    let limit = match text("limit") {
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                Problem::new(
                    StatusCode::BAD_REQUEST,
                    pipec_diagnostic::OPTION_INVALID.code,
                    format!("`limit` is a number from 1 to {MAX_PAGE}, not `{l}`"),
                )
            })?,
        None => 50,
    };
    let listed = pipec_runtime::show::listed(
        &*app.store,
        ListQuery {
            status,
            before: text("before").map(str::to_string),
            limit,
            pipeline: text("pipeline").map(str::to_string),
        },
    )
    .await?;
    let rows: Vec<Value> = listed
        .iter()
        .map(|(t, u)| pipec_runtime::show::listed_json(t, u))
        .collect();
    let next = (listed.len() == limit)
        .then(|| listed.last().map(|(t, _)| t.id.clone()))
        .flatten();
    Ok((StatusCode::OK, json!({ "threads": rows, "next": next })))
}

/// `GET /api/threads/{id}`: the thread's view (as `pipec show --json`), its pipeline's
/// graph, the form of each pending gate a form can ask, and its newest events.
pub(crate) async fn thread(app: &App, id: &str) -> Answer {
    let stored = Stored::load(&*app.store, id).await?;
    let view = stored.view(false, None);
    let graph = stored.plan.as_ref().map(graph);
    let forms: Map<String, Value> = match &stored.plan {
        Some(plan) => stored
            .state
            .gates
            .iter()
            .filter(|(_, g)| g.state == GateState::Pending)
            .filter_map(|(name, g)| {
                let mut form = pipec_schema::form::form_of(&g.schema, name)?;
                if let Some(Body::Gate {
                    suggest: Some(answer),
                    ..
                }) = plan.node(name).map(|n| &n.body)
                {
                    form = form.suggest(answer);
                }
                Some((
                    name.clone(),
                    json!({ "schema": form.schema, "wrapped": form.wrapped }),
                ))
            })
            .collect(),
        None => Map::new(),
    };
    // The newest events, from the log the view was made of (read once a poll).
    let skip = stored.events.len().saturating_sub(MAX_EVENTS);
    Ok((
        StatusCode::OK,
        json!({
            "view": view,
            "graph": graph,
            "forms": forms,
            "events": &stored.events[skip..],
            "plan_error": stored.plan_error.map(|e| json!({ "code": e.code, "message": e.message })),
        }),
    ))
}

/// A plan as the page draws it: its nodes (name, kind, what they read), inputs, outputs.
fn graph(plan: &Plan) -> Value {
    let nodes: Vec<Value> = plan
        .nodes
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "kind": format!("{:?}", n.kind).to_ascii_lowercase(),
                "deps": n.deps,
                "each": n.each.is_some(),
                "doc": n.doc,
            })
        })
        .collect();
    json!({
        "pipeline": plan.name,
        "nodes": nodes,
        "inputs": plan.inputs.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
        "outputs": plan.outputs.iter().map(|o| o.name.clone()).collect::<Vec<_>>(),
    })
}

/// `GET /api/threads/{id}/events?since=N`: the events from `since`, at most
/// [`MAX_EVENTS`]; `next` is where the next read starts.
pub(crate) async fn events(app: &App, id: &str, query: &str) -> Answer {
    let p = params(query);
    let since = p.get("since").and_then(Value::as_str).map_or(Ok(0), |s| {
        s.parse::<u64>().map_err(|_| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                pipec_diagnostic::OPTION_INVALID.code,
                format!("`since` is an event number, not `{s}`"),
            )
        })
    })?;
    let mut events = app.store.events(id, since).await?;
    events.truncate(MAX_EVENTS);
    let next = events.last().map_or(since, |e| e.seq + 1);
    Ok((StatusCode::OK, json!({ "events": events, "next": next })))
}

/// The thread's record and the plan it runs.
async fn thread_and_plan(app: &App, id: &str) -> Result<(ThreadRec, Plan), Problem> {
    let state = app.store.load(id).await?;
    let Some(rec) = state.thread else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            pipec_diagnostic::THREAD_NOT_FOUND.code,
            format!("no thread `{id}`"),
        ));
    };
    let plan = pipec_runtime::stored_plan(&*app.store, &rec).await?;
    Ok((rec, plan))
}

/// A runner of the thread's plan, in its project, answering as the inspector.
fn runner(app: &App, rec: &ThreadRec, plan: Plan) -> Runner {
    let runner = Runner::with_store(plan, app.store.clone())
        .project_root(rec.project_root.clone())
        .source(&rec.source)
        .answered_by("ui");
    match &app.options.spans {
        Some(sink) => runner.spans(sink.clone()),
        None => runner,
    }
}

/// `POST /api/threads/{id}/answer` with `{"gate": NAME, "content": {...}}` (a form's
/// fields) or `{"gate": NAME, "answer": VALUE}`: checked against the gate's type and stored
/// as `pipec answer` stores it; nothing runs.
pub(crate) async fn answer(app: &App, id: &str, body: &Value) -> Answer {
    let Some(gate) = body.get("gate").and_then(Value::as_str) else {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            pipec_diagnostic::OPTION_INVALID.code,
            "an answer names its `gate`".into(),
        ));
    };
    let (rec, plan) = thread_and_plan(app, id).await?;
    let value = match (body.get("content"), body.get("answer")) {
        (Some(content), _) => {
            let state = app.store.load(&rec.id).await?;
            let schema = state.gates.get(gate).map(|g| g.schema.clone());
            match schema.and_then(|s| pipec_schema::form::form_of(&s, gate)) {
                Some(form) => form.answer(content.clone()),
                None => content.clone(),
            }
        }
        (None, Some(answer)) => answer.clone(),
        (None, None) => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                pipec_diagnostic::OPTION_INVALID.code,
                "an answer gives `content` (a form's fields) or `answer`".into(),
            ));
        }
    };
    let thread = runner(app, &rec, plan)
        .answer(&rec.id, vec![(gate.to_string(), value)])
        .await?;
    Ok((
        StatusCode::OK,
        json!({ "answered": gate, "thread": thread }),
    ))
}

/// `POST /api/threads/{id}/cancel`.
pub(crate) async fn cancel(app: &App, id: &str) -> Answer {
    let (outcome, _) = app.store.request_cancel(id).await?;
    let said = match outcome {
        CancelOutcome::Cancelled => "cancelled".to_string(),
        CancelOutcome::Requested => "requested".to_string(),
        CancelOutcome::AlreadyEnded(status) => format!("already {}", status.as_str()),
    };
    Ok((StatusCode::OK, json!({ "cancel": said })))
}

/// `POST /api/threads/{id}/resume` with `{}` or `{"rerun_from": [NODE, ...]}`: the thread
/// runs on in this process, as `pipec resume` runs it. Answers its outcome when it ends
/// within a moment, else that it runs (the page follows it).
pub(crate) async fn resume(app: &App, id: &str, body: &Value) -> Answer {
    let rerun_from: Vec<String> = match body.get("rerun_from") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    Problem::new(
                        StatusCode::BAD_REQUEST,
                        pipec_diagnostic::OPTION_INVALID.code,
                        "`rerun_from` lists node names".into(),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                pipec_diagnostic::OPTION_INVALID.code,
                "`rerun_from` lists node names".into(),
            ));
        }
    };
    let (rec, plan) = thread_and_plan(app, id).await?;
    if let Some(unknown) = rerun_from.iter().find(|n| plan.node(n).is_none()) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            pipec_diagnostic::OPTION_INVALID.code,
            format!("the pipeline has no node `{unknown}`"),
        ));
    }
    let runner = runner(app, &rec, plan);
    let thread = rec.id.clone();
    let opts = RunOptions {
        rerun_from,
        ..RunOptions::default()
    };
    let run = tokio::spawn(async move { runner.resume_with(&thread, Vec::new(), opts).await });
    match tokio::time::timeout(RESUME_WAIT, run).await {
        Ok(Ok(Ok(outcome))) => Ok((StatusCode::OK, json!({ "outcome": outcome_word(&outcome) }))),
        Ok(Ok(Err(e))) => Err(e.into()),
        Ok(Err(_)) => Err(Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            pipec_diagnostic::INTERNAL_ERROR.code,
            "the resume stopped unexpectedly".into(),
        )),
        Err(_) => Ok((StatusCode::ACCEPTED, json!({ "outcome": "running" }))),
    }
}

fn outcome_word(outcome: &pipec_runtime::Outcome) -> &'static str {
    match outcome {
        pipec_runtime::Outcome::Completed { .. } => "completed",
        pipec_runtime::Outcome::Paused { .. } => "paused",
        pipec_runtime::Outcome::Failed { .. } => "failed",
        pipec_runtime::Outcome::Blocked { .. } => "blocked",
        pipec_runtime::Outcome::Released { .. } => "released",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parameters_are_decoded() {
        let p = params("status=paused&pipeline=deal%20research&before=&x=%zz");
        assert_eq!(p["status"], "paused");
        assert_eq!(p["pipeline"], "deal research");
        assert_eq!(p["before"], "");
        assert_eq!(p["x"], "%zz");
    }
}
