//! The lease's heartbeat: while an attempt runs, a task beside it renews its lease as
//! often as the store asks (a Postgres lease expires without it; redb and memory leases
//! need none). It runs on the attempt's runtime, so an attempt that stops making
//! progress because its runtime is wedged stops renewing too, and loses the thread.

use std::sync::Arc;

use crate::context::AttemptContext;
use pipec_store::StoreError;

/// The running heartbeat; dropping it stops it.
pub(super) struct Heartbeat(Option<tokio::task::JoinHandle<()>>);

impl Heartbeat {
    pub(super) fn start(shared: &Arc<AttemptContext>) -> Heartbeat {
        let Some(every) = shared.store.renew_every() else {
            return Heartbeat(None);
        };
        let shared = shared.clone();
        Heartbeat(Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match shared.store.renew(&shared.lease).await {
                    Ok(()) => {}
                    // Lost: the next commit is fenced and the attempt stops there.
                    Err(StoreError::Fenced { .. } | StoreError::NotFound { .. }) => break,
                    // A failed round trip: the next beat tries again, within the lease.
                    Err(_) => {}
                }
            }
        })))
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}
