//! The core of an I/O object: issuing, cancelling, draining, the completion
//! path and the teardown phases.

use core::cell::Cell;
use core::ffi::c_void;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::io;
use std::os::windows::io::{AsRawHandle, AsRawSocket, IntoRawHandle, OwnedHandle, OwnedSocket};
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};

use windows_sys::Win32::Foundation::{CloseHandle, ERROR_NOT_FOUND, HANDLE};
use windows_sys::Win32::System::IO::{CancelIoEx, IO_STATUS_BLOCK, OVERLAPPED};
use windows_sys::Win32::System::Threading::{
    CancelThreadpoolIo, CloseThreadpoolIo, CreateThreadpoolIo, PTP_CALLBACK_INSTANCE, PTP_IO, StartThreadpoolIo,
    WaitForThreadpoolIoCallbacks,
};

use crate::callback::ctx::{self, Blocks, Context};
use crate::callback::inplace;
use crate::callback::local::Local;
use crate::callback::obligation::DrainObligation;
use crate::callback::owner::{Lifecycle, Phase};
use crate::callback::reentry;
use crate::callback::spans;
use crate::callback::unwind::AbortOnUnwind;
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::instance::CallbackInstance;
use crate::pool::PoolRef;
use crate::sys;

use super::op::fs::issue_read_write;
use super::op::{BufferFor, Issued, transfer_at};
use super::{operation::*, registry::*};

/// The handle an I/O object is bound to, owned, and closed by the object's
/// teardown with its own routine.
#[derive(Debug)]
pub(crate) enum BoundHandle {
    /// A file or pipe, closed with `CloseHandle`.
    File(OwnedHandle),
    /// A socket, closed with `closesocket` (Winsock documents `CloseHandle`
    /// on a socket as unsupported).
    Socket(OwnedSocket),
}

impl BoundHandle {
    pub(crate) fn raw(&self) -> HANDLE {
        match self {
            Self::File(h) => h.as_raw_handle(),
            Self::Socket(s) => s.as_raw_socket() as HANDLE,
        }
    }

    /// The socket, if this is one.
    pub(crate) fn into_socket(self) -> Result<OwnedSocket, Self> {
        match self {
            Self::Socket(s) => Ok(s),
            other => Err(other),
        }
    }

    /// Closes the handle; returns the value it had, for the trace.
    fn close(self) -> HANDLE {
        let h = self.raw();
        match self {
            Self::File(f) => {
                let h = f.into_raw_handle();
                // SAFETY: `h` was owned and is closed exactly once, here.
                trace_call!("CloseHandle", h, 0, { unsafe { CloseHandle(h) } });
            }
            // `OwnedSocket`'s drop is `closesocket`.
            Self::Socket(s) => trace_call!("closesocket", h, 0, { drop(s) }),
        }
        h
    }
}

/// A submitted operation: queued, or completed inline and given back.
pub(crate) enum Submitted<P: Send + 'static> {
    Queued(OperationId),
    Completed(Operation<P>, usize),
}

/// The context state the owner and the trampoline share.
#[derive(Default)]
pub(crate) struct IoHeader {
    pub(super) obligation: DrainObligation,
    pub(super) registry: Mutex<Registry>,
    /// Started operations whose completion has not been delivered (and
    /// storage freed) or whose synchronous failure has not been balanced.
    pub(super) outstanding: AtomicUsize,
    /// Operations issued so far: a rundown re-cancels when this moves.
    pub(super) issued: AtomicU64,
    /// Threads blocked in `run_down` or `wait`; wakers skip the lock when zero.
    pub(super) waiters: AtomicUsize,
    pub(super) idle_lock: Mutex<()>,
    pub(super) idle: Condvar,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl IoHeader {
    pub(super) fn wake_waiters(&self) {
        if self.waiters.load(Ordering::SeqCst) != 0 {
            let _g = lock(&self.idle_lock);
            self.idle.notify_all();
        }
    }

    /// Enters the block at `address` in the registry under a fresh
    /// generation; from here its completion can be delivered.
    pub(super) fn register(&self, address: usize) -> OperationId {
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        let slot = lock(&self.registry).insert(address, generation);
        OperationId { slot, address, generation }
    }

    /// One operation is settled; the last touch of the header by a completion.
    pub(super) fn finish_one(&self) {
        if self.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.wake_waiters();
        }
    }
}

