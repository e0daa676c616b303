//! Thread and run ids: ULIDs (48-bit milliseconds, 80 random bits), written in Crockford
//! base32, sortable by time, and kept monotonic within a process.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Milliseconds since the Unix epoch: the clock of ids, journal times, gate deadlines and
/// the due check (PostgreSQL's leases run on the database's clock instead). After
/// [`start_clock_at`], the time since then added to the origin it was given.
pub fn now_ms() -> u64 {
    if let Some((origin, since)) = ORIGIN.get() {
        let elapsed = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
        return origin
            .saturating_add(elapsed)
            .saturating_add_signed(clock_offset_ms());
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        .saturating_add_signed(clock_offset_ms())
}

/// A fixed origin for this process's clock, and when it was set.
static ORIGIN: std::sync::OnceLock<(u64, std::time::Instant)> = std::sync::OnceLock::new();

/// Starts this process's clock at `origin_ms` (ms since the Unix epoch): from now on
/// [`now_ms`] is that origin plus the real time passed, so the times a run records do
/// not depend on the day it ran (`pipec test`). The clock still moves as time passes,
/// so every deadline and backoff works as before. Only the first call counts; use it
/// before the process has written anything.
pub fn start_clock_at(origin_ms: u64) {
    let _ = ORIGIN.set((origin_ms, std::time::Instant::now()));
}

/// The test clock: `PIPEC_CLOCK_OFFSET_MS` moves [`now_ms`] by that many milliseconds, so
/// that a test passes a gate's deadline without sleeping. Only builds with the
/// `test-clock` feature read it, which pipec's own tests enable as a dev-dependency: a
/// binary built without tests (`cargo build`, `cargo install`, any release) never looks at
/// the variable.
#[cfg(feature = "test-clock")]
fn clock_offset_ms() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        std::env::var("PIPEC_CLOCK_OFFSET_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

#[cfg(not(feature = "test-clock"))]
const fn clock_offset_ms() -> i64 {
    0
}

fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS per instance; two of them give 128 bits.
    let mut out = 0u128;
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(u128::from(std::process::id()) ^ u128::from(now_ms()));
        out = (out << 64) | u128::from(h.finish());
    }
    out
}

static LAST: Mutex<u128> = Mutex::new(0);

/// A new ULID as a number; strictly greater than the previous one of this process.
pub fn new_ulid() -> u128 {
    let time = u128::from(now_ms() & 0xFFFF_FFFF_FFFF) << 80;
    let random = random_u128() & ((1u128 << 80) - 1);
    let mut candidate = time | random;
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    if candidate <= *last {
        candidate = *last + 1;
    }
    *last = candidate;
    candidate
}

pub fn encode(id: u128) -> String {
    let mut s = [0u8; 26];
    for (i, slot) in s.iter_mut().enumerate() {
        let shift = 125 - 5 * i as i32;
        let v = if shift >= 0 {
            (id >> shift) & 0x1F
        } else {
            (id << (-shift)) & 0x1F
        };
        *slot = ALPHABET[v as usize];
    }
    String::from_utf8_lossy(&s).into_owned()
}

pub fn decode(s: &str) -> Option<u128> {
    if s.len() != 26 {
        return None;
    }
    let mut out: u128 = 0;
    for (i, c) in s.bytes().enumerate() {
        let c = c.to_ascii_uppercase();
        let v = match c {
            b'O' => 0,
            b'I' | b'L' => 1,
            _ => ALPHABET.iter().position(|a| *a == c)? as u128,
        };
        if i == 0 && v > 7 {
            return None;
        }
        out = (out << 5) | v;
    }
    Some(out)
}

/// A new thread id.
pub fn new_thread_id() -> String {
    encode(new_ulid())
}

/// What a thread id typed by a person names: one id, or the range of ids that start with
/// a prefix. Every store resolves ids through this, so a prefix means the same in each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdQuery {
    Exact(u128),
    /// The lowest and highest id with the prefix.
    Prefix(u128, u128),
}

/// `None` when the text can name no thread (empty, too long, not base32).
pub(crate) fn query(id: &str) -> Option<IdQuery> {
    let upper = id.trim().to_ascii_uppercase();
    if upper.is_empty() || upper.len() > 26 {
        return None;
    }
    if let Some(n) = decode(&upper) {
        return Some(IdQuery::Exact(n));
    }
    let lo = decode(&format!("{upper}{}", "0".repeat(26 - upper.len())))?;
    let hi = decode(&format!("{upper}{}", "Z".repeat(26 - upper.len()))).unwrap_or(u128::MAX);
    Some(IdQuery::Prefix(lo, hi))
}

/// How many threads a prefix lookup lists before it calls the prefix ambiguous.
pub(crate) const AMBIGUOUS_SHOWN: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulids_round_trip_and_increase() {
        let a = new_ulid();
        let b = new_ulid();
        assert!(b > a);
        assert_eq!(decode(&encode(a)), Some(a));
        assert_eq!(encode(a).len(), 26);
        assert!(encode(a) < encode(b));
        assert_eq!(decode("not-a-ulid"), None);
    }
}
