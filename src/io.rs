//! Thread-pool I/O (`TP_IO`): overlapped operations whose completions run a
//! callback on a pool thread.
//!
//! A [`ThreadpoolIo`] binds an overlapped handle to the pool. Each operation
//! ([`read_at`](ThreadpoolIo::read_at), [`write_at`](ThreadpoolIo::write_at),
//! [`read`](ThreadpoolIo::read), [`write`](ThreadpoolIo::write), or any other
//! overlapped call through [`submit`](ThreadpoolIo::submit)) delivers exactly
//! one [`IoCompletion`] to the callback, unless it fails synchronously, in
//! which case the caller gets the error and its buffer back and the callback
//! never runs.
//!
//! ```
//! use std::sync::mpsc;
//! use windows_threadpool::io::{self, IoCompletion, ThreadpoolIo};
//!
//! let path = std::env::temp_dir().join(format!("wtp-io-doc-{}", std::process::id()));
//! std::fs::write(&path, b"hello, pool")?;
//! let (tx, rx) = mpsc::channel();
//! let file = ThreadpoolIo::new(
//!     io::open_file(&path, std::fs::OpenOptions::new().read(true))?,
//!     move |c: &IoCompletion| {
//!         let buf = c.claim::<Vec<u8>>().expect("a Vec<u8> read").into_payload();
//!         tx.send((c.error().map(|e| e.kind()), buf[..c.bytes_transferred()].to_vec())).unwrap();
//!     },
//!     None,
//! )?;
//! file.read_at(7, vec![0u8; 64])?;
//! assert_eq!(rx.recv().unwrap(), (None, b"pool".to_vec()));
//! drop(file);
//! std::fs::remove_file(&path)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Ownership
//! From the moment an operation is issued until its completion is delivered,
//! its `OVERLAPPED` and its buffer belong to the kernel. The crate owns both:
//! an operation is one heap block ([`Operation`]) holding the `OVERLAPPED`
//! (first, so the `OVERLAPPED*` a completion carries is the block's address)
//! and a payload `P` (the buffer, or anything the issuing call needs). The
//! caller hands the operation over and gets an [`OperationId`] back; the
//! callback can take the payload back with [`IoCompletion::claim`], which
//! checks the payload's type. A payload nobody claims is dropped when the
//! callback returns.
//!
//! # The start/cancel balance
//! `StartThreadpoolIo` must precede every operation, and be undone with
//! `CancelThreadpoolIo` when the operation fails synchronously (no completion
//! will arrive). A synchronous success, `ERROR_IO_PENDING` and
//! `ERROR_MORE_DATA` (a warning status: a message longer than the buffer)
//! all queue a completion, so they are not undone. The crate keeps one
//! counter, [`outstanding`](ThreadpoolIo::outstanding): an operation counts
//! from just before its start until its completion has been delivered and its
//! storage freed, or until its synchronous failure has been balanced. That is
//! both the balance and what a rundown waits for.
//!
//! # Operation ids
//! A block's address is reused once a completion frees it, so an
//! [`OperationId`] carries a process-wide generation as well as the address.
//! [`cancel`](ThreadpoolIo::cancel) looks the id up in a registry of
//! outstanding operations and calls `CancelIoEx` only if the live operation at
//! that slot has the same address and generation, all under the registry's
//! lock, which the completion path takes before it frees a block. A stale id
//! is rejected rather than cancelling whatever now lives at its address. The
//! registry grows to the largest number of operations outstanding at once and
//! is reused after that: issuing allocates only the operation's block.
//!
//! # Teardown
//! `Drop` runs down (cancels everything outstanding with `CancelIoEx` and
//! waits, on a condition variable, until every completion has been delivered),
//! drains the callbacks (`WaitForThreadpoolIoCallbacks(.., FALSE)`, never
//! cancelling queued callbacks), closes the `TP_IO`, then closes the handle.
//! A pipe read nobody will ever satisfy cannot hang teardown.
//!
//! The callback may drop the last owner of its own I/O object: the teardown
//! (rundown included) then runs on another thread and completes once the
//! callback has returned. `run_down`, `stop_and_drain` and `wait` called
//! from the object's own callback panic: they would wait for themselves (see
//! the [crate docs](crate#a-callback-that-reaches-its-own-object)).
//!
//! `WaitForThreadpoolIoCallbacks` also waits for every started operation
//! whose completion has not arrived (measured under Wine; correct whether or
//! not Windows does the same), so the drain runs only once nothing is
//! outstanding, while submissions are held off: a start racing it would make
//! it wait for that operation.
//!
//! `TP_IO` objects are deliberately not cleanup-group members: a `TP_IO` must
//! not be closed while an operation is outstanding, which a bulk
//! `CloseThreadpoolCleanupGroupMembers` cannot guarantee.
//!
//! # Handles
//! A handle must be opened for overlapped I/O, not already be bound to a
//! completion port, and not have skip-on-success
//! (`FILE_SKIP_COMPLETION_PORT_ON_SUCCESS`) set, or completions go missing
//! and the balance breaks. [`open_file`] and [`pipe_pair`] return an
//! [`OverlappedHandle`] that is known to satisfy this; any other handle goes
//! through the unsafe [`ThreadpoolIo::from_handle`].
//!
//! # Under Wine
//! Wine 8 answers every overlapped file read on a bound handle with
//! `ERROR_IO_PENDING`, even one past the end of the file, whose completion
//! then carries `ERROR_HANDLE_EOF`; Windows usually fails such a read
//! synchronously. Either way it surfaces as an error (see `docs/wine.md`).

use core::any::TypeId;
use core::cell::Cell;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::fs::OpenOptions;
use std::io;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::{
    AsHandle, AsRawHandle, BorrowedHandle, FromRawHandle, IntoRawHandle, OwnedHandle, RawHandle,
};
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard, RwLock};