/// The parts of an I/O object: the raw `TP_IO`, its context, the handle and
/// the pool reference. [`Io`](crate::Io) is its only owner (I/O objects are
/// not cleanup-group members, see the module docs).
pub(crate) struct IoCore {
    pub(super) raw: PTP_IO,
    pub(super) ctx: Context<IoHeader>,
    pub(super) handle: BoundHandle,
    /// Held shared by submissions across start and issue, exclusively by
    /// `cancel_all`, so a cancel-all never falls between the two.
    pub(super) issuing: RwLock<()>,
    pub(super) pool: PoolRef,
}

impl IoCore {
    pub(super) fn new<F>(handle: BoundHandle, callback: F, env: Option<&CallbackEnviron>) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        let (env, pool, placement) = env_parts(env);
        let ctx = Context::new(Blocks::KEPT, placement, IoHeader::default(), callback);
        let pv = ctx.as_ptr();
        let h = handle.raw();
        // The error is read inside the bracket: recording may overwrite it.
        let raw = trace_call!("CreateThreadpoolIo", h, env, {
            // SAFETY: the trampoline is instantiated for the context's type,
            // and the context outlives the object (freed only after rundown,
            // drain and close); `h` is a live handle owned by `handle`.
            sys::created(unsafe { CreateThreadpoolIo(h, Some(trampoline::<F>), pv, env) })
        });
        let raw = match raw {
            Ok(raw) => raw,
            Err(err) => {
                drop(ctx);
                return Err(err);
            }
        };
        trace_record!("io", "created", h, raw);
        Ok(Self { raw, ctx, handle, issuing: RwLock::new(()), pool })
    }

    pub(super) fn header(&self) -> &IoHeader {
        self.ctx.header()
    }

    /// Ends the handle's association with the pool's completion port
    /// (`NtSetInformationFile` with `FileReplaceCompletionInformation` and
    /// no port, documented from Windows 8.1), so that the handle can
    /// outlive the object: no later operation on it can queue a completion
    /// for the closed object. Wine 8 does not implement it.
    pub(super) fn dissociate(&self) -> io::Result<()> {
        use windows_sys::Wdk::Storage::FileSystem::{
            FILE_COMPLETION_INFORMATION, FileReplaceCompletionInformation, NtSetInformationFile,
        };
        let info = FILE_COMPLETION_INFORMATION { Port: core::ptr::null_mut(), Key: core::ptr::null_mut() };
        let mut iosb = IO_STATUS_BLOCK::default();
        let h = self.handle.raw();
        let status = trace_call!("NtSetInformationFile", h, FileReplaceCompletionInformation, {
            // SAFETY: `h` is open; `info` and `iosb` are valid for their sizes.
            unsafe {
                NtSetInformationFile(
                    h,
                    &mut iosb,
                    (&raw const info).cast(),
                    size_of::<FILE_COMPLETION_INFORMATION>() as u32,
                    FileReplaceCompletionInformation,
                )
            }
        });
        sys::nt_check(status)
    }

    /// Gives the handle to `fate` (which closes it, or keeps it once
    /// [`dissociate`](Self::dissociate)d), then closes the object and frees
    /// the context: the order `CloseThreadpoolIo` documents, with "no
    /// completion can reach the object" standing for "the handle is closed".
    ///
    /// # Safety
    /// Nothing is outstanding, every callback has returned, and `fate`
    /// closes the handle or it is no longer associated with the port.
    pub(super) unsafe fn close_after<R>(self, fate: impl FnOnce(BoundHandle) -> R) -> R {
        let Self { raw, ctx, handle, issuing: _, pool } = self;
        let h = handle.raw();
        let r = fate(handle);
        // SAFETY: the caller's contract: no completion can reach the object
        // and none is running; the object is closed exactly once, here.
        trace_call!("CloseThreadpoolIo", raw, 0, { unsafe { CloseThreadpoolIo(raw) } });
        drop(ctx);
        drop(pool);
        trace_record!("io", "drop-closed", raw, h);
        r
    }

    /// Registers, starts and issues one operation whose completion is
    /// always queued; on a synchronous failure balances the start and gives
    /// the operation back.
    ///
    /// # Safety
    /// `issue` must start at most one overlapped operation, on `handle` with
    /// the given `OVERLAPPED`, and return `Ok` if and only if it did and a
    /// completion will be queued for it (see [`Io::submit`](crate::Io::submit)).
    pub(super) unsafe fn submit<P, X>(
        &self,
        op: Operation<P>,
        prepare: impl FnOnce(&mut P) -> io::Result<X>,
        issue: impl FnOnce(HANDLE, *mut OVERLAPPED, X) -> io::Result<()>,
    ) -> Result<OperationId, SubmitError<Operation<P>>>
    where
        P: Send + 'static,
    {
        let issue = |h, ov, x| issue(h, ov, x).map(|()| Issued::Queued);
        // SAFETY: forwarded; `issue` never reports an inline completion.
        match unsafe { self.submit_op(op, prepare, issue) }? {
            Submitted::Queued(id) => Ok(id),
            Submitted::Completed(..) => unreachable!("an issue that always queues completed inline"),
        }
    }

    /// Registers, starts and issues one operation. A synchronous failure, and
    /// a synchronous success that queues no completion (skip-on-success, or
    /// an error status meaning success), balance the start with `CancelThreadpoolIo`
    /// ([`unstart`](Self::unstart), the one place that does) and give the
    /// operation back.
    ///
    /// `prepare` runs before anything is started (user code such as a
    /// buffer's `AsMut` runs there); `issue` runs between the start and the
    /// return.
    ///
    /// # Safety
    /// `issue` must start at most one overlapped operation, on `handle` with
    /// the given `OVERLAPPED`, and return `Ok(Issued::Queued)` if and only if
    /// a completion will be queued for it, `Ok(Issued::Completed(n))` if it
    /// completed synchronously with `n` bytes and no completion will be
    /// queued, and `Err` if it failed synchronously (no completion either).
    pub(crate) unsafe fn submit_op<P, X>(
        &self,
        op: Operation<P>,
        prepare: impl FnOnce(&mut P) -> io::Result<X>,
        issue: impl FnOnce(HANDLE, *mut OVERLAPPED, X) -> io::Result<Issued>,
    ) -> Result<Submitted<P>, SubmitError<Operation<P>>>
    where
        P: Send + 'static,
    {
        // SAFETY: the block is owned by `op`; the OVERLAPPED is plain data.
        unsafe { (*op.block.as_ptr()).header.overlapped = OVERLAPPED::default() };
        // SAFETY: as above; the reference is derived from the block's raw
        // pointer, so pointers `prepare` derives from it stay valid after.
        let x = match prepare(unsafe { &mut (*op.block.as_ptr()).payload }) {
            Ok(x) => x,
            Err(error) => return Err(SubmitError { error, payload: op }),
        };
        // Before the block is registered and issued: until then `op` owns it
        // alone, and the registry's lock orders this write before the
        // completion's read. The field always holds a value (`NONE` from
        // `Operation::new` or after a completion or a refused issue took it),
        // which this assignment drops once.
        // SAFETY: the block is owned by `op`; nothing else can reach it yet.
        unsafe { (*op.block.as_ptr()).header.parent = spans::Captured::current() };
        let block = op.into_raw();
        let header = self.header();
        let _issuing = self.issuing.read().unwrap_or_else(|e| e.into_inner());
        let id = header.register(block.as_ptr() as usize);
        let OperationId { slot, address, generation } = id;
        // SAFETY: a place projection of the owned block, not a reference.
        let overlapped = unsafe { &raw mut (*block.as_ptr()).header.overlapped };
        let handle = self.handle.raw();
        header.outstanding.fetch_add(1, Ordering::SeqCst);
        let issued = header.obligation.publish_submission(|| {
            // SAFETY: `self.raw` is a live I/O object.
            trace_call!("StartThreadpoolIo", self.raw, 0, { unsafe { StartThreadpoolIo(self.raw) } });
            trace_record!("io", "started", address, generation);
            // After a panic in `issue` it cannot be known whether the kernel
            // owns the operation.
            let guard = AbortOnUnwind;
            let r = issue(handle, overlapped, x);
            core::mem::forget(guard);
            r
        });
        // From here on a queued block may already have been completed and
        // freed: only `id` and the paths that unstart may use it.
        match issued {
            Ok(Issued::Queued) => {
                header.issued.fetch_add(1, Ordering::SeqCst);
                header.wake_waiters();
                Ok(Submitted::Queued(id))
            }
            Ok(Issued::Completed(bytes)) => {
                // SAFETY: no completion will be queued for the block.
                Ok(Submitted::Completed(unsafe { self.unstart(block, slot, address, 0) }, bytes))
            }
            Err(error) => {
                // SAFETY: no completion will be queued for the block.
                let op = unsafe { self.unstart(block, slot, address, error.raw_os_error().unwrap_or(-1)) };
                Err(SubmitError { error, payload: op })
            }
        }
    }

    /// Balances the start of an operation for which no completion will be
    /// queued (`CancelThreadpoolIo`), settles it and gives its block back.
    ///
    /// # Safety
    /// `block` was registered at `slot` and started, and no completion will
    /// be queued for it.
    unsafe fn unstart<P: Send + 'static>(
        &self,
        block: NonNull<OpBlock<P>>,
        slot: usize,
        address: usize,
        status: i32,
    ) -> Operation<P> {
        let header = self.header();
        // SAFETY: `self.raw` is live and the start is unmatched.
        trace_call!("CancelThreadpoolIo", self.raw, 0, { unsafe { CancelThreadpoolIo(self.raw) } });
        trace_record!("io", "start-cancelled", address, status);
        lock(&header.registry).remove(slot);
        header.obligation.dispatched();
        header.finish_one();
        // No completion will run under it: the span is not kept open by an
        // operation handed back to the caller.
        // SAFETY: no completion will arrive and the entry is out of the
        // registry, so the block is ours again.
        unsafe { (*block.as_ptr()).header.parent = spans::Captured::NONE };
        // SAFETY: as above.
        unsafe { Operation::from_raw(block) }
    }

    pub(super) fn read_write<B, const WRITE: bool>(&self, offset: u64, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: Send + 'static,
        B: BufferFor<WRITE>,
    {
        let prepare = |b: &mut B| transfer_at::<B, WRITE>(b, offset);
        // SAFETY: one NtReadFile/NtWriteFile on `handle` with `ov`, of the
        // payload's own buffer.
        let issue = |handle, ov, (ptr, len)| unsafe { issue_read_write::<WRITE>(handle, ov, ptr, len, offset) };
        // SAFETY: `issue` issues exactly one operation, and `issue_status`
        // returns `Ok` exactly when a completion is queued (the handle has no
        // skip-on-success, by construction or by `assume_overlapped`'s
        // contract).
        unsafe { self.submit(Operation::new(buffer), prepare, issue) }.map_err(|e| e.map(Operation::into_payload))
    }

    pub(super) fn cancel(&self, id: OperationId) -> io::Result<()> {
        let registry = lock(&self.header().registry);
        if !registry.is_live(id.slot, id.address, id.generation) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "cancel: no outstanding operation of this object has this id (it completed, failed synchronously, or belongs to another object)",
            ));
        }
        let h = self.handle.raw();
        let ov = id.address as *const OVERLAPPED;
        trace_call!("CancelIoEx", h, ov, {
            // SAFETY: the registry lock is held, so the operation is still
            // outstanding and its block cannot be freed and reused under us.
            sys::check(unsafe { CancelIoEx(h, ov) })
        })
    }

    pub(super) fn cancel_all(&self) -> io::Result<()> {
        let _no_issue = self.issuing.write().unwrap_or_else(|e| e.into_inner());
        self.cancel_all_locked()
    }

    /// `CancelIoEx(handle, NULL)`; the caller holds `issuing` exclusively.
    pub(super) fn cancel_all_locked(&self) -> io::Result<()> {
        let h = self.handle.raw();
        let r = trace_call!("CancelIoEx", h, 0, {
            // SAFETY: `h` is live; a null OVERLAPPED cancels every operation on it.
            sys::check(unsafe { CancelIoEx(h, core::ptr::null()) })
        });
        match r {
            Err(e) if e.raw_os_error() == Some(ERROR_NOT_FOUND as i32) => Ok(()),
            r => r,
        }
    }

    /// The one drain: returns once nothing is outstanding and every callback
    /// has returned; with `cancel`, cancels everything outstanding first, and
    /// again whenever an operation was issued meanwhile.
    ///
    /// `WaitForThreadpoolIoCallbacks` also waits for started operations whose
    /// completion has not arrived (Wine does; a pipe read nobody satisfies
    /// would block it forever), so it is called only under the exclusive
    /// `issuing` lock with nothing outstanding: no start can race it, and the
    /// only callbacks left are past their last use of the operation and the
    /// user's code, so none can be waiting for the lock.
    pub(super) fn settle(&self, cancel: bool) {
        crate::callback::inplace::flush();
        let h = self.header();
        h.waiters.fetch_add(1, Ordering::SeqCst);
        loop {
            let seen = h.issued.load(Ordering::SeqCst);
            {
                let _no_issue = self.issuing.write().unwrap_or_else(|e| e.into_inner());
                if h.outstanding.load(Ordering::SeqCst) == 0 {
                    self.drain();
                    break;
                }
                if cancel {
                    // A failure cannot be acted on: the wait below still waits for every completion.
                    let _ = self.cancel_all_locked();
                }
            }
            let g = lock(&h.idle_lock);
            let g = h
                .idle
                .wait_while(g, |_| h.outstanding.load(Ordering::SeqCst) != 0 && h.issued.load(Ordering::SeqCst) == seen)
                .unwrap_or_else(|e| e.into_inner());
            drop(g);
        }
        h.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// `WaitForThreadpoolIoCallbacks(.., FALSE)`; only [`settle`](Self::settle) calls it.
    pub(super) fn drain(&self) {
        trace_call!("WaitForThreadpoolIoCallbacks", self.raw, 0, {
            // SAFETY: `self.raw` is a live I/O object.
            unsafe { WaitForThreadpoolIoCallbacks(self.raw, 0) }
        });
    }

    /// Cancel, wait for every completion, drain.
    pub(super) fn run_down(&self) {
        trace_record!("io", "rundown-begin", self.raw, self.header().outstanding.load(Ordering::SeqCst));
        self.settle(true);
        trace_record!("io", "rundown-ended", self.raw, self.header().outstanding.load(Ordering::SeqCst));
    }
}

