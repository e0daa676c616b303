//! What a resume decides from a thread's stored state before its attempt starts, and
//! the two ways an attempt of a stored thread starts: `pipec resume` (the state read
//! first, the checks, then the claim) and a worker's taken thread (claimed with its
//! state in one transaction, then the same checks).
//!
//! A thread a worker took that the checks refuse (a configuration value this machine
//! lacks, a node kind this pipec cannot run) is given back as it was: its attempt ends
//! `refused` and its status is the one it was taken with, so nothing it holds is lost
//! and another worker (or this one, later) can take it. One stored with another plan
//! than the runner's that the plan-change rules refuse (`R0407`, `R0401`) is not given
//! back: no worker with this plan could ever run it, so it fails with the refusal, which
//! `pipec show` prints and a person settles with `pipec resume`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::Runner;
use crate::attempt::Start;
use crate::config;
use crate::context::{Last, commit};
use crate::error::RuntimeError;
use crate::llm::Model;
use crate::models;
use crate::options::RunOptions;
use crate::outcome::Outcome;
use crate::plan_change;
use crate::resources::servers::WithOverrides;
use crate::secrets::Scrubber;
use pipec_diagnostic as codes;
use pipec_store::{
    Event, Lease, RecordedEvent, Status, Store, StoredError, Taken, ThreadState, Why, Write, ids,
};

/// What a resume needs to start its attempt, decided before anything is written.
pub(super) struct Ready {
    /// The thread's inputs as the plan takes them (inputs it added come with their
    /// defaults).
    pub inputs: Value,
    /// The nodes the plan changed since the thread last ran.
    pub plan_changes: Vec<String>,
    pub to_run: BTreeSet<String>,
    pub config: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    pub models: HashMap<String, Arc<dyn Model>>,
}

/// What a thread's stored state decides.
pub(super) enum Decided {
    Ready(Ready),
    /// Calls that started and may or may not have happened: the thread waits for a
    /// person.
    Blocked(Vec<StoredError>),
}

impl Runner {
    /// The checks of a resume on `state` (with `answers` given), and what its attempt
    /// needs. It only reads.
    pub(super) async fn decide(
        &self,
        state: &ThreadState,
        answers: &[(String, Value)],
        opts: &RunOptions,
    ) -> Result<Decided, RuntimeError> {
        let inputs =
            plan_change::check_identity(&self.plan, state, &opts.renames, &self.validators)?;
        self.check_resume_options(state, opts)?;
        self.check_answers(answers, Some(&state.gates))?;
        let (plan_changes, blocked) = self.what_the_state_decides(state, opts).await?;
        if !blocked.is_empty() {
            return Ok(Decided::Blocked(blocked));
        }
        let to_run = self.still_to_run(state, opts);
        self.check_runnable(Some(&to_run))?;
        let (mut recorded, overrides) = state
            .thread
            .as_ref()
            .map(|t| (t.config.clone(), t.model_overrides.clone()))
            .unwrap_or_default();
        if self.own_configuration {
            recorded.clear();
            self.check_overrides_beneath_root(&overrides)?;
        }
        let needs = config::needs(
            &self.plan,
            Some(&to_run),
            &|m| self.models.contains_key(m) || overrides.contains_key(m),
            self.servers.is_none(),
        );
        let config::Values { config, secrets } =
            config::read(&needs, &recorded, &*self.environment)?;
        let models = self.tapped(
            models::build(
                &self.plan,
                Some(&to_run),
                &self.models,
                &overrides,
                &secrets,
                &config,
                &self.project_root,
            )?,
            &secrets,
        );
        Ok(Decided::Ready(Ready {
            inputs,
            plan_changes,
            to_run,
            config,
            secrets,
            models,
        }))
    }

    /// Starts the attempt of a claimed thread and runs it to its next pause or end;
    /// `committed` is what the store wrote for it so far (for the live stream).
    pub(super) async fn start_resumed(
        &self,
        lease: Lease,
        mut state: ThreadState,
        ready: Ready,
        servers: WithOverrides,
        committed: &[RecordedEvent],
        opts: RunOptions,
    ) -> Result<Outcome, RuntimeError> {
        if let Some(t) = &mut state.thread {
            // Inputs the new plan added come with their defaults; recorded config stays.
            t.inputs = ready.inputs;
            t.config = ready.config;
            // A thread that takes this plan names it from its first commit on: the store
            // has it before then, so every later reader (a worker, `pipec show`) finds it.
            if t.plan_hash != self.plan.hash {
                let plan_json = serde_json::to_string(&*self.plan).unwrap_or_default();
                self.store.put_plan(&self.plan.hash, &plan_json).await?;
            }
        }
        let attempt = self.new_attempt(
            lease,
            state,
            ready.models,
            ready.secrets,
            servers,
            Start::Resume {
                plan_changes: ready.plan_changes,
            },
        )?;
        attempt.stream(committed);
        attempt.run(opts).await
    }

