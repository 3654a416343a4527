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
//! the wait object has been drained and closed.
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

use core::ffi::c_void;
#[cfg(doc)]
use core::time::Duration;
use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, BorrowedHandle, FromRawHandle, IntoRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use windows_sys::Win32::Foundation::{DuplicateHandle, FILETIME, HANDLE, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{
    CloseThreadpoolWait, CreateEventW, CreateThreadpoolWait, EVENT_MODIFY_STATE, GetCurrentProcess, OpenEventW,
    PTP_CALLBACK_INSTANCE, PTP_WAIT, ResetEvent, SYNCHRONIZATION_SYNCHRONIZE, SetEvent, SetThreadpoolWait,
    WaitForThreadpoolWaitCallbacks,
};
use windows_sys::core::BOOL;

use crate::callback::arming::{ArmGate, Gated};
use crate::callback::ctx::{self, Blocks, Context};
use crate::callback::local::Local;
use crate::callback::obligation::DrainObligation;
use crate::callback::owner::{
    self, Access, DrainLock, Lifecycle, Owner, Phase, Released, forbid_drain_in_own_callback,
};
use crate::callback::reentry;
use crate::callback::spans;
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::heal::Registration;
use crate::instance::CallbackInstance;
use crate::pool::PoolRef;
use crate::sys::{self, filetime};
use crate::time::Deadline;

mod future;
pub use future::{ProcessExit, Signalled, process_exit, signalled, signalled_in};

/// The close routine of a wait target that is not closed by `CloseHandle`
/// (a change notification closes with `FindCloseChangeNotification`).
pub type WaitCloseFn = unsafe extern "system" fn(HANDLE) -> BOOL;

/// A raw handle value that may cross threads (handle values are process-wide).
#[derive(Clone, Copy)]
struct SendHandle(HANDLE);
// SAFETY: a handle value is valid on every thread of the process; whoever
// holds one only passes it to thread-safe kernel calls.
unsafe impl Send for SendHandle {}
// SAFETY: as above.
unsafe impl Sync for SendHandle {}

enum Target {
    /// Closed with `CloseHandle`.
    Owned(OwnedHandle),
    /// Closed with its own routine.
    Custom { raw: SendHandle, close: WaitCloseFn },
}

/// A handle the thread pool can wait on, owned.
///
/// Build one from an [`Event`], a [`WaitOnlyEvent`], a
/// [`std::process::Child`] (signalled when the process exits) or a
/// [`std::thread::JoinHandle`] (signalled when the thread exits), given up
/// by `From` or kept with [`from_child`](Self::from_child) and
/// [`from_thread`](Self::from_thread), or with the `unsafe` constructors for
/// handles obtained elsewhere. Dropping it closes the handle, with its own
/// close routine if it has one.
#[must_use = "dropping it closes the handle"]
pub struct WaitableHandle {
    /// `None` only while being dismantled.
    target: Option<Target>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<WaitableHandle>();
    send_sync::<Event>();
    send_sync::<WaitOnlyEvent>();
    send_sync::<Wait>();
    send_sync::<WaitObject>();
};

impl core::fmt::Debug for WaitableHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitableHandle")
            .field("handle", &self.raw())
            .field("custom_close", &matches!(self.target, Some(Target::Custom { .. })))
            .finish()
    }
}

impl WaitableHandle {
    /// A new handle to `child`'s process with `SYNCHRONIZE` access alone
    /// (`DuplicateHandle`): a wait on it fires when the process exits, and
    /// `child` stays the caller's, so [`Child::wait`](std::process::Child::wait)
    /// still reads the exit status. To give the child up instead, convert it
    /// with `From`.
    ///
    /// # Errors
    /// The OS error if `DuplicateHandle` fails.
    pub fn from_child(child: &std::process::Child) -> io::Result<Self> {
        Ok(Self { target: Some(Target::Owned(duplicate_synchronize(child.as_handle())?)) })
    }

