//! Following what clients subscribed to. Each URI a subscription covers that a file
//! template serves names a file; the file is followed from the moment a first
//! subscription covers its URI (its starting point taken before the client hears it is
//! subscribed, so a change right after is seen) until the last one ends.
//!
//! On Linux the folder of each followed file is watched with inotify (one watch per
//! folder, whatever number of files in it are followed), and only the files an event
//! names are looked at again: the cost grows with what changes, not with what is
//! subscribed. A file is looked at by its size, change times and inode, not following
//! links, and a difference is one `resources/updated` to each of its subscribers. Looks
//! happen every [`POLL`], so a burst of writes within one is one notice. A file whose
//! folder cannot be watched (it does not exist, the watch limit is reached, another
//! system) is looked at every [`POLL`] instead.
//!
//! The specification files served are looked at every [`POLL`] too: an edit rebuilds
//! what is served (one list-changed notice to every listener of the lists, and an update
//! to the subscribers of each fixed resource); a rebuild that fails keeps what was served
//! and says why on stderr.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pipec_mcp::server::Provider;

use super::build::FileTemplate;
#[cfg(target_os = "linux")]
use super::file_events::{Event, Inotify};
use super::matcher::match_uri;
use super::registry::Registry;
use super::template_path::file_segments;

/// How often changed files, files that cannot be watched, and the specifications are
/// looked at.
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

/// Where no inotify is, nothing is watched and every followed file is looked at.
#[cfg(not(target_os = "linux"))]
struct Inotify;

#[cfg(not(target_os = "linux"))]
struct Event {
    watch: i32,
    name: Option<std::ffi::OsString>,
    overflow: bool,
    gone: bool,
}

#[cfg(not(target_os = "linux"))]
impl Inotify {
    fn new() -> std::io::Result<Inotify> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    fn watch(&self, _dir: &Path) -> std::io::Result<i32> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
    fn unwatch(&self, _watch: i32) {}
}

/// Makes what is served again, from the files as they are now.
pub type Rebuild = Box<dyn Fn() -> Result<super::build::Built, String> + Send + Sync>;

/// The specification files whose edits rebuild what is served.
pub struct Specs {
    pub paths: Vec<PathBuf>,
    pub rebuild: Rebuild,
}

/// A followed file: what it looked like last, the URIs that name it, and the watch of
/// its folder (`None`: looked at every [`POLL`]).
struct FileState {
    stamp: Option<Stamp>,
    uris: BTreeSet<String>,
    watch: Option<i32>,
}

/// One inotify watch: the folder paths it stands for (one folder reached by two paths
/// is one watch) and how many followed files are in it.
struct WatchState {
    folders: Vec<PathBuf>,
    files: usize,
}

/// What is followed.
#[derive(Default)]
struct Followed {
    /// Each covered URI (normal form) that names a file, with that file.
    uris: HashMap<String, PathBuf>,
    files: HashMap<PathBuf, FileState>,
    watches: HashMap<i32, WatchState>,
    folders: HashMap<PathBuf, i32>,
    /// Files an event named since the last look.
    dirty: HashSet<PathBuf>,
}