impl Lifecycle for IoCore {
    fn owner_name(&self) -> &'static str {
        "Io"
    }

    fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    fn record(&self, phase: Phase) {
        match phase {
            Phase::Begin => {
                trace_record!("io", "drop-begin", self.raw, self.header().outstanding.load(Ordering::SeqCst));
            }
            Phase::Drained => trace_record!("io", "drop-drained", self.raw, 0),
            Phase::DrainOwed => {
                trace_record!("io", "drain-owed", self.raw, self.header().outstanding.load(Ordering::SeqCst));
            }
        }
    }

    /// Operations whose completions were not yet delivered.
    fn obligation(&self) -> &DrainObligation {
        &self.header().obligation
    }

    /// Waits for every outstanding operation and callback (`cancel`:
    /// cancels them first, and whatever is issued meanwhile).
    fn drain(&self, cancel: bool) {
        self.settle(cancel);
    }

    fn stop_and_drain(&self) {
        self.run_down();
    }

    /// Runs down: an I/O object's teardown cancels what is outstanding (a
    /// pipe read nobody satisfies must not hang it), whatever `cancel` says.
    fn quiesce(&self, _cancel: bool) {
        self.run_down();
    }

    /// Closes the handle, closes the object, then frees the context (the
    /// order `CloseThreadpoolIo` documents) as dropping it does: an I/O
    /// object's teardown costs its handle's close, not a thread-local read.
    fn close_and_free(self, _here: Option<&Local>) {
        // SAFETY: `BoundHandle::close` closes the handle.
        unsafe { self.close_after(BoundHandle::close) };
    }
}