use windows_sys::Win32::Foundation::{
    CloseHandle, ERROR_ACCESS_DENIED, ERROR_IO_PENDING, ERROR_MORE_DATA, ERROR_NOT_FOUND, ERROR_PIPE_CONNECTED,
    GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, OPEN_EXISTING, PIPE_ACCESS_DUPLEX, ReadFile,
    SECURITY_IDENTIFICATION, SECURITY_SQOS_PRESENT, WriteFile,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};
use windows_sys::Win32::System::Pipes::{
    ConnectNamedPipe, CreateNamedPipeW, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};
use windows_sys::Win32::System::Threading::{
    CancelThreadpoolIo, CloseThreadpoolIo, CreateEventW, CreateThreadpoolIo, GetCurrentProcessId,
    PTP_CALLBACK_INSTANCE, PTP_IO, StartThreadpoolIo, WaitForThreadpoolIoCallbacks,
};
use windows_sys::core::BOOL;

use crate::callback_env::{CallbackEnviron, env_parts};
use crate::ctx::{self, Context};
use crate::obligation::DrainObligation;
use crate::pool::PoolRef;
use crate::reentry;
use crate::trace::EventInfo;

pub(crate) const TRACE_EVENTS: &[EventInfo] = &[
    EventInfo {
        target: "io",
        event: "created",
        slots: ["handle", "io"],
        meaning: "an I/O object was bound to a handle",
    },
    EventInfo {
        target: "io",
        event: "started",
        slots: ["overlapped", "generation"],
        meaning: "StartThreadpoolIo was called for an operation about to be issued",
    },
    EventInfo {
        target: "io",
        event: "start-cancelled",
        slots: ["overlapped", "error"],
        meaning: "the issuing call failed synchronously: the start was balanced with CancelThreadpoolIo and the payload returned",
    },
    EventInfo {
        target: "io",
        event: "trampoline-entered",
        slots: ["overlapped", "result"],
        meaning: "a pool thread entered the completion callback",
    },
    EventInfo {
        target: "io",
        event: "trampoline-left",
        slots: ["overlapped", "result"],
        meaning: "the callback returned and unclaimed storage was freed",
    },
    EventInfo {
        target: "io",
        event: "trampoline-foreign",
        slots: ["io", "result"],
        meaning: "a completion with no OVERLAPPED (I/O not issued by this object) was ignored",
    },
    EventInfo {
        target: "io",
        event: "rundown-begin",
        slots: ["io", "outstanding"],
        meaning: "run_down started cancelling and waiting",
    },
    EventInfo {
        target: "io",
        event: "rundown-ended",
        slots: ["io", "outstanding"],
        meaning: "every completion was delivered and every callback returned",
    },
    EventInfo { target: "io", event: "drop-begin", slots: ["io", "outstanding"], meaning: "teardown started" },
    EventInfo {
        target: "io",
        event: "drain-owed",
        slots: ["io", "outstanding"],
        meaning: "teardown found operations whose completions were not yet delivered (they are cancelled)",
    },
    EventInfo {
        target: "io",
        event: "drop-drained",
        slots: ["io", ""],
        meaning: "teardown ran down and drained every callback",
    },
    EventInfo {
        target: "io",
        event: "drop-closed",
        slots: ["io", "handle"],
        meaning: "the I/O object and its handle were closed and the context freed",
    },
    EventInfo { target: "syscall", event: "CreateThreadpoolIo", slots: ["handle", "environment"], meaning: "" },
    EventInfo { target: "syscall", event: "StartThreadpoolIo", slots: ["io", ""], meaning: "" },
    EventInfo { target: "syscall", event: "CancelThreadpoolIo", slots: ["io", ""], meaning: "" },
    EventInfo { target: "syscall", event: "WaitForThreadpoolIoCallbacks", slots: ["io", "cancel"], meaning: "" },
    EventInfo { target: "syscall", event: "CloseThreadpoolIo", slots: ["io", ""], meaning: "" },
    EventInfo { target: "syscall", event: "CancelIoEx", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "ReadFile", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "WriteFile", slots: ["handle", "overlapped"], meaning: "" },
];

// ---------------------------------------------------------------------------
// Handles of proven provenance

/// An owned handle known to be fit for [`ThreadpoolIo::new`]: opened by this
/// module with `FILE_FLAG_OVERLAPPED`, not bound to a completion port, and
/// without skip-on-success.
#[derive(Debug)]
pub struct OverlappedHandle(OwnedHandle);

impl OverlappedHandle {
    /// Gives up the proof and returns the plain owned handle.
    pub fn into_owned(self) -> OwnedHandle {
        self.0
    }
}

impl AsHandle for OverlappedHandle {
    fn as_handle(&self) -> BorrowedHandle<'_> {
        self.0.as_handle()
    }
}

impl AsRawHandle for OverlappedHandle {
    fn as_raw_handle(&self) -> RawHandle {
        self.0.as_raw_handle()
    }
}

impl From<OverlappedHandle> for OwnedHandle {
    fn from(h: OverlappedHandle) -> Self {
        h.0
    }
}

/// Opens `path` with `options` for overlapped I/O.
///
/// `options` decides access and disposition (`read`, `write`, `create`,
/// `truncate`, ...). This sets the options' `custom_flags` to
/// `FILE_FLAG_OVERLAPPED`, replacing any custom flags already set on them;
/// use [`open_file_with_flags`] to pass others.
pub fn open_file(path: impl AsRef<Path>, options: &OpenOptions) -> io::Result<OverlappedHandle> {
    open_file_with_flags(path, options, 0)
}

/// [`open_file`] with extra `FILE_FLAG_*` values (for example
/// `FILE_FLAG_NO_BUFFERING`), combined with `FILE_FLAG_OVERLAPPED`.
pub fn open_file_with_flags(path: impl AsRef<Path>, options: &OpenOptions, flags: u32) -> io::Result<OverlappedHandle> {
    let mut options = options.clone();
    options.custom_flags(flags | FILE_FLAG_OVERLAPPED);
    Ok(OverlappedHandle(OwnedHandle::from(options.open(path)?)))
}

