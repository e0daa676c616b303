//! Following what clients subscribed to: every URI a subscription covers that a file
//! template serves is looked at every [`POLL`] (its file's size, change times and
//! inode, not following links), and a difference is one `resources/updated` to each of
//! its subscribers. Looking at the subscribed files alone keeps the cost to what is
//! subscribed; looking at intervals coalesces a burst of writes into one notice. The
//! starting point of a URI is taken when the subscription is accepted, before the client
//! hears it is subscribed, so a change right after is seen.
//!
//! The specification files served are looked at too: an edit rebuilds what is served
//! (one list-changed notice to every listener of the lists, and an update to the
//! subscribers of each fixed resource); a rebuild that fails keeps what was served and
//! says why on stderr.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::mcp::server::Provider;

use super::build::FileTemplate;
use super::matcher::match_uri;
use super::registry::Registry;
use super::template_path::file_segments;

/// How often subscribed files are looked at.
pub const POLL: Duration = Duration::from_millis(40);

/// What a file looks like at one moment; `None` when there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified_ns: i128,
    changed_ns: i128,
    inode: u64,
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(Stamp {
            len: meta.len(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            inode: meta.ino(),
        })
    }
    #[cfg(not(unix))]
    {
        let modified_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        Some(Stamp {
            len: meta.len(),
            modified_ns,
            changed_ns: 0,
            inode: 0,
        })
    }
}

/// Makes what is served again, from the files as they are now.
pub type Rebuild = Box<dyn Fn() -> Result<super::build::Built, String> + Send + Sync>;

/// The specification files whose edits rebuild what is served.
pub struct Specs {
    pub paths: Vec<PathBuf>,
    pub rebuild: Rebuild,
}

/// The watcher of one registry's file templates and specifications.
pub struct Watcher {
    registry: Arc<Registry>,
    templates: Mutex<Vec<FileTemplate>>,
    seen: Mutex<HashMap<String, Option<Stamp>>>,
    specs: Option<Specs>,
    spec_stamps: Mutex<Vec<Option<Stamp>>>,
}

impl Watcher {
    /// Starts following `registry`'s subscriptions to the files of `templates`; the
    /// returned handle keeps it going.
    pub fn start(
        registry: Arc<Registry>,
        templates: Vec<FileTemplate>,
        specs: Option<Specs>,
    ) -> Arc<Watcher> {
        let spec_stamps = specs
            .as_ref()
            .map(|s| s.paths.iter().map(|p| stamp(p)).collect())
            .unwrap_or_default();
        let watcher = Arc::new(Watcher {
            registry: registry.clone(),
            templates: Mutex::new(templates),
            seen: Mutex::new(HashMap::new()),
            specs,
            spec_stamps: Mutex::new(spec_stamps),
        });
        let hook_target = Arc::downgrade(&watcher);
        registry.updates().on_watch(Arc::new(move |uri: &str| {
            if let Some(w) = hook_target.upgrade() {
                w.baseline(uri);
            }
        }));
        let polled = Arc::downgrade(&watcher);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(w) = polled.upgrade() else { break };
                let w2 = w.clone();
                let _ = tokio::task::spawn_blocking(move || w2.poll()).await;
            }
        });
        watcher
    }

    /// The file a URI names, if a file template serves it and its values are allowed.
    fn path_of(&self, uri: &str) -> Option<PathBuf> {
        let templates = self.templates.lock().unwrap_or_else(|p| p.into_inner());
        for t in templates.iter() {
            match match_uri(&t.template, uri) {
                Ok(Some(captures)) => {
                    let segments = file_segments(&t.template, &captures, false).ok()?;
                    let mut path = t.root.clone();
                    for s in segments {
                        path.push(s);
                    }
                    return Some(path);
                }
                Ok(None) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    fn baseline(&self, uri: &str) {
        let Some(path) = self.path_of(uri) else {
            return;
        };
        let now = stamp(&path);
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(uri.to_string())
            .or_insert(now);
    }

    /// Rebuilds what is served when a specification file changed.
    fn poll_specs(&self) {
        let Some(specs) = &self.specs else { return };
        let now: Vec<Option<Stamp>> = specs.paths.iter().map(|p| stamp(p)).collect();
        {
            let mut before = self.spec_stamps.lock().unwrap_or_else(|p| p.into_inner());
            if *before == now {
                return;
            }
            *before = now;
        }
        match (specs.rebuild)() {
            Ok(built) => {
                let fixed: Vec<String> = built
                    .registry
                    .resources()
                    .into_iter()
                    .map(|r| r.uri)
                    .collect();
                *self.templates.lock().unwrap_or_else(|p| p.into_inner()) = built.file_templates;
                self.registry.replace_with(built.registry);
                for uri in fixed {
                    if self.registry.updates().is_watched(&uri) {
                        self.registry.notify_updated(&uri);
                    }
                }
                eprintln!("pipec serve: a specification changed; serving it as it is now");
            }
            Err(e) => eprintln!(
                "pipec serve: a specification changed but cannot be served ({e}); serving it as it was"
            ),
        }
    }

    /// One look at every subscribed file; a change is announced once.
    fn poll(&self) {
        self.poll_specs();
        let watched = self.registry.updates().watched();
        let mut changed = Vec::new();
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.retain(|uri, _| watched.contains(uri));
            for uri in &watched {
                let Some(path) = self.path_of(uri) else {
                    continue;
                };
                let now = stamp(&path);
                match seen.get(uri) {
                    Some(before) if *before == now => {}
                    Some(_) => {
                        seen.insert(uri.clone(), now);
                        changed.push(uri.clone());
                    }
                    None => {
                        seen.insert(uri.clone(), now);
                    }
                }
            }
        }
        for uri in changed {
            self.registry.notify_updated(&uri);
        }
    }
}