pub(super) unsafe extern "system" fn trampoline<F: Fn(&IoCompletion) + Send + Sync + 'static>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    overlapped: *mut c_void,
    io_result: u32,
    bytes: usize,
    io: PTP_IO,
) {
    // First, so it is left last: a task the completion woke is polled there,
    // once nothing of the object is touched any more (`crate::callback::inplace`).
    let site = inplace::Site::new(instance, true);
    let _inplace = site.enter();
    let _scope = reentry::CallbackScope::enter(context);
    trace_record!("io", "trampoline-entered", overlapped, io_result);
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after every completion was delivered and every
    // callback drained.
    let shared = unsafe { ctx::get::<IoHeader, F>(context) };
    // SAFETY: the pool delivers this completion once, and it names an
    // operation of this object only if that operation has completed.
    unsafe { deliver_in(instance, &shared.header, &shared.callback, overlapped, io_result, bytes, io) };
}

/// The completion path: hands the operation at `overlapped` to `callback`,
/// then frees what the callback did not claim and settles the operation.
///
/// A completion whose `OVERLAPPED` is not one of this object's outstanding
/// operations (null, I/O issued on a duplicate of the handle, a late
/// duplicate of a delivered address) is recorded as `trampoline-foreign` and
/// ignored: no callback, and `outstanding` and the drain obligation are left
/// alone. Membership is decided under the registry lock by address alone,
/// before the pointer is dereferenced, and the same lock acquisition removes
/// the operation, so it is delivered at most once.
///
/// # Safety
/// If `overlapped` is the address of an operation in `header`'s registry,
/// that operation's completion is what is being delivered: the kernel is
/// done with its block. `instance` is the running callback's (or null, in
/// unit tests whose callbacks do not use it).
pub(crate) unsafe fn deliver_in<F: Fn(&IoCompletion)>(
    instance: PTP_CALLBACK_INSTANCE,
    header: &IoHeader,
    callback: &F,
    overlapped: *mut c_void,
    io_result: u32,
    bytes: usize,
    io: PTP_IO,
) {
    let Some((slot, generation)) = lock(&header.registry).take(overlapped as usize) else {
        trace_record!("io", "trampoline-foreign", io, io_result);
        return;
    };
    let block = overlapped.cast::<OpHeader>();
    // SAFETY: the registry held this address, so it is an operation block of
    // this object whose completion is being delivered (the caller's
    // guarantee); removing it made the block ours alone.
    let type_id = unsafe { (*block).type_id };
    // SAFETY: as above. Taken out of the block: the callback span (entered
    // below) holds its own reference to the parent, and a block the callback
    // claims does not keep the parent open.
    let parent = unsafe { core::mem::take(&mut (*block).parent) };
    header.obligation.dispatched();
    let completion = IoCompletion {
        instance: CallbackInstance::new(instance),
        block: Cell::new(NonNull::new(block)),
        type_id,
        id: OperationId { slot, address: overlapped as usize, generation },
        result: io_result,
        bytes,
    };
    let span = spans::enter(spans::Kind::Io, io as usize, move || parent, Some(spans::Outcome::Io(io_result)));
    callback(&completion);
    drop(span);
    if let Some(block) = completion.block.take() {
        // SAFETY: unclaimed, so still ours; `free` matches its payload type.
        unsafe { ((*block.as_ptr()).free)(block) };
    }
    trace_record!("io", "trampoline-left", overlapped, io_result);
    header.finish_one();
}
