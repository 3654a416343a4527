//! Integration tests of the pool's objects and what surrounds them: work,
//! timers, waits, pools, cleanup groups, callback instances and environments,
//! teardown from a callback, self-heal, wakers that panic, the trace, the
//! child-process harness, the leak checks and the lifecycle models.
//!
//! One test binary per area, each former test file a module of it (a test is
//! named `<module>::<test>`): nextest still runs every test in a process of
//! its own, and the binary is linked and started once per configuration
//! instead of once per file. Modules that need a feature gate themselves.
#![cfg(windows)]

#[path = "../support/mod.rs"]
mod support;

// Shared helpers, compiled once for the modules that use them.
#[path = "../support/executors.rs"]
mod executors;
#[path = "../support/json.rs"]
mod json;
#[path = "../support/leak.rs"]
mod leak;
#[cfg(feature = "trace")]
#[path = "../support/rows.rs"]
mod rows;

mod callback_env;
mod cleanup_group;
mod debug;
mod harness;
mod inplace;
mod instance;
mod leaks;
mod lifecycle;
mod placement;
mod pool;
mod pool_stack;
mod self_heal;
mod self_teardown;
mod timer;
mod trace;
mod wait;
mod waker_panic;
mod work;
