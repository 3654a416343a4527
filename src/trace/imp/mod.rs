//! The recorder (only built with the `trace` feature): the filter and the
//! record path here; the clock, the ring, the exception observer and the
//! renderers in their own files.
//!
//! # Circular imports
//! This file is the recorder's state (the mask, the ring once installed);
//! `exceptions` (the exception observer) records through it and `render`
//! reads it for a dump, and this file calls both: one recorder's parts.

use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::OnceLock;

use windows_sys::Win32::System::Threading::GetCurrentThreadId;

use crate::trace::table::{OTHER_BIT, TARGETS, target_mask};

mod clock;
mod exceptions;
mod render;
mod ring;

pub(crate) use clock::*;
pub(crate) use exceptions::*;
pub(crate) use render::*;
pub(crate) use ring::*;

/// The variable holding the filter.
pub(crate) const FILTER_VAR: &str = "WINDOWS_THREADPOOL_TRACE";
/// The variable that overrides the ring's capacity.
pub(crate) const CAPACITY_VAR: &str = "WINDOWS_THREADPOOL_TRACE_CAPACITY";
/// Records the ring holds unless [`CAPACITY_VAR`] says otherwise.
pub(crate) const DEFAULT_CAPACITY: usize = 262_144;

/// Set until the filter has been read; every target bit is set with it,
/// so the first test of any target reaches the slow path.
const UNINIT: u32 = 1 << 31;
/// Every target bit, [`OTHER_BIT`] included.
const EVERYTHING: u32 = (OTHER_BIT << 1) - 1;

static MASK: AtomicU32 = AtomicU32::new(UNINIT | EVERYTHING);

/// Whether records under `mask` (from [`target_mask`]) are kept. When the
/// trace is disarmed this is one relaxed load and a test.
#[inline(always)]
pub(crate) fn armed(mask: u32) -> bool {
    let m = MASK.load(Relaxed);
    m & mask != 0 && (m & UNINIT == 0 || init() & mask != 0)
}

/// The filter word, reading the filter first if needed.
pub(crate) fn mask() -> u32 {
    let m = MASK.load(Relaxed);
    if m & UNINIT == 0 { m } else { init() }
}

/// A parsed `WINDOWS_THREADPOOL_TRACE`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Filter {
    pub(crate) mask: u32,
    /// Names that are not targets; they arm nothing, and the dump says so.
    pub(crate) unknown: Vec<String>,
}

/// Parses a filter: comma-separated target names, surrounding spaces
/// ignored; `*` arms everything, `syscall` both syscall targets.
pub(crate) fn parse_filter(text: &str) -> Filter {
    let mut f = Filter { mask: 0, unknown: Vec::new() };
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "*" => f.mask |= EVERYTHING,
            n if target_mask(n) != OTHER_BIT => f.mask |= target_mask(n),
            n => f.unknown.push(n.to_string()),
        }
    }
    f
}

/// The largest capacity accepted: 2^24 records, 1 GiB of ring.
const MAX_CAPACITY: usize = 1 << 24;

/// Parses a capacity: a count in `1..=MAX_CAPACITY`, rounded up to a
/// power of two.
pub(crate) fn parse_capacity(text: &str) -> Option<usize> {
    let n: usize = text.trim().parse().ok()?;
    if n == 0 || n > MAX_CAPACITY { None } else { Some(n.next_power_of_two()) }
}

struct State {
    filter_text: String,
    filter: Filter,
    /// The capacity variable's text when it was not a valid capacity.
    bad_capacity: Option<String>,
    ring: Option<Ring>,
}

static STATE: OnceLock<State> = OnceLock::new();

fn state() -> &'static State {
    STATE.get_or_init(|| {
        let filter_text = std::env::var(FILTER_VAR).unwrap_or_default();
        let filter = parse_filter(&filter_text);
        let cap_text = std::env::var(CAPACITY_VAR).ok();
        let capacity = cap_text.as_deref().and_then(parse_capacity);
        let bad_capacity = cap_text.filter(|_| capacity.is_none());
        let ring = (filter.mask != 0).then(|| Ring::new(capacity.unwrap_or(DEFAULT_CAPACITY)));
        State { filter_text, filter, bad_capacity, ring }
    })
}

/// The slow path, taken until the mask is published: reads the filter
/// once, publishes it, and installs the exception observer if armed.
#[cold]
#[inline(never)]
fn init() -> u32 {
    let _last_error = KeepLastError::new();
    let mask = state().filter.mask;
    MASK.store(mask, Release);
    if mask != 0 {
        observe_exceptions();
    }
    mask
}

/// Restores the thread's last-error value when dropped: a record made
/// between a failing Win32 call and the caller's `GetLastError` (the
/// `syscall-leave` of `trace_call!`) must not change what it reads.
struct KeepLastError(u32);

impl KeepLastError {
    fn new() -> Self {
        // SAFETY: no preconditions.
        Self(unsafe { windows_sys::Win32::Foundation::GetLastError() })
    }
}

impl Drop for KeepLastError {
    fn drop(&mut self) {
        // SAFETY: no preconditions.
        unsafe { windows_sys::Win32::Foundation::SetLastError(self.0) }
    }
}

/// Records one event; the caller has checked the filter.
pub(crate) fn push(target: &'static str, event: &'static str, a: u64, b: u64) {
    let _last_error = KeepLastError::new();
    let ticks = now();
    start_clock(ticks);
    // SAFETY: no preconditions.
    let tid = unsafe { GetCurrentThreadId() };
    if let Some(ring) = &state().ring {
        ring.push(ticks, tid, target, event, a, b);
    }
}

pub(crate) fn clear() {
    mask();
    if let Some(ring) = &state().ring {
        ring.clear();
    }
}

#[cfg(test)]
pub(crate) const EVERY_TARGET: u32 = EVERYTHING;
const _: () = assert!(TARGETS.len() < 31, "the filter word holds a bit per target, OTHER_BIT and UNINIT");
