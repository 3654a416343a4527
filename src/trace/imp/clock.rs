//! The trace's clock: raw `QueryPerformanceCounter` ticks, and their
//! conversion to time since the clock started.

use core::sync::atomic::AtomicI64;
use core::sync::atomic::Ordering::Relaxed;

use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};

/// The earliest tick the trace has seen (`i64::MAX`: none yet).
pub(super) static START: AtomicI64 = AtomicI64::new(i64::MAX);

pub(crate) fn now() -> i64 {
    let mut t = 0;
    // SAFETY: `t` is a valid out-pointer; the call cannot fail on XP or later.
    unsafe { QueryPerformanceCounter(&mut t) };
    t
}

pub(super) fn frequency() -> i64 {
    let mut f = 0;
    // SAFETY: `f` is a valid out-pointer; the call cannot fail on XP or later.
    unsafe { QueryPerformanceFrequency(&mut f) };
    f.max(1)
}

/// Starts the clock at `ticks` unless it started earlier. After the first
/// record this is one load and a branch not taken.
pub(super) fn start_clock(ticks: i64) {
    if ticks < START.load(Relaxed) {
        START.fetch_min(ticks, Relaxed);
    }
}

/// Converts ticks to nanoseconds since the trace's clock started.
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) start: i64,
    pub(crate) frequency: i64,
}

impl Clock {
    pub(super) fn current() -> Self {
        Self { start: START.load(Relaxed), frequency: frequency() }
    }

    pub(crate) fn ns(self, ticks: i64) -> u64 {
        let d = ticks.saturating_sub(self.start).max(0) as u128;
        (d * 1_000_000_000 / self.frequency as u128) as u64
    }
}
