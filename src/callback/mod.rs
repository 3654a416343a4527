//! The callback machinery: what every pool object kind (work, timer, wait,
//! I/O) and every one-off task share. Read this first; each file below is
//! one rule of it.
//!
//! **A context.** The OS hands a pool callback one `*mut c_void`. That
//! pointer is the object's heap *context* ([`ctx`]): a block holding the
//! object's placement, a non-generic header both sides use (the drain
//! obligation, the arming gate, the waker slot) and the user's callback,
//! erased so the public types are not generic over it. A generic
//! `extern "system"` trampoline casts it back. Blocks are reused per thread.
//!
//! **Who owns what.** The object's public type owns its *core* (the raw
//! object and the context) through one [`owner::Owner`]; a cleanup group owns
//! its members' cores instead. The callback only borrows the context, for as
//! long as the OS runs it. Tokens (`WorkInvocation`, `TimerFiring`, ...) are
//! what only a running callback may hold.
//!
//! **How teardown runs.** Written once, in [`owner`]: stop what could queue
//! another callback ([`arming`] absorbs the arms that race the stop), drain
//! (`WaitFor*Callbacks(.., FALSE)`: never cancel), close, free the context.
//! [`obligation`] knows whether a drain was still owed (`drain-owed`,
//! `fail-fast`). Dropping the last owner from the object's own callback
//! cannot drain there: [`reentry`] marks which callback runs on a thread
//! and hands the rest of that teardown to another thread.
//!
//! **Inside a callback.** [`local`] is the thread's one thread-local (the
//! running callback, the in-place slot, the kept blocks). [`inplace`] polls
//! a task a callback woke on that callback's thread, once its work is done.
//! [`waker_slot`] gives a future's waker exactly one wake. [`unwind`] aborts,
//! naming the culprit, where a panic would cross the FFI boundary. [`spans`]
//! wraps each callback in a `tracing` span (feature `tracing`).
//!
//! The Win32 boundary itself (error values, 100 ns units) is `crate::sys`,
//! one floor below; the atomics the host-built cores use are `crate::sync`.
//! [`ctx`], [`local`], [`obligation`] and [`unwind`] call no Windows API and
//! build on every target, so Miri and loom check them on the host.

#[cfg(windows)]
#[macro_use]
pub(crate) mod owner;

#[cfg(windows)]
pub(crate) mod arming;
pub(crate) mod ctx;
#[cfg(windows)]
pub(crate) mod inplace;
pub(crate) mod local;
pub(crate) mod obligation;
#[cfg(windows)]
pub(crate) mod reentry;
#[cfg(windows)]
pub(crate) mod spans;
pub(crate) mod unwind;
#[cfg(windows)]
pub(crate) mod waker_slot;
