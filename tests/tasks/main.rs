//! Integration tests of the crate's tasks and async futures: `spawn` and its
//! relatives, the futures of timers, waits and tasks, and async teardown, each
//! under every executor of `support/executors.rs`.
//!
//! One test binary per area, each former test file a module of it (a test is
//! named `<module>::<test>`): nextest still runs every test in a process of
//! its own, and the binary is linked and started once per configuration
//! instead of once per file.
#![cfg(windows)]

#[path = "../support/mod.rs"]
mod support;

// Shared helpers, compiled once for the modules that use them.
#[path = "../support/executors.rs"]
mod executors;

mod async_task;
mod async_teardown;
mod async_time;
mod async_wait;
mod service;
mod signal;
mod spawn;
