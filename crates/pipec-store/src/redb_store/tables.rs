//! The tables of the store file, its format number, and how plans are packed into it.

use redb::TableDefinition;

use crate::StoreError;

/// The format of the store file. Additive changes keep it; a breaking change bumps it
/// and comes with `pipec store migrate`.
pub const STORE_FORMAT: u32 = 1;

pub(super) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub(super) const PLANS: TableDefinition<&str, &[u8]> = TableDefinition::new("plans");
pub(super) const THREADS: TableDefinition<u128, &[u8]> = TableDefinition::new("threads");
pub(super) const BY_STATUS: TableDefinition<(u8, u128), ()> = TableDefinition::new("by_status");
pub(super) const NODES: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("nodes");
pub(super) const ITEMS: TableDefinition<(u128, &str, u32, u32), &[u8]> =
    TableDefinition::new("items");
pub(super) const CALLS: TableDefinition<CallCols, &[u8]> = TableDefinition::new("calls");
pub(super) const GATES: TableDefinition<(u128, &str), &[u8]> = TableDefinition::new("gates");
pub(super) const ATTEMPTS: TableDefinition<(u128, u32), &[u8]> = TableDefinition::new("attempts");
pub(super) const EVENTS: TableDefinition<(u128, u64), &[u8]> = TableDefinition::new("events");
/// The latest heal of each healed reference: thread, producer node, generation, item,
/// index in the producer's manifest. Added within format 1: a file without it has none.
pub(super) const HEALS: TableDefinition<HealCols, &[u8]> = TableDefinition::new("heals");
/// Each thread's fence, (epoch, cancel requested), kept apart from the thread record so
/// that checking it does not decode the record (whose inputs may be large). Written with
/// every write of the thread record; a thread without one (older stores) is fenced by
/// its record.
pub(super) const FENCES: TableDefinition<u128, (u64, bool)> = TableDefinition::new("fences");

/// A heal key: thread, producer node, generation, item, index.
pub(super) type HealCols = (u128, &'static str, u32, u32, u32);

/// A journal key: thread, node, generation, item, sequence, call.
pub(super) type CallCols = (u128, &'static str, u32, u32, u32, u32);

/// Marks a plan stored deflated. A stored plan is either plain JSON text (it starts with
/// `{`) or this byte followed by the deflated JSON.
pub(super) const PLAN_DEFLATED: u8 = 0x02;

/// The largest plan a store will inflate (a damaged or hostile row cannot exhaust memory).
pub(super) const MAX_PLAN_BYTES: usize = 256 * 1024 * 1024;

/// Plans are written once and read at every resume; deflated they take a tenth of the
/// space, and inflating one is far below a millisecond.
pub(super) fn pack_plan(json: &str) -> Vec<u8> {
    let mut out = vec![PLAN_DEFLATED];
    out.extend(miniz_oxide::deflate::compress_to_vec(json.as_bytes(), 6));
    out
}

pub(super) fn unpack_plan(bytes: &[u8], hash: &str) -> Result<String, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt {
        what: format!("the stored plan {hash}: {why}"),
    };
    let text = match bytes.split_first() {
        Some((&PLAN_DEFLATED, body)) => {
            miniz_oxide::inflate::decompress_to_vec_with_limit(body, MAX_PLAN_BYTES)
                .map_err(|e| corrupt(format!("cannot inflate it ({e})")))?
        }
        Some((b'{', _)) => bytes.to_vec(),
        _ => return Err(corrupt("not a plan".into())),
    };
    String::from_utf8(text).map_err(|_| corrupt("not UTF-8".into()))
}
