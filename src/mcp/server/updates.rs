//! Change announcements from a provider to the clients listening: `resource_updated`
//! reaches every subscription of that resource exactly once, under the URI string the
//! subscriber used; `list_changed` reaches every listener of the lists. Each listener
//! has its own queue, made when the subscription is accepted (before the client is told
//! so), so a change between the acknowledgement and the start of delivery waits in the
//! queue instead of being lost.

use std::sync::{Arc, Mutex, Weak};

use tokio::sync::mpsc;

/// A change one listener is told of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// The resource the listener subscribed to as this string changed.
    Updated(String),
    ListChanged,
}

/// Called with the normal form of each URI as a subscription comes to cover it, before
/// the client is told it is subscribed: a provider that watches what is subscribed to
/// takes its starting point then, so a change right after the answer is not missed.
pub type WatchHook = Arc<dyn Fn(&str) + Send + Sync>;

type HookSlot = Arc<Mutex<Option<WatchHook>>>;

/// One subscription: the URIs it covers (as the client wrote them, with their normal
/// forms), whether it hears of list changes, and its queue.
pub(crate) struct Listener {
    uris: Mutex<Vec<(String, String)>>,
    lists: bool,
    queue: mpsc::UnboundedSender<Change>,
    hook: HookSlot,
}

impl Listener {
    /// Adds a URI (a legacy `resources/subscribe`); a URI already held is not doubled.
    pub(crate) fn add(&self, uri: &str) {
        let normal = normal_form(uri);
        {
            let mut uris = self.uris.lock().unwrap_or_else(|p| p.into_inner());
            if uris.iter().any(|(own, _)| own == uri) {
                return;
            }
            uris.push((uri.to_string(), normal.clone()));
        }
        let hook = self.hook.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hook) = hook {
            hook(&normal);
        }
    }

    /// Removes a URI (a legacy `resources/unsubscribe`).
    pub(crate) fn remove(&self, uri: &str) {
        let mut uris = self.uris.lock().unwrap_or_else(|p| p.into_inner());
        uris.retain(|(own, _)| own != uri);
    }

    /// Whether it still covers `uri` (checked again just before a change is sent, so a
    /// client that unsubscribed meanwhile gets nothing).
    pub(crate) fn covers(&self, uri: &str) -> bool {
        let uris = self.uris.lock().unwrap_or_else(|p| p.into_inner());
        uris.iter().any(|(own, _)| own == uri)
    }
}

/// The listeners of one provider.
#[derive(Default)]
pub struct Updates {
    listeners: Mutex<Vec<Weak<Listener>>>,
    hook: HookSlot,
}

impl Updates {
    pub fn new() -> Updates {
        Updates::default()
    }

    /// Sets the hook told of each URI a subscription comes to cover.
    pub fn on_watch(&self, hook: WatchHook) {
        *self.hook.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    /// Tells every subscriber of `uri` that it changed. URIs are compared in a normal
    /// form (scheme in lower case, escapes of unreserved characters decoded), and each
    /// subscriber hears its own spelling back.
    pub fn resource_updated(&self, uri: &str) {
        let normal = normal_form(uri);
        for listener in self.live() {
            let own: Vec<String> = {
                let uris = listener.uris.lock().unwrap_or_else(|p| p.into_inner());
                uris.iter()
                    .filter(|(_, n)| *n == normal)
                    .map(|(own, _)| own.clone())
                    .collect()
            };
            for o in own {
                let _ = listener.queue.send(Change::Updated(o));
            }
        }
    }

    /// Tells every listener of the lists that the resources or templates changed.
    pub fn list_changed(&self) {
        for listener in self.live() {
            if listener.lists {
                let _ = listener.queue.send(Change::ListChanged);
            }
        }
    }

    /// Whether any live subscription covers `uri` (a provider may watch only what is
    /// subscribed to).
    pub fn is_watched(&self, uri: &str) -> bool {
        let normal = normal_form(uri);
        self.live().iter().any(|l| {
            let uris = l.uris.lock().unwrap_or_else(|p| p.into_inner());
            uris.iter().any(|(_, n)| *n == normal)
        })
    }

    /// The URIs live subscriptions cover, in their normal forms.
    pub fn watched(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .live()
            .iter()
            .flat_map(|l| {
                let uris = l.uris.lock().unwrap_or_else(|p| p.into_inner());
                uris.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>()
            })
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// A new listener and its queue; it hears of changes from now on, and stops when
    /// the returned `Arc` is dropped.
    pub(crate) fn listen(
        &self,
        uris: &[String],
        lists: bool,
    ) -> (Arc<Listener>, mpsc::UnboundedReceiver<Change>) {
        let (queue, rx) = mpsc::unbounded_channel();
        let listener = Arc::new(Listener {
            uris: Mutex::new(Vec::new()),
            lists,
            queue,
            hook: self.hook.clone(),
        });
        for uri in uris {
            listener.add(uri);
        }
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|w| w.strong_count() > 0);
        listeners.push(Arc::downgrade(&listener));
        (listener, rx)
    }

    fn live(&self) -> Vec<Arc<Listener>> {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|w| w.strong_count() > 0);
        listeners.iter().filter_map(Weak::upgrade).collect()
    }
}

/// The form two spellings of one URI share: the scheme in lower case, percent-escapes of
/// unreserved characters decoded and the others' hex digits in upper case.
pub fn normal_form(uri: &str) -> String {
    let (scheme, rest) = match uri.find(':') {
        Some(at)
            if uri[..at]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (uri[..at].to_ascii_lowercase(), &uri[at..])
        }
        _ => (String::new(), uri),
    };
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && bytes[i + 1].is_ascii_hexdigit()
            && bytes[i + 2].is_ascii_hexdigit()
        {
            let hex = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
            let byte = hex(bytes[i + 1]) * 16 + hex(bytes[i + 2]);
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                out.push(byte);
            } else {
                out.push(b'%');
                out.push(bytes[i + 1].to_ascii_uppercase());
                out.push(bytes[i + 2].to_ascii_uppercase());
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    scheme + &String::from_utf8_lossy(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_uri_share_a_normal_form() {
        assert_eq!(normal_form("FILE:///a/%7Eb%2fc"), "file:///a/~b%2Fc");
        assert_eq!(normal_form("x://a%2"), "x://a%2");
        assert_eq!(normal_form("no scheme"), "no scheme");
    }

    #[test]
    fn a_change_reaches_each_subscription_once_under_its_own_spelling() {
        let updates = Updates::new();
        let (a, mut ra) = updates.listen(&["file:///x/%7Ea".into()], false);
        let (b, mut rb) = updates.listen(&["file:///x/~a".into(), "file:///y".into()], true);
        updates.resource_updated("FILE:///x/~a");
        assert_eq!(ra.try_recv(), Ok(Change::Updated("file:///x/%7Ea".into())));
        assert!(ra.try_recv().is_err());
        assert_eq!(rb.try_recv(), Ok(Change::Updated("file:///x/~a".into())));
        assert!(rb.try_recv().is_err());
        updates.list_changed();
        assert!(ra.try_recv().is_err(), "a does not listen to the lists");
        assert_eq!(rb.try_recv(), Ok(Change::ListChanged));
        a.add("file:///x/%7Ea");
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
}
