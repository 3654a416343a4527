//! Memory-safe owned types over the Windows thread pool API.
//!
//! Every pool object (`TP_WORK`, `TP_TIMER`, `TP_WAIT`, `TP_IO`, `TP_POOL`,
//! cleanup groups) is an owned Rust value whose `Drop` performs the documented
//! teardown, so a callback can never outlive the state it captured:
//!
//! 1. stop whatever could queue another callback (disarm, suppress re-arms);
//! 2. **drain**: wait for every queued and running callback
//!    (`WaitFor*Callbacks(.., FALSE)`); teardown never cancels, because on
//!    Windows cancelling a wait can leave the default pool without a worker;
//! 3. close the pool object;
//! 4. free the callback's heap context.
//!
//! # A callback that reaches its own object
//! A drain waits for every running callback, including the one that calls
//! it, so it can never complete inside a callback of the object it drains.
//! - **Dropping the last owner from the object's own callback works** (a
//!   one-shot timer that drops itself after firing, a work item that removes
//!   itself from a registry, a wait whose handler owns it). The drop does
//!   step 1 at once and hands steps 2 to 4, the same teardown, to another
//!   thread: a one-off callback on the process default pool (never the
//!   object's own pool, whose only thread may be the one still inside the
//!   callback). The drop returns at once; the teardown completes once the
//!   callback has returned, and what the callback captured is freed then,
//!   exactly once. A cleanup group dropped from one of its members' callbacks
//!   hands its whole release off the same way. A drain owed at that moment
//!   (work submissions not yet started, a periodic timer its tick did not
//!   stop) is reported as for any teardown.
//! - **Draining from the object's own callback panics** (`wait`,
//!   `stop_and_drain`, `cancel_pending`, `run_down`, and a cleanup group's
//!   `close_members` from a member's callback): it could never return. In a
//!   callback the panic aborts the process, with a message naming the call.
//!
//! "Own callback" means the callback's own thread, which the trampolines
//! mark: a thread the callback starts and waits for is not recognised, and a
//! drop or drain there still waits for the callback, forever.
//!
//! Callbacks run on pool threads through `extern "system"` trampolines with no
//! `catch_unwind`: a callback that panics aborts the process, since an unwind
//! may not cross the FFI boundary. One-off tasks ([`task`]: [`task::spawn`], [`task::spawn_blocking`],
//! [`scope`], [`join`], [`for_each`], [`map`]) differ: a task runs once and someone
//! waits for its outcome, so its panic is caught inside the callback and
//! handed to that waiter. A waker the crate wakes when a pool callback
//! completes a future (every future of [`time`], [`wait`] and [`io`], and a
//! [`JoinHandle`]) must not panic either: no unwind may leave the callback,
//! so the process aborts, printing `windows-threadpool: a waker panicked;
//! aborting` after the panic's message.
//!
//! Modules: [`callback_env`] (the `TP_CALLBACK_ENVIRON_V3` an object is
//! created in), [`pool`] (private pools), [`work`], [`timer`], [`wait`],
//! [`handle`] (the events and other kernel objects a wait waits on),
//! [`io`], [`process`] (child processes, awaited on the pool, with async
//! pipes), [`task`] (one-off closures with results), [`cleanup_group`], [`instance`] (what a running callback can ask
//! of the pool), [`placement`] (running an object's callbacks on chosen
//! processors), [`trace`] (an optional in-process record of what the
//! crate does), and [`hyper`](mod@hyper) (feature `hyper`: hyper 1.x's executor and timer
//! on the pool).
//!
//! On targets other than Windows the crate exports nothing. It still builds
//! the pure-Rust cores that need no Windows call (the trace ring, the drain
//! obligation, the I/O registry, the callback context and the chunking of
//! [`for_each`] and [`map`]), so that their
//! unit tests run there under Miri and their concurrent protocols are
//! model-checked with loom (`src/sync.rs` says how).
#![cfg_attr(not(windows), allow(unused))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

mod sync;

