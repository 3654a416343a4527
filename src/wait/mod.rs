//! Thread-pool waits (`TP_WAIT`): a callback that runs when a kernel object
//! is signalled or a timeout expires.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use windows_threadpool::wait::{Event, Wait, WaitResult};
//! use windows_threadpool::Deadline;
//!
//! let event = Event::auto_reset()?;
//! let (tx, rx) = mpsc::channel();
//! let wait = Wait::new(event.try_clone()?.into(), move |act| {
//!     tx.send(act.result()).unwrap();
//! })?;
//! wait.arm(Deadline::NEVER); // wait for the event, without timeout
//! event.set()?;
//! assert_eq!(rx.recv().unwrap(), WaitResult::Signalled);
//! wait.arm(Duration::from_millis(1));
//! assert_eq!(rx.recv().unwrap(), WaitResult::TimedOut);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Wait targets
//! The pool waits only on some kinds of handle; on others (a mutex, say) the
//! native behaviour is undefined and nothing reports an error. A wait
//! therefore takes a [`WaitableHandle`], built from a kind known to work
//! ([`Event`], [`WaitOnlyEvent`], a child process, a thread) or asserted with
//! an `unsafe` constructor. The wait owns it and lends it out only as a
//! borrow, so it cannot be closed while a wait on it is pending: it is closed
//! (by `CloseHandle`, or by the target's own close routine) exactly once, after
//! the wait object has been drained and closed. The handle types are
//! [`crate::handle`]'s, re-exported here.
//!
//! # Arming
//! A wait is created disarmed. [`WaitObject::arm`] arms it once: the
//! platform consumes the arming when it dispatches the callback, so a callback
//! that wants the next signal re-arms through [`WaitActivation::rearm`].
//! The timeout is a [`Deadline`]: [`Deadline::NEVER`] waits without one, a
//! `Duration` from now, an `Instant` or a `SystemTime` time out then
//! (`Duration::ZERO`: at once; see [`WaitObject::arm`] and
//! [`crate::time`]). There is no `is_armed`: the pool consumes an arming
//! when it queues the callback, and offers no call that reports it.
//!
//! # Teardown
//! `Drop` (and [`WaitObject::stop_and_drain`]) first refuse re-arms and
//! disarm under one lock, the lock a re-arm takes, so a callback running
//! concurrently cannot re-arm a wait being torn down. Then it drains (waits
//! for every queued and running callback, never cancels), closes the wait
//! object, closes the target handle, and frees the callback.
//!
//! The callback may drop the last owner of its own wait: the drop refuses
//! re-arms and disarms at once, and the rest of the teardown runs on another
//! thread once the callback has returned (a re-arm through the activation
//! after the drop returns `false`). Draining the wait from its own
//! callback (`wait`, `stop_and_drain`, the cancellations) panics: it would
//! wait for itself. See the
//! [crate docs](crate#a-callback-that-reaches-its-own-object).
//!
//! Under Wine, `SetThreadpoolWait(.., NULL, ..)` does not stop the pool from
//! queueing a callback: Wine's wait thread may still be blocked on a handle
//! array built before the disarm, and when that wait completes it queues the
//! callback, possibly after a drain has returned (measured: about one
//! iteration in ten of "signal, disarm, drain"). Closing and freeing then
//! would let that callback run on freed memory. So on Wine only, when an
//! arming may still be outstanding, teardown adds a flush: it arms the wait
//! once more with a zero timeout, which Wine's wait thread can only consume
//! after it has finished with every handle array older than the disarm, waits
//! for that activation (which does not reach the user's callback), disarms
//! and drains again. The flush needs a free thread in the wait's pool.
//! `docs/wine.md` records the difference.
//!
//! # Waits as futures
//! [`signalled`] (and [`signalled_in`]) turn one wait into a future that works
//! under any executor; [`process_exit`] builds on it. The timeout's deadline
//! is fixed when the future is made (as `tokio::time::sleep` fixes its own),
//! so a late first poll does not extend it; the future creates and arms its
//! own [`Wait`] at the first poll, and the poll returns an error creating it.
//! The callback publishes the result and wakes the latest poll's waker, once.
//!
//! Dropping an unfinished future must neither cancel the wait (a cancelled
//! wait callback can leave a Windows pool with no worker) nor block the
//! executor's thread, yet the wait's ordinary teardown drains, which waits
//! for a queued callback to get a pool thread. So that teardown is handed to
//! another thread (a callback on the process default pool); the future's
//! part ends at once, and the callback, which owns what it touches, finishes
//! safely. A completed future drops its wait in place: the callback has
//! already run, up to its wake. The handed-off teardown can itself wait:
//! under Wine its flush needs a free thread in the wait's pool.
//!
//! # Circular imports
//! `waitcore` is the core [`Wait`] owns and `future` the futures over a wait;
//! both use this file's public types ([`WaitResult`], [`WaitActivation`],
//! [`Wait`]), and this file wraps the core and re-exports the futures: one
//! module's parts, which name each other.

