//! A tap on an attempt's models and MCP servers: what [`Runner::tap`](crate::Runner::tap)
//! is given sees every model and the servers an attempt is about to use, with the
//! attempt's secrets, and may wrap or replace them. `pipec test` records tapes this way
//! (every request and its answer, secrets scrubbed) and replays them.

use std::sync::Arc;

use crate::llm::Model;
use crate::resources::servers::Servers;
use crate::secrets::Scrubber;

/// Sees the models and servers of each attempt before its nodes run.
pub trait Tap: Send + Sync {
    /// The model the attempt calls as `name`: `model` (what the runner built: a
    /// registered model, an override or the declared endpoint) or what stands for it.
    /// `secrets` holds every secret value the attempt read.
    fn model(&self, name: &str, model: Arc<dyn Model>, secrets: &Scrubber) -> Arc<dyn Model>;

    /// The servers the attempt reaches (the embedder's, or the plan's own, started when
    /// first used), or what stands for them.
    fn servers(&self, servers: Arc<dyn Servers>, secrets: &Scrubber) -> Arc<dyn Servers>;
}
