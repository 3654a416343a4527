//! The atomics the platform-independent cores (the trace ring, the drain
//! obligation) import: loom's in the crate's own tests under `--cfg loom`,
//! so its model checker sees every access and explores the interleavings
//! (up to a preemption bound, see `model`) and the values a weak load may
//! return; `core`'s everywhere else. Run the models on the host with
//! `RUSTFLAGS="--cfg loom" cargo test --release --lib loom` (`cargo xtask
//! test` does, in a target directory of its own).
//!
//! `cfg(all(test, loom))`, not `cfg(loom)`: loom is a dev-dependency, and a
//! `--cfg loom` build also compiles the crate as an ordinary library (the
//! self dev-dependency), which cannot see it. Code under a loom model uses
//! only what this module exports, and types built from these atomics are
//! constructed with `new`, never from zeroed memory (a loom atomic is a
//! handle into the model, not a plain integer).

#[cfg(all(test, loom))]
pub(crate) use loom::sync::atomic::*;

#[cfg(not(all(test, loom)))]
pub(crate) use core::sync::atomic::*;

/// Runs a loom model with at most three preemptions per execution (unless
/// `LOOM_MAX_PREEMPTIONS` says otherwise): enough for every interleaving
/// the small models here can tell apart, and seconds rather than minutes.
#[cfg(all(test, loom))]
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = b.preemption_bound.or(Some(3));
    b.check(f);
}
