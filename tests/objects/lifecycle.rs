//! Randomised lifecycle tests (proptest): one model per object type. Each
//! case is a random sequence of steps; a step is up to four operations
//! (create, arm, re-arm from the callback, disarm, cancel,
//! `stop_and_drain`, drop, drop from the own callback, a group's release),
//! issued concurrently from up to four threads; the invariants are checked
//! at the barrier after every step and at the end of the case. See
//! `lifecycle/engine.rs` for the engine and the invariants every model
//! shares, `lifecycle/streams.rs` for what the two stream models (sockets,
//! named pipes) share, and each model's module for its own.
//!
//! `PROPTEST_CASES` sets the number of cases per model (default
//! `engine::DEFAULT_CASES`; `cargo xtask stress` runs many more); the
//! sockets and named pipes models, whose cases cost more, run a fixed share
//! of it (`engine::config_share`). A failing
//! case is shrunk and its seed kept in `lifecycle/<model>.proptest-regressions`,
//! committed: proptest replays those seeds first on every run.
//!
//! The leak checks count the whole process's contexts and operation blocks,
//! so every test runs in a process of its own (`support::alone`; the engine
//! refuses to run otherwise).
#![cfg(windows)]

use crate::support;

mod engine;
mod group;
mod io;
mod net;
mod periodic;
mod pipe;
mod streams;
mod timer;
mod wait;
mod work;

/// The context count is not vacuous: a work object's context is counted
/// from its creation to its drop.
#[test]
fn the_context_count_sees_a_context_come_and_go() {
    support::alone("lifecycle::the_context_count_sees_a_context_come_and_go", || {
        let before = windows_threadpool::live_contexts();
        let work = windows_threadpool::Work::new(|_| {}).unwrap();
        assert_eq!(windows_threadpool::live_contexts(), before + 1);
        drop(work);
        assert_eq!(windows_threadpool::live_contexts(), before);
    });
}