/// Creates a connected pair of overlapped named-pipe ends, `(server, client)`,
/// both readable and writable, in byte mode.
///
/// The pipe has a unique local name (process id and a counter), admits one
/// instance (`FILE_FLAG_FIRST_PIPE_INSTANCE`, so an existing pipe of that name
/// is never joined), rejects remote clients, and the client end is opened
/// at identification level, so the server cannot impersonate it.
pub fn pipe_pair() -> io::Result<(OverlappedHandle, OverlappedHandle)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    /// Each end's buffer size hint.
    const BUFFER: u32 = 64 * 1024;
    // SAFETY: no preconditions.
    let pid = unsafe { GetCurrentProcessId() };
    let mut attempts = 0;
    let (server, name) = loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name: Vec<u16> = format!(r"\\.\pipe\windows-threadpool-{pid}-{n}").encode_utf16().chain(Some(0)).collect();
        // SAFETY: `name` is NUL-terminated; a null security descriptor is the default.
        let h = unsafe {
            CreateNamedPipeW(
                name.as_ptr(),
                PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
                PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
                1,
                BUFFER,
                BUFFER,
                0,
                core::ptr::null(),
            )
        };
        if h != INVALID_HANDLE_VALUE {
            // SAFETY: a fresh handle that nothing else owns.
            break (unsafe { OwnedHandle::from_raw_handle(h) }, name);
        }
        let err = io::Error::last_os_error();
        // Someone else holds this name: take the next one.
        attempts += 1;
        if err.raw_os_error() != Some(ERROR_ACCESS_DENIED as i32) || attempts == 16 {
            return Err(err);
        }
    };
    // SAFETY: `name` is NUL-terminated; the other arguments are plain values.
    let c = unsafe {
        CreateFileW(
            name.as_ptr(),
            GENERIC_READ | GENERIC_WRITE,
            0,
            core::ptr::null(),
            OPEN_EXISTING,
            FILE_FLAG_OVERLAPPED | SECURITY_SQOS_PRESENT | SECURITY_IDENTIFICATION,
            core::ptr::null_mut(),
        )
    };
    if c == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    let client = unsafe { OwnedHandle::from_raw_handle(c) };
    connect(&server)?;
    Ok((OverlappedHandle(server), OverlappedHandle(client)))
}

/// Completes the server side of a connection the client has already made:
/// `ConnectNamedPipe` then normally reports `ERROR_PIPE_CONNECTED`.
fn connect(server: &OwnedHandle) -> io::Result<()> {
    // SAFETY: default attributes, manual reset, unsignalled, unnamed.
    let event = unsafe { CreateEventW(core::ptr::null(), 1, 0, core::ptr::null()) };
    if event.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle that nothing else owns.
    let event = unsafe { OwnedHandle::from_raw_handle(event) };
    let mut ov = OVERLAPPED { hEvent: event.as_raw_handle(), ..Default::default() };
    // SAFETY: `ov` outlives the operation: a pending connect is waited for below.
    if unsafe { ConnectNamedPipe(server.as_raw_handle(), &mut ov) } != 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error().map(|e| e as u32) {
        Some(ERROR_PIPE_CONNECTED) => Ok(()),
        Some(ERROR_IO_PENDING) => {
            let mut n = 0;
            // SAFETY: `ov` is the pending operation's; waiting makes it finish before `ov` dies.
            if unsafe { GetOverlappedResult(server.as_raw_handle(), &ov, &mut n, 1) } != 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }
        _ => Err(err),
    }
}

/// Classifies the `BOOL` an overlapped call returned, reading the thread's
/// last error when it is `FALSE`: `Ok` when a completion will be queued
/// (success, `ERROR_IO_PENDING`, or the warning `ERROR_MORE_DATA`), the error
/// when none will. Call it directly after the issuing call, before anything
/// else can overwrite the last error. Meant for [`ThreadpoolIo::submit`]'s
/// `issue` closures.
pub fn issue_result(ret: BOOL) -> io::Result<()> {
    if ret != 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error().map(|e| e as u32) {
        Some(ERROR_IO_PENDING | ERROR_MORE_DATA) => Ok(()),
        _ => Err(err),
    }
}

// ---------------------------------------------------------------------------
// Operations

/// Operation blocks alive in the process (for tests: every block is freed
/// exactly once).
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// The next generation; process-wide, so an id never names another object's
/// operation either.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// How many operation blocks ([`Operation`]s, whether outstanding, claimed or
/// waiting to be submitted) are alive in this process. For tests.
#[doc(hidden)]
pub fn live_operations() -> usize {
    LIVE_BLOCKS.load(Ordering::SeqCst)
}

/// The non-generic part of an operation block.
#[repr(C)]
struct OpHeader {
    /// First, so a completion's `OVERLAPPED*` is the block's address.
    overlapped: OVERLAPPED,
    /// The registry slot while outstanding.
    slot: usize,
    generation: u64,
    /// `TypeId` of the payload, checked by [`IoCompletion::claim`].
    type_id: TypeId,
    /// Frees the whole block, payload included.
    free: unsafe fn(NonNull<OpHeader>),
}

#[repr(C)]
struct OpBlock<P> {
    header: OpHeader,
    payload: P,
}

/// Frees a block allocated by [`Operation::new`] as an `OpBlock<P>`.
///
/// # Safety
/// `h` must be such a block, owned by the caller, and not used afterwards.
unsafe fn free_block<P>(h: NonNull<OpHeader>) {
    // SAFETY: guaranteed by the caller; `OpBlock` is `repr(C)` with the header first.
    drop(unsafe { Box::from_raw(h.cast::<OpBlock<P>>().as_ptr()) });
    LIVE_BLOCKS.fetch_sub(1, Ordering::SeqCst);
}

