//! Kernel objects a wait or a future waits on: the owned
//! [`WaitableHandle`] a [`Wait`](crate::wait::Wait) takes, the [`Event`]
//! most waits are on (and its wait-only duplicate, [`WaitOnlyEvent`]), and
//! [`WaitTarget`], what [`signalled`](crate::wait::signalled) accepts.
//!
//! ```
//! use windows_threadpool::handle::{Event, WaitableHandle};
//!
//! let stop = Event::manual_reset()?;
//! // A wait-only duplicate can be waited on, never set.
//! let waitable: WaitableHandle = stop.wait_only()?.into();
//! stop.set()?;
//! # drop(waitable);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The pool waits only on some kinds of handle; on others (a mutex, say)
//! the native behaviour is undefined and nothing reports an error. So a
//! [`WaitableHandle`] is built from a kind known to work ([`Event`],
//! [`WaitOnlyEvent`], a child process, a thread) or asserted with an
//! `unsafe` constructor, and it owns the handle: whoever holds it (a wait,
//! which lends it out only as a borrow) decides when it is closed, exactly
//! once. The [`wait`](crate::wait#wait-targets) module, which re-exports
//! every type here, says how a wait keeps its target open.

use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, BorrowedHandle, FromRawHandle, IntoRawHandle, OwnedHandle};

use windows_sys::Win32::Foundation::{DuplicateHandle, HANDLE};
use windows_sys::Win32::System::Threading::{
    CreateEventW, EVENT_MODIFY_STATE, GetCurrentProcess, OpenEventW, ResetEvent, SYNCHRONIZATION_SYNCHRONIZE, SetEvent,
};
use windows_sys::core::BOOL;

use crate::sys;

/// The close routine of a wait target that is not closed by `CloseHandle`
/// (a change notification closes with `FindCloseChangeNotification`).
pub type WaitCloseFn = unsafe extern "system" fn(HANDLE) -> BOOL;

/// A raw handle value that may cross threads (handle values are process-wide).
#[derive(Clone, Copy)]
pub(crate) struct SendHandle(pub(crate) HANDLE);
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

    pub(crate) fn raw(&self) -> HANDLE {
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
/// [`wait_only`](Self::wait_only) duplicate) to a [`Wait`](crate::wait::Wait).
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

/// What [`signalled`](crate::wait::signalled) waits on: a
/// [`WaitableHandle`], or anything that converts into one ([`Event`],
/// [`WaitOnlyEvent`], a `Child`, a thread's `JoinHandle`), given up; or an
/// event borrowed (`&Event`,
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
