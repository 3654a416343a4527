//! The public I/O object.

use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::Ordering;
use std::io;
use std::os::windows::io::{AsRawHandle, BorrowedHandle, RawHandle};

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::IO::OVERLAPPED;
use windows_sys::Win32::System::Threading::PTP_IO;

use crate::callback::owner::{self, Owner, forbid_drain_in_own_callback};
use crate::callback_env::CallbackEnviron;

use super::{handles::*, iocore::*, operation::*};

/// An owned thread-pool I/O object (`CreateThreadpoolIo`) and the overlapped
/// handle it is bound to.
///
/// See the [module docs](crate::io) for ownership, ids, the start/cancel balance
/// and teardown.
#[must_use = "dropping it cancels outstanding I/O, drains and closes the I/O object and its handle"]
pub struct Io {
    pub(super) core: Owner<IoCore>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Io>();
    send_sync::<Operation<Vec<u8>>>();
    send_sync::<OperationId>();
};

impl core::fmt::Debug for Io {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let core = &self.core;
        f.debug_struct("Io")
            .field("raw", &(core.raw as *const c_void))
            .field("handle", &core.handle)
            .field("outstanding", &self.outstanding())
            .finish()
    }
}

/// The bound handle's value. There is deliberately no `AsHandle`: a
/// borrowed handle can be duplicated safely, and a duplicate handed to a
/// child process lets the child's overlapped I/O complete on this object's
/// port with addresses from another address space, which can match a live
/// operation's (see [Completions that are not
/// ours](crate::io#completions-that-are-not-ours)). Borrowing the raw value
/// (`BorrowedHandle::borrow_raw`) is `unsafe`, and that obligation is the
/// caller's.
///
/// ```compile_fail,E0277
/// use std::os::windows::io::AsHandle;
/// fn lend(_: impl AsHandle) {}
/// let (s, _c) = windows_threadpool::io::pipe_pair()?;
/// let io = windows_threadpool::Io::new(s, |_| {})?;
/// lend(&io);
/// # Ok::<(), std::io::Error>(())
/// ```
impl AsRawHandle for Io {
    fn as_raw_handle(&self) -> RawHandle {
        self.core.handle.raw()
    }
}

