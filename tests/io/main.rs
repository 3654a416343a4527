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
// `process` is the test module; the process counts (`leak`'s, which holds
// them) keep its old name for them.
use leak as counts;
#[cfg(feature = "trace")]
#[path = "../support/rows.rs"]
mod rows;
#[path = "../support/sockets.rs"]
mod sockets;
// The hostile-client rounds of `pipe_hostile`.
#[path = "../support/hostile_pipe.rs"]
mod hostile_pipe;
#[path = "../support/leak.rs"]
mod leak;
#[path = "../support/pipe_server.rs"]
mod pipe_server;
#[path = "../support/rounds.rs"]
mod rounds;

mod child_stdio;
mod compat;
mod io;
mod net;
mod pipe;
mod pipe_hostile;
mod process;
