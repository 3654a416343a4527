//! [`PipeListener`]: a pipe name served, one listening instance at all
//! times (see [Always listening](super#always-listening)).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::ffi::OsStr;
use std::io;
use std::os::windows::io::{FromRawHandle, OwnedHandle};
use std::sync::{Mutex, PoisonError};

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_FILE_NOT_FOUND, ERROR_NO_DATA, ERROR_PIPE_BUSY, ERROR_SEM_TIMEOUT, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::System::Pipes::{CreateNamedPipeW, WaitNamedPipeW};

use super::busy::Backoff;
use super::options::{CreateParams, PipeOptions, open_mode, wide};
use super::stream::PipeStream;
use crate::callback_env::CallbackEnviron;
use crate::io::OverlappedHandle;
use crate::io::engine::{InFlight, Started};
use crate::time::Sleep;

/// A named pipe served on the pool: [`accept`](Self::accept) resolves to
/// each client's connected [`PipeStream`].
///
/// Made by [`bind`](Self::bind) (the defaults) or
/// [`PipeOptions::bind`] (instance limit, message mode, buffer sizes,
/// security descriptor, remote clients). One instance listens from the
/// bind on, and another replaces it as each accept returns, so a client
/// never finds the name gone between two accepts (see [Always
/// listening](super#always-listening)). Dropping it never blocks: the
/// listening instance is closed, and the streams it accepted live on.
#[derive(Debug)]
pub struct PipeListener {
    name: Vec<u16>,
    params: CreateParams,
    env: Option<CallbackEnviron>,
    /// Instances waiting for an accept: the one the listener keeps, and
    /// those dropped accepts gave back (each may hold a client already).
    listening: Mutex<Vec<PipeStream>>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<PipeListener>();
    const fn send<T: Send>() {}
    send::<AcceptFuture<'static>>();
};

impl PipeListener {
    /// Creates the pipe `name` (`\\.\pipe\...`) with the default options
    /// ([`PipeOptions::new`]) and listens; the streams it accepts are
    /// bound to the process default pool. `AddrInUse` if an instance of
    /// that name exists (another server owns it).
    pub fn bind(name: impl AsRef<OsStr>) -> io::Result<Self> {
        PipeOptions::new().bind(name)
    }

    pub(super) fn create(name: &OsStr, options: &PipeOptions, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        let name = wide(name)?;
        let params = options.create_params()?;
        refuse_taken(&name)?;
        let first = match create_instance(&name, &params, true) {
            Err(e) if e.raw_os_error() == Some(ERROR_ACCESS_DENIED as i32) => return Err(name_taken()),
            other => other?,
        };
        let first = PipeStream::bind(first, env, params.message())?;
        Ok(Self { name, params, env: env.cloned(), listening: Mutex::new(vec![first]) })
    }