    /// A new handle to `thread` with `SYNCHRONIZE` access alone
    /// (`DuplicateHandle`): a wait on it fires when the thread exits, and
    /// `thread` can still be joined for its result. To give the
    /// `JoinHandle` up instead, convert it with `From`.
    ///
    /// # Errors
    /// The OS error if `DuplicateHandle` fails.
    pub fn from_thread<T>(thread: &std::thread::JoinHandle<T>) -> io::Result<Self> {
        Ok(Self { target: Some(Target::Owned(duplicate_synchronize(thread.as_handle())?)) })
    }

    /// Wraps a handle obtained elsewhere; it is closed with `CloseHandle`.
    ///
    /// # Safety
    /// `handle` must be a handle the thread pool supports waiting on, with
    /// `SYNCHRONIZE` access: a change notification closed by `CloseHandle`
    /// (otherwise see [`assume_waitable_with`](Self::assume_waitable_with)),
    /// console input, an event, a memory resource notification, a process, a
    /// semaphore, a thread or a waitable timer. Not a mutex (the pool's
    /// behaviour on one is undefined), not a pseudo-handle, and no other code
    /// may close it.
    pub unsafe fn assume_waitable(handle: OwnedHandle) -> Self {
        Self { target: Some(Target::Owned(handle)) }
    }

    /// Wraps a raw handle whose close routine is `close` rather than
    /// `CloseHandle`. `close` runs exactly once: when the value is dropped,
    /// or after the wait that owns it has been drained and closed.
    ///
    /// # Safety
    /// `handle` must satisfy the conditions of
    /// [`assume_waitable`](Self::assume_waitable), be owned by the caller
    /// (closed by nothing else), and `close` must be the routine that closes
    /// it, callable on any thread.
    pub unsafe fn assume_waitable_with(handle: HANDLE, close: WaitCloseFn) -> Self {
        Self { target: Some(Target::Custom { raw: SendHandle(handle), close }) }
    }

    /// The handle, borrowed.
    pub fn handle(&self) -> BorrowedHandle<'_> {
        // SAFETY: the handle stays open as long as `self`, which the borrow
        // cannot outlive.
        unsafe { BorrowedHandle::borrow_raw(self.raw()) }
    }

    /// Gives the handle back as an [`OwnedHandle`], or returns `self`
    /// unchanged if the handle closes with its own routine (an `OwnedHandle`
    /// would close it with `CloseHandle`).
    pub fn into_handle(mut self) -> Result<OwnedHandle, Self> {
        match self.target.take() {
            Some(Target::Owned(h)) => Ok(h),
            other => {
                self.target = other;
                Err(self)
            }
        }
    }

    fn raw(&self) -> HANDLE {
        match &self.target {
            Some(Target::Owned(h)) => h.as_raw_handle(),
            Some(Target::Custom { raw, .. }) => raw.0,
            None => core::ptr::null_mut(),
        }
    }
}

impl AsHandle for WaitableHandle {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle()
    }
}

impl Drop for WaitableHandle {
    fn drop(&mut self) {
        match self.target.take() {
            Some(Target::Owned(h)) => {
                let raw = h.as_raw_handle();
                trace_call!("CloseHandle", raw, 0, { drop(h) });
            }
            Some(Target::Custom { raw, close }) => {
                // SAFETY: the constructor's contract: `close` closes `raw`,
                // which nothing else closes; `take` makes this the only call.
                trace_call!("WaitCloseFn", raw.0, 0, { unsafe { close(raw.0) } });
            }
            None => {}
        }
    }
}

impl From<Event> for WaitableHandle {
    fn from(e: Event) -> Self {
        Self { target: Some(Target::Owned(e.handle)) }
    }
}

impl From<WaitOnlyEvent> for WaitableHandle {
    fn from(e: WaitOnlyEvent) -> Self {
        Self { target: Some(Target::Owned(e.handle)) }
    }
}