    /// Runs a thread a worker took ([`pipec_store::Store::take`]) as `pipec resume`
    /// would, from the state its claim read. A thread the checks refuse is given back
    /// as it was taken, and the refusal is the error; one stored with another plan than
    /// this runner's that the plan-change rules refuse is failed with the refusal
    /// instead (no runner of this plan could take it), which is the error too.
    pub async fn resume_taken(
        &self,
        taken: Taken,
        opts: RunOptions,
    ) -> Result<Outcome, RuntimeError> {
        let Taken {
            why,
            lease,
            state,
            events,
        } = taken;
        let thread = lease.thread.clone();
        let ready = match self.decide(&state, &[], &opts).await {
            Ok(Decided::Ready(ready)) => ready,
            Ok(Decided::Blocked(blocked)) => {
                self.stream(&events);
                self.end_blocked(lease, state, &blocked).await?;
                return Ok(Outcome::Blocked {
                    thread,
                    reasons: blocked,
                });
            }
            Err(e) => {
                let e = match self.plan_refusal(&state, e) {
                    Ok(refusal) => {
                        self.stream(&events);
                        let (committed, cancelled) =
                            end_unrun(&*self.store, lease, state, Unrun::Refused(&refusal)).await?;
                        self.stream(&committed);
                        return Err(cancelled.unwrap_or(refusal));
                    }
                    Err(e) => e,
                };
                self.give_back(lease, state, why, &events).await?;
                return Err(e);
            }
        };
        let servers = self.servers_for(&ready.config, &ready.secrets, &ready.models);
        if let Err(e) = self.check_servers(&servers, Some(&ready.to_run)).await {
            self.give_back(lease, state, why, &events).await?;
            return Err(e);
        }
        self.start_resumed(lease, state, ready, servers, &events, opts)
            .await
    }

    /// Claims a thread that a look found runnable for `why` and runs it as a taken one
    /// ([`Runner::resume_taken`]): for a worker whose plan differs from the thread's, so
    /// that the refusal of the plan-change rules is recorded on the thread.
    pub(crate) async fn resume_claimed(
        &self,
        rec: &pipec_store::ThreadRec,
        why: Why,
        opts: RunOptions,
    ) -> Result<Outcome, RuntimeError> {
        let (lease, state, events) = self
            .store
            .claim(&rec.id, self.attempt_rec(rec.attempts + 1))
            .await?;
        let taken = Taken {
            why,
            lease,
            state,
            events,
        };
        self.resume_taken(taken, opts).await
    }

    /// `e`, the refusal of a resume's checks, as the error a thread fails with when
    /// another try would meet it again: the plan-change rules refused this runner's plan
    /// for a thread stored with another, or a runner that trusts only its own
    /// configuration refused what the thread recorded. `Err(e)` for any other refusal,
    /// which another try may not meet.
    fn plan_refusal(
        &self,
        state: &ThreadState,
        e: RuntimeError,
    ) -> Result<RuntimeError, RuntimeError> {
        let Some(t) = &state.thread else {
            return Err(e);
        };
        if self.own_configuration && e.is(&codes::OPTION_INVALID) {
            return Ok(RuntimeError {
                message: format!("{}; nothing of it ran", e.message),
                ..e
            });
        }
        let e_is_changed = e.is(&codes::PLAN_CHANGED);
        let by_plan = e_is_changed || e.is(&codes::FOREIGN_PLAN);
        if t.plan_hash == self.plan.hash || !by_plan {
            return Err(e);
        }
        let source = if self.source.is_empty() {
            String::new()
        } else {
            format!(", from `{}`", self.source)
        };
        let mut refusal = RuntimeError {
            message: format!(
                "the thread was stored with another plan of `{}` ({}) than the one it was to run here ({}{source}), and cannot take that one: {}; nothing of it ran",
                t.pipeline, t.plan_hash, self.plan.hash, e.message
            ),
            ..e
        };
        let with_plan = if self.source.is_empty() {
            "--plan FILE".to_string()
        } else {
            format!("--plan {}", self.source)
        };
        let id = &t.id;
        refusal.help = Some(match refusal.help.take() {
            Some(h) if e_is_changed => format!(
                "to take this plan: `pipec resume {id} {with_plan}`, and {h}; to run it with its own pipeline: `pipec resume {id}`"
            ),
            _ => format!(
                "to run it with its own pipeline: `pipec resume {id}`; or start a new thread of this one with `pipec run`"
            ),
        });
        Ok(refusal)
    }

