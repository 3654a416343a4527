//! A small xorshift generator the tests share: cheap varied values, not
//! statistical quality; seeded, so a run can be repeated.
#![allow(dead_code)]

use std::time::Duration;

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// A duration uniform in `0..max`.
    pub fn duration(&mut self, max: Duration) -> Duration {
        Duration::from_nanos(self.below(max.as_nanos().max(1) as u64))
    }
    /// Up to `max - 1` random bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.next() as usize % max;
        (0..n).map(|_| self.next() as u8).collect()
    }
}