/// The wait fires when the process exits. The child's standard I/O pipes, if
/// any, are closed by the conversion: take them out of the `Child` first to
/// keep them.
impl From<std::process::Child> for WaitableHandle {
    fn from(child: std::process::Child) -> Self {
        Self { target: Some(Target::Owned(OwnedHandle::from(child))) }
    }
}

/// The wait fires when the thread exits. The thread is detached: its result
/// can no longer be joined.
impl<T> From<std::thread::JoinHandle<T>> for WaitableHandle {
    fn from(thread: std::thread::JoinHandle<T>) -> Self {
        // SAFETY: `into_raw_handle` transfers ownership of the thread handle.
        let h = unsafe { OwnedHandle::from_raw_handle(thread.into_raw_handle()) };
        Self { target: Some(Target::Owned(h)) }
    }
}

/// An owned event (`CreateEventW`), unnamed with full access, or named
/// ([`named_manual_reset`](Self::named_manual_reset), [`open`](Self::open)),
/// so that another process can set it.
///
/// Keep one and give a [`try_clone`](Self::try_clone) (or a
/// [`wait_only`](Self::wait_only) duplicate) to a [`Wait`].
#[derive(Debug)]
#[must_use = "dropping it closes the event handle"]
pub struct Event {
    handle: OwnedHandle,
}

impl Event {
    /// Creates an unsignalled manual-reset event: once [`set`](Self::set) it
    /// stays signalled, releasing every wait, until [`reset`](Self::reset).
    ///
    /// # Errors
    /// The OS error if `CreateEventW` fails.
    pub fn manual_reset() -> io::Result<Self> {
        Self::create(true)
    }

    /// Creates an unsignalled auto-reset event: a [`set`](Self::set) releases
    /// one wait, which resets the event.
    ///
    /// # Errors
    /// The OS error if `CreateEventW` fails.
    pub fn auto_reset() -> io::Result<Self> {
        Self::create(false)
    }

    /// Creates the unsignalled manual-reset event `name` (for example
    /// `Local\my-service-stop`), or opens it if it exists already, with
    /// full access: a process that knows the name can then set it
    /// ([`open`](Self::open)). An existing event keeps its state and its
    /// reset kind.
    ///
    /// # Errors
    /// `InvalidInput` if `name` contains a NUL; the OS error if
    /// `CreateEventW` fails (`ERROR_INVALID_HANDLE` when the name belongs
    /// to an object of another kind).
    pub fn named_manual_reset(name: &str) -> io::Result<Self> {
        let name = wide_name(name)?;
        // SAFETY: null attributes are allowed; `name` is NUL-terminated and
        // outlives the call; the result is checked.
        let h = unsafe { CreateEventW(core::ptr::null(), 1, 0, name.as_ptr()) };
        Self::owning(h)
    }

    /// Opens the existing event `name` (`OpenEventW`) with the access to
    /// [`set`](Self::set), [`reset`](Self::reset) and wait on it.
    ///
    /// # Errors
    /// `InvalidInput` if `name` contains a NUL; `NotFound`
    /// (`ERROR_FILE_NOT_FOUND`) if no such event exists; the OS error if
    /// `OpenEventW` fails otherwise.
    pub fn open(name: &str) -> io::Result<Self> {
        let name = wide_name(name)?;
        // SAFETY: `name` is NUL-terminated and outlives the call; the result
        // is checked.
        let h = unsafe { OpenEventW(EVENT_MODIFY_STATE | SYNCHRONIZATION_SYNCHRONIZE, 0, name.as_ptr()) };
        Self::owning(h)
    }

    fn create(manual_reset: bool) -> io::Result<Self> {
        // SAFETY: null attributes and name are allowed; the result is checked.
        let h = unsafe { CreateEventW(core::ptr::null(), manual_reset.into(), 0, core::ptr::null()) };
        Self::owning(h)
    }

