//! Everything a start or resume checks before it writes anything: inputs, answers,
//! options (every name they give must exist), host functions, node kinds this pipec can
//! run, and unfinished effects. A refused command changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::Runner;
use crate::error::{RuntimeError, combine};
use crate::options::{Decision, RunOptions};
use crate::validate::Mode;
use pipec_base::names::did_you_mean;
use pipec_diagnostic as codes;
use pipec_plan::{Body, NodeKind};
use pipec_store::{CallState, NodeState, StoredError, ThreadState};

/// How long a resume waits for the processes of a dead pipec's calls to be gone.
const EFFECTS_GONE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The default cap on one gate answer's size, as JSON.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 1024 * 1024;

fn option(message: String) -> RuntimeError {
    RuntimeError::new(&codes::OPTION_INVALID, message)
}

/// `help` naming what exists, with a did-you-mean when one is close.
fn suggestion<'a>(name: &str, known: impl Iterator<Item = &'a str> + Clone, what: &str) -> String {
    did_you_mean(name, known.clone()).unwrap_or_else(|| {
        let list: Vec<&str> = known.collect();
        if list.is_empty() {
            format!("there are no {what}")
        } else {
            format!("the {what} are {}", list.join(", "))
        }
    })
}

impl Runner {
    /// Validates inputs against the plan and fills defaults.
    pub fn check_inputs(&self, inputs: Value) -> Result<Value, RuntimeError> {
        let Value::Object(given) = inputs else {
            return Err(RuntimeError::new(
                &codes::INPUT_INVALID,
                "inputs are a JSON object of input names",
            ));
        };
        for name in given.keys() {
            if !self.plan.inputs.iter().any(|i| &i.name == name) {
                let known = self.plan.inputs.iter().map(|i| i.name.as_str());
                let help = if self.plan.inputs.is_empty() {
                    "this pipeline takes no inputs".to_string()
                } else {
                    suggestion(name, known, "inputs")
                };
                return Err(RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!("the pipeline has no input `{name}`"),
                )
                .help(help));
            }
        }
        let mut out = Map::new();
        for input in &self.plan.inputs {
            let value = match given.get(&input.name) {
                Some(v) => v.clone(),
                None => match &input.default {
                    Some(d) => d.clone(),
                    None if input.optional => Value::Null,
                    None => {
                        return Err(RuntimeError::new(
                            &codes::INPUT_INVALID,
                            format!(
                                "the input `{}` ({}) is required",
                                input.name, input.type_name
                            ),
                        )
                        .help(format!("give it: `--input {}=...`", input.name)));
                    }
                },
            };
            // Records are open: an input may carry fields its type does not name.
            if let Err(e) = self.validators.check(&input.schema, &value, Mode::Open) {
                return Err(RuntimeError::new(
                    &codes::INPUT_INVALID,
                    format!(
                        "the input `{}` does not fit `{}`: {e}",
                        input.name, input.type_name
                    ),
                ));
            }
            out.insert(input.name.clone(), value);
        }
        Ok(Value::Object(out))
    }

    /// An answer must name a gate, fit its type exactly (no field it does not declare,
    /// integers within 64 bits) and stay under the size cap.
    pub(crate) fn check_answer(
        &self,
        gate: &str,
        answer: &Value,
        rows: Option<&BTreeMap<String, pipec_store::GateRec>>,
    ) -> Result<(), RuntimeError> {
        let size = serde_json::to_vec(answer).map_or(0, |b| b.len());
        if size > self.max_answer_bytes {
            return Err(RuntimeError::new(
                &codes::GATE_ANSWER_INVALID,
                format!(
                    "the answer to `{gate}` is {size} bytes, more than the {} an answer may have",
                    self.max_answer_bytes
                ),
            )
            .help("put large content where the pipeline can read it (a file, a resource) and answer with a reference; or raise the cap with `--max-answer-bytes`"));
        }
        // The approval gate of a call, and a server's question during one (named after
        // the call), are the thread's, not the plan's: the row says what it takes.
        let approvals = || {
            rows.into_iter().flatten().filter(|(_, g)| {
                self.plan
                    .node(&g.node)
                    .is_some_and(|n| n.kind != NodeKind::Gate)
            })
        };
        if let Some((_, row)) = approvals().find(|(name, _)| name.as_str() == gate) {
            return self
                .validators
                .check(&row.schema, answer, Mode::Closed)
                .map_err(|e| {
                    let help = match row.ask {
                        Some(_) if crate::ClientAsk::of(row).is_some() => r#"answer with the model's reply: {"content": {"type": "text", "text": "..."}}"#.to_string(),
                        Some(_) => format!(
                            "answer with the fields of the form the server sent, as JSON, or null to decline; `pipec show` has the form: {}",
                            serde_json::to_string(&row.schema).unwrap_or_default()
                        ),
                        None => r#"answer with {"approved": true}, or {"approved": false, "note": "why"}"#.to_string(),
                    };
                    RuntimeError::new(
                        &codes::GATE_ANSWER_INVALID,
                        format!("the answer to `{gate}` does not fit: {e}"),
                    )
                    .help(help)
                });
        }
        let gates = || {
            self.plan
                .nodes
                .iter()
                .filter(|n| n.kind == NodeKind::Gate)
                .map(|n| n.name.as_str())
                .chain(approvals().map(|(name, _)| name.as_str()))
        };
        let Some(node) = self.plan.node(gate).filter(|n| n.kind == NodeKind::Gate) else {
            let mut e = RuntimeError::new(
                &codes::GATE_ANSWER_INVALID,
                format!("the pipeline has no gate `{gate}`"),
            )
            .help(suggestion(gate, gates(), "gates"));
            if rows.is_none() && self.plan.nodes.iter().any(|n| matches!(&n.body, pipec_plan::Body::Model { approve, .. } if !approve.is_empty())) {
                e = e.help("a call's approval gate exists once the call is asked for: answer it when the run pauses there, not ahead");
            }
            return Err(e);
        };
        self.validators
            .check(&node.output, answer, Mode::Closed)
            .map_err(|e| {
                let example = serde_json::to_string(&self.validators.shown_schema(&node.output))
                    .unwrap_or_default();
                RuntimeError::new(
                    &codes::GATE_ANSWER_INVALID,
                    format!(
                        "the answer to `{gate}` does not fit `{}`: {e}",
                        node.output_type
                    ),
                )
                .help(format!("answer with JSON of this schema: {example}"))
            })
    }

    /// Answers given on one command: each gate once, each valid.
    /// `rows`: the thread's gate rows (a resume, `pipec answer`), where the approval gates
    /// of calls are; a new thread has none.
    pub(crate) fn check_answers(
        &self,
        answers: &[(String, Value)],
        rows: Option<&BTreeMap<String, pipec_store::GateRec>>,
    ) -> Result<(), RuntimeError> {
        let mut seen = BTreeSet::new();
        for (gate, answer) in answers {
            if !seen.insert(gate.as_str()) {
                return Err(option(format!("the gate `{gate}` is answered twice"))
                    .help("give one answer per gate"));
            }
            self.check_answer(gate, answer, rows)?;
        }
        Ok(())
    }

    /// Every `host` node needs its function.
    pub(crate) fn check_runnable(
        &self,
        to_run: Option<&BTreeSet<String>>,
    ) -> Result<(), RuntimeError> {
        for node in &self.plan.nodes {
            if to_run.is_some_and(|set| !set.contains(&node.name)) {
                continue;
            }
            if let Body::Host { function } = &node.body
                && !self.hosts.contains_key(function)
            {
                return Err(RuntimeError::new(
                    &codes::HOST_FUNCTION_MISSING,
                    format!(
                        "the node `{}` calls the host function `{function}`, which is not registered",
                        node.name
                    ),
                )
                .help("host functions are registered by a program that embeds pipec: `Runner::host_fn(...)`"));
            }
        }
        Ok(())
    }

    /// Model overrides name models the plan declares.
    pub(crate) fn check_overrides(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        for name in overrides.keys() {
            if !self.plan.models.iter().any(|m| &m.name == name) {
                let known = self.plan.models.iter().map(|m| m.name.as_str());
                return Err(option(format!(
                    "`--model {name}=...`: the plan declares no model `{name}`"
                ))
                .help(suggestion(name, known, "models")));
            }
        }
        Ok(())
    }

    /// The scripted model replacements a thread recorded, when this runner trusts only
    /// its own configuration: each replies file must be beneath the project root.
    pub(crate) fn check_overrides_beneath_root(
        &self,
        overrides: &BTreeMap<String, String>,
    ) -> Result<(), RuntimeError> {
        let root = std::fs::canonicalize(&self.project_root).ok();
        for (name, spec) in overrides {
            let file = spec.strip_prefix("scripted:").unwrap_or(spec);
            let beneath = std::fs::canonicalize(self.project_root.join(file))
                .ok()
                .zip(root.as_ref())
                .is_some_and(|(f, r)| f.starts_with(r));
            if !beneath {
                return Err(option(format!(
                    "the thread replaces the model `{name}` with scripted replies from `{file}`, which is not in the folder this worker serves ({})",
                    self.project_root.display()
                ))
                .help("a worker serving a folder reads replies files only from that folder: submit the thread with `--model NAME=scripted:FILE` naming a file in it, or run it with `pipec resume`"));
            }
        }
        Ok(())
    }

    /// The options of a start: only answers ahead and a new thread id are meaningful.
    pub(crate) fn check_start_options(&self, opts: &RunOptions) -> Result<(), RuntimeError> {
        if opts.concurrency == Some(0) {
            return Err(option("a concurrency of 0 runs nothing".into())
                .help("give `--concurrency 1` or more"));
        }
        if opts.changes_results() {
            return Err(option(
                "`--keep`, `--rerun-from`, `--rename`, `--retry-unfinished` and `--resolve` apply to a resume, not to a new thread".into(),
            ));
        }
        self.check_answers(&opts.pre_answers, None)
    }

    /// The options of a resume: every node and call they name exists, no node is both
    /// kept and rerun, each decision's result fits its node.
    pub(crate) fn check_resume_options(
        &self,
        state: &ThreadState,
        opts: &RunOptions,
    ) -> Result<(), RuntimeError> {
        if opts.concurrency == Some(0) {
            return Err(option("a concurrency of 0 runs nothing".into())
                .help("give `--concurrency 1` or more"));
        }
        let plan_nodes = || self.plan.nodes.iter().map(|n| n.name.as_str());
        let mut problems = Vec::new();
        for (flag, names) in [("--keep", &opts.keep), ("--rerun-from", &opts.rerun_from)] {
            for name in names {
                if self.plan.node(name).is_none() {
                    problems.push(
                        option(format!(
                            "`{flag} {name}`: the pipeline has no node `{name}`"
                        ))
                        .help(suggestion(name, plan_nodes(), "nodes")),
                    );
                }
            }
        }
        for name in opts.keep.iter().filter(|n| opts.rerun_from.contains(n)) {
            problems.push(
                option(format!(
                    "`{name}` is both kept (`--keep`) and computed again (`--rerun-from`)"
                ))
                .help("choose one"),
            );
        }
        let mut renamed = BTreeSet::new();
        let mut sources = BTreeSet::new();
        for (old, new) in &opts.renames {
            if !state.nodes.contains_key(old) && !state.gates.contains_key(old) {
                let known = state
                    .nodes
                    .keys()
                    .chain(state.gates.keys())
                    .map(String::as_str);
                problems.push(
                    option(format!(
                        "`--rename {old}={new}`: the thread has no node `{old}`"
                    ))
                    .help(suggestion(old, known, "thread's nodes")),
                );
            }
            if self.plan.node(new).is_none() {
                problems.push(
                    option(format!(
                        "`--rename {old}={new}`: the pipeline has no node `{new}`"
                    ))
                    .help(suggestion(new, plan_nodes(), "nodes")),
                );
            } else if (state.nodes.contains_key(new) || state.gates.contains_key(new))
                && opts.renamed_to(new).is_none()
            {
                problems.push(
                    option(format!(
                        "`--rename {old}={new}`: the thread already has a node `{new}`"
                    ))
                    .help(format!("rename `{new}` too, or give `{old}` another name")),
                );
            }
            if !sources.insert(old.as_str()) {
                problems.push(option(format!("`{old}` is renamed twice")));
            }
            if !renamed.insert(new.as_str()) {
                problems.push(option(format!("two nodes are renamed to `{new}`")));
            }
        }
        // An unfinished call may be named by its stored key or by the one a rename
        // gives it.
        let unfinished: Vec<(&pipec_store::CallKey, String, Option<String>)> = state
            .calls
            .iter()
            .filter(|(_, c)| {
                matches!(c.state, CallState::Started | CallState::Unknown) && !c.idempotent
            })
            .map(|(k, _)| {
                let (stored, renamed) = opts.call_names(k);
                (k, stored, renamed)
            })
            .collect();
        let mut decided = BTreeSet::new();
        for (key, decision) in &opts.decisions {
            if !decided.insert(key.as_str()) {
                problems.push(option(format!("the call `{key}` is decided twice")));
            }
            let named: Vec<&pipec_store::CallKey> = if key == "all" {
                if unfinished.is_empty() {
                    problems.push(option("`all`: the thread has no unfinished call".into()));
                }
                unfinished.iter().map(|(k, _, _)| *k).collect()
            } else {
                match unfinished
                    .iter()
                    .find(|(_, stored, renamed)| stored == key || renamed.as_ref() == Some(key))
                {
                    Some((k, _, _)) => vec![*k],
                    None => {
                        let help = if unfinished.is_empty() {
                            "the thread has no unfinished call".to_string()
                        } else {
                            suggestion(
                                key,
                                unfinished.iter().map(|(_, stored, _)| stored.as_str()),
                                "unfinished calls",
                            )
                        };
                        problems.push(
                            option(format!("`{key}` is not an unfinished call of this thread"))
                                .help(help),
                        );
                        continue;
                    }
                }
            };
            // A result given as what happened must fit each node it is given for.
            if let Decision::Performed(value) = decision {
                for k in named {
                    let name = opts.renamed_to(&k.node).unwrap_or(&k.node);
                    if let Some(node) = self.plan.node(name)
                        && let Err(e) = self.validators.check(&node.output, value, Mode::Open)
                    {
                        problems.push(option(format!(
                            "the result given for {} does not fit `{}`: {e}",
                            k.display(),
                            node.output_type
                        )));
                    }
                }
            }
        }
        match combine(problems) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Before anything is decided about calls another process left unfinished, what they
    /// started must be gone: each `started` row names the reaper watching its process
    /// group, and the reaper of a pipec that died kills the group, then exits. A resume
    /// waits for it (briefly; it takes milliseconds) and is refused while it still runs.
    pub(crate) async fn wait_for_unfinished_effects(
        &self,
        state: &ThreadState,
    ) -> Result<(), RuntimeError> {
        let mut seen = BTreeSet::new();
        for (key, call) in &state.calls {
            if !matches!(call.state, CallState::Started | CallState::Unknown) || call.idempotent {
                continue;
            }
            let Some(w) = call.watched_by else {
                continue;
            };
            if !seen.insert((w.reaper_pid, w.reaper_start, w.owner_pid)) {
                continue;
            }
            let reaper = pipec_process::ReaperId {
                pid: w.reaper_pid,
                start_time: w.reaper_start,
            };
            if let Err(still) =
                pipec_process::wait_gone(&reaper, w.owner_pid, EFFECTS_GONE_WAIT).await
            {
                return Err(RuntimeError::new(
                    &codes::THREAD_LOCKED,
                    format!(
                        "the processes the call {} started may still run: {still}",
                        key.display()
                    ),
                )
                .help("resume again in a moment; `ps` shows what the reaper is waiting for"));
            }
        }
        Ok(())
    }

    /// Calls whose outcome nobody knows and nobody decided on.
    pub(crate) fn unfinished_calls(
        &self,
        state: &ThreadState,
        opts: &RunOptions,
    ) -> Vec<StoredError> {
        let mut out = Vec::new();
        for (key, call) in &state.calls {
            if !matches!(call.state, CallState::Started | CallState::Unknown) || call.idempotent {
                continue;
            }
            let shown = key.display();
            if opts.decision_for(key).is_some() {
                continue;
            }
            let node_done = state
                .nodes
                .get(&key.node)
                .is_some_and(|n| n.state == NodeState::Done && n.generation == key.generation);
            if node_done {
                continue;
            }
            out.push(StoredError {
                code: codes::UNFINISHED_EFFECT.code.into(),
                name: codes::UNFINISHED_EFFECT.name.into(),
                message: format!(
                    "the call {shown} ({} {}) started and may or may not have happened",
                    call.kind, call.target
                ),
                node: Some(key.node.clone()),
                help: Some(format!(
                    "run it again with `--retry-unfinished {shown}`, or record that it happened with `--resolve {shown}=<result JSON>`"
                )),
            });
        }
        out
    }

    /// The nodes a resume may still run: those without a finished row, and those it
    /// computes again.
    pub(crate) fn still_to_run(&self, state: &ThreadState, opts: &RunOptions) -> BTreeSet<String> {
        let rerun = super::plan_change::dependents(&self.plan, &opts.rerun_from);
        let renamed: BTreeMap<&str, &str> = opts
            .renames
            .iter()
            .map(|(a, b)| (b.as_str(), a.as_str()))
            .collect();
        self.plan
            .nodes
            .iter()
            .filter(|n| {
                let stored = renamed.get(n.name.as_str()).copied().unwrap_or(&n.name);
                rerun.contains(&n.name)
                    || !state
                        .nodes
                        .get(stored)
                        .is_some_and(|r| matches!(r.state, NodeState::Done | NodeState::Skipped))
            })
            .map(|n| n.name.clone())
            .collect()
    }
}
