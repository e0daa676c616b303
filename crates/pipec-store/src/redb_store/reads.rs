//! Reads: thread ids and prefixes, a thread's whole state, pages of threads, events and
//! plans. Reads run on a blocking thread in a read transaction of their own, beside the
//! store thread's writes.

use std::ops::Bound;
use std::path::Path;

use redb::ReadTransaction;

use super::tables::*;
use super::{RedbStore, io};
use crate::envelope::decode;
use crate::ids;
use crate::lock;
use crate::*;

impl RedbStore {
    /// Runs a read here and now, in a read transaction of its own (contained).
    pub(super) fn read_now<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let reader = self.reader()?;
        let result = self
            .inner
            .health
            .run("reading", || f(&reader.begin_read()?));
        if self.inner.health.is_broken() {
            // See `Drop for Inner`.
            std::mem::forget(reader);
        }
        result
    }

    /// Runs a read on a blocking thread, in a read transaction of its own (contained: a
    /// panic answers `R0410`).
    pub(super) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let reader = self.reader()?;
        let health = self.inner.health.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let result = health.run("reading", || f(&reader.begin_read()?));
            if health.is_broken() {
                // See `Drop for Inner`.
                std::mem::forget(reader);
            }
            result
        })
        .await;
        match joined {
            Ok(result) => result,
            Err(e) => Err(self.inner.health.locate(io(e))),
        }
    }
}

pub(super) fn resolve_id(
    txn: &ReadTransaction,
    id: &str,
    store: &Path,
) -> Result<u128, StoreError> {
    let not_found = || StoreError::NotFound {
        thread: id.to_string(),
        store: store.display().to_string(),
    };
    let threads = txn.open_table(THREADS).map_err(io)?;
    let (lo, hi) = match ids::query(id).ok_or_else(not_found)? {
        ids::IdQuery::Exact(n) => {
            return match threads.get(n).map_err(io)? {
                Some(_) => Ok(n),
                None => Err(not_found()),
            };
        }
        ids::IdQuery::Prefix(lo, hi) => (lo, hi),
    };
    let mut found = Vec::new();
    for entry in threads.range(lo..=hi).map_err(io)? {
        let (k, _) = entry.map_err(io)?;
        found.push(k.value());
        if found.len() >= ids::AMBIGUOUS_SHOWN {
            break;
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(not_found()),
        many => Err(StoreError::Ambiguous {
            prefix: id.to_string(),
            matches: many.iter().map(|n| ids::encode(*n)).collect(),
        }),
    }
}

pub(super) fn read_thread(
    txn: &ReadTransaction,
    id: u128,
) -> Result<Option<ThreadRec>, StoreError> {
    let threads = txn.open_table(THREADS).map_err(io)?;
    let v = threads.get(id).map_err(io)?;
    match v {
        Some(g) => Ok(Some(decode(g.value(), &|| {
            format!("thread {}", ids::encode(id))
        })?)),
        None => Ok(None),
    }
}

pub(super) fn load_state(txn: &ReadTransaction, id: u128) -> Result<ThreadState, StoreError> {
    let name = ids::encode(id);
    let mut st = ThreadState {
        thread: read_thread(txn, id)?,
        ..Default::default()
    };
    let next = id.wrapping_add(1);
    {
        let t = txn.open_table(NODES).map_err(io)?;
        for e in t.range((id, "")..(next, "")).map_err(io)? {
            let (k, v) = e.map_err(io)?;
            let node = k.value().1.to_string();
            let rec: NodeRec = decode(v.value(), &|| format!("thread {name}, node `{node}`"))?;
            st.nodes.insert(node, rec);
        }
    }
    {
        let t = txn.open_table(ITEMS).map_err(io)?;
        for e in t
            .range((id, "", 0u32, 0u32)..(next, "", 0u32, 0u32))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, node, generation, item) = k.value();
            let rec: ItemRec = decode(v.value(), &|| {
                format!("thread {name}, item {item} of `{node}`")
            })?;
            st.items.insert((node.to_string(), generation, item), rec);
        }
    }
    {
        let t = txn.open_table(CALLS).map_err(io)?;
        for e in t
            .range((id, "", 0u32, 0u32, 0u32, 0u32)..(next, "", 0u32, 0u32, 0u32, 0u32))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let (_, node, generation, item, seq, call) = k.value();
            let key = CallKey {
                node: node.to_string(),
                generation,
                item,
                seq,
                call,
            };
            let rec: CallRec = decode(v.value(), &|| {
                format!("thread {name}, call {}", key.display())
            })?;
            st.calls.insert(key, rec);
        }
    }
    {
        let t = txn.open_table(GATES).map_err(io)?;
        for e in t.range((id, "")..(next, "")).map_err(io)? {
            let (k, v) = e.map_err(io)?;
            let gate = k.value().1.to_string();
            let rec: GateRec = decode(v.value(), &|| format!("thread {name}, gate `{gate}`"))?;
            st.gates.insert(gate, rec);
        }
    }
    {
        let t = txn.open_table(ATTEMPTS).map_err(io)?;
        for e in t.range((id, 0u32)..(next, 0u32)).map_err(io)? {
            let (_, v) = e.map_err(io)?;
            st.attempts
                .push(decode(v.value(), &|| format!("thread {name}, attempt"))?);
        }
    }
    // A file written before heals were recorded has no table for them.
    match txn.open_table(HEALS) {
        Ok(t) => {
            for e in t
                .range((id, "", 0u32, 0u32, 0u32)..(next, "", 0u32, 0u32, 0u32))
                .map_err(io)?
            {
                let (k, v) = e.map_err(io)?;
                let (_, node, generation, item, index) = k.value();
                let key = RefOrigin {
                    node: node.to_string(),
                    generation,
                    item,
                    index,
                };
                let rec: HealRec = decode(v.value(), &|| {
                    format!("thread {name}, the heal of link {index} of `{node}`")
                })?;
                st.heals.insert(key, rec);
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(io(e)),
    }
    Ok(st)
}

pub(super) fn get_plan<'a>(store: &'a RedbStore, hash: &str) -> StoreFuture<'a, Option<String>> {
    let hash = hash.to_string();
    Box::pin(store.read(move |txn| {
        let t = txn.open_table(PLANS).map_err(io)?;
        let v = t.get(hash.as_str()).map_err(io)?;
        v.map(|g| unpack_plan(g.value(), &hash)).transpose()
    }))
}