    /// [`give_back`], its events streamed.
    async fn give_back(
        &self,
        lease: Lease,
        state: ThreadState,
        why: Why,
        claimed: &[RecordedEvent],
    ) -> Result<(), RuntimeError> {
        self.stream(claimed);
        let committed = give_back(&*self.store, lease, state, why).await?;
        self.stream(&committed);
        Ok(())
    }

    /// Hands events the store wrote to the live stream, when there is one.
    fn stream(&self, events: &[RecordedEvent]) {
        if let Some(sink) = &self.events {
            events.iter().for_each(|e| sink(e));
        }
    }
}

/// How an attempt that runs nothing ends.
pub(crate) enum Unrun<'a> {
    /// Given back as it was taken for this reason: the status it had, no holder.
    GivenBack(Why),
    /// Failed with this refusal.
    Refused(&'a RuntimeError),
    /// Blocked on these unfinished calls.
    Blocked(&'a [StoredError]),
}

/// Ends a claimed attempt that ran nothing, in its last commit: the thread let go, the
/// attempt ended `refused` (or `blocked`). A cancel asked while the thread's last
/// holder was dead but still held it (on PostgreSQL, until its lease expired) is carried
/// out instead: the store lets only the commit that records the cancellation through,
/// so any other end would be refused and the thread left running for ever. The events
/// written, and the cancellation's error when it was one.
pub(crate) async fn end_unrun(
    store: &dyn Store,
    lease: Lease,
    state: ThreadState,
    how: Unrun<'_>,
) -> Result<(Vec<RecordedEvent>, Option<RuntimeError>), RuntimeError> {
    let Some(mut t) = state.thread else {
        return Ok((Vec::new(), None));
    };
    let cancelled = t.cancel_requested.then(|| {
        RuntimeError::from(pipec_store::StoreError::Cancelled {
            thread: t.id.clone(),
        })
    });
    t.holder = None;
    let (event, end) = match (&cancelled, how) {
        (Some(e), _) => {
            t.status = Status::Cancelled;
            t.error = Some(e.stored(None));
            (Event::ThreadCancelled {}, "cancelled")
        }
        (None, Unrun::GivenBack(why)) => {
            t.status = match why {
                Why::Queued => Status::Queued,
                Why::Answered | Why::Due => Status::Paused,
                Why::Orphaned => Status::Running,
            };
            (Event::ThreadReleased {}, "refused")
        }
        (None, Unrun::Refused(e)) => {
            t.status = Status::Failed;
            t.error = Some(e.stored(None));
            let event = Event::ThreadFailed {
                code: e.code.into(),
                message: e.message.clone(),
                node: None,
            };
            (event, "refused")
        }
        (None, Unrun::Blocked(blocked)) => {
            t.status = Status::Blocked;
            t.error = blocked.first().cloned();
            let calls = blocked.iter().map(|b| b.message.clone()).collect();
            (Event::ThreadBlocked { calls }, "blocked")
        }
    };
    let mut writes = vec![Write::Thread(t), Write::Event(event)];
    if let Some(mut a) = state.attempts.last().cloned() {
        a.ended_ms = ids::now_ms();
        a.end = Some(end.into());
        writes.push(Write::Attempt(a));
    }
    let committed = commit(store, &lease, &Scrubber::default(), writes, Last::Yes).await?;
    Ok((committed, cancelled))
}

/// Gives a taken thread back as it was taken: the status it had, no holder, its
/// attempt ended `refused` (or the cancel asked of it carried out). The events written.
pub(crate) async fn give_back(
    store: &dyn Store,
    lease: Lease,
    state: ThreadState,
    why: Why,
) -> Result<Vec<RecordedEvent>, RuntimeError> {
    let (committed, cancelled) = end_unrun(store, lease, state, Unrun::GivenBack(why)).await?;
    cancelled.map_or(Ok(committed), Err)
}
