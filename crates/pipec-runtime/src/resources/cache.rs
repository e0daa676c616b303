//! The per-attempt fetch cache: within one attempt a URI is read from its server once,
//! however many nodes bind it; two nodes asking at the same time cause one read
//! (single-flight). It lives in memory, bounded in bytes, and dies with the attempt, so
//! a resume never serves a value fetched before its pause. Failed reads are not kept:
//! the next reader (a heal's second read among them) asks the server again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use pipec_mcp::{McpError, ResourceContent};

/// The bytes the cache keeps at most; a read that would pass it is served but not kept.
pub(crate) const DEFAULT_CACHE_BYTES: usize = 128_000_000;

type Contents = Arc<Vec<ResourceContent>>;
type Key = (String, String);

/// Reads, shared within an attempt.
pub(crate) struct FetchCache {
    limit: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    cells: HashMap<Key, Arc<OnceCell<Contents>>>,
    kept_bytes: usize,
}

/// How a read was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Served {
    /// This caller read it from the server.
    Fetched,
    /// Another reader's result (read before, or at the same time).
    Cached,
}

impl FetchCache {
    pub(crate) fn new(limit: usize) -> FetchCache {
        FetchCache {
            limit,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The contents of `uri` on `server`: from the cache, or read with `read`.
    pub(crate) async fn get<F, Fut>(
        &self,
        server: &str,
        uri: &str,
        read: F,
    ) -> Result<(Contents, Served), McpError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<ResourceContent>, McpError>>,
    {
        let key = (server.to_string(), uri.to_string());
        let cell = self.lock().cells.entry(key.clone()).or_default().clone();
        let mut fetched = false;
        let contents = cell
            .get_or_try_init(|| {
                fetched = true;
                async move { read().await.map(Arc::new) }
            })
            .await?
            .clone();
        if fetched {
            let size: usize = contents.iter().map(ResourceContent::len).sum();
            let mut state = self.lock();
            if state.kept_bytes + size <= self.limit {
                state.kept_bytes += size;
            } else if state.cells.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
                // Too big to keep: readers waiting on it have it, later ones read again.
                state.cells.remove(&key);
            }
        }
        Ok((
            contents,
            if fetched {
                Served::Fetched
            } else {
                Served::Cached
            },
        ))
    }

    /// Forgets a URI (its link turned out dead, so what is kept of it is not to be
    /// served again).
    pub(crate) fn forget(&self, server: &str, uri: &str) {
        let mut state = self.lock();
        if let Some(cell) = state.cells.remove(&(server.to_string(), uri.to_string()))
            && let Some(c) = cell.get()
        {
            let size: usize = c.iter().map(ResourceContent::len).sum();
            state.kept_bytes = state.kept_bytes.saturating_sub(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_mcp::Body;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn content(text: &str) -> Vec<ResourceContent> {
        vec![ResourceContent {
            uri: "u".into(),
            mime: None,
            body: Body::Text(text.into()),
        }]
    }

    #[tokio::test]
    async fn two_readers_at_once_cause_one_read_and_a_failure_is_not_kept() {
        let cache = Arc::new(FetchCache::new(1024));
        let reads = Arc::new(AtomicUsize::new(0));
        let slow_read = |reads: Arc<AtomicUsize>| async move {
            reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            Ok(content("abc"))
        };
        let (a, b) = tokio::join!(
            cache.get("s", "u", || slow_read(reads.clone())),
            cache.get("s", "u", || slow_read(reads.clone())),
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        let served = [
            a.map(|x| x.1).unwrap_or_else(|e| panic!("{e}")),
            b.map(|x| x.1).unwrap_or_else(|e| panic!("{e}")),
        ];
        assert!(served.contains(&Served::Fetched) && served.contains(&Served::Cached));
        // A failed read is not kept: the next reader reads again.
        let failing = cache
            .get("s", "v", || async {
                Err(McpError::Closed {
                    server: "s".into(),
                    stderr: String::new(),
                })
            })
            .await;
        assert!(failing.is_err());
        let again = cache.get("s", "v", || async { Ok(content("x")) }).await;
        assert_eq!(again.map(|x| x.1).ok(), Some(Served::Fetched));
    }

    #[tokio::test]
    async fn what_would_pass_the_bound_is_served_but_read_again_next_time() {
        let cache = FetchCache::new(4);
        let first = cache
            .get("s", "big", || async { Ok(content("too long")) })
            .await;
        assert_eq!(first.map(|x| x.1).ok(), Some(Served::Fetched));
        let second = cache
            .get("s", "big", || async { Ok(content("too long")) })
            .await;
        assert_eq!(second.map(|x| x.1).ok(), Some(Served::Fetched));
    }
}
