//! Change announcements from a provider to the clients listening: `resource_updated`
//! reaches every subscription of that resource exactly once, under the URI string the
//! subscriber used; `list_changed` reaches every listener of the lists. Each listener
//! has its own queue, made when the subscription is accepted (before the client is told
//! so), so a change between the acknowledgement and the start of delivery waits in the
//! queue instead of being lost.
//!
//! Subscriptions are indexed by URI, so a change costs what its own subscribers cost,
//! whatever else is subscribed; they are counted per session and in all, and a
//! subscription past either limit is refused whole. A listener dropped (its session
//! ended, its listen request closed) takes its subscriptions with it, and the watch
//! hooks hear of each URI that no subscription covers any more.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use pipec_base::uri::normal_form;
use tokio::sync::mpsc;

/// A change one listener is told of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The resource the listener subscribed to as this string changed.
    Updated(String),
    ListChanged,
}

/// Called with the normal form of a URI: by `on_watch` when a first subscription comes
/// to cover it, before the client is told it is subscribed (a provider that watches
/// what is subscribed to takes its starting point then, so a change right after the
/// answer is not missed); by `on_unwatch` when the last one that covered it ended.
pub type WatchHook = Arc<dyn Fn(&str) + Send + Sync>;

/// How many subscriptions may be held at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriptionLimits {
    /// By one session: its `resources/subscribe` URIs and its `subscriptions/listen`
    /// URIs together (over HTTP in the 2026-07-28 era, which has no sessions, by one
    /// listen request).
    pub per_session: usize,
    /// By every session together.
    pub total: usize,
}

impl SubscriptionLimits {
    pub const DEFAULT_PER_SESSION: usize = 1_000;
    pub const DEFAULT_TOTAL: usize = 10_000;
}

impl Default for SubscriptionLimits {
    fn default() -> Self {
        SubscriptionLimits {
            per_session: Self::DEFAULT_PER_SESSION,
            total: Self::DEFAULT_TOTAL,
        }
    }
}

/// Why a subscription was refused: it would take a session, or the server, past its
/// limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitReached {
    Session { limit: usize },
    Server { limit: usize },
}

impl std::fmt::Display for LimitReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitReached::Session { limit } => write!(
                f,
                "too many subscriptions: a session may hold {limit} (--max-subscriptions-per-session); unsubscribe from some first, or ask for fewer"
            ),
            LimitReached::Server { limit } => write!(
                f,
                "too many subscriptions: this server holds {limit}, the most it may (--max-subscriptions); try again once others have ended"
            ),
        }
    }
}

/// How many subscriptions one session holds; shared by its listeners.
#[derive(Clone, Default)]
pub(crate) struct SessionCount(Arc<AtomicUsize>);

struct Entry {
    lists: bool,
    queue: mpsc::UnboundedSender<Change>,
    /// The URIs it covers, as the client wrote them, with their normal forms.
    uris: Vec<(String, String)>,
    session: SessionCount,
}

#[derive(Default)]
struct State {
    limits: SubscriptionLimits,
    next: u64,
    listeners: HashMap<u64, Entry>,
    /// Normal form → the listeners covering it, each with its own spelling.
    by_uri: HashMap<String, Vec<(u64, String)>>,
    total: usize,
    watch: Option<WatchHook>,
    unwatch: Option<WatchHook>,
}

