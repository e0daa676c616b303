//! The generator of the randomised tests (xorshift64*): small, deterministic for a seed,
//! so a failure found from a printed seed can be replayed.

pub struct Rng(pub u64);

impl Rng {
    /// Seeded from the clock (never zero).
    pub fn from_clock() -> Rng {
        Rng(clock_seed())
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// Milliseconds below `n`, for a delay.
    pub fn millis(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A seed from the clock, odd so it is never zero.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1
}