impl Io {
    /// Binds `handle` to the process default pool; `callback` runs once per
    /// delivered completion.
    ///
    /// If creation fails the handle is closed.
    pub fn new<F>(handle: OverlappedHandle, callback: F) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        Self::bind(BoundHandle::File(handle.0), callback, None)
    }

    /// Binds `handle` to the pool of `env`, with its settings; `callback`
    /// runs once per delivered completion.
    ///
    /// If creation fails the handle is closed.
    pub fn new_in<F>(handle: OverlappedHandle, callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        Self::bind(BoundHandle::File(handle.0), callback, Some(env))
    }

    /// Binds `handle`, which the caller has proven fit (see [`OverlappedHandle`]
    /// for a file; sockets are made so by `crate::net`).
    pub(crate) fn bind<F>(handle: BoundHandle, callback: F, env: Option<&CallbackEnviron>) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(IoCore::new(handle, callback, env)?) })
    }

    /// The raw `PTP_IO`, valid while `self` is alive.
    pub fn as_raw(&self) -> PTP_IO {
        self.core.raw
    }

    /// Reads into `buffer` from byte `offset` of a file (`ReadFile`). The
    /// completion's [`bytes_transferred`](IoCompletion::bytes_transferred)
    /// says how much of the buffer was filled; a read at or past the end of
    /// the file completes with (or fails synchronously with) `ERROR_HANDLE_EOF`.
    ///
    /// On a synchronous failure the error and `buffer` come back and the
    /// callback does not run.
    ///
    /// # Errors
    /// A [`SubmitError`] holding `buffer` and:
    /// - [`io::ErrorKind::InvalidInput`] with no OS error code for a buffer
    ///   longer than `u32::MAX` bytes or an `offset` of 2^63 or more
    ///   (nothing was issued);
    /// - otherwise the OS error the operation failed with synchronously (its
    ///   [`raw_os_error`](io::Error::raw_os_error) is set).
    pub fn read_at<B>(&self, offset: u64, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        self.core.read_write::<B, false>(offset, buffer)
    }

    /// Writes `buffer` at byte `offset` of a file (`WriteFile`); see
    /// [`read_at`](Self::read_at) for the failure cases.
    pub fn write_at<B>(&self, offset: u64, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        self.core.read_write::<B, true>(offset, buffer)
    }

    /// Reads into `buffer` from a stream such as a pipe (`ReadFile` with a
    /// zero offset, which streams ignore); completes when some data arrives.
    /// See [`read_at`](Self::read_at) for the failure cases.
    pub fn read<B>(&self, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        self.core.read_write::<B, false>(0, buffer)
    }

    /// Writes `buffer` to a stream such as a pipe (`WriteFile` with a zero
    /// offset). See [`read_at`](Self::read_at) for the failure cases.
    pub fn write<B>(&self, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        self.core.read_write::<B, true>(0, buffer)
    }

    /// Issues any other overlapped call (`DeviceIoControl`,
    /// `ReadFileScatter`, a socket call, ...) as an operation of this object.
    ///
    /// The OVERLAPPED is zeroed, `StartThreadpoolIo` is called, then `issue`
    /// runs with the bound handle, the operation's `OVERLAPPED` and its
    /// payload. If `issue` returns an error the start is balanced with
    /// `CancelThreadpoolIo` and the operation comes back in the error;
    /// otherwise the completion will be delivered to the callback, which can
    /// [`claim`](IoCompletion::claim) the operation. [`issue_status`]
    /// classifies an `Nt*` call's status, [`issue_result`] a Win32 call's
    /// `BOOL`.
    ///
    /// A panic in `issue` aborts the process: whether the kernel took the
    /// operation could not be known.
    ///
    /// # Safety
    /// `issue` must:
    /// - issue at most one overlapped operation, on the given handle, with
    ///   the given `OVERLAPPED`, and not set the low-order bit of its `hEvent`
    ///   (which would suppress the completion);
    /// - return `Ok(())` if and only if a completion will be queued for it:
    ///   its status is not of the error class (success, `STATUS_PENDING`, an
    ///   informational or a warning status, see [`issue_status`]); return
    ///   the error when it failed synchronously or was never issued. A Win32
    ///   call's `FALSE` can hide a warning: see [`issue_result`] for when it
    ///   is exact;
    /// - only pass the kernel memory that lives in the payload (or is
    ///   otherwise guaranteed to outlive the completion), and not keep or use
    ///   the `OVERLAPPED` or payload pointers after returning;
    /// - not call anything on this object.
    pub unsafe fn submit<P, I>(
        &self,
        operation: Operation<P>,
        issue: I,
    ) -> Result<OperationId, SubmitError<Operation<P>>>
    where
        P: Send + 'static,
        I: FnOnce(BorrowedHandle<'_>, *mut OVERLAPPED, &mut P) -> io::Result<()>,
    {
        let prepare = |p: &mut P| -> io::Result<NonNull<P>> { Ok(NonNull::from(p)) };
        let issue = |h: HANDLE, ov: *mut OVERLAPPED, p: NonNull<P>| {
            // SAFETY: `h` is the bound handle, live for this call.
            let h = unsafe { BorrowedHandle::borrow_raw(h) };
            // SAFETY: the payload of the block being issued, which nothing
            // else references until the completion.
            issue(h, ov, unsafe { &mut *p.as_ptr() })
        };
        // SAFETY: forwarded to our caller.
        unsafe { self.core.submit(operation, prepare, issue) }
    }

    /// Requests cancellation of one outstanding operation (`CancelIoEx`);
    /// its completion still arrives, normally with `ERROR_OPERATION_ABORTED`.
    ///
    /// # Errors
    /// - [`io::ErrorKind::NotFound`], with no OS error code, if no operation
    ///   of this object with this id is outstanding: its completion was
    ///   delivered, it failed synchronously, the id is stale (a newer
    ///   operation uses its address) or belongs to another object;
    /// - the OS error `ERROR_NOT_FOUND` (a [`raw_os_error`](io::Error::raw_os_error)
    ///   of 1168, which `std` does not classify as `NotFound`) if the
    ///   operation already completed and its completion is on its way;
    /// - any other OS error `CancelIoEx` reports.
    pub fn cancel(&self, id: OperationId) -> io::Result<()> {
        self.core.cancel(id)
    }

    /// Requests cancellation of every outstanding operation on the handle
    /// (`CancelIoEx` with no `OVERLAPPED`). Nothing outstanding is success.
    ///
    /// # Errors
    /// The OS error `CancelIoEx` reports, other than `ERROR_NOT_FOUND`.
    pub fn cancel_all(&self) -> io::Result<()> {
        self.core.cancel_all()
    }

    /// Operations started and not yet settled (their completion delivered
    /// and storage freed, or their synchronous failure balanced).
    pub fn outstanding(&self) -> usize {
        self.core.header().outstanding.load(Ordering::SeqCst)
    }

    /// Cancels everything outstanding and returns once every completion has
    /// been delivered and every callback has returned. Idempotent; the object
    /// stays usable. Operations issued while it runs are cancelled too.
    ///
    /// Called from a callback on this object's pool while every other thread
    /// of that pool is busy, it waits for a completion only those threads
    /// can deliver, and deadlocks (see [Async I/O](crate::io#async-io));
    /// an [`AsyncIo`](crate::io::AsyncIo) drop hands its rundown off instead.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn run_down(&self) {
        forbid_drain_in_own_callback(&*self.core, "run_down");
        self.core.run_down();
    }

    /// The same as [`run_down`](Self::run_down), under the name every object
    /// type uses for "bring it to rest": call it before dropping an object
    /// with operations outstanding (the `fail-fast` feature reports a drop
    /// that still owed this).
    ///
    /// Called from a callback on this object's pool while every other thread
    /// of that pool is busy, it waits for a completion only those threads
    /// can deliver, and deadlocks (see [Async I/O](crate::io#async-io));
    /// an [`AsyncIo`](crate::io::AsyncIo) drop hands its rundown off instead.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&*self.core);
    }

    /// Runs the object down (as [`run_down`](Self::run_down)), ends the
    /// handle's association with the pool's completion port, and closes
    /// the object, giving the handle back; where the association cannot be
    /// ended, the object comes back unchanged but run down, with the error.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    #[track_caller]
    pub(crate) fn into_bound(self) -> Result<BoundHandle, (Self, io::Error)> {
        self.run_down();
        if let Err(e) = self.core.dissociate() {
            return Err((self, e));
        }
        let Self { core } = self;
        // SAFETY: the rundown left nothing outstanding and no callback
        // running, the owner being consumed nothing can issue, and the
        // handle is dissociated from the port.
        Ok(core.tear_down_with("into_std", |c| unsafe { c.close_after(|h| h) }))
    }

    /// Returns once every outstanding operation has completed and every
    /// callback has returned, without cancelling anything: a pipe read no
    /// one satisfies makes it wait forever.
    ///
    /// Called from a callback on this object's pool while every other thread
    /// of that pool is busy, it waits for a completion only those threads
    /// can deliver, and deadlocks (see [Async I/O](crate::io#async-io));
    /// an [`AsyncIo`](crate::io::AsyncIo) drop hands its rundown off instead.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&*self.core);
    }
}