/// The watcher of one registry's file templates and specifications.
pub struct Watcher {
    registry: Arc<Registry>,
    templates: Mutex<Vec<FileTemplate>>,
    followed: Mutex<Followed>,
    events: Option<Arc<Inotify>>,
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
            followed: Mutex::new(Followed::default()),
            events: Inotify::new().ok().map(Arc::new),
            specs,
            spec_stamps: Mutex::new(spec_stamps),
        });
        let (on, off) = (Arc::downgrade(&watcher), Arc::downgrade(&watcher));
        registry.updates().on_watch(Arc::new(move |uri: &str| {
            if let Some(w) = on.upgrade() {
                w.follow(uri);
            }
        }));
        registry.updates().on_unwatch(Arc::new(move |uri: &str| {
            if let Some(w) = off.upgrade() {
                w.lock().unfollow(uri, w.events.as_deref());
            }
        }));
        tokio::spawn(run(Arc::downgrade(&watcher)));
        watcher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Followed> {
        self.followed.lock().unwrap_or_else(|p| p.into_inner())
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

    /// Follows the file `uri` names, if any: its folder watched first, then its
    /// starting point taken, so no change between the two is missed.
    fn follow(&self, uri: &str) {
        if let Some(path) = self.path_of(uri) {
            self.lock().follow(uri, path, self.events.as_deref());
        }
    }

    /// Takes the events waiting: the files they name are looked at next.
    #[cfg(target_os = "linux")]
    fn take_events(&self) {
        let Some(events) = &self.events else { return };
        match events.read() {
            Ok(list) => self.lock().note(&list, events),
            Err(e) => eprintln!("pipec serve: reading file events failed: {e}"),
        }
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
                self.refollow();
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

    /// After a rebuild, each followed URI follows the file the new templates name.
    fn refollow(&self) {
        let uris: Vec<String> = self.lock().uris.keys().cloned().collect();
        for uri in uris {
            let path = self.path_of(&uri);
            let mut followed = self.lock();
            // A URI let go of meanwhile stays let go of.
            let Some(before) = followed.uris.get(&uri) else {
                continue;
            };
            if path.as_ref() == Some(before) {
                continue;
            }
            followed.unfollow(&uri, self.events.as_deref());
            if let Some(path) = path {
                followed.follow(&uri, path, self.events.as_deref());
            }
        }
    }

    /// One look: the specifications, the files events named, and the files that are
    /// not watched; a change is announced once.
    fn look(&self) {
        self.poll_specs();
        let mut changed = Vec::new();
        {
            let mut followed = self.lock();
            let mut due: HashSet<PathBuf> = std::mem::take(&mut followed.dirty);
            due.extend(
                followed
                    .files
                    .iter()
                    .filter(|(_, f)| f.watch.is_none())
                    .map(|(p, _)| p.clone()),
            );
            for path in due {
                let Some(file) = followed.files.get_mut(&path) else {
                    continue;
                };
                let now = stamp(&path);
                if file.stamp != now {
                    file.stamp = now;
                    changed.extend(file.uris.iter().cloned());
                }
            }
        }
        for uri in changed {
            self.registry.notify_updated(&uri);
        }
    }
}

impl Followed {
    fn follow(&mut self, uri: &str, path: PathBuf, events: Option<&Inotify>) {
        if self.uris.contains_key(uri) {
            return;
        }
        self.uris.insert(uri.to_string(), path.clone());
        if let Some(file) = self.files.get_mut(&path) {
            file.uris.insert(uri.to_string());
            return;
        }
        let watch = path
            .parent()
            .and_then(|folder| self.watch_folder(folder, events));
        let state = FileState {
            stamp: stamp(&path),
            uris: BTreeSet::from([uri.to_string()]),
            watch,
        };
        self.files.insert(path, state);
    }

    fn unfollow(&mut self, uri: &str, events: Option<&Inotify>) {
        let Some(path) = self.uris.remove(uri) else {
            return;
        };
        let Some(file) = self.files.get_mut(&path) else {
            return;
        };
        file.uris.remove(uri);
        if !file.uris.is_empty() {
            return;
        }
        let watch = file.watch;
        self.files.remove(&path);
        self.dirty.remove(&path);
        if let Some(watch) = watch {
            self.release_watch(watch, events);
        }
    }

    /// The watch of `folder`, made if it is the first followed file there; `None` when
    /// it cannot be watched.
    fn watch_folder(&mut self, folder: &Path, events: Option<&Inotify>) -> Option<i32> {
        if let Some(&watch) = self.folders.get(folder) {
            if let Some(state) = self.watches.get_mut(&watch) {
                state.files += 1;
            }
            return Some(watch);
        }
        let watch = events?.watch(folder).ok()?;
        self.folders.insert(folder.to_path_buf(), watch);
        let state = self.watches.entry(watch).or_insert(WatchState {
            folders: Vec::new(),
            files: 0,
        });
        state.folders.push(folder.to_path_buf());
        state.files += 1;
        Some(watch)
    }

    fn release_watch(&mut self, watch: i32, events: Option<&Inotify>) {
        let Some(state) = self.watches.get_mut(&watch) else {
            return;
        };
        state.files = state.files.saturating_sub(1);
        if state.files > 0 {
            return;
        }
        if let Some(state) = self.watches.remove(&watch) {
            for folder in state.folders {
                self.folders.remove(&folder);
            }
        }
        if let Some(events) = events {
            events.unwatch(watch);
        }
    }

    /// Marks the files `list` names for the next look. A folder that went away takes
    /// its watch with it: its files are looked at every [`POLL`] from then on.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn note(&mut self, list: &[Event], events: &Inotify) {
        for event in list {
            if event.overflow {
                let all: Vec<PathBuf> = self.files.keys().cloned().collect();
                self.dirty.extend(all);
                continue;
            }
            let Some(state) = self.watches.get(&event.watch) else {
                continue;
            };
            if let Some(name) = &event.name {
                for folder in &state.folders {
                    let path = folder.join(name);
                    if self.files.contains_key(&path) {
                        self.dirty.insert(path);
                    }
                }
            }
            if event.gone {
                if let Some(state) = self.watches.remove(&event.watch) {
                    for folder in state.folders {
                        self.folders.remove(&folder);
                    }
                }
                for (path, file) in &mut self.files {
                    if file.watch == Some(event.watch) {
                        file.watch = None;
                        self.dirty.insert(path.clone());
                    }
                }
                events.unwatch(event.watch);
            }
        }
    }
}

/// The watcher's loop: a look every [`POLL`], and the file events taken as they come;
/// it ends when the watcher is dropped.
async fn run(watcher: Weak<Watcher>) {
    #[cfg(target_os = "linux")]
    let readable = watcher
        .upgrade()
        .and_then(|w| w.events.clone())
        .and_then(|e| super::file_events::readiness(e).ok());
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Without inotify (or with a reactor that cannot take it) only the looks run.
        #[cfg(target_os = "linux")]
        let ready = async {
            match &readable {
                Some(fd) => match fd.readable().await {
                    Ok(guard) => guard,
                    Err(_) => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        #[cfg(not(target_os = "linux"))]
        let ready = std::future::pending::<()>();
        tokio::select! {
            _ = tick.tick() => {
                let Some(w) = watcher.upgrade() else { break };
                let _ = tokio::task::spawn_blocking(move || w.look()).await;
            }
            guard = ready => {
                let Some(w) = watcher.upgrade() else { break };
                #[cfg(target_os = "linux")]
                {
                    let mut guard = guard;
                    w.take_events();
                    guard.clear_ready();
                }
                #[cfg(not(target_os = "linux"))]
                let _ = (w, guard);
            }
        }
    }
}