#[cfg(windows)]
#[macro_use]
pub mod trace;
// Off Windows, only the trace's platform-independent ring.
#[cfg(not(windows))]
mod trace {
    pub(crate) mod imp {
        pub(crate) mod ring;
    }
}

#[macro_use]
mod callback;
#[cfg(windows)]
pub mod callback_env;
#[cfg(windows)]
pub mod cleanup_group;
#[cfg(windows)]
pub mod handle;
// Public only for the crate's own tests (`heal::testing`).
#[cfg(all(windows, feature = "test-hooks"))]
#[doc(hidden)]
pub mod heal;
#[cfg(all(windows, not(feature = "test-hooks")))]
mod heal;
#[cfg(windows)]
pub mod instance;
#[cfg(windows)]
pub mod io;
// Off Windows, only the I/O object's registry of outstanding operations
// and the engine's kept blocks.
#[cfg(not(windows))]
mod io {
    mod kept;
    mod registry;
}
#[cfg(all(windows, feature = "hyper"))]
pub mod hyper;
#[cfg(windows)]
pub mod net;
#[cfg(windows)]
pub mod pipe;
#[cfg(windows)]
pub mod placement;
#[cfg(windows)]
pub mod pool;
#[cfg(windows)]
pub mod process;
#[cfg(windows)]
pub mod service;
#[cfg(windows)]
pub mod signal;
#[cfg(windows)]
mod sys;
#[cfg(windows)]
pub mod task;
// Off Windows, only the chunking core of `for_each` and `map`.
#[cfg(not(windows))]
mod task {
    mod chunked;
}
#[cfg(windows)]
/// Starting a process from the crate's tests, Wine's start-up failures
/// started once more: one definition with the integration tests'.
#[cfg(test)]
#[path = "../tests/support/start.rs"]
mod test_start;
#[cfg(windows)]
pub mod time;
#[cfg(windows)]
pub mod timer;
#[cfg(windows)]
pub mod wait;
#[cfg(windows)]
pub mod work;

/// How many callback contexts are alive in this process (a test hook).
#[cfg(all(windows, any(test, feature = "test-hooks")))]
#[doc(hidden)]
pub use callback::ctx::live_contexts;
/// How many teardowns were handed to another thread (a test hook).
#[cfg(all(windows, any(test, feature = "test-hooks")))]
#[doc(hidden)]
pub use callback::reentry::handoffs;
#[cfg(windows)]
pub use callback_env::{CallbackEnviron, CallbackPriority};
#[cfg(windows)]
pub use cleanup_group::CleanupGroup;
#[cfg(windows)]
pub use instance::CallbackInstance;
#[cfg(windows)]
pub use io::{Io, IoCompletion};
#[cfg(windows)]
pub use placement::ProcessorSet;
#[cfg(windows)]
pub use pool::Pool;
#[cfg(windows)]
pub use task::{
    JoinHandle, Scope, ScopedJoinHandle, for_each, for_each_in, join, join_in, map, map_in, scope, scope_in,
};
#[cfg(windows)]
pub use time::Deadline;
#[cfg(windows)]
pub use timer::{PeriodicTick, PeriodicTimer, Timer, TimerFiring};
#[cfg(windows)]
pub use wait::{Event, Wait, WaitActivation, WaitResult, WaitableHandle};
#[cfg(windows)]
pub use work::{Work, WorkInvocation};

/// The README's examples, compiled and run as doctests.
#[cfg(all(windows, doctest))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Ignoring an owned object or a payload does not compile under
/// `deny(unused_must_use)`: a type,
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn make() -> std::io::Result<()> {
///     windows_threadpool::Event::auto_reset()?;
///     Ok(())
/// }
/// ```
///
/// and a method that hands back a payload:
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn give_back(e: windows_threadpool::io::SubmitError<Vec<u8>>) {
///     e.into_payload();
/// }
/// ```
#[cfg(all(windows, doctest))]
pub struct MustUseDoctests;

/// The trace guide's examples, compiled and run as doctests.
#[cfg(all(windows, doctest))]
#[doc = include_str!("../docs/trace.md")]
pub struct TraceDocDoctests;