impl State {
    fn lock(shared: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
        shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `more` subscriptions fit beside what the session and the server hold.
    fn room(&self, session: &SessionCount, more: usize) -> Result<(), LimitReached> {
        let held = session.0.load(Ordering::SeqCst);
        if held + more > self.limits.per_session {
            return Err(LimitReached::Session {
                limit: self.limits.per_session,
            });
        }
        if self.total + more > self.limits.total {
            return Err(LimitReached::Server {
                limit: self.limits.total,
            });
        }
        Ok(())
    }

    /// Adds `uri` to listener `id` (room checked by the caller). The watch hook runs
    /// under the lock, so watch and unwatch of one URI are heard in their order.
    fn add(&mut self, id: u64, uri: &str) {
        let normal = normal_form(uri);
        let Some(entry) = self.listeners.get_mut(&id) else {
            return;
        };
        if entry.uris.iter().any(|(own, _)| own == uri) {
            return;
        }
        entry.uris.push((uri.to_string(), normal.clone()));
        entry.session.0.fetch_add(1, Ordering::SeqCst);
        self.total += 1;
        let covering = self.by_uri.entry(normal.clone()).or_default();
        covering.push((id, uri.to_string()));
        if covering.len() == 1
            && let Some(hook) = &self.watch
        {
            hook(&normal);
        }
    }

    fn remove(&mut self, id: u64, uri: &str) {
        let Some(entry) = self.listeners.get_mut(&id) else {
            return;
        };
        let Some(at) = entry.uris.iter().position(|(own, _)| own == uri) else {
            return;
        };
        let (_, normal) = entry.uris.remove(at);
        entry.session.0.fetch_sub(1, Ordering::SeqCst);
        self.total -= 1;
        self.uncover(id, uri, &normal);
    }

    fn uncover(&mut self, id: u64, own: &str, normal: &str) {
        let Some(covering) = self.by_uri.get_mut(normal) else {
            return;
        };
        covering.retain(|(l, o)| !(*l == id && o == own));
        if covering.is_empty() {
            self.by_uri.remove(normal);
            if let Some(hook) = &self.unwatch {
                hook(normal);
            }
        }
    }

    fn drop_listener(&mut self, id: u64) {
        let Some(entry) = self.listeners.remove(&id) else {
            return;
        };
        entry
            .session
            .0
            .fetch_sub(entry.uris.len(), Ordering::SeqCst);
        self.total -= entry.uris.len();
        for (own, normal) in &entry.uris {
            self.uncover(id, own, normal);
        }
    }
}

/// One subscription: the URIs it covers, whether it hears of list changes, and its
/// queue. Dropping it ends it.
pub(crate) struct Listener {
    id: u64,
    state: Weak<Mutex<State>>,
    session: SessionCount,
}

impl Listener {
    /// Adds a URI (a legacy `resources/subscribe`); a URI already held is not doubled,
    /// and one past a limit is refused.
    pub(crate) fn add(&self, uri: &str) -> Result<(), LimitReached> {
        let Some(state) = self.state.upgrade() else {
            return Ok(());
        };
        let mut state = State::lock(&state);
        let held = state
            .listeners
            .get(&self.id)
            .is_some_and(|e| e.uris.iter().any(|(own, _)| own == uri));
        if !held {
            state.room(&self.session, 1)?;
            state.add(self.id, uri);
        }
        Ok(())
    }

    /// Removes a URI (a legacy `resources/unsubscribe`).
    pub(crate) fn remove(&self, uri: &str) {
        if let Some(state) = self.state.upgrade() {
            State::lock(&state).remove(self.id, uri);
        }
    }