/// An operation's storage: a heap block holding the `OVERLAPPED` and a
/// payload `P`, which stay at a fixed address while the kernel owns them.
///
/// The safe operations make one from the buffer they are given;
/// [`IoCompletion::claim`] hands it back after the completion, and it can be
/// submitted again through [`ThreadpoolIo::submit`] without a new allocation.
pub struct Operation<P: Send + 'static> {
    block: NonNull<OpBlock<P>>,
    _owns: PhantomData<OpBlock<P>>,
}

// SAFETY: the block is owned; its `OVERLAPPED` is plain data (the event
// handle in it is usable from any thread), so sending it is sending `P`.
unsafe impl<P: Send + 'static> Send for Operation<P> {}
// SAFETY: shared access only reads the payload and the plain `OVERLAPPED`.
unsafe impl<P: Send + Sync + 'static> Sync for Operation<P> {}

impl<P: Send + 'static> Operation<P> {
    /// Allocates the block for `payload`.
    pub fn new(payload: P) -> Self {
        let block = Box::new(OpBlock {
            header: OpHeader {
                overlapped: OVERLAPPED::default(),
                slot: 0,
                generation: 0,
                type_id: TypeId::of::<P>(),
                free: free_block::<P>,
            },
            payload,
        });
        LIVE_BLOCKS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `Box::into_raw` never returns null.
        Self { block: unsafe { NonNull::new_unchecked(Box::into_raw(block)) }, _owns: PhantomData }
    }

    /// The payload.
    pub fn payload(&self) -> &P {
        // SAFETY: the block is owned by `self` and not shared with the kernel.
        unsafe { &(*self.block.as_ptr()).payload }
    }

    /// The payload, mutably.
    pub fn payload_mut(&mut self) -> &mut P {
        // SAFETY: as in `payload`, and `&mut self` makes the access unique.
        unsafe { &mut (*self.block.as_ptr()).payload }
    }

    /// The `OVERLAPPED` as the last operation left it (`Internal` holds its
    /// status, `InternalHigh` the bytes transferred).
    pub fn overlapped(&self) -> &OVERLAPPED {
        // SAFETY: as in `payload`.
        unsafe { &(*self.block.as_ptr()).header.overlapped }
    }

    /// Frees the block and returns the payload.
    pub fn into_payload(self) -> P {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the block came from `Box::into_raw` in `new`; `this` will not free it again.
        let block = unsafe { Box::from_raw(this.block.as_ptr()) };
        LIVE_BLOCKS.fetch_sub(1, Ordering::SeqCst);
        block.payload
    }

    fn into_raw(self) -> NonNull<OpBlock<P>> {
        core::mem::ManuallyDrop::new(self).block
    }

    /// # Safety
    /// `block` must come from [`Operation::into_raw`] (or a header of such a
    /// block) and be owned by the caller.
    unsafe fn from_raw(block: NonNull<OpBlock<P>>) -> Self {
        Self { block, _owns: PhantomData }
    }
}

impl<P: Send + 'static> Drop for Operation<P> {
    fn drop(&mut self) {
        // SAFETY: the block is owned by `self` and freed exactly once, here.
        unsafe { free_block::<P>(self.block.cast()) }
    }
}

impl<P: Send + core::fmt::Debug + 'static> core::fmt::Debug for Operation<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Operation").field("block", &self.block).field("payload", self.payload()).finish()
    }
}

/// Names one outstanding operation: the address of its `OVERLAPPED` and a
/// process-wide generation, which tells apart operations that reuse an address.
/// Ids order by generation, which is issue order within one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId {
    generation: u64,
    address: usize,
    slot: usize,
}

impl OperationId {
    /// The address of the operation's `OVERLAPPED` (what the trace records).
    pub fn overlapped_address(&self) -> usize {
        self.address
    }

    /// The generation: never the same for two operations in one process.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

/// An operation refused synchronously: the error, and the payload given back.
///
/// Converts into [`io::Error`], so `?` works in functions returning
/// `io::Result`.
pub struct SubmitError<T> {
    error: io::Error,
    payload: T,
}

impl<T> SubmitError<T> {
    /// The error the issuing call (or the argument check) reported.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// The payload, given back.
    pub fn into_payload(self) -> T {
        self.payload
    }

    /// The error and the payload.
    pub fn into_parts(self) -> (io::Error, T) {
        (self.error, self.payload)
    }

    fn map<U>(self, f: impl FnOnce(T) -> U) -> SubmitError<U> {
        SubmitError { error: self.error, payload: f(self.payload) }
    }
}

impl<T> core::fmt::Debug for SubmitError<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SubmitError")
            .field("error", &self.error)
            .field("payload", &core::any::type_name::<T>())
            .finish()
    }
}

impl<T> core::fmt::Display for SubmitError<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "the operation was not issued: {}", self.error)
    }
}

impl<T> std::error::Error for SubmitError<T> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<T> From<SubmitError<T>> for io::Error {
    fn from(e: SubmitError<T>) -> Self {
        e.error
    }
}

/// One delivered completion, as the callback sees it.
///
/// Not `Send` or `Sync`: it lives for one callback invocation on one thread.
pub struct IoCompletion {
    /// The operation's block until claimed.
    block: Cell<Option<NonNull<OpHeader>>>,
    type_id: TypeId,
    id: OperationId,
    result: u32,
    bytes: usize,
}

impl IoCompletion {
    /// The operation this completion belongs to.
    pub fn id(&self) -> OperationId {
        self.id
    }

    /// Bytes the operation transferred.
    pub fn bytes_transferred(&self) -> usize {
        self.bytes
    }

    /// The raw Win32 status the pool reported (`0` for success).
    pub fn io_result(&self) -> u32 {
        self.result
    }