    /// Accepts one client: resolves to its connected stream. Lazy: the wait
    /// is issued at the first poll, and resolves at once if a client has
    /// already opened the listening instance. Dropping the future after
    /// that cancels the wait (see [Teardown](super#teardown)).
    ///
    /// A client that came and went before its accept ends no accept: the
    /// accept goes on with a new instance. The errors that reach the
    /// caller are the system's (out of memory or handles), or the
    /// listener's own.
    pub fn accept(&self) -> AcceptFuture<'_> {
        AcceptFuture { listener: self, instance: None, issued: None, wait: None, backoff: Backoff::new() }
    }

    /// The listening instance, or a new one; `ERROR_PIPE_BUSY` at the
    /// instance limit.
    fn take_instance(&self) -> io::Result<PipeStream> {
        if let Some(instance) = self.slot().pop() {
            return Ok(instance);
        }
        self.new_instance()
    }

    fn new_instance(&self) -> io::Result<PipeStream> {
        PipeStream::bind(create_instance(&self.name, &self.params, false)?, self.env.as_ref(), self.params.message())
    }

    /// Opens the next listening instance unless one is there. At the
    /// instance limit none can be opened; the next accept waits for one.
    fn refill(&self) {
        let mut slot = self.slot();
        if slot.is_empty() {
            slot.extend(self.new_instance().ok());
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Vec<PipeStream>> {
        self.listening.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl PipeOptions {
    /// Creates the pipe's first instance under `name` (`\\.\pipe\...`) and
    /// returns its listener, whose accepts and streams are bound to the
    /// process default pool. `AddrInUse` if an instance of that name exists
    /// (another server owns it).
    pub fn bind(&self, name: impl AsRef<OsStr>) -> io::Result<PipeListener> {
        PipeListener::create(name.as_ref(), self, None)
    }

    /// [`bind`](Self::bind), with the accepts and the streams bound to the
    /// pool of `env`, with its settings.
    pub fn bind_in(&self, name: impl AsRef<OsStr>, env: &CallbackEnviron) -> io::Result<PipeListener> {
        PipeListener::create(name.as_ref(), self, Some(env))
    }
}

/// `AddrInUse`: another server owns the name.
fn name_taken() -> io::Error {
    io::Error::new(io::ErrorKind::AddrInUse, "an instance of this pipe name exists: another server owns it")
}

/// Refuses a name that has an instance already. Windows refuses a first
/// instance of a taken name by itself (`FILE_FLAG_FIRST_PIPE_INSTANCE`);
/// Wine ignores that flag (see `docs/wine.md`), so the name is probed
/// first: `WaitNamedPipeW` fails with `ERROR_FILE_NOT_FOUND` at once when
/// no instance exists. Under Wine two servers binding one name at the
/// same moment can both pass the probe; on Windows the flag still refuses
/// the second.
fn refuse_taken(name: &[u16]) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated.
    if unsafe { WaitNamedPipeW(name.as_ptr(), 1) } != 0 {
        return Err(name_taken());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error().map(|c| c as u32) {
        Some(ERROR_FILE_NOT_FOUND) => Ok(()),
        // An instance exists: every one is busy, and the wait timed out.
        Some(ERROR_SEM_TIMEOUT | ERROR_PIPE_BUSY) => Err(name_taken()),
        _ => Err(e), // a name that is not a pipe's, say
    }
}

/// Creates one overlapped, duplex instance of the pipe `name`.
fn create_instance(name: &[u16], p: &CreateParams, first: bool) -> io::Result<OverlappedHandle> {
    let attributes = p.security.as_ref().map(|sd| sd.attributes());
    let attributes = attributes.as_ref().map_or(core::ptr::null(), core::ptr::from_ref);
    // SAFETY: `name` is NUL-terminated; `attributes` is null or points to
    // attributes whose descriptor `p` keeps alive across the call.
    let h = unsafe {
        CreateNamedPipeW(
            name.as_ptr(),
            open_mode(first),
            p.pipe_mode,
            p.max_instances,
            p.out_buffer,
            p.in_buffer,
            0,
            attributes,
        )
    };
    if h == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    let handle = unsafe { OwnedHandle::from_raw_handle(h) };
    // SAFETY: created with FILE_FLAG_OVERLAPPED (`open_mode`), not
    // inheritable (`bInheritHandle` 0, or no attributes), fresh (so bound to
    // no port) and without skip-on-success.
    Ok(unsafe { OverlappedHandle::assume_overlapped(handle) })
}

/// The future of [`PipeListener::accept`]: the connected stream.
#[must_use = "futures do nothing unless polled"]
pub struct AcceptFuture<'a> {
    listener: &'a PipeListener,
    /// The instance being connected.
    instance: Option<PipeStream>,
    /// Its wait for a client, once issued.
    issued: Option<InFlight<io::Result<()>>>,
    /// The wait for an instance to spare, at the instance limit.
    wait: Option<Sleep>,
    backoff: Backoff,
}

/// Clients that came and went before their accept which one poll skips
/// before it yields (waking itself), so a client doing that in a loop
/// cannot keep the polling thread.
const SKIPS_PER_POLL: u32 = 16;

impl Future for AcceptFuture<'_> {
    type Output = io::Result<PipeStream>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut skipped = 0;
        loop {
            if let Some(wait) = &mut this.wait {
                core::task::ready!(Pin::new(wait).poll(cx));
                this.wait = None;
            }
            let result = match (&this.instance, &this.issued) {
                (None, _) => match this.listener.take_instance() {
                    Ok(instance) => {
                        this.instance = Some(instance);
                        continue;
                    }
                    Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) => {
                        this.wait = Some(this.backoff.sleep(None));
                        continue;
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                },
                (Some(instance), None) => match instance.engine().start(instance.listen()) {
                    Started::Done(result) => result,
                    Started::InFlight(f) => {
                        this.issued = Some(f);
                        continue;
                    }
                },
                (Some(instance), Some(_)) => {
                    core::task::ready!(InFlight::poll_slot(&mut this.issued, instance.engine(), cx))
                }
            };
            let instance = this.instance.take().expect("an accept's result is its instance's");
            match result {
                Ok(()) => {
                    this.listener.refill();
                    return Poll::Ready(Ok(instance));
                }
                Err(e) if e.raw_os_error() == Some(ERROR_NO_DATA as i32) => {
                    // The client is gone. A new instance takes its place,
                    // opened before it closes so that the name never has none.
                    this.instance = this.listener.new_instance().ok();
                    drop(instance);
                    skipped += 1;
                    if skipped == SKIPS_PER_POLL {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Err(e) => {
                    this.listener.refill();
                    return Poll::Ready(Err(e));
                }
            }
        }
    }
}

impl Drop for AcceptFuture<'_> {
    /// Cancels a wait in flight and gives the instance back to the
    /// listener, still listening: closing it instead would leave it open
    /// until its cancelled completion arrives, and a client opening the
    /// name meanwhile could land on it and be lost. A client that connected
    /// as the wait was cancelled is returned by the next accept (its wait
    /// reports `STATUS_PIPE_CONNECTED` at once).
    fn drop(&mut self) {
        let Some(instance) = self.instance.take() else { return };
        if let Some(issued) = self.issued.take() {
            issued.cancel(instance.engine());
        }
        self.listener.slot().push(instance);
    }
}

impl core::fmt::Debug for AcceptFuture<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AcceptFuture")
            .field("instance", &self.instance.is_some())
            .field("issued", &self.issued.is_some())
            .finish()
    }
}
