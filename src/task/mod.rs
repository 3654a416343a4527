//! One-off tasks, with results and panics carried back to the caller:
//! futures ([`spawn`], [`block_on`]) and closures ([`spawn_blocking`],
//! [`scope`], [`join`], [`for_each`], [`map`]). The names follow tokio for futures and
//! rayon/`std::thread` for closures.
//!
//! ```
//! use windows_threadpool::task;
//!
//! // A future polled on pool threads; its handle is a future too.
//! let handle = task::spawn(async { 6 * 7 });
//! assert_eq!(task::block_on(handle).unwrap(), 42);
//!
//! // A closure run on a pool thread; `join` blocks, `.await` does not.
//! let handle = task::spawn_blocking(|| 6 * 7);
//! assert_eq!(handle.join().unwrap(), 42);
//!
//! let mut words = vec!["a", "b"];
//! windows_threadpool::scope(|s| {
//!     s.spawn(|| words.push("c")); // borrows `words` until the scope ends
//! });
//! assert_eq!(words, ["a", "b", "c"]);
//! ```
//!
//! # Async tasks
//! [`spawn`] gives the future a pool work object of its own
//! (`CreateThreadpoolWork`); each wake submits it once
//! (`SubmitThreadpoolWork`, nothing allocated), and its callback polls the
//! future. The futures of this crate ([`crate::time`], [`crate::wait`],
//! [`crate::io`]) are completed by pool callbacks too, so a service written
//! with them runs entirely on the pool, with no runtime thread of its own.
//! They work under any executor as well; in these tasks, any future that
//! needs no runtime of its own works (channels, `futures` combinators, this
//! crate's), while tokio's timers and sockets still need a tokio runtime. A panic in the future is caught and delivered to the
//! [`JoinHandle`]; a dropped handle detaches the task, which still runs; a
//! task is never cancelled. See `task/future.rs` for the state machine.
//!
//! # In-place polling
//! A wake is a hand-off to another pool thread (10 to 20 µs under Wine). So,
//! as openvmm's executor on the Windows pool and tokio's LIFO slot do, the
//! first task woken from inside one of the crate's own callbacks (an I/O or
//! socket completion, the time driver's timer, a wait future's callback, or
//! another task's poll) is polled on that callback's thread once the
//! callback's own work is done, instead of being submitted
//! (`src/callback/inplace.rs` is the mechanism):
//!
//! - **Only where it would run anyway**: the callback's object and the task
//!   have the same pool, priority, runs-long setting and placement. A task
//!   whose environment holds a library reference (`with_library`), and the
//!   callbacks of objects in a cleanup group, never take part.
//! - **At most one per callback, no recursion**: a further wake in the same
//!   callback, and any wake from the in-place poll itself, submits as
//!   before. So the thread goes back to the pool after every in-place poll.
//! - **A budget**: after 16 in-place polls in a row on a thread the next
//!   wake is submitted (it goes to the back of the pool's queue), so a chain
//!   of tasks that keep waking each other cannot keep overtaking callbacks
//!   already queued.
//! - **Never lost**: a parked task is polled when its callback ends, or
//!   submitted instead (if the callback is unwinding, which only happens on
//!   the way to the abort an unwinding callback ends in). A poll that blocks
//!   in the crate ([`JoinHandle::join`], [`block_on`], [`may_run_long`],
//!   `wait`, `stop_and_drain` or a drop that drains a pool object, a cleanup
//!   group's release) submits the task its callback parked first, since
//!   that task would otherwise wait for it; a poll that blocks by other
//!   means (a `std` channel, a lock) on a task it has just woken waits until
//!   it returns, as under tokio's LIFO slot: do not block in a poll.
//! - **The same poll**: the in-place poll runs the work callback's code:
//!   the task's own `tracing` span (parented as always, entered after the
//!   callback's own span has closed), its placement, its panics caught and
//!   handed to the [`JoinHandle`].
//! - **`may_run_long`** in a task polled in place calls `CallbackMayRunLong`
//!   on the instance of the callback it runs in: the thread it blocks is
//!   that callback's, of the same pool and class.
//! - **Not the object's callback**: the poll runs after the callback has
//!   left its own-callback mark (`crate::callback::reentry`), and a completion
//!   callback first disassociates its thread from its object
//!   (`DisassociateCurrentThreadFromCallback`), touching nothing of the
//!   object afterwards. So a task polled in place is in no object's
//!   callback: it may drop or drain the very `AsyncIo`, socket or wait that
//!   woke it, and the drain does not wait for the callback it runs in.
//!   (A task's own work callback is not disassociated: nothing drains a
//!   task's work object.)
//!
//! `WINDOWS_THREADPOOL_NO_INPLACE=1`, read at the first spawn, turns it
//! off: every wake is submitted.
//!
//! # The budget
//! A receive of data already buffered completes inline on a socket that
//! skips the completion port on success, so a task reading from a peer that
//! floods it would be ready at every poll and keep its pool thread for as long
//! as the flood lasts, ahead of every other task queued there. As tokio's
//! cooperative budget does, each poll of a task ([`spawn`]'s, an in-place
//! poll, each poll of [`block_on`]) gets a budget of 128 operations: each I/O
//! future of the crate (the sockets', [`AsyncIo`](crate::io::AsyncIo)'s,
//! `io::Compat`'s reads and writes) spends one when it
//! completes, and once it is spent such a future does not complete: it wakes
//! its task and returns `Pending`, so the task goes to the back of the pool's
//! queue and is polled again with a fresh budget. In-place polls are bounded
//! apart from this (16 in a row per thread, above). The budget belongs to
//! the poll's waker: a future polled with it (directly, or through
//! `join!`/`select!`, which pass it on) spends it; one polled by another
//! executor (tokio, `futures::executor`, even nested in a crate task's
//! poll) or through a combinator that gives its futures wakers of their own
//! (`FuturesUnordered`) runs without one, since the crate cannot see where
//! such a poll begins (tokio's own budget covers only tokio's resources).
//! `src/task/budget.rs` is the mechanism.
//!
//! # Design of closure tasks
//! **One allocation per task.** A task is one reference-counted block
//! (`Arc`) holding a header (state, scope link, a vtable), the result slot,
//! the pool reference and the closure. The pool callback
//! (`TrySubmitThreadpoolCallback`) owns one reference, the handle another
//! (and, for scoped tasks, the scope a third); nothing else is allocated.
//!
//! **Claimed once, by whoever comes first.** A task's state goes
//! `QUEUED -> RUNNING -> DONE`; the pool callback and any thread that waits
//! for the task race to claim it (`QUEUED -> RUNNING`), and the winner runs
//! the closure. So a thread that waits in [`JoinHandle::join`], at the end of
//! a [`scope`], in [`join`], in [`for_each`] or in [`map`] first runs the tasks it waits
//! for that no pool thread has started (help while waiting), and only blocks
//! (`WaitOnAddress`) on tasks that are already running elsewhere. This is
//! what keeps a pool with a thread maximum of 1 from deadlocking when a
//! callback on its only thread spawns and joins, or opens a scope: the
//! tasks queued behind it are run by the waiter itself. The pool callback of
//! a task claimed by a waiter finds it claimed and only drops its reference.
//! A task run by a waiter runs on the waiter's thread as that thread is:
//! with its affinity (placed only if the waiter is itself a placed
//! callback, see [`crate::placement`]), and without the environment's
//! priority or runs-long setting. A task that joins its own handle (passed
//! to it through shared state) waits for itself forever, as a thread that
//! joins itself would; a long chain of tasks each joining the next, all
//! run by waiters, runs on one stack.
//!
//! **Panics are caught inside the task** (`catch_unwind`), stored as the
//! result and returned by `join`, as `std::thread` does; no unwind reaches
//! the pool. This differs from the long-lived objects ([`Work`](crate::Work),
//! timers, waits, I/O), whose callbacks abort the process on panic: their
//! callback runs again and again on shared state with nobody to hand a
//! panic to, while a task runs once and has a handle (or a scope) waiting
//! for its outcome.
//!
//! **Teardown drains, never cancels.** A task is never cancelled: a dropped
//! [`JoinHandle`] detaches the task, which still runs; a scope returns only
//! after every task spawned in it has finished and its unjoined result has
//! been dropped. Tasks are never members of a cleanup group (the
//! environment's group, if any, is not passed on), so no group release can
//! discard one. A task keeps the private pool it runs on open until its
//! callback has returned; a callback that holds the pool's last reference
//! hands the close to the default pool (`reentry::hand_off`), as an
//! object's own-callback teardown does, rather than close the pool from one
//! of its own callbacks. None of the self-heal or drain-obligation
//! machinery of the long-lived objects applies: there is no object to drain
//! or to drop from its own callback, and nothing is ever cancelled.
//!
//! **A scope's tasks are finished before it returns.** [`scope`] collects its
//! tasks on a lock-free list; when its closure has returned (or panicked) it
//! claims or waits for each, takes the list again until it stays empty
//! (tasks may spawn more tasks into the scope), and only then drops the
//! results nobody joined. After that a task's block holds no closure and no
//! result, so the pool callback that drops the last reference later touches
//! nothing the scope borrowed. If the closure panicked, `scope` resumes that
//! panic; otherwise, if a task panicked and was not joined, `scope` panics,
//! as `std::thread::scope` does.
//!
//! **`for_each` runs chunks taken from the iterator.** Submitting one pool
//! callback per item costs microseconds (about 9 µs under Wine), so
//! [`for_each`] starts one helper task per other processor, and every
//! participant (the caller included) takes chunks of up to 1,024 items from
//! the iterator under one lock, into a buffer of its own, and visits them
//! without the lock, until the iterator is exhausted. Nothing is collected
//! up front (collecting 1,000,000 items into a fresh buffer costs more under
//! Wine than visiting them), and the allocations are one buffer per
//! participant whatever the number of items. Each item is moved out exactly
//! once: visited, or, if `f` panicked earlier in the same chunk, dropped
//! unvisited; the first panic is resumed once the iterator is exhausted and
//! every chunk finished.
//!
//! **`map` is `for_each` writing each result at its item's index.** The
//! index of a chunk's first item is taken with the chunk, under the same
//! lock, and the participant writes its results into the output `Vec`'s
//! spare capacity at those indices, for as many items as the iterator's
//! lower size bound promises (all of them for a range, a slice's or a
//! `Vec`'s iterator): one allocation, at the final length, whatever the
//! number of items. Past that bound (`filter`, `from_fn`), results are
//! gathered per participant with their indices and stitched in order at
//! the end. `map` does not require `ExactSizeIterator`, which `0..=n`,
//! `Range<u64>`, `filter` and `chain` lack. A panic of `f` leaves its
//! chunk's unwritten slots recorded as a hole, so the written results, and
//! only those, are dropped before the panic is resumed. The chunking and
//! this output are platform-independent (`task/chunked.rs`), and their unit
//! tests run on `std` threads under Miri on the host.
//!
//! # Long-blocking tasks
//! A task that is about to block for long calls [`may_run_long`]
//! (`CallbackMayRunLong` on the instance of the pool callback it runs in),
//! as an object's callback calls `CallbackInstance::may_run_long`. It
//! returns `None` where there is no such callback: outside a task, or in a
//! task a waiter runs on its own thread (which is not the pool's to plan
//! for). Tasks that all block for long can instead run on an environment
//! that says so up front,
//! [`CallbackEnviron::with_runs_long`](crate::CallbackEnviron::with_runs_long)
//! (`SetThreadpoolCallbackRunsLong`):
//!
//! ```
//! let h = windows_threadpool::task::spawn_blocking(|| {
//!     let _more_threads = windows_threadpool::task::may_run_long();
//!     std::thread::sleep(std::time::Duration::from_millis(1)); // blocks
//! });
//! h.join().unwrap();
//! ```
//!
//! ```
//! use windows_threadpool::{CallbackEnviron, task::spawn_blocking_in};
//!
//! let env = CallbackEnviron::new().with_runs_long();
//! let h = spawn_blocking_in(|| std::thread::sleep(std::time::Duration::from_millis(1)), &env);
//! h.join().unwrap();
//! ```
//!
//! # Compile-time rules
//! A spawned closure must be `Send`:
//!
//! ```compile_fail,E0277
//! let rc = std::rc::Rc::new(1);
//! let _h = windows_threadpool::task::spawn_blocking(move || *rc);
//! ```
//!
//! An unscoped task cannot borrow from the stack:
//!
//! ```compile_fail,E0373
//! let v = vec![1, 2, 3];
//! let _h = windows_threadpool::task::spawn_blocking(|| v.len());
//! ```
//!
//! A scoped task may borrow only what outlives the scope:
//!
//! ```compile_fail,E0373
//! windows_threadpool::scope(|s| {
//!     let local = vec![1, 2, 3];
//!     s.spawn(|| local.len());
//! });
//! ```
//!
//! A spawned future must be `Send`, as tokio's `spawn` requires:
//!
//! ```compile_fail,E0277
//! let rc = std::rc::Rc::new(1);
//! let _h = windows_threadpool::task::spawn(async move { *rc });
//! ```
//!
//! A scoped task is `Send` too:
//!
//! ```compile_fail,E0277
//! let rc = std::rc::Rc::new(1);
//! windows_threadpool::scope(|s| {
//!     s.spawn(|| *rc);
//! });
//! ```

mod blocking;
pub(crate) mod budget;
mod chunked;
mod current_thread;
mod future;
mod header;
mod parallel;
mod scoped;

/// How many tasks were polled in place (a test hook).
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub use crate::callback::inplace::inplace_polls;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub use blocking::fail_next_submits;
pub use blocking::{spawn_blocking, spawn_blocking_in, try_spawn_blocking, try_spawn_blocking_in};
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub use budget::budget_yields;
pub use current_thread::block_on;
/// How many wakes found their task idle (a test hook).
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub use future::idle_wakes;
pub use future::{spawn, spawn_in, try_spawn, try_spawn_in};
pub use header::{JoinHandle, may_run_long};
pub use parallel::{for_each, for_each_in, map, map_in};
pub use scoped::{Scope, ScopedJoinHandle, join, join_in, scope, scope_in};