    /// The status as an error, or `None` for success. End of file is
    /// `ERROR_HANDLE_EOF`, cancellation `ERROR_OPERATION_ABORTED`, a message
    /// longer than the buffer `ERROR_MORE_DATA` (the buffer holds its start).
    pub fn error(&self) -> Option<io::Error> {
        (self.result != 0).then(|| io::Error::from_raw_os_error(self.result as i32))
    }

    /// Takes the operation (and its payload) back, if it carries a `P` and
    /// has not been claimed yet. Unclaimed, it is freed when the callback
    /// returns.
    pub fn claim<P: Send + 'static>(&self) -> Option<Operation<P>> {
        if self.type_id != TypeId::of::<P>() {
            return None;
        }
        let block = self.block.take()?;
        // SAFETY: the completion was delivered, so the kernel is done with the
        // block; its type tag says it is an `OpBlock<P>`; `take` makes this the
        // only owner.
        Some(unsafe { Operation::from_raw(block.cast()) })
    }
}

impl core::fmt::Debug for IoCompletion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IoCompletion")
            .field("id", &self.id)
            .field("io_result", &self.result)
            .field("bytes_transferred", &self.bytes)
            .field("claimed", &self.block.get().is_none())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// The registry of outstanding operations

enum Slot {
    Live { address: usize, generation: u64 },
    Free { next: usize },
}

/// Outstanding operations by slot, with a free list. Slots are reused, so
/// the vector grows only to the largest number outstanding at once.
#[derive(Default)]
struct Registry {
    slots: Vec<Slot>,
    free: Option<usize>,
}

impl Registry {
    fn insert(&mut self, address: usize, generation: u64) -> usize {
        let live = Slot::Live { address, generation };
        match self.free {
            Some(i) => {
                let Slot::Free { next } = core::mem::replace(&mut self.slots[i], live) else {
                    unreachable!("the free list holds free slots")
                };
                self.free = (next != usize::MAX).then_some(next);
                i
            }
            None => {
                self.slots.push(live);
                self.slots.len() - 1
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        self.slots[slot] = Slot::Free { next: self.free.unwrap_or(usize::MAX) };
        self.free = Some(slot);
    }

    fn is_live(&self, id: OperationId) -> bool {
        matches!(self.slots.get(id.slot), Some(&Slot::Live { address, generation })
            if address == id.address && generation == id.generation)
    }
}

// ---------------------------------------------------------------------------
// The core

/// The context state the owner and the trampoline share.
#[derive(Default)]
pub(crate) struct IoHeader {
    obligation: DrainObligation,
    registry: Mutex<Registry>,
    /// Started operations whose completion has not been delivered (and
    /// storage freed) or whose synchronous failure has not been balanced.
    outstanding: AtomicUsize,
    /// Operations issued so far: a rundown re-cancels when this moves.
    issued: AtomicU64,
    /// Threads blocked in `run_down` or `wait`; wakers skip the lock when zero.
    waiters: AtomicUsize,
    idle_lock: Mutex<()>,
    idle: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl IoHeader {
    fn wake_waiters(&self) {
        if self.waiters.load(Ordering::SeqCst) != 0 {
            let _g = lock(&self.idle_lock);
            self.idle.notify_all();
        }
    }

    /// One operation is settled; the last touch of the header by a completion.
    fn finish_one(&self) {
        if self.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.wake_waiters();
        }
    }
}

/// The parts of an I/O object: the raw `TP_IO`, its context, the handle and
/// the pool reference. [`ThreadpoolIo`] is its only owner (I/O objects are
/// not cleanup-group members, see the module docs).
pub(crate) struct IoCore {
    raw: PTP_IO,
    ctx: Context<IoHeader>,
    handle: OwnedHandle,
    /// Held shared by submissions across start and issue, exclusively by
    /// `cancel_all`, so a cancel-all never falls between the two.
    issuing: RwLock<()>,
    pool: PoolRef,
}

/// Aborts the process if dropped: armed while a caller's `issue` runs, after
/// which it cannot be known whether the kernel owns the operation.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        std::process::abort();
    }
}

