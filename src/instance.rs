//! The callback instance: what a running callback can ask of the pool.
//!
//! Every callback invocation has a `TP_CALLBACK_INSTANCE`, passed to the
//! trampoline and valid only while that invocation runs, on its thread.
//! [`CallbackInstance`] wraps it; a callback reaches it through its token
//! ([`TimerFiring::instance`](crate::timer::TimerFiring::instance),
//! [`PeriodicTick::instance`](crate::timer::PeriodicTick::instance),
//! [`WaitActivation::instance`](crate::wait::WaitActivation::instance),
//! [`IoCompletion::instance`](crate::io::IoCompletion::instance)).
//!
//! ```
//! use std::sync::OnceLock;
//! use windows_threadpool::{Event, Timer};
//!
//! static DONE: OnceLock<Event> = OnceLock::new();
//! let done = DONE.get_or_init(|| Event::manual_reset().unwrap());
//! let timer = Timer::new(
//!     |firing| {
//!         // Set once this callback has returned, by the pool.
//!         firing.instance().set_event_on_return(DONE.get().unwrap()).unwrap();
//!     },
//! )?;
//! timer.arm(std::time::Duration::ZERO);
//! timer.stop_and_drain();
//! # let _ = done;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # It cannot escape the callback
//! A token is passed to the callback as a reference borrowed for the call
//! (`Fn(&Token<'_>)`, higher-ranked), and [`CallbackInstance`] is reached
//! only through such a borrow, so it cannot be stored anywhere that outlives
//! the call. It is neither `Send` nor `Sync` (nor, therefore, are the tokens
//! that hold it), so it cannot reach another thread either, not even a
//! scoped one: the pool's instance calls belong to the callback's thread
//! (Wine ignores them from any other).
//!
//! ```compile_fail,E0521
//! use std::cell::Cell;
//! use windows_threadpool::{Timer, instance::CallbackInstance};
//!
//! thread_local! {
//!     static KEPT: Cell<Option<&'static CallbackInstance<'static>>> = const { Cell::new(None) };
//! }
//! // error[E0521]: borrowed data escapes outside of closure
//! let _t = Timer::new(|f| KEPT.with(|k| k.set(Some(f.instance()))));
//! ```
//!
//! The same holds for every token, the work callback's included:
//!
//! ```compile_fail,E0521
//! use std::cell::Cell;
//! use windows_threadpool::{Work, WorkInvocation};
//!
//! thread_local! {
//!     static KEPT: Cell<Option<&'static WorkInvocation<'static>>> = const { Cell::new(None) };
//! }
//! let _w = Work::new(|w| KEPT.with(|k| k.set(Some(w))));
//! ```
//!
//! ```compile_fail,E0277
//! use windows_threadpool::Timer;
//!
//! // error[E0277]: `*mut ()` cannot be shared between threads safely
//! let _t = Timer::new(
//!     |f| std::thread::scope(|s| { s.spawn(|| f.instance().may_run_long()); }),
//! );
//! ```
//!
//! # Completion actions
//! An action requested with a `*_on_return` method is carried out by the
//! pool after the callback has returned. Each kind can be requested once per
//! invocation (Wine ignores a second request; Windows does not document
//! one), so a second request of the same kind fails with
//! [`io::ErrorKind::AlreadyExists`] on both: the request, not its argument,
//! is what is refused.
//!
//! **Why `set_event_on_return` takes `&'static Event`.** The pool signals
//! the event after the callback has returned, so the handle must stay open
//! past the callback's end. The borrow checker can only prove that of a
//! `'static` borrow: a callback is a closure called through `Fn(&Token)`,
//! and nothing in that signature relates the closure's own captures (which
//! do live as long as the object's context, and so past every callback) to
//! the token's lifetime, so an event the closure owns cannot be lent for
//! the token's lifetime either; and a borrow tied to the token's lifetime
//! would let a covariant token shorten it to a local's. A `static` (for
//! example a `OnceLock<Event>`) or a leaked `Event` is what safe code can
//! pass; a per-object event needs a constructor that lends the closure's
//! state with the token's lifetime, which this crate does not have yet.
//!
//! **No semaphore or mutex actions.** The crate has no owned semaphore or
//! mutex type, so `ReleaseSemaphoreWhenCallbackReturns` and
//! `ReleaseMutexWhenCallbackReturns` are not offered. A kernel mutex
//! released on return must be owned by the callback's thread, which only a
//! guard acquired on that thread can prove; and what the pool does when the
//! release fails (a mutex not owned, a semaphore past its maximum) is not
//! documented.
//!
//! **No `disassociate`.** `DisassociateCurrentThreadFromCallback` makes the
//! object's drains stop waiting for the calling callback. This crate's
//! teardown is "drain, close, then free the context", and the trampoline
//! keeps using the context after the user's callback returns (a one-shot's
//! re-arm, an I/O completion's accounting, the trace), as does the callback
//! itself (its closure is in the context). After a disassociation, a
//! concurrent `Drop` (or the own-callback handoff of `src/callback/reentry.rs`, whose
//! drain would no longer wait for the callback that dropped the object)
//! could free the context and close the object while the callback still
//! runs on them: a use after free. Making it sound would need the context
//! to be reference-counted by each running callback and the trampoline to
//! touch neither the context nor the object after a disassociation; that is
//! a change of the teardown design, not an addition, so it is left out.