pub(super) fn load<'a>(store: &'a RedbStore, thread: &str) -> StoreFuture<'a, ThreadState> {
    let thread = thread.to_string();
    let path = store.inner.path.clone();
    Box::pin(store.read(move |txn| {
        let id = resolve_id(txn, &thread, &path)?;
        load_state(txn, id)
    }))
}

pub(super) fn list<'a>(
    store: &'a RedbStore,
    query: ListQuery,
) -> StoreFuture<'a, Vec<ThreadSummary>> {
    let path = store.inner.path.clone();
    Box::pin(store.read(move |txn| {
        let before = match &query.before {
            Some(b) => Some(ids::decode(b).ok_or_else(|| StoreError::NotFound {
                thread: b.clone(),
                store: path.display().to_string(),
            })?),
            None => None,
        };
        let limit = if query.limit == 0 { 50 } else { query.limit };
        let threads = txn.open_table(THREADS).map_err(io)?;
        let mut out = Vec::new();
        let mut push = |id: u128| -> Result<bool, StoreError> {
            if let Some(g) = threads.get(id).map_err(io)? {
                let rec: ThreadRec = decode(g.value(), &|| format!("thread {}", ids::encode(id)))?;
                if query.pipeline.as_ref().is_some_and(|p| *p != rec.pipeline) {
                    return Ok(false);
                }
                let stale = rec.status == Status::Running && !lock::is_locked(&path, &rec.id);
                out.push(ThreadSummary {
                    id: rec.id,
                    pipeline: rec.pipeline,
                    status: rec.status,
                    stale,
                    holder: rec.holder.filter(|_| rec.status == Status::Running),
                    created_ms: rec.created_ms,
                    updated_ms: rec.updated_ms,
                });
            }
            Ok(out.len() >= limit)
        };
        match query.status {
            Some(status) => {
                let by = txn.open_table(BY_STATUS).map_err(io)?;
                let hi = match before {
                    Some(b) => Bound::Excluded((status.code(), b)),
                    None => Bound::Included((status.code(), u128::MAX)),
                };
                let range = by
                    .range::<(u8, u128)>((Bound::Included((status.code(), 0u128)), hi))
                    .map_err(io)?;
                for e in range.rev() {
                    let (k, _) = e.map_err(io)?;
                    if push(k.value().1)? {
                        break;
                    }
                }
            }
            None => {
                let hi = match before {
                    Some(b) => Bound::Excluded(b),
                    None => Bound::Unbounded,
                };
                let ids_in_range: Vec<u128> = {
                    let mut v = Vec::new();
                    for e in threads
                        .range::<u128>((Bound::Unbounded, hi))
                        .map_err(io)?
                        .rev()
                    {
                        let (k, _) = e.map_err(io)?;
                        v.push(k.value());
                        if v.len() >= limit * 4 + 64 && query.pipeline.is_none() {
                            break;
                        }
                    }
                    v
                };
                for id in ids_in_range {
                    if push(id)? {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }))
}

pub(super) fn events<'a>(
    store: &'a RedbStore,
    thread: &str,
    since: u64,
) -> StoreFuture<'a, Vec<RecordedEvent>> {
    let thread = thread.to_string();
    let path = store.inner.path.clone();
    Box::pin(store.read(move |txn| {
        let id = resolve_id(txn, &thread, &path)?;
        let name = ids::encode(id);
        let t = txn.open_table(EVENTS).map_err(io)?;
        let mut out = Vec::new();
        for e in t
            .range((id, since)..(id.wrapping_add(1), 0u64))
            .map_err(io)?
        {
            let (k, v) = e.map_err(io)?;
            let seq = k.value().1;
            let row: EventRow = decode(v.value(), &|| format!("thread {name}, event {seq}"))?;
            out.push(row.recorded(&name, seq));
        }
        Ok(out)
    }))
}

/// Whether a cancel was asked for: the thread's fence row (older stores: its record).
pub(super) fn cancel_requested<'a>(store: &'a RedbStore, thread: &str) -> StoreFuture<'a, bool> {
    let thread = thread.to_string();
    let path = store.inner.path.clone();
    Box::pin(store.read(move |txn| {
        let id = resolve_id(txn, &thread, &path)?;
        let fence = txn
            .open_table(FENCES)
            .map_err(io)?
            .get(id)
            .map_err(io)?
            .map(|g| g.value());
        match fence {
            Some((_, cancel)) => Ok(cancel),
            None => Ok(read_thread(txn, id)?.is_some_and(|t| t.cancel_requested)),
        }
    }))
}