impl IoCore {
    fn new<F>(handle: OwnedHandle, callback: F, env: Option<&mut CallbackEnviron<'_>>) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        reentry::ensure_slot()?;
        let (env, pool) = env_parts(env);
        let ctx = Context::new(IoHeader::default(), callback);
        let pv = ctx.as_ptr();
        let h = handle.as_raw_handle();
        // The error is read inside the bracket: recording may overwrite it.
        let raw = trace_call!("CreateThreadpoolIo", h, env, {
            // SAFETY: the trampoline is instantiated for the context's type,
            // and the context outlives the object (freed only after rundown,
            // drain and close); `h` is a live handle owned by `handle`.
            let raw = unsafe { CreateThreadpoolIo(h, Some(trampoline::<F>), pv, env) };
            if raw == 0 { Err(io::Error::last_os_error()) } else { Ok(raw) }
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

    fn header(&self) -> &IoHeader {
        self.ctx.header()
    }

    /// The context pointer, which identifies the object to its callbacks.
    fn context(&self) -> *const c_void {
        self.ctx.as_ptr()
    }

    /// Registers, starts and issues one operation; on a synchronous failure
    /// balances the start and gives the operation back.
    ///
    /// `prepare` runs before anything is started (user code such as a
    /// buffer's `AsMut` runs there); `issue` runs between the start and the
    /// return and must return `Ok` exactly when a completion will be queued.
    ///
    /// # Safety
    /// `issue` must start at most one overlapped operation, on `handle` with
    /// the given `OVERLAPPED`, and return `Ok` if and only if it did and a
    /// completion will be queued for it (see [`ThreadpoolIo::submit`]).
    unsafe fn submit<P, X>(
        &self,
        op: Operation<P>,
        prepare: impl FnOnce(&mut P) -> io::Result<X>,
        issue: impl FnOnce(HANDLE, *mut OVERLAPPED, X) -> io::Result<()>,
    ) -> Result<OperationId, SubmitError<Operation<P>>>
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
        let block = op.into_raw();
        let header = self.header();
        let _issuing = self.issuing.read().unwrap_or_else(|e| e.into_inner());
        let address = block.as_ptr() as usize;
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        let slot = lock(&header.registry).insert(address, generation);
        // SAFETY: the block is still ours: nothing has been issued yet.
        unsafe {
            (*block.as_ptr()).header.slot = slot;
            (*block.as_ptr()).header.generation = generation;
        }
        let id = OperationId { slot, address, generation };
        // SAFETY: a place projection of the owned block, not a reference.
        let overlapped = unsafe { &raw mut (*block.as_ptr()).header.overlapped };
        let handle = self.handle.as_raw_handle();
        header.outstanding.fetch_add(1, Ordering::SeqCst);
        let issued = header.obligation.publish_submission(|| {
            // SAFETY: `self.raw` is a live I/O object.
            trace_call!("StartThreadpoolIo", self.raw, 0, { unsafe { StartThreadpoolIo(self.raw) } });
            trace_record!("io", "started", address, generation);
            let guard = AbortOnUnwind;
            let r = issue(handle, overlapped, x);
            core::mem::forget(guard);
            r
        });
        // From here on an issued block may already have been completed and
        // freed: only `id` and the failure path below may be used.
        match issued {
            Ok(()) => {
                header.issued.fetch_add(1, Ordering::SeqCst);
                header.wake_waiters();
                Ok(id)
            }
            Err(error) => {
                // SAFETY: `self.raw` is live and the start above is unmatched.
                trace_call!("CancelThreadpoolIo", self.raw, 0, { unsafe { CancelThreadpoolIo(self.raw) } });
                trace_record!("io", "start-cancelled", address, error.raw_os_error().unwrap_or(-1));
                lock(&header.registry).remove(slot);
                header.obligation.dispatched();
                header.finish_one();
                // SAFETY: no completion will arrive, so the block is ours again.
                Err(SubmitError { error, payload: unsafe { Operation::from_raw(block) } })
            }
        }
    }

    fn read_write<B, const WRITE: bool>(&self, offset: u64, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: Send + 'static,
        B: BufferFor<WRITE>,
    {
        let prepare = |b: &mut B| -> io::Result<(*mut u8, u32)> {
            let (ptr, len) = b.raw_parts();
            let len = u32::try_from(len).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a single read or write transfers at most u32::MAX bytes")
            })?;
            Ok((ptr, len))
        };
        let issue = |handle: HANDLE, ov: *mut OVERLAPPED, (ptr, len): (*mut u8, u32)| {
            // SAFETY: `ov` is the operation's zeroed OVERLAPPED, ours until issued.
            unsafe {
                (*ov).Anonymous.Anonymous.Offset = offset as u32;
                (*ov).Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
            }
            // Each result is classified inside its bracket, before recording
            // can overwrite the thread's last error.
            if WRITE {
                trace_call!("WriteFile", handle, ov, {
                    // SAFETY: `ptr..ptr+len` is the payload's buffer, which
                    // lives in the block the kernel owns until the completion.
                    issue_result(unsafe { WriteFile(handle, ptr, len, core::ptr::null_mut(), ov) })
                })
            } else {
                trace_call!("ReadFile", handle, ov, {
                    // SAFETY: as above, and the buffer was borrowed mutably.
                    issue_result(unsafe { ReadFile(handle, ptr, len, core::ptr::null_mut(), ov) })
                })
            }
        };
        // SAFETY: `issue` issues exactly one ReadFile/WriteFile on `handle`
        // with `ov`, and `issue_result` returns `Ok` exactly when a completion
        // is queued (the handle has no skip-on-success, by construction or by
        // `from_handle`'s contract).
        unsafe { self.submit(Operation::new(buffer), prepare, issue) }.map_err(|e| e.map(Operation::into_payload))
    }

    fn cancel(&self, id: OperationId) -> io::Result<()> {
        let registry = lock(&self.header().registry);
        if !registry.is_live(id) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "cancel: no outstanding operation of this object has this id (it completed, failed synchronously, or belongs to another object)",
            ));
        }
        let h = self.handle.as_raw_handle();
        let ov = id.address as *const OVERLAPPED;
        trace_call!("CancelIoEx", h, ov, {
            // SAFETY: the registry lock is held, so the operation is still
            // outstanding and its block cannot be freed and reused under us.
            let ok = unsafe { CancelIoEx(h, ov) };
            if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        })
    }

    fn cancel_all(&self) -> io::Result<()> {
        let _no_issue = self.issuing.write().unwrap_or_else(|e| e.into_inner());
        self.cancel_all_locked()
    }

    /// `CancelIoEx(handle, NULL)`; the caller holds `issuing` exclusively.
    fn cancel_all_locked(&self) -> io::Result<()> {
        let h = self.handle.as_raw_handle();
        let r = trace_call!("CancelIoEx", h, 0, {
            // SAFETY: `h` is live; a null OVERLAPPED cancels every operation on it.
            let ok = unsafe { CancelIoEx(h, core::ptr::null()) };
            if ok == 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
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
    fn settle(&self, cancel: bool) {
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
    fn drain(&self) {
        trace_call!("WaitForThreadpoolIoCallbacks", self.raw, 0, {
            // SAFETY: `self.raw` is a live I/O object.
            unsafe { WaitForThreadpoolIoCallbacks(self.raw, 0) }
        });
    }

    /// Cancel, wait for every completion, drain.
    fn run_down(&self) {
        trace_record!("io", "rundown-begin", self.raw, self.header().outstanding.load(Ordering::SeqCst));
        self.settle(true);
        trace_record!("io", "rundown-ended", self.raw, self.header().outstanding.load(Ordering::SeqCst));
    }

    /// Runs down, closes the object, closes the handle, then frees the
    /// context; returns whether a drain was owed (operations were still
    /// outstanding).
    fn close(self) -> bool {
        let outstanding = self.header().outstanding.load(Ordering::SeqCst);
        trace_record!("io", "drop-begin", self.raw, outstanding);
        let owed = self.header().obligation.is_owed();
        if owed {
            trace_record!("io", "drain-owed", self.raw, outstanding);
        }
        self.run_down();
        trace_record!("io", "drop-drained", self.raw, 0);
        // SAFETY: nothing is outstanding and every callback has returned; the
        // object is closed exactly once, here.
        trace_call!("CloseThreadpoolIo", self.raw, 0, { unsafe { CloseThreadpoolIo(self.raw) } });
        let Self { raw, ctx, handle, issuing: _, pool } = self;
        let h = handle.into_raw_handle();
        // SAFETY: `h` was owned and is closed exactly once, here.
        trace_call!("CloseHandle", h, 0, { unsafe { CloseHandle(h) } });
        drop(ctx);
        drop(pool);
        trace_record!("io", "drop-closed", raw, h);
        owed
    }
}

/// A buffer the safe operations can read into (`WRITE = false`, needs
/// `AsMut<[u8]>`) or write from (`WRITE = true`, needs `AsRef<[u8]>`).
trait BufferFor<const WRITE: bool> {
    fn raw_parts(&mut self) -> (*mut u8, usize);
}

impl<B: AsMut<[u8]>> BufferFor<false> for B {
    fn raw_parts(&mut self) -> (*mut u8, usize) {
        let s = self.as_mut();
        (s.as_mut_ptr(), s.len())
    }
}

impl<B: AsRef<[u8]>> BufferFor<true> for B {
    fn raw_parts(&mut self) -> (*mut u8, usize) {
        let s = self.as_ref();
        // The kernel only reads through a write's pointer.
        (s.as_ptr().cast_mut(), s.len())
    }
}

unsafe extern "system" fn trampoline<F: Fn(&IoCompletion) + Send + Sync + 'static>(
    _instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    overlapped: *mut c_void,
    io_result: u32,
    bytes: usize,
    io: PTP_IO,
) {
    let _scope = reentry::CallbackScope::enter(context);
    trace_record!("io", "trampoline-entered", overlapped, io_result);
    // SAFETY: `context` is the `Shared` this trampoline was created with; the
    // owner frees it only after every completion was delivered and every
    // callback drained.
    let shared = unsafe { ctx::get::<IoHeader, F>(context) };
    let Some(block) = NonNull::new(overlapped.cast::<OpHeader>()) else {
        // Not one of ours (this object always passes an OVERLAPPED).
        trace_record!("io", "trampoline-foreign", io, io_result);
        return;
    };
    // SAFETY: every OVERLAPPED issued on this object's handle is the first
    // field of an operation block this object submitted (see `from_handle`
    // and `submit`); its completion is being delivered, so the kernel is done
    // with it and the block is ours.
    let (slot, generation, type_id) = unsafe {
        let h = block.as_ptr();
        ((*h).slot, (*h).generation, (*h).type_id)
    };
    let header = &shared.header;
    lock(&header.registry).remove(slot);
    header.obligation.dispatched();
    let completion = IoCompletion {
        block: Cell::new(Some(block)),
        type_id,
        id: OperationId { slot, address: block.as_ptr() as usize, generation },
        result: io_result,
        bytes,
    };
    (shared.callback)(&completion);
    if let Some(block) = completion.block.take() {
        // SAFETY: unclaimed, so still ours; `free` matches its payload type.
        unsafe { ((*block.as_ptr()).free)(block) };
    }
    trace_record!("io", "trampoline-left", overlapped, io_result);
    header.finish_one();
}

// ---------------------------------------------------------------------------
// The public object

/// An owned thread-pool I/O object (`CreateThreadpoolIo`) and the overlapped
/// handle it is bound to.
///
/// See the [module docs](self) for ownership, ids, the start/cancel balance
/// and teardown.
pub struct ThreadpoolIo {
    core: Option<IoCore>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ThreadpoolIo>();
    send_sync::<Operation<Vec<u8>>>();
    send_sync::<OperationId>();
};

impl core::fmt::Debug for ThreadpoolIo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let core = self.core();
        f.debug_struct("ThreadpoolIo")
            .field("raw", &(core.raw as *const c_void))
            .field("handle", &core.handle)
            .field("outstanding", &self.outstanding())
            .finish()
    }
}

