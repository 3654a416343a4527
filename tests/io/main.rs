//! Integration tests of I/O: `io::Io` and its operations, sockets (`net`),
//! `io::Compat` (tokio's and `futures-io`'s traits), child processes and
//! their stdio pipes.
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
// `process` is the test module; the process counts keep its old name for them.
#[path = "../support/process.rs"]
mod counts;
#[cfg(feature = "trace")]
#[path = "../support/rows.rs"]
mod rows;
#[path = "../support/sockets.rs"]
mod sockets;

mod child_stdio;
mod compat;
mod io;
mod net;
mod pipe;
mod process;