use core::ffi::c_void;
#[cfg(doc)]
use core::time::Duration;
use std::io;
use std::os::windows::io::{AsHandle, BorrowedHandle};

use windows_sys::Win32::System::Threading::PTP_WAIT;

use crate::callback::ctx::Blocks;
use crate::callback::owner::{self, Owner, forbid_drain_in_own_callback};
use crate::callback_env::CallbackEnviron;
use crate::instance::CallbackInstance;
use crate::sys::deadline::Deadline;
use crate::sys::filetime;

mod future;
mod waitcore;
pub use crate::handle::{Event, WaitCloseFn, WaitOnlyEvent, WaitTarget, WaitableHandle};
pub use future::{ProcessExit, Signalled, process_exit, signalled, signalled_in};
pub(crate) use waitcore::WaitCore;
use waitcore::WaitHeader;

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Wait>();
    send_sync::<WaitObject>();
};

/// How an activation came about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitResult {
    /// The handle was signalled (`WAIT_OBJECT_0`).
    Signalled,
    /// The timeout expired first (`WAIT_TIMEOUT`).
    TimedOut,
}

/// What a callback is told about one activation of its wait.
///
/// Not `Send` or `Sync`: it lives for one activation on one thread.
pub struct WaitActivation<'a> {
    header: &'a WaitHeader,
    wait: PTP_WAIT,
    result: WaitResult,
    instance: CallbackInstance<'a>,
}

impl core::fmt::Debug for WaitActivation<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitActivation").field("result", &self.result).finish_non_exhaustive()
    }
}

impl<'a> WaitActivation<'a> {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'a> {
        &self.instance
    }

    /// Why the callback runs.
    pub fn result(&self) -> WaitResult {
        self.result
    }

    /// Whether the handle was signalled (rather than the timeout expiring).
    pub fn is_signalled(&self) -> bool {
        self.result == WaitResult::Signalled
    }

    /// The handle waited on, borrowed for the callback's duration.
    pub fn handle(&self) -> BorrowedHandle<'_> {
        // SAFETY: the target stays open until the wait is drained, which
        // cannot complete while this callback runs.
        unsafe { BorrowedHandle::borrow_raw(self.header.target.0) }
    }

    /// Arms the wait again, as [`WaitObject::arm`] does: this activation
    /// consumed the previous arming.
    ///
    /// Returns `false` without arming when the wait is being stopped or
    /// torn down ([`WaitObject::stop_and_drain`] or `Drop`).
    pub fn rearm(&self, timeout: impl Into<Deadline>) -> bool {
        let ft = timeout.into().due().map(filetime);
        let h = self.header;
        h.parent.follow_current();
        let armed = h.arming.arm(|state| {
            trace_record!("wait", "rearm-entered", self.wait, h.target.0);
            h.publish(state, self.wait, ft.as_ref());
        });
        if armed.is_none() {
            trace_record!("wait", "rearm-suppressed", self.wait, 0);
            return false;
        }
        trace_record!("wait", "rearm-left", self.wait, 0);
        true
    }
}