    /// Takes a handle just returned by `CreateEventW`/`OpenEventW`: null is
    /// their failure.
    fn owning(h: HANDLE) -> io::Result<Self> {
        if h.is_null() {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `h` is a new handle owned by nothing else.
        Ok(Self { handle: unsafe { OwnedHandle::from_raw_handle(h) } })
    }

    /// Signals the event (`SetEvent`).
    pub fn set(&self) -> io::Result<()> {
        // SAFETY: `self.handle` is an open event handle.
        sys::check(unsafe { SetEvent(self.handle.as_raw_handle()) })
    }

    /// Resets the event to non-signalled (`ResetEvent`).
    pub fn reset(&self) -> io::Result<()> {
        // SAFETY: `self.handle` is an open event handle.
        sys::check(unsafe { ResetEvent(self.handle.as_raw_handle()) })
    }

    /// Another handle to the same event, with the same access.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self { handle: self.handle.try_clone()? })
    }

    /// Another handle to the same event with `SYNCHRONIZE` access alone: the
    /// pool can wait on it, but it cannot set or reset the event.
    pub fn wait_only(&self) -> io::Result<WaitOnlyEvent> {
        Ok(WaitOnlyEvent { handle: duplicate_synchronize(self.handle.as_handle())? })
    }

    /// The handle, borrowed.
    pub fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle.as_handle()
    }
}

/// `name` as a NUL-terminated UTF-16 string for the `W` calls.
fn wide_name(name: &str) -> io::Result<Vec<u16>> {
    if name.contains('\0') {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an event name cannot contain NUL"));
    }
    Ok(name.encode_utf16().chain(Some(0)).collect())
}

impl AsHandle for Event {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle.as_handle()
    }
}

/// A handle to an [`Event`] with `SYNCHRONIZE` access alone
/// ([`Event::wait_only`]): waitable, but it cannot signal the event.
#[derive(Debug)]
#[must_use = "dropping it closes the handle"]
pub struct WaitOnlyEvent {
    handle: OwnedHandle,
}

impl WaitOnlyEvent {
    /// The handle, borrowed.
    pub fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle.as_handle()
    }
}

impl AsHandle for WaitOnlyEvent {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.handle.as_handle()
    }
}

/// What [`signalled`] waits on: a [`WaitableHandle`], or anything that
/// converts into one ([`Event`], [`WaitOnlyEvent`], a `Child`, a thread's
/// `JoinHandle`), given up; or an event borrowed (`&Event`,
/// `&WaitOnlyEvent`), which is duplicated with `SYNCHRONIZE` access alone at
/// the call. The future owns what it waits on either way: a dropped future's
/// teardown, which finishes on another thread, may outlive any borrow.
pub trait WaitTarget {
    /// The handle to wait on; for a borrowed event, its duplicate.
    ///
    /// # Errors
    /// The OS error if `DuplicateHandle` fails.
    fn into_waitable(self) -> io::Result<WaitableHandle>;
}

impl<T: Into<WaitableHandle>> WaitTarget for T {
    fn into_waitable(self) -> io::Result<WaitableHandle> {
        Ok(self.into())
    }
}

impl WaitTarget for &Event {
    fn into_waitable(self) -> io::Result<WaitableHandle> {
        Ok(self.wait_only()?.into())
    }
}

impl WaitTarget for &WaitOnlyEvent {
    fn into_waitable(self) -> io::Result<WaitableHandle> {
        let handle = duplicate_synchronize(self.as_handle())?;
        Ok(WaitOnlyEvent { handle }.into())
    }
}

/// A new handle to the object behind `handle` with `SYNCHRONIZE` access
/// alone: enough to wait on it, nothing else.
fn duplicate_synchronize(handle: BorrowedHandle<'_>) -> io::Result<OwnedHandle> {
    let mut out: HANDLE = core::ptr::null_mut();
    // SAFETY: both process handles are the current-process pseudo-handle,
    // `handle` is open for the borrow, and `out` receives a new handle on
    // success.
    let ok = unsafe {
        let me = GetCurrentProcess();
        DuplicateHandle(me, handle.as_raw_handle(), me, &mut out, SYNCHRONIZATION_SYNCHRONIZE, 0, 0)
    };
    sys::check(ok)?;
    // SAFETY: `out` is a new handle owned by nothing else.
    Ok(unsafe { OwnedHandle::from_raw_handle(out) })
}