    /// Whether it still covers `uri` (checked again just before a change is sent, so a
    /// client that unsubscribed meanwhile gets nothing).
    pub(crate) fn covers(&self, uri: &str) -> bool {
        self.state.upgrade().is_some_and(|state| {
            State::lock(&state)
                .listeners
                .get(&self.id)
                .is_some_and(|e| e.uris.iter().any(|(own, _)| own == uri))
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(state) = self.state.upgrade() {
            State::lock(&state).drop_listener(self.id);
        }
    }
}

/// The listeners of one provider.
#[derive(Default)]
pub struct Updates {
    state: Arc<Mutex<State>>,
}

impl Updates {
    pub fn new() -> Updates {
        Updates::default()
    }

    /// Sets how many subscriptions may be held; those already held stay.
    pub fn set_limits(&self, limits: SubscriptionLimits) {
        State::lock(&self.state).limits = limits;
    }

    /// Sets the hook told of each URI a first subscription comes to cover.
    pub fn on_watch(&self, hook: WatchHook) {
        State::lock(&self.state).watch = Some(hook);
    }

    /// Sets the hook told of each URI the last subscription covering it let go of.
    pub fn on_unwatch(&self, hook: WatchHook) {
        State::lock(&self.state).unwatch = Some(hook);
    }

    /// Tells every subscriber of `uri` that it changed. URIs are compared in a normal
    /// form (scheme in lower case, escapes of unreserved characters decoded), and each
    /// subscriber hears its own spelling back.
    pub fn resource_updated(&self, uri: &str) {
        let normal = normal_form(uri);
        let state = State::lock(&self.state);
        for (id, own) in state.by_uri.get(&normal).into_iter().flatten() {
            if let Some(entry) = state.listeners.get(id) {
                let _ = entry.queue.send(Change::Updated(own.clone()));
            }
        }
    }

    /// Tells every listener of the lists that the resources or templates changed.
    pub fn list_changed(&self) {
        let state = State::lock(&self.state);
        for entry in state.listeners.values().filter(|e| e.lists) {
            let _ = entry.queue.send(Change::ListChanged);
        }
    }

    /// Whether any live subscription covers `uri` (a provider may watch only what is
    /// subscribed to).
    pub fn is_watched(&self, uri: &str) -> bool {
        State::lock(&self.state)
            .by_uri
            .contains_key(&normal_form(uri))
    }

    /// The URIs live subscriptions cover, in their normal forms, sorted.
    pub fn watched(&self) -> Vec<String> {
        let mut all: Vec<String> = State::lock(&self.state).by_uri.keys().cloned().collect();
        all.sort();
        all
    }

    /// How many subscriptions are held, by every session together.
    pub fn held(&self) -> usize {
        State::lock(&self.state).total
    }

    /// A new listener of `session` covering `uris`, and its queue; it hears of changes
    /// from now on, and stops when the returned `Arc` is dropped. Refused whole when
    /// the URIs would take the session or the server past its limit.
    pub(crate) fn listen(
        &self,
        session: &SessionCount,
        uris: &[String],
        lists: bool,
    ) -> Result<(Arc<Listener>, mpsc::UnboundedReceiver<Change>), LimitReached> {
        let mut seen = std::collections::HashSet::with_capacity(uris.len());
        let distinct: Vec<&String> = uris.iter().filter(|u| seen.insert(*u)).collect();
        let (queue, rx) = mpsc::unbounded_channel();
        let mut state = State::lock(&self.state);
        state.room(session, distinct.len())?;
        let id = state.next;
        state.next += 1;
        state.listeners.insert(
            id,
            Entry {
                lists,
                queue,
                uris: Vec::with_capacity(distinct.len()),
                session: session.clone(),
            },
        );
        for uri in distinct {
            state.add(id, uri);
        }
        drop(state);
        let listener = Arc::new(Listener {
            id,
            state: Arc::downgrade(&self.state),
            session: session.clone(),
        });
        Ok((listener, rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reaches_each_subscription_once_under_its_own_spelling() {
        let updates = Updates::new();
        let (one, two) = (SessionCount::default(), SessionCount::default());
        let (a, mut ra) = updates
            .listen(&one, &["file:///x/%7Ea".into()], false)
            .expect("room");
        let (b, mut rb) = updates
            .listen(&two, &["file:///x/~a".into(), "file:///y".into()], true)
            .expect("room");
        updates.resource_updated("FILE:///x/~a");
        assert_eq!(ra.try_recv(), Ok(Change::Updated("file:///x/%7Ea".into())));
        assert!(ra.try_recv().is_err());
        assert_eq!(rb.try_recv(), Ok(Change::Updated("file:///x/~a".into())));
        assert!(rb.try_recv().is_err());
        updates.list_changed();
        assert!(ra.try_recv().is_err(), "a does not listen to the lists");
        assert_eq!(rb.try_recv(), Ok(Change::ListChanged));
        a.add("file:///x/%7Ea").expect("room");
        updates.resource_updated("file:///x/~a");
        assert_eq!(ra.try_recv(), Ok(Change::Updated("file:///x/%7Ea".into())));
        assert!(
            ra.try_recv().is_err(),
            "subscribing twice is one subscription"
        );
        assert_eq!(rb.try_recv(), Ok(Change::Updated("file:///x/~a".into())));
        b.remove("file:///x/~a");
        updates.resource_updated("file:///x/~a");
        assert!(rb.try_recv().is_err(), "unsubscribed");
        assert!(updates.is_watched("file:///y"));
        drop(b);
        assert!(
            !updates.is_watched("file:///y"),
            "a dropped listener is gone"
        );
    }

    #[test]
    fn limits_refuse_whole_and_a_dropped_listener_frees_its_share() {
        let updates = Updates::new();
        updates.set_limits(SubscriptionLimits {
            per_session: 2,
            total: 3,
        });
        let watched = Arc::new(Mutex::new(Vec::new()));
        let (w, u) = (watched.clone(), watched.clone());
        updates.on_watch(Arc::new(move |uri| {
            w.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("+{uri}"))
        }));
        updates.on_unwatch(Arc::new(move |uri| {
            u.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(format!("-{uri}"))
        }));
        let (one, two) = (SessionCount::default(), SessionCount::default());
        let uris = |n: &[&str]| n.iter().map(|u| u.to_string()).collect::<Vec<_>>();
        assert_eq!(
            updates
                .listen(&one, &uris(&["a:1", "a:2", "a:3"]), false)
                .err(),
            Some(LimitReached::Session { limit: 2 })
        );
        assert_eq!(updates.held(), 0, "a refusal holds nothing");
        let (a, _ra) = updates
            .listen(&one, &uris(&["a:1", "a:2"]), false)
            .expect("room");
        assert_eq!(a.add("a:3"), Err(LimitReached::Session { limit: 2 }));
        assert_eq!(a.add("a:2"), Ok(()), "one already held is no more");
        let (b, _rb) = updates.listen(&two, &uris(&["a:2"]), false).expect("room");
        assert_eq!(b.add("a:4"), Err(LimitReached::Server { limit: 3 }));
        drop(a);
        assert_eq!(updates.held(), 1);
        assert_eq!(b.add("a:4"), Ok(()));
        let seen = watched.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(seen, ["+a:1", "+a:2", "-a:1", "+a:4"], "a:2 is still b's");
    }
}