use core::cell::Cell;
use core::ffi::c_void;
use core::marker::PhantomData;
use std::io;
use std::os::windows::io::AsRawHandle;

use windows_sys::Win32::System::Threading::{
    CallbackMayRunLong, FreeLibraryWhenCallbackReturns, PTP_CALLBACK_INSTANCE, SetEventWhenCallbackReturns,
};

use crate::handle::Event;

/// Completion actions already requested, one bit each.
const ACTION_EVENT: u8 = 1;
const ACTION_LIBRARY: u8 = 2;

/// The running callback's `TP_CALLBACK_INSTANCE`, borrowed for the call.
///
/// Reached through a callback's token; it cannot be stored past the call or
/// shared with another thread (see the [module docs](self)).
pub struct CallbackInstance<'a> {
    raw: PTP_CALLBACK_INSTANCE,
    requested: Cell<u8>,
    /// `*mut ()`: neither `Send` nor `Sync`. `&'a ()`: bounded by the call.
    _call: PhantomData<(&'a (), *mut ())>,
}

impl core::fmt::Debug for CallbackInstance<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CallbackInstance").field("raw", &(self.raw as *const c_void)).finish()
    }
}

impl CallbackInstance<'_> {
    /// Wraps the instance a trampoline received.
    pub(crate) fn new(raw: PTP_CALLBACK_INSTANCE) -> Self {
        Self { raw, requested: Cell::new(0), _call: PhantomData }
    }

    /// Records that the action `bit` is requested; fails if it already was.
    fn request(&self, bit: u8, what: &str) -> io::Result<()> {
        let r = self.requested.get();
        if r & bit != 0 {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{what} was already requested for this callback (one per callback)"),
            ));
        }
        self.requested.set(r | bit);
        Ok(())
    }

    /// Tells the pool this callback may run long (`CallbackMayRunLong`), so
    /// it should not count on this thread for other callbacks. Returns
    /// whether another thread is available (or could be created) for them;
    /// `false` when the pool is at its thread maximum with every thread busy.
    pub fn may_run_long(&self) -> bool {
        // SAFETY: `raw` is the running callback's instance and this is its
        // thread (`CallbackInstance` is neither `Send` nor `Sync`, and lives
        // only for the call).
        unsafe { CallbackMayRunLong(self.raw) != 0 }
    }

    /// Has the pool signal `event` once this callback has returned
    /// (`SetEventWhenCallbackReturns`).
    ///
    /// The event is `'static` because it is signalled after the callback's
    /// end (see the [module docs](self#completion-actions)).
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] if an event was already requested for
    /// this invocation.
    pub fn set_event_on_return(&self, event: &'static Event) -> io::Result<()> {
        self.request(ACTION_EVENT, "set_event_on_return")?;
        // SAFETY: `raw` is the running callback's instance, on its thread;
        // the event handle is never closed (`'static` borrow), so it is open
        // when the pool signals it.
        unsafe { SetEventWhenCallbackReturns(self.raw, event.as_handle().as_raw_handle()) };
        Ok(())
    }

    /// Has the pool release one reference to the DLL `module` once this
    /// callback has returned (`FreeLibraryWhenCallbackReturns`): the way a
    /// callback whose code lives in a DLL lets that DLL be unloaded without
    /// returning into unloaded code.
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`], releasing nothing (the reference
    /// stays the caller's), if a library was already requested for this
    /// invocation.
    ///
    /// # Safety
    /// `module` must be a module handle (`HMODULE`) on which the caller owns
    /// a reference (from `LoadLibrary*`, not yet released), which this call
    /// hands to the pool. If that is the module's last reference, it is
    /// unloaded after the callback returns: nothing may use its code or data
    /// after that (no function pointer, vtable, `static` or thread-local of
    /// the module may be reached again, by this or any other thread).
    pub unsafe fn free_library_on_return(&self, module: *mut c_void) -> io::Result<()> {
        self.request(ACTION_LIBRARY, "free_library_on_return")?;
        // SAFETY: `raw` is the running callback's instance, on its thread;
        // the caller gives up a reference it owns on `module`.
        unsafe { FreeLibraryWhenCallbackReturns(self.raw, module) };
        Ok(())
    }

    /// The raw `PTP_CALLBACK_INSTANCE`, valid only during this callback and
    /// on its thread.
    pub fn as_raw(&self) -> PTP_CALLBACK_INSTANCE {
        self.raw
    }
}
