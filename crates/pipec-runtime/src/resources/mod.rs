//! Resources at run time: the servers an attempt talks to (`servers.rs`), what a tool
//! result means (`results.rs`), links lifted into manifests (`manifest.rs`), bindings
//! resolved to references when a node enters (`resolve.rs`), and reads shared within
//! the attempt (`cache.rs`); references are fetched when a node starts by hydration
//! (`hydrate/`, above this module). Before a run, the declared tools are held against
//! `tools/list` (`tools_check.rs`); `pipec check --online` and `pipec tools pull` take a
//! server's listings in a short session of their own (`server_listing.rs`), and the
//! former compares them with every declaration that uses the server
//! (`online_check.rs`).
//!
//! Protocol code is `pipec_mcp`'s; this module decides what the protocol's answers mean
//! to a pipeline.

mod cache;
pub(crate) mod manifest;
pub(crate) mod online_check;
pub(crate) mod resolve;
pub(crate) mod results;
mod sampling;
pub(crate) mod server_listing;
pub(crate) mod servers;
pub(crate) mod tools_check;

use std::collections::BTreeMap;
use std::sync::Mutex;

pub(crate) use cache::{FetchCache, Served};
use servers::WithOverrides;

use pipec_store::{HealRec, RefOrigin};

/// What an attempt's nodes share to reach resources.
pub(crate) struct Resources {
    pub servers: WithOverrides,
    pub cache: FetchCache,
    /// The latest heal of each reference (loaded with the thread, then kept current).
    heals: Mutex<BTreeMap<RefOrigin, HealRec>>,
    /// One heal at a time per reference.
    pub healing: tokio::sync::Mutex<BTreeMap<RefOrigin, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    /// The attempt's secrets, to put back into a replay's arguments.
    pub secrets: BTreeMap<String, String>,
    /// Numbers the attempt's heal replays in the journal.
    pub replays: std::sync::atomic::AtomicU32,
    /// A fault injected by a test: links of these kinds are dead on their first read.
    pub dead_links: DeadLinks,
}

/// Link kinds whose links a test kills ([`crate::Runner::dead_links`]): the first read of
/// each such link is answered as a resource that no longer exists, as its server would
/// once the link expired, so the heal path runs; a later read (of the healed link) goes
/// to the server.
#[derive(Default)]
pub(crate) struct DeadLinks {
    pub kinds: std::collections::BTreeSet<String>,
    killed: Mutex<std::collections::BTreeSet<String>>,
}

impl DeadLinks {
    pub(crate) fn new(kinds: std::collections::BTreeSet<String>) -> DeadLinks {
        DeadLinks {
            kinds,
            killed: Mutex::default(),
        }
    }

    /// Whether this read of `uri`, a link of `kind`, is answered as dead.
    pub(crate) fn kills(&self, kind: Option<&str>, uri: &str) -> bool {
        match kind {
            Some(k) if self.kinds.contains(k) => self
                .killed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uri.to_string()),
            _ => false,
        }
    }
}

impl Resources {
    pub(crate) fn new(
        servers: WithOverrides,
        heals: BTreeMap<RefOrigin, HealRec>,
        secrets: BTreeMap<String, String>,
    ) -> Resources {
        Resources {
            servers,
            cache: FetchCache::new(cache::DEFAULT_CACHE_BYTES),
            heals: Mutex::new(heals),
            healing: Default::default(),
            secrets,
            replays: Default::default(),
            dead_links: DeadLinks::default(),
        }
    }

    /// The latest heal of a reference.
    pub(crate) fn heal_of(&self, origin: &RefOrigin) -> Option<HealRec> {
        self.heals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(origin)
            .cloned()
    }

    pub(crate) fn record_heal(&self, origin: RefOrigin, rec: HealRec) {
        self.heals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(origin, rec);
    }

    /// Ends the attempt's sessions.
    pub(crate) async fn close(&self) {
        servers::Servers::close(&self.servers).await;
    }
}