impl ThreadpoolIo {
    /// Binds `handle` to the pool of `env` (the default pool when `None`);
    /// `callback` runs once per delivered completion.
    ///
    /// If creation fails the handle is closed.
    pub fn new<F>(handle: OverlappedHandle, callback: F, env: Option<&mut CallbackEnviron<'_>>) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        Ok(Self { core: Some(IoCore::new(handle.0, callback, env)?) })
    }

    /// [`new`](Self::new) for a handle this module did not open.
    ///
    /// # Safety
    /// `handle` must have been opened for overlapped I/O
    /// (`FILE_FLAG_OVERLAPPED` or the equivalent), must not already be bound
    /// to a completion port, and must not have
    /// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` set (now or later). No I/O may
    /// be issued on it with an `OVERLAPPED` other than through this object:
    /// the callback trusts every `OVERLAPPED` a completion carries to be one
    /// of this object's operation blocks.
    pub unsafe fn from_handle<F>(
        handle: OwnedHandle,
        callback: F,
        env: Option<&mut CallbackEnviron<'_>>,
    ) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        Ok(Self { core: Some(IoCore::new(handle, callback, env)?) })
    }

    fn core(&self) -> &IoCore {
        self.core.as_ref().expect("present until drop")
    }

    /// The bound handle. I/O issued through it (or a duplicate) other than
    /// through this object is not supported: the pool would count its
    /// completion against this object's operations.
    pub fn handle(&self) -> BorrowedHandle<'_> {
        self.core().handle.as_handle()
    }

    /// The raw `PTP_IO`, valid while `self` is alive.
    pub fn as_raw(&self) -> PTP_IO {
        self.core().raw
    }

    /// Reads into `buffer` from byte `offset` of a file (`ReadFile`). The
    /// completion's [`bytes_transferred`](IoCompletion::bytes_transferred)
    /// says how much of the buffer was filled; a read at or past the end of
    /// the file completes with (or fails synchronously with) `ERROR_HANDLE_EOF`.
    ///
    /// On a synchronous failure the error and `buffer` come back and the
    /// callback does not run. A buffer longer than `u32::MAX` bytes is
    /// refused with [`io::ErrorKind::InvalidInput`].
    pub fn read_at<B>(&self, offset: u64, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        self.core().read_write::<B, false>(offset, buffer)
    }

    /// Writes `buffer` at byte `offset` of a file (`WriteFile`); see
    /// [`read_at`](Self::read_at) for the failure cases.
    pub fn write_at<B>(&self, offset: u64, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        self.core().read_write::<B, true>(offset, buffer)
    }

    /// Reads into `buffer` from a stream such as a pipe (`ReadFile` with a
    /// zero offset, which streams ignore); completes when some data arrives.
    /// See [`read_at`](Self::read_at) for the failure cases.
    pub fn read<B>(&self, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        self.core().read_write::<B, false>(0, buffer)
    }

    /// Writes `buffer` to a stream such as a pipe (`WriteFile` with a zero
    /// offset). See [`read_at`](Self::read_at) for the failure cases.
    pub fn write<B>(&self, buffer: B) -> Result<OperationId, SubmitError<B>>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        self.core().read_write::<B, true>(0, buffer)
    }

    /// Issues any other overlapped call (`DeviceIoControl`,
    /// `ReadFileScatter`, a socket call, ...) as an operation of this object.
    ///
    /// The OVERLAPPED is zeroed, `StartThreadpoolIo` is called, then `issue`
    /// runs with the bound handle, the operation's `OVERLAPPED` and its
    /// payload. If `issue` returns an error the start is balanced with
    /// `CancelThreadpoolIo` and the operation comes back in the error;
    /// otherwise the completion will be delivered to the callback, which can
    /// [`claim`](IoCompletion::claim) the operation. [`issue_result`]
    /// classifies a `BOOL`-returning call's result.
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
    ///   the call succeeded, or reported `ERROR_IO_PENDING`, or a warning
    ///   status such as `ERROR_MORE_DATA`; return the error when it failed
    ///   synchronously or was never issued;
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
        unsafe { self.core().submit(operation, prepare, issue) }
    }

    /// Requests cancellation of one outstanding operation (`CancelIoEx`);
    /// its completion still arrives, normally with `ERROR_OPERATION_ABORTED`.
    ///
    /// Fails with [`io::ErrorKind::NotFound`] if no operation of this object
    /// with this id is outstanding, including a stale id whose address a
    /// newer operation now uses; with the OS error (`ERROR_NOT_FOUND`) if the
    /// operation already completed and its completion is on its way.
    pub fn cancel(&self, id: OperationId) -> io::Result<()> {
        self.core().cancel(id)
    }

    /// Requests cancellation of every outstanding operation on the handle
    /// (`CancelIoEx` with no `OVERLAPPED`). Nothing outstanding is success.
    pub fn cancel_all(&self) -> io::Result<()> {
        self.core().cancel_all()
    }

    /// Operations started and not yet settled (their completion delivered
    /// and storage freed, or their synchronous failure balanced).
    pub fn outstanding(&self) -> usize {
        self.core().header().outstanding.load(Ordering::SeqCst)
    }

    /// Cancels everything outstanding and returns once every completion has
    /// been delivered and every callback has returned. Idempotent; the object
    /// stays usable. Operations issued while it runs are cancelled too.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn run_down(&self) {
        reentry::forbid_drain_in_own_callback(self.core().context(), "ThreadpoolIo::run_down");
        self.core().run_down();
    }

    /// The same as [`run_down`](Self::run_down), under the name every object
    /// type uses for "bring it to rest": call it before dropping an object
    /// with operations outstanding (the `fail-fast` feature reports a drop
    /// that still owed this).
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        reentry::forbid_drain_in_own_callback(self.core().context(), "ThreadpoolIo::stop_and_drain");
        self.core().run_down();
    }

    /// Returns once every outstanding operation has completed and every
    /// callback has returned, without cancelling anything: a pipe read no
    /// one satisfies makes it wait forever.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn wait(&self) {
        reentry::forbid_drain_in_own_callback(self.core().context(), "ThreadpoolIo::wait");
        self.core().settle(false);
    }
}