/// The handle waited on, as [`WaitActivation::handle`] lends it.
impl AsHandle for WaitActivation<'_> {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle()
    }
}

/// An owned thread-pool wait (`CreateThreadpoolWait`) on an owned
/// [`WaitableHandle`]. Its methods are [`WaitObject`]'s, which the cleanup
/// group's [`WaitMember`](crate::cleanup_group::WaitMember) offers too.
///
/// Created disarmed. Each [`arm`](WaitObject::arm) produces at most one
/// callback; the callback receives a [`WaitActivation`] and may re-arm
/// through it. `Drop` refuses further re-arms and disarms (under one lock),
/// drains (never cancels), closes the wait, closes the handle, then frees
/// the callback.
#[cfg_attr(
    not(feature = "self-heal"),
    doc = r#"
Without the `self-heal` feature the healing cancellation does not exist; only
`try_cancel_pending_without_heal` does:

```compile_fail,E0599
use windows_threadpool::wait::{Event, Wait};
let wait = Wait::new(Event::auto_reset()?.into(), |_| {})?;
wait.try_cancel_pending();
# Ok::<(), std::io::Error>(())
```
"#
)]
#[must_use = "dropping it disarms, drains and closes the wait and its handle"]
pub struct Wait {
    core: Owner<WaitCore>,
}

view! {
    /// A wait's methods, shared by its owners: [`Wait`] and the
    /// cleanup group's [`WaitMember`](crate::cleanup_group::WaitMember) both
    /// dereference to it.
    pub struct WaitObject(WaitCore); owned by Wait
}

impl core::fmt::Debug for WaitObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(self.0.owner)
            .field("raw", &(self.0.raw as *const c_void))
            .field("handle", &self.0.handle)
            .finish()
    }
}

/// The handle waited on, as [`WaitObject::handle`] lends it.
impl AsHandle for Wait {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle()
    }
}

/// The handle waited on, as [`WaitObject::handle`] lends it.
impl AsHandle for WaitObject {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle()
    }
}

impl Wait {
    /// Creates a disarmed wait on `handle` whose callback is `callback`, on
    /// the process default pool. If creation fails, `handle` is closed.
    pub fn new<F>(handle: WaitableHandle, callback: F) -> io::Result<Self>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(WaitCore::new("Wait", handle, callback, None, Blocks::KEPT)?) })
    }

    /// Creates a disarmed wait on `handle` whose callback is `callback`, on
    /// the pool and with the settings of `env`. If creation fails, `handle`
    /// is closed.
    pub fn new_in<F>(handle: WaitableHandle, callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(WaitCore::new("Wait", handle, callback, Some(env), Blocks::KEPT)?) })
    }
}