/// How an activation came about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitResult {
    /// The handle was signalled (`WAIT_OBJECT_0`).
    Signalled,
    /// The timeout expired first (`WAIT_TIMEOUT`).
    TimedOut,
}

/// The arming state, behind the gate that arming, re-arming and stopping
/// share (`crate::callback::arming`: arms are absorbed while a stop is in progress;
/// teardown's stop never ends).
#[derive(Default)]
struct ArmState {
    /// Armings published since the wait was last at rest. Compared with
    /// [`WaitHeader::activations`]: fewer activations than armings means an
    /// arming may still be outstanding (each arming yields at most one
    /// activation).
    armings: u64,
    /// Wine only: a flush arming is outstanding; a disarm now would remove
    /// it and leave the flush waiting for an activation that never comes.
    flushing: bool,
}

/// Wine only: the teardown flush handshake.
#[derive(Default)]
struct Flush {
    /// Read by every activation; true only while a flush is in progress.
    active: AtomicBool,
    acked: Mutex<bool>,
    cv: Condvar,
}

/// The context state the owner and the trampoline share.
pub(crate) struct WaitHeader {
    obligation: DrainObligation,
    /// The target's handle value, for re-arms (the owner keeps it open until
    /// the wait is drained and closed).
    target: SendHandle,
    arming: ArmGate<ArmState>,
    /// Activations of user armings since the wait was last at rest.
    activations: AtomicU64,
    flush: Flush,
    /// The span current at the latest `arm` from outside a callback: the
    /// activations' parent.
    parent: spans::Parent,
}

impl WaitHeader {
    fn lock(&self) -> MutexGuard<'_, Gated<ArmState>> {
        self.arming.lock()
    }

    /// Publishes an arming; the caller is inside the gate's `arm` (holds the
    /// lock, no stop in progress).
    fn publish(&self, state: &mut ArmState, wait: PTP_WAIT, timeout: Option<&FILETIME>) {
        state.armings += 1;
        let handle = self.target.0;
        let ft = timeout.map_or(core::ptr::null(), |t| t as *const FILETIME);
        self.obligation.publish_arming(|| {
            trace_call!("SetThreadpoolWait", wait, handle, {
                // SAFETY: `wait` is live (owner alive or callback running) and
                // `handle` stays open until the wait is drained and closed.
                unsafe { SetThreadpoolWait(wait, handle, ft) }
            })
        });
    }
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