impl Drop for ThreadpoolIo {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            // From its own callback: the rundown (which cancels) is handed off.
            reentry::tear_down(
                core.context(),
                core,
                |core| core.header().obligation.is_owed(),
                |core, owed| {
                    if core.close() || owed {
                        crate::obligation::report_drain_owed("ThreadpoolIo");
                    }
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_reuses_slots_and_rejects_stale_generations() {
        let mut r = Registry::default();
        let id = |slot, address, generation| OperationId { generation, address, slot };
        let a = r.insert(0x100, 1);
        let b = r.insert(0x200, 2);
        assert!(r.is_live(id(a, 0x100, 1)) && r.is_live(id(b, 0x200, 2)));
        r.remove(a);
        assert!(!r.is_live(id(a, 0x100, 1)));
        let c = r.insert(0x100, 3);
        assert_eq!(c, a, "a freed slot is reused before the registry grows");
        assert!(!r.is_live(id(a, 0x100, 1)), "a stale generation at a live address");
        assert!(r.is_live(id(c, 0x100, 3)));
        assert!(!r.is_live(id(7, 0x100, 3)), "an unknown slot");
        r.remove(b);
        r.remove(c);
        assert_eq!((r.insert(0x300, 4), r.insert(0x400, 5), r.insert(0x500, 6)), (c, b, 2));
    }
}
