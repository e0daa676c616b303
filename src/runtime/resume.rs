//! What a resume decides from a thread's stored state before its attempt starts, and
//! the two ways an attempt of a stored thread starts: `pipec resume` (the state read
//! first, the checks, then the claim) and a worker's taken thread (claimed with its
//! state in one transaction, then the same checks).
//!
//! A thread a worker took that the checks refuse (a configuration value this machine
//! lacks, a node kind this pipec cannot run) is given back as it was: its attempt ends
//! `refused` and its status is the one it was taken with, so nothing it holds is lost
//! and another worker (or this one, later) can take it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::attempt::{Attempt, Last, Start, commit, event_write};
use super::config;
use super::error::RuntimeError;
use super::models;
use super::options::RunOptions;
use super::outcome::Outcome;
use super::plan_change;
use super::resources::servers::WithOverrides;
use super::runner::Runner;
use super::secrets::Scrubber;
use crate::llm::Model;
use crate::store::{
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
        let (recorded, overrides) = state
            .thread
            .as_ref()
            .map(|t| (t.config.clone(), t.model_overrides.clone()))
            .unwrap_or_default();
        let needs = config::needs(&self.plan, Some(&to_run), &|m| {
            self.models.contains_key(m) || overrides.contains_key(m)
        });
        let config::Values { config, secrets } =
            config::read(&needs, &recorded, &*self.environment)?;
        let models = models::build(
            &self.plan,
            Some(&to_run),
            &self.models,
            &overrides,
            &secrets,
            &config,
            &self.project_root,
        )?;
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
        }
        let attempt = Attempt::new(
            self,
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

    /// Runs a thread a worker took ([`crate::store::Store::take`]) as `pipec resume`
    /// would, from the state its claim read. A thread the checks refuse is given back
    /// as it was taken, and the refusal is the error.
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
                self.give_back(lease, state, why, &events).await?;
                return Err(e);
            }
        };
        let servers = self.servers_for(&ready.config, &ready.secrets);
        if let Err(e) = self.check_servers(&servers, Some(&ready.to_run)).await {
            self.give_back(lease, state, why, &events).await?;
            return Err(e);
        }
        self.start_resumed(lease, state, ready, servers, &events, opts)
            .await
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

/// Gives a taken thread back as it was taken: the status it had, no holder, its
/// attempt ended `refused`. The events written.
pub(crate) async fn give_back(
    store: &dyn Store,
    lease: Lease,
    state: ThreadState,
    why: Why,
) -> Result<Vec<RecordedEvent>, RuntimeError> {
    let Some(mut t) = state.thread else {
        return Ok(Vec::new());
    };
    t.status = match why {
        Why::Queued => Status::Queued,
        Why::Answered | Why::Due => Status::Paused,
        Why::Orphaned => Status::Running,
    };
    t.holder = None;
    let mut writes = vec![Write::Thread(t), event_write(Event::ThreadReleased {})];
    if let Some(mut a) = state.attempts.last().cloned() {
        a.ended_ms = ids::now_ms();
        a.end = Some("refused".into());
        writes.push(Write::Attempt(a));
    }
    commit(store, &lease, &Scrubber::default(), writes, Last::Yes).await
}