unsafe extern "system" fn trampoline<F>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    wait: PTP_WAIT,
    result: u32,
) where
    F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
{
    // First, so it is left last (`crate::callback::inplace`): a wait future's
    // callback arms it.
    let site = crate::callback::inplace::Site::new(instance, true);
    let _inplace = site.enter();
    let _scope = reentry::CallbackScope::enter(context);
    let result = if result == WAIT_TIMEOUT { WaitResult::TimedOut } else { WaitResult::Signalled };
    let timed_out = result == WaitResult::TimedOut;
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after draining every callback (and, on Wine,
    // flushing stale activations).
    let shared = unsafe { ctx::get::<WaitHeader, F>(context) };
    let header = &shared.header;
    if header.flush.active.load(Ordering::SeqCst) {
        trace_record!("wait", "trampoline-flush", wait, timed_out);
        *header.flush.acked.lock().unwrap_or_else(PoisonError::into_inner) = true;
        header.flush.cv.notify_all();
        return;
    }
    trace_record!("wait", "trampoline-entered", wait, timed_out);
    header.activations.fetch_add(1, Ordering::SeqCst);
    header.obligation.dispatched();
    let outcome = if timed_out { spans::Outcome::TimedOut } else { spans::Outcome::Signalled };
    let span = spans::enter(spans::Kind::Wait, wait as usize, || header.parent.get(), Some(outcome));
    (shared.callback)(&WaitActivation { header, wait, result, instance: CallbackInstance::new(instance) });
    drop(span);
    trace_record!("wait", "trampoline-left", wait, 0);
}

/// The part of a wait shared by [`Wait`] and the cleanup group's
/// wait member: the raw object, its context, its target and its pool.
pub(crate) struct WaitCore {
    raw: PTP_WAIT,
    ctx: Context<WaitHeader>,
    handle: WaitableHandle,
    pool: PoolRef,
    /// Serialises the owner's stops and cancellations, so a flush never
    /// meets another stop's disarm or a cancellation of its activation.
    /// Callbacks never take it.
    stopping: Mutex<()>,
    /// Under Wine, serialises a cancelling drain with the others, `wait` among them
    /// (see [`DrainLock`]); `stopping` already orders it with stops.
    drains: DrainLock,
    /// This wait's claim on its pool's self-heal registry entry.
    claim: Registration,
    /// The public type owning it, for reports and panics.
    owner: &'static str,
}

impl WaitCore {
    pub(crate) fn new<F>(
        owner: &'static str,
        handle: WaitableHandle,
        callback: F,
        env: Option<&CallbackEnviron>,
        blocks: Blocks<'_>,
    ) -> io::Result<Self>
    where
        F: Fn(&WaitActivation<'_>) + Send + Sync + 'static,
    {
        let (env, pool, placement) = env_parts(env);
        let header = WaitHeader {
            obligation: DrainObligation::default(),
            target: SendHandle(handle.raw()),
            arming: ArmGate::new(ArmState::default()),
            activations: AtomicU64::new(0),
            flush: Flush::default(),
            parent: spans::Parent::new(),
        };
        let ctx = Context::new(blocks, placement, header, callback);
        let pv = ctx.as_ptr();
        // The error is read inside the bracket, before anything is freed.
        let raw = trace_call!("CreateThreadpoolWait", pv, env, {
            // SAFETY: the trampoline is instantiated for the context's type, and
            // the context outlives the object (freed only after drain and close).
            sys::created(unsafe { CreateThreadpoolWait(Some(trampoline::<F>), pv, env) })
        })?;
        trace_record!("wait", "created", raw, pv);
        let claim = Registration::new(&pool);
        Ok(Self { raw, ctx, handle, pool, stopping: Mutex::new(()), drains: DrainLock::new(), claim, owner })
    }

    fn header(&self) -> &WaitHeader {
        self.ctx.header()
    }

    fn arm(&self, timeout: Deadline) {
        let ft = timeout.due().map(filetime);
        let h = self.header();
        h.parent.capture();
        let armed = h.arming.arm(|state| {
            trace_record!("wait", "armed", self.raw, h.target.0);
            h.publish(state, self.raw, ft.as_ref());
        });
        if armed.is_none() {
            trace_record!("wait", "arm-suppressed", self.raw, 0);
        }
    }

    fn disarm(&self) -> Option<bool> {
        let g = self.header().lock();
        // During a flush the wait is already disarmed for the user (nothing
        // of theirs to cancel); the flush disarms its own arming when it ends.
        let cancelled = if g.state.flushing { sys::set_wait_ex().map(|_| false) } else { self.set_null() };
        drop(g);
        trace_record!("wait", "disarmed", self.raw, 0);
        cancelled
    }

    fn lock_stopping(&self) -> MutexGuard<'_, ()> {
        self.stopping.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Disarms; returns what `SetThreadpoolWaitEx` reports (whether an
    /// armed wait was cancelled) where the system has it.
    fn set_null(&self) -> Option<bool> {
        match sys::set_wait_ex() {
            Some(set_ex) => Some(trace_call!("SetThreadpoolWaitEx", self.raw, 0, {
                // SAFETY: `self.raw` is a live wait; a null handle disarms it;
                // `set_ex` is `SetThreadpoolWaitEx` (signature checked in
                // `sys`), whose reserved last argument must be null.
                unsafe { set_ex(self.raw, core::ptr::null_mut(), core::ptr::null(), core::ptr::null_mut()) != 0 }
            })),
            None => {
                trace_call!("SetThreadpoolWait", self.raw, 0, {
                    // SAFETY: `self.raw` is a live wait; a null handle disarms it.
                    unsafe { SetThreadpoolWait(self.raw, core::ptr::null_mut(), core::ptr::null()) }
                });
                None
            }
        }
    }

    /// Begins a stop (arms and re-arms are absorbed until
    /// [`Self::lift_suppression`]) and disarms, under the gate's lock.
    /// Returns whether a Wine flush is needed: an arming may still be
    /// outstanding under Wine.
    fn suppress_and_disarm(&self) -> bool {
        let h = self.header();
        let flush = h.arming.begin_stop(|state| {
            let _ = self.set_null();
            sys::on_wine() && state.armings > h.activations.load(Ordering::SeqCst)
        });
        trace_record!("wait", "suppress-and-disarm", self.raw, flush);
        flush
    }

    /// Ends a `stop_and_drain`: the wait is at rest, so the counts restart.
    fn lift_suppression(&self) {
        let h = self.header();
        h.arming.end_stop(|state| {
            // Nothing is armed, queued or running (drained, arms absorbed),
            // so no activation can race this reset.
            state.armings = 0;
            h.activations.store(0, Ordering::SeqCst);
            h.obligation.drained();
        });
    }

    /// Wine only, after `suppress_and_disarm` and a drain: makes sure no
    /// activation can still be queued (see the module docs).
    ///
    /// Wine's wait thread consumes the zero-timeout arming either when it
    /// processes the result of a wait begun before the disarm (it then
    /// queues a stale activation, and that handle array is done), or in a
    /// later pass that builds its next array (which times the arming out
    /// without including the handle). Either way the activation that follows
    /// proves no array holding the handle remains. Every activation that runs
    /// while the flush is active is taken as that proof: the drain before it
    /// finished every activation queued before the disarm, so any later one
    /// is stale or the flush's own. A final disarm and drain then settle
    /// whatever that pass queued.
    fn flush_stale_activations(&self) {
        let h = self.header();
        trace_record!("wait", "flush-begin", self.raw, 0);
        *h.flush.acked.lock().unwrap_or_else(PoisonError::into_inner) = false;
        h.flush.active.store(true, Ordering::SeqCst);
        let mut g = h.lock();
        g.state.flushing = true;
        let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
        trace_call!("SetThreadpoolWait", self.raw, h.target.0, {
            // SAFETY: `self.raw` is live and the target is open; a zero
            // timeout makes Wine time the arming out without waiting.
            unsafe { SetThreadpoolWait(self.raw, h.target.0, &zero) }
        });
        drop(g);
        let acked = h.flush.acked.lock().unwrap_or_else(PoisonError::into_inner);
        drop(h.flush.cv.wait_while(acked, |acked| !*acked).unwrap_or_else(PoisonError::into_inner));
        let mut g = h.lock();
        let _ = self.set_null();
        g.state.flushing = false;
        drop(g);
        self.drain(false);
        h.flush.active.store(false, Ordering::SeqCst);
        trace_record!("wait", "flush-done", self.raw, 0);
    }

    /// Refuses re-arms, disarms and drains (flushing under Wine), so that on
    /// return nothing is armed, queued or running. The caller holds
    /// `stopping` or owns the core.
    fn quiesce(&self, cancel: bool) {
        let flush = self.suppress_and_disarm();
        self.drain(cancel);
        if flush {
            self.flush_stale_activations();
        }
    }

    /// The one cancellation for waits (the caller owes the pool a repair):
    /// discards queued callbacks, waits for running ones, serialised with
    /// stops so it never cancels a flush's activation.
    fn cancel_pending(&self) {
        let _stopping = self.lock_stopping();
        self.drain(true);
    }

    /// Cancels, then stamps the pool as owing a repair and makes sure one
    /// will run (see `docs/self-heal.md`).
    #[cfg(feature = "self-heal")]
    fn cancel_pending_and_heal(&self) {
        self.cancel_pending();
        self.claim.after_cancel();
    }
}

impl Lifecycle for WaitCore {
    fn owner_name(&self) -> &'static str {
        self.owner
    }

    fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    fn record(&self, phase: Phase) {
        match phase {
            Phase::Begin => trace_record!("wait", "drop-begin", self.raw, 0),
            Phase::Drained => trace_record!("wait", "drop-drained", self.raw, 0),
            Phase::DrainOwed => trace_record!("wait", "drain-owed", self.raw, 0),
        }
    }

    /// An arming not yet dispatched or drained.
    fn obligation(&self) -> &DrainObligation {
        &self.header().obligation
    }

    /// The one drain for waits: waits for every queued and running callback,
    /// or with `cancel` discards the queued ones first.
    fn drain(&self, cancel: bool) {
        self.drains.drain(Access::Shared, cancel, || {
            trace_call!("WaitForThreadpoolWaitCallbacks", self.raw, cancel, {
                // SAFETY: `self.raw` is a live wait object.
                unsafe { WaitForThreadpoolWaitCallbacks(self.raw, cancel.into()) }
            });
        });
        trace_record!("wait", "drained", self.raw, cancel);
    }

    fn stop_and_drain(&self) {
        let _stopping = self.lock_stopping();
        self.quiesce(false);
        self.lift_suppression();
        trace_record!("wait", "stopped", self.raw, 0);
    }

    /// Refuses re-arms for good and disarms; the quiesce that follows
    /// decides on the Wine flush.
    fn stop(&self) {
        self.suppress_and_disarm();
    }

    fn quiesce(&self, cancel: bool) {
        WaitCore::quiesce(self, cancel);
    }

    fn close_and_free(self, here: Option<&Local>) {
        // SAFETY: quiesced by the owner, nothing can queue another callback;
        // the object is closed exactly once, here.
        trace_call!("CloseThreadpoolWait", self.raw, 0, { unsafe { CloseThreadpoolWait(self.raw) } });
        self.free_with(|ctx| ctx.free_in(here));
    }
}

impl Released for WaitCore {
    fn free(self) {
        self.free_with(drop);
    }
}

impl WaitCore {
    /// Closes the target, frees the context with `free`, drops the pool
    /// reference.
    fn free_with(self, free: impl FnOnce(Context<WaitHeader>)) {
        // The claim goes last: the pool stays registered until all is freed.
        let Self { raw, ctx, handle, pool, stopping: _, drains: _, claim: _claim, owner: _ } = self;
        drop(handle);
        free(ctx);
        drop(pool);
        trace_record!("wait", "drop-closed", raw, 0);
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
    /// Under Wine, one that races a drain of the same object on another
    /// thread (`wait`, `stop_and_drain`, another cancellation) waits for that
    /// drain to return first, since Wine 8's raw cancellation would leave it
    /// blocked (see `docs/wine.md`); it then waits for the callbacks that
    /// drain waits for, queued ones included, so issued from a callback on a
    /// pool with no other free thread it can deadlock. On Windows it waits
    /// only for running callbacks.
    ///
    /// # Liveness
    /// On Windows a cancelled wait callback can leave the wait's pool with no
    /// worker, so that nothing queued to it runs until work is submitted to
    /// it. Nothing here repairs that: make the pool dispatch again yourself,
    /// for instance with [`prewarm_default_pool`](crate::pool::prewarm_default_pool)
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
    /// Under Wine, one that races a drain of the same object on another
    /// thread (`wait`, `stop_and_drain`, another cancellation) waits for that
    /// drain to return first, since Wine 8's raw cancellation would leave it
    /// blocked (see `docs/wine.md`); it then waits for the callbacks that
    /// drain waits for, queued ones included, so issued from a callback on a
    /// pool with no other free thread it can deadlock. On Windows it waits
    /// only for running callbacks.
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