impl WaitObject {
    /// The handle waited on, borrowed: it stays owned by the wait.
    pub fn handle(&self) -> BorrowedHandle<'_> {
        self.0.handle.handle()
    }

    /// Arms the wait (`SetThreadpoolWait`): the callback runs once, when the
    /// handle is signalled or at `timeout` ([`Deadline::NEVER`]: never times
    /// out; a [`Duration`] from now, an `Instant` or a `SystemTime`: see
    /// [`crate::time`]). A new arming replaces the previous one.
    ///
    /// A timeout already due (`Duration::ZERO`, a past instant) times out
    /// at once. Whether an already-signalled handle then reports
    /// [`WaitResult::Signalled`] is the platform's choice: Wine always
    /// reports a timeout and leaves the handle's state alone. An arm that
    /// races [`stop_and_drain`](Self::stop_and_drain) on another thread may
    /// be absorbed by it, as if it came first.
    pub fn arm(&self, timeout: impl Into<Deadline>) {
        self.0.arm(timeout.into())
    }

    /// Disarms (`SetThreadpoolWait(.., NULL, ..)`): no new callback is queued
    /// for later signals; one already queued still runs. Under Wine a signal
    /// arriving just before the disarm may still queue a callback after it
    /// returns; [`stop_and_drain`](Self::stop_and_drain) and `Drop` do not
    /// have that gap.
    ///
    /// Returns what `SetThreadpoolWaitEx` (Windows 8 and later) reports:
    /// `Some(true)` if the wait was armed and the disarm cancelled it,
    /// `Some(false)` if it was not armed or its callback is running or
    /// about to start; `None` where the system lacks that call (Wine 8).
    pub fn disarm(&self) -> Option<bool> {
        self.0.disarm()
    }

    /// Returns after every callback queued or running has finished. It does
    /// not disarm: a later signal still runs the callback.
    ///
    /// # Panics
    /// If called from this wait's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&self.0);
    }

    /// Brings the wait to rest: refuses re-arms from callbacks, disarms,
    /// waits for every queued and running callback, then accepts re-arms
    /// again. On return nothing is armed, queued or running; the wait may be
    /// armed again.
    ///
    /// A signal that races it (or `Drop`, which ends the same way) is not a
    /// callback yet, and may never become one: the disarm can come first.
    /// Under Wine the teardown's flush arms the wait with a zero timeout,
    /// and a signal arriving then satisfies that arming instead, as its
    /// acknowledgement (an auto-reset event is reset by it); the callback
    /// never sees it (see `docs/wine.md`). What is waited for is every
    /// callback queued by the time the wait is disarmed.
    ///
    /// # Panics
    /// If called from this wait's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&self.0);
    }

    /// Discards queued callbacks that have not started and waits for the
    /// running ones (`WaitForThreadpoolWaitCallbacks(.., TRUE)`), without the
    /// self-heal repair that `try_cancel_pending` schedules. It does not
    /// disarm (Windows 8 did: Wine's conformance test `test_tp_wait` marks
    /// that `broken`).
    ///
    /// Under Wine it first waits for a drain of the same object racing it
    /// on another thread, and then for what that drain waits for, so from a
    /// callback on a pool with no other free thread it can deadlock:
    /// `docs/wine.md`, the row "A cancelling drain ... while another thread
    /// is blocked in a drain of the same object".
    ///
    /// # Liveness
    /// On Windows a cancelled wait callback can leave the wait's pool with no
    /// worker, so that nothing queued to it runs until work is submitted to
    /// it. Nothing here repairs that: make the pool dispatch again yourself,
    /// for instance with [`prewarm_default_pool`](crate::work::prewarm_default_pool)
    /// or any work submission. A wedged pool hangs; it corrupts no memory.
    ///
    /// # Panics
    /// If called from this wait's own callback: it would wait for itself.
    pub fn try_cancel_pending_without_heal(&self) {
        forbid_drain_in_own_callback(&self.0, "try_cancel_pending_without_heal");
        self.0.cancel_pending();
    }

    /// Discards queued callbacks that have not started and waits for the
    /// running ones, then has the self-heal machinery repair the pool the
    /// cancellation may have wedged (a work submission to it, within about
    /// 250 ms; see `docs/self-heal.md`). It does not disarm (Windows 8 did:
    /// Wine's conformance test `test_tp_wait` marks that `broken`). Requires
    /// the default `self-heal` feature.
    ///
    /// Under Wine it first waits for a drain of the same object racing it
    /// on another thread, and then for what that drain waits for, so from a
    /// callback on a pool with no other free thread it can deadlock:
    /// `docs/wine.md`, the row "A cancelling drain ... while another thread
    /// is blocked in a drain of the same object".
    ///
    /// # Panics
    /// If called from this wait's own callback: it would wait for itself.
    #[cfg(feature = "self-heal")]
    pub fn try_cancel_pending(&self) {
        forbid_drain_in_own_callback(&self.0, "try_cancel_pending");
        self.0.cancel_pending_and_heal();
    }

    /// The raw `PTP_WAIT`, valid while its owner is alive.
    pub fn as_raw(&self) -> PTP_WAIT {
        self.0.raw
    }
}
