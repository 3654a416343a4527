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
//! will arrive). The crate keeps one counter,
//! [`outstanding`](ThreadpoolIo::outstanding): an operation counts from just
//! before its start until its completion has been delivered and its storage
//! freed, or until its synchronous failure has been balanced. That is both
//! the balance and what a rundown waits for.
//!
//! Which results queue a completion is decided by the `NTSTATUS` behind
//! them: the I/O manager queues one for every status that is not of the
//! error class (its two severity bits `0b11`), so success, `STATUS_PENDING`,
//! informational and warning statuses all do. Win32 calls report warnings
//! (`STATUS_BUFFER_OVERFLOW`, `STATUS_END_OF_MEDIA`, `STATUS_DEVICE_BUSY`,
//! ...) as `FALSE` with an ordinary error code, indistinguishable from a real
//! failure; treating one as a failure would free a block whose completion is
//! still coming. So the crate's own reads and writes are issued with
//! `NtReadFile` and `NtWriteFile`, which return the status itself, and
//! [`issue_status`] classifies it. These are documented calls (the WDK's
//! `NtReadFile`/`ZwReadFile` pages; user-mode code uses the `Nt` names);
//! `RtlGetLastNtStatus`, which would recover the status behind a Win32
//! call's last error, is not documented, and the `OVERLAPPED`'s `Internal`
//! cannot be read after a call that queued a completion (the completion may
//! already have freed the block). [`issue_result`] classifies a Win32 call
//! and is exact only where `ERROR_MORE_DATA` is the one possible warning.
//!
//! # Completions that are not ours
//! A completion port is bound to the file object, not to the handle: any
//! duplicate of the bound handle (from [`ThreadpoolIo::handle`], inherited by
//! a child process, handed to a library) that issues overlapped I/O sends its
//! completion to this object's port. The callback therefore trusts no
//! `OVERLAPPED`: it looks the address up among the object's outstanding
//! operations (an O(1) index by address inside the registry, under the one
//! lock acquisition the completion path takes anyway) and only then reads
//! the block. Anything else is recorded as `trampoline-foreign` and ignored:
//! the callback does not run, and neither `outstanding` nor the drain is
//! touched. The same look-up makes a second completion for an address that
//! was already delivered a foreign one.
//!
//! The guard keeps the crate's memory safe; it cannot repair the thread
//! pool's own count of started operations, which such I/O bypasses.
//! Microsoft documents I/O on the handle without `StartThreadpoolIo` as
//! corrupting the pool's state. Wine 8 drops a foreign packet when no start
//! is pending, and otherwise pairs it with one of the object's starts and
//! later drops that operation's own packet, which then never completes (a
//! rundown waits for it forever); see `docs/wine.md`. Issuing I/O on a
//! duplicate of the handle therefore stays unsupported. An address the
//! registry holds is trusted, so a foreign `OVERLAPPED` whose memory was
//! freed and reused for one of this object's blocks while its packet was
//! still queued cannot be told apart either.
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
//! cancelling queued callbacks), closes the handle, then closes the `TP_IO`:
//! `CloseThreadpoolIo` asks for the handle to be closed and outstanding I/O
//! finished before it is called, and for no I/O to be caused after. A pipe
//! read nobody will ever satisfy cannot hang teardown.
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

use windows_sys::Wdk::Storage::FileSystem::{NtReadFile, NtWriteFile};
use windows_sys::Win32::Foundation::{
    CloseHandle, ERROR_ACCESS_DENIED, ERROR_IO_PENDING, ERROR_MORE_DATA, ERROR_NOT_FOUND, ERROR_PIPE_CONNECTED,
    GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, NTSTATUS, RtlNtStatusToDosError, STATUS_PENDING,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, OPEN_EXISTING, PIPE_ACCESS_DUPLEX,
    SECURITY_IDENTIFICATION, SECURITY_SQOS_PRESENT,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, IO_STATUS_BLOCK, OVERLAPPED};
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
use crate::owner::{self, Lifecycle, Owner, Phase, forbid_drain_in_own_callback};
use crate::pool::PoolRef;
use crate::reentry;
use crate::sys;
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
        meaning: "a completion whose OVERLAPPED is not an outstanding operation of this object (null, or I/O issued on a duplicate of the handle) was ignored",
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
    EventInfo { target: "syscall", event: "NtReadFile", slots: ["handle", "overlapped"], meaning: "" },
    EventInfo { target: "syscall", event: "NtWriteFile", slots: ["handle", "overlapped"], meaning: "" },
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
            sys::check(unsafe { GetOverlappedResult(server.as_raw_handle(), &ov, &mut n, 1) })
        }
        _ => Err(err),
    }
}

/// Classifies the `BOOL` a Win32 overlapped call returned, reading the
/// thread's last error when it is `FALSE`: `Ok` for success,
/// `ERROR_IO_PENDING` and `ERROR_MORE_DATA`, the error otherwise. Call it
/// directly after the issuing call, before anything else can overwrite the
/// last error. Meant for [`ThreadpoolIo::submit`]'s `issue` closures.
///
/// A Win32 error code does not say whether the status behind it was a
/// warning (a completion is queued) or an error (none is): this is exact
/// only for calls whose one possible warning is `STATUS_BUFFER_OVERFLOW`
/// (`ERROR_MORE_DATA`), such as reads and writes of files and pipes. For a
/// call that can end in another warning (a tape or removable-media driver's
/// `STATUS_END_OF_MEDIA`, `STATUS_FILEMARK_DETECTED`, a `STATUS_DEVICE_BUSY`,
/// ...) issue its `Nt*` form and classify with [`issue_status`].
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

/// Classifies the `NTSTATUS` an `Nt*` overlapped call (`NtReadFile`,
/// `NtDeviceIoControlFile`, ...) returned: `Ok` when a completion will be
/// queued, which is for every status that is not of the error class
/// (success, `STATUS_PENDING`, informational and warning statuses), the
/// status as a Win32 error (`RtlNtStatusToDosError`) otherwise. Meant for
/// [`ThreadpoolIo::submit`]'s `issue` closures.
pub fn issue_status(status: NTSTATUS) -> io::Result<()> {
    if queues_completion(status) {
        Ok(())
    } else {
        // SAFETY: a pure conversion. The thread's last error is left alone.
        Err(io::Error::from_raw_os_error(unsafe { RtlNtStatusToDosError(status) } as i32))
    }
}

/// Whether an overlapped call that returned `status` has a completion queued
/// for it: the I/O manager queues one for every status outside the error
/// class (severity bits `0b11`), so success, `STATUS_PENDING`, the
/// informational and the warning statuses all do, and only an error fails
/// the operation synchronously.
pub(crate) const fn queues_completion(status: NTSTATUS) -> bool {
    (status as u32) >> 30 != 0b11
}

// ---------------------------------------------------------------------------
// Operations

/// Operation blocks alive in the process (for tests: every block is freed
/// exactly once). Counted only when the tests can read it.
#[cfg(any(test, feature = "test-hooks"))]
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// The next generation; process-wide, so an id never names another object's
/// operation either.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// How many operation blocks ([`Operation`]s, whether outstanding, claimed or
/// waiting to be submitted) are alive in this process. A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn live_operations() -> usize {
    LIVE_BLOCKS.load(Ordering::SeqCst)
}

/// One block more (`true`) or fewer alive; nothing unless the tests count.
#[inline(always)]
fn count_block(allocated: bool) {
    #[cfg(any(test, feature = "test-hooks"))]
    if allocated {
        LIVE_BLOCKS.fetch_add(1, Ordering::SeqCst);
    } else {
        LIVE_BLOCKS.fetch_sub(1, Ordering::SeqCst);
    }
    #[cfg(not(any(test, feature = "test-hooks")))]
    let _ = allocated;
}

/// The non-generic part of an operation block.
#[repr(C)]
struct OpHeader {
    /// First, so a completion's `OVERLAPPED*` is the block's address.
    overlapped: OVERLAPPED,
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
    count_block(false);
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
            header: OpHeader { overlapped: OVERLAPPED::default(), type_id: TypeId::of::<P>(), free: free_block::<P> },
            payload,
        });
        count_block(true);
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
        count_block(false);
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

/// Outstanding operations by slot, with a free list, and an index from a
/// live operation's address to its slot. Slots are reused, so the vector
/// grows only to the largest number outstanding at once, and the index with
/// it: after that, nothing here allocates.
///
/// The index is an open-addressing table with linear probing, holding
/// `slot + 1` (0 is empty) and kept at most half full, so a lookup by address
/// is a few probes. Deletion shifts the following entries back rather than
/// leaving tombstones, so probe runs never grow with churn.
#[derive(Default)]
struct Registry {
    slots: Vec<Slot>,
    free: Option<usize>,
    /// Length 0 or a power of two at least twice `slots.len()`.
    index: Vec<usize>,
}

impl Registry {
    fn insert(&mut self, address: usize, generation: u64) -> usize {
        let live = Slot::Live { address, generation };
        let slot = match self.free {
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
        };
        if self.index.len() < 2 * self.slots.len() {
            self.rebuild_index();
        } else {
            let mut i = self.home(address);
            while self.index[i] != 0 {
                i = (i + 1) & (self.index.len() - 1);
            }
            self.index[i] = slot + 1;
        }
        slot
    }

    fn remove(&mut self, slot: usize) {
        let Slot::Live { address, .. } = self.slots[slot] else { unreachable!("only a live slot is removed") };
        let i = self.position(address).expect("a live slot is indexed");
        self.remove_at(i);
    }

    /// Removes the live slot named by index entry `i`.
    fn remove_at(&mut self, i: usize) {
        let slot = self.index[i] - 1;
        self.unindex(i);
        self.slots[slot] = Slot::Free { next: self.free.unwrap_or(usize::MAX) };
        self.free = Some(slot);
    }

    /// The slot and generation of the live operation at `address`, removed
    /// from the registry; `None` when no operation at `address` is live. Only
    /// compares addresses: `address` is never dereferenced.
    fn take(&mut self, address: usize) -> Option<(usize, u64)> {
        let i = self.position(address)?;
        let slot = self.index[i] - 1;
        let Slot::Live { generation, .. } = self.slots[slot] else { unreachable!("the index holds live slots") };
        self.remove_at(i);
        Some((slot, generation))
    }

    /// The address of the live slot an index entry names.
    fn address_of(&self, entry: usize) -> usize {
        match self.slots[entry - 1] {
            Slot::Live { address, .. } => address,
            Slot::Free { .. } => unreachable!("the index holds live slots"),
        }
    }

    /// Where a probe for `address` starts (Fibonacci hashing: the high bits
    /// of the product, since blocks are aligned and their low bits constant).
    fn home(&self, address: usize) -> usize {
        let bits = self.index.len().trailing_zeros();
        ((address as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// The index entry naming `address`, if it is live.
    fn position(&self, address: usize) -> Option<usize> {
        if self.index.is_empty() {
            return None;
        }
        let mask = self.index.len() - 1;
        let mut i = self.home(address);
        loop {
            match self.index[i] {
                0 => return None,
                e if self.address_of(e) == address => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Empties entry `hole`, shifting back the entries after it that would
    /// otherwise no longer be reached from their home position.
    fn unindex(&mut self, mut hole: usize) {
        let mask = self.index.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = self.index[j];
            if e == 0 {
                break;
            }
            let home = self.home(self.address_of(e));
            // The entry stays if its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.index[hole] = e;
                hole = j;
            }
        }
        self.index[hole] = 0;
    }

    /// Resizes the index to twice the number of slots (rounded up to a power
    /// of two, at least 8) and reinserts every live slot.
    fn rebuild_index(&mut self) {
        let len = (2 * self.slots.len()).next_power_of_two().max(8);
        self.index.clear();
        self.index.resize(len, 0);
        let mask = len - 1;
        for slot in 0..self.slots.len() {
            if let Slot::Live { address, .. } = self.slots[slot] {
                let mut i = self.home(address);
                while self.index[i] != 0 {
                    i = (i + 1) & mask;
                }
                self.index[i] = slot + 1;
            }
        }
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

    /// Enters the block at `address` in the registry under a fresh
    /// generation; from here its completion can be delivered.
    fn register(&self, address: usize) -> OperationId {
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
        let slot = lock(&self.registry).insert(address, generation);
        OperationId { slot, address, generation }
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

    fn header(&self) -> &IoHeader {
        self.ctx.header()
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
        let id = header.register(block.as_ptr() as usize);
        let OperationId { slot, address, generation } = id;
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
            // SAFETY: `ov` is the operation's zeroed OVERLAPPED, ours until
            // issued. `Internal` starts as STATUS_PENDING, as ReadFile leaves
            // it; the offset is recorded where ReadFile would have put it.
            unsafe {
                (*ov).Internal = STATUS_PENDING as usize;
                (*ov).Anonymous.Anonymous.Offset = offset as u32;
                (*ov).Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
            }
            let position = offset as i64;
            // The OVERLAPPED's `Internal` and `InternalHigh` are the request's
            // IO_STATUS_BLOCK, and its address the completion's context, as
            // ReadFile and WriteFile pass them.
            let iosb = ov.cast::<IO_STATUS_BLOCK>();
            let context = ov.cast_const().cast::<c_void>();
            let event = core::ptr::null_mut();
            if WRITE {
                trace_call!("NtWriteFile", handle, ov, {
                    // SAFETY: `ptr..ptr+len` is the payload's buffer, which
                    // lives in the block the kernel owns until the
                    // completion; `position` is read before the call returns.
                    issue_status(unsafe {
                        NtWriteFile(handle, event, None, context, iosb, ptr.cast(), len, &position, core::ptr::null())
                    })
                })
            } else {
                trace_call!("NtReadFile", handle, ov, {
                    // SAFETY: as above, and the buffer was borrowed mutably.
                    issue_status(unsafe {
                        NtReadFile(handle, event, None, context, iosb, ptr.cast(), len, &position, core::ptr::null())
                    })
                })
            }
        };
        // SAFETY: `issue` issues exactly one NtReadFile/NtWriteFile on
        // `handle` with `ov`, and `issue_status` returns `Ok` exactly when a
        // completion is queued (the handle has no skip-on-success, by
        // construction or by `from_handle`'s contract).
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
            sys::check(unsafe { CancelIoEx(h, ov) })
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
}

impl Lifecycle for IoCore {
    fn owner_name(&self) -> &'static str {
        "ThreadpoolIo"
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
        }
    }

    /// Operations whose completions were not yet delivered.
    fn drain_owed(&self) -> bool {
        let owed = self.header().obligation.is_owed();
        if owed {
            trace_record!("io", "drain-owed", self.raw, self.header().outstanding.load(Ordering::SeqCst));
        }
        owed
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
    /// order `CloseThreadpoolIo` documents).
    fn close_and_free(self) {
        let Self { raw, ctx, handle, issuing: _, pool } = self;
        let h = handle.into_raw_handle();
        // SAFETY: `h` was owned and is closed exactly once, here.
        trace_call!("CloseHandle", h, 0, { unsafe { CloseHandle(h) } });
        // SAFETY: the handle is closed, nothing is outstanding and every
        // callback has returned; the object is closed exactly once, here.
        trace_call!("CloseThreadpoolIo", raw, 0, { unsafe { CloseThreadpoolIo(raw) } });
        drop(ctx);
        drop(pool);
        trace_record!("io", "drop-closed", raw, h);
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
    // SAFETY: the pool delivers this completion once, and it names an
    // operation of this object only if that operation has completed.
    unsafe { deliver(&shared.header, &shared.callback, overlapped, io_result, bytes, io) };
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
/// done with its block.
pub(crate) unsafe fn deliver<F: Fn(&IoCompletion)>(
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
    header.obligation.dispatched();
    let completion = IoCompletion {
        block: Cell::new(NonNull::new(block)),
        type_id,
        id: OperationId { slot, address: overlapped as usize, generation },
        result: io_result,
        bytes,
    };
    callback(&completion);
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
    core: Owner<IoCore>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ThreadpoolIo>();
    send_sync::<Operation<Vec<u8>>>();
    send_sync::<OperationId>();
};

impl core::fmt::Debug for ThreadpoolIo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let core = &self.core;
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
        Ok(Self { core: Owner::new(IoCore::new(handle.0, callback, env)?) })
    }

    /// [`new`](Self::new) for a handle this module did not open.
    ///
    /// # Safety
    /// `handle` must have been opened for overlapped I/O
    /// (`FILE_FLAG_OVERLAPPED` or the equivalent), must not already be bound
    /// to a completion port, and must not have
    /// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS` set (now or later). No I/O may
    /// be issued on it other than through this object, with the same caveat
    /// as for [`handle`](Self::handle).
    pub unsafe fn from_handle<F>(
        handle: OwnedHandle,
        callback: F,
        env: Option<&mut CallbackEnviron<'_>>,
    ) -> io::Result<Self>
    where
        F: Fn(&IoCompletion) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(IoCore::new(handle, callback, env)?) })
    }

    /// The bound handle. I/O issued through it (or a duplicate) other than
    /// through this object is not supported: the thread pool expects a
    /// `StartThreadpoolIo` for every operation on the handle. Its completions
    /// never reach the callback (see [Completions that are not
    /// ours](self#completions-that-are-not-ours)).
    pub fn handle(&self) -> BorrowedHandle<'_> {
        self.core.handle.as_handle()
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
    /// callback does not run. A buffer longer than `u32::MAX` bytes is
    /// refused with [`io::ErrorKind::InvalidInput`].
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
    /// Fails with [`io::ErrorKind::NotFound`] if no operation of this object
    /// with this id is outstanding, including a stale id whose address a
    /// newer operation now uses; with the OS error (`ERROR_NOT_FOUND`) if the
    /// operation already completed and its completion is on its way.
    pub fn cancel(&self, id: OperationId) -> io::Result<()> {
        self.core.cancel(id)
    }

    /// Requests cancellation of every outstanding operation on the handle
    /// (`CancelIoEx` with no `OVERLAPPED`). Nothing outstanding is success.
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
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&*self.core);
    }

    /// Returns once every outstanding operation has completed and every
    /// callback has returned, without cancelling anything: a pipe read no
    /// one satisfies makes it wait forever.
    ///
    /// # Panics
    /// If called from this object's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&*self.core);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicUsize;
    use std::collections::HashMap;
    use windows_sys::Win32::Foundation::{
        ERROR_BUSY, ERROR_END_OF_MEDIA, ERROR_FILEMARK_DETECTED, ERROR_HANDLE_EOF, ERROR_INVALID_PARAMETER,
        ERROR_OPERATION_ABORTED, STATUS_ALERTED, STATUS_BUFFER_OVERFLOW, STATUS_CANCELLED, STATUS_DEVICE_BUSY,
        STATUS_END_OF_FILE, STATUS_END_OF_MEDIA, STATUS_FILEMARK_DETECTED, STATUS_INVALID_PARAMETER,
        STATUS_MORE_ENTRIES, STATUS_NO_MORE_FILES, STATUS_OBJECT_NAME_EXISTS, STATUS_PIPE_BROKEN, STATUS_SUCCESS,
        STATUS_WAIT_1,
    };

    #[test]
    fn completion_is_queued_for_every_status_but_an_error() {
        let queued = [
            ("success", STATUS_SUCCESS),
            ("success", STATUS_WAIT_1),
            ("success", STATUS_ALERTED),
            ("pending", STATUS_PENDING),
            ("success", STATUS_MORE_ENTRIES),
            ("informational", STATUS_OBJECT_NAME_EXISTS),
            ("informational", 0x7FFF_FFFF),
            ("warning", STATUS_BUFFER_OVERFLOW),
            ("warning", STATUS_NO_MORE_FILES),
            ("warning", STATUS_DEVICE_BUSY),
            ("warning", STATUS_FILEMARK_DETECTED),
            ("warning", STATUS_END_OF_MEDIA),
            ("warning", 0xBFFF_FFFF_u32 as NTSTATUS),
        ];
        for (class, status) in queued {
            assert!(queues_completion(status), "{class} status {:#010x} queues a completion", status as u32);
            assert!(issue_status(status).is_ok(), "{class} status {:#010x}", status as u32);
        }
        let failed = [
            (STATUS_END_OF_FILE, ERROR_HANDLE_EOF),
            (STATUS_PIPE_BROKEN, windows_sys::Win32::Foundation::ERROR_BROKEN_PIPE),
            (STATUS_CANCELLED, ERROR_OPERATION_ABORTED),
            (STATUS_INVALID_PARAMETER, ERROR_INVALID_PARAMETER),
        ];
        for (status, win32) in failed {
            assert!(!queues_completion(status), "error status {:#010x} queues nothing", status as u32);
            let e = issue_status(status).expect_err("an error status fails synchronously");
            assert_eq!(e.raw_os_error(), Some(win32 as i32), "status {:#010x}", status as u32);
        }
        assert!(!queues_completion(0xC000_0000_u32 as NTSTATUS) && !queues_completion(-1));
        // The warnings above surface from Win32 calls as ordinary errors,
        // which is why the Win32 error code cannot classify them.
        for (status, win32) in [
            (STATUS_END_OF_MEDIA, ERROR_END_OF_MEDIA),
            (STATUS_DEVICE_BUSY, ERROR_BUSY),
            (STATUS_FILEMARK_DETECTED, ERROR_FILEMARK_DETECTED),
        ] {
            // SAFETY: a pure conversion.
            assert_eq!(unsafe { RtlNtStatusToDosError(status) }, win32);
        }
    }

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

    #[test]
    fn registry_finds_exactly_the_live_addresses() {
        // Churn against a model: addresses cluster like heap blocks (aligned,
        // close together) and are reused after removal.
        let mut r = Registry::default();
        let mut model: HashMap<usize, (usize, u64)> = HashMap::new();
        let mut seed = 0x2545_F491_4F6C_DD1D_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for generation in 1..20_000u64 {
            let address = 0x10_0000 + (next() % 300) as usize * 48;
            if let Some(&(slot, g)) = model.get(&address) {
                assert_eq!(r.take(address), Some((slot, g)), "live address {address:#x}");
                model.remove(&address);
                assert_eq!(r.take(address), None, "a taken address is no longer live");
            } else {
                assert_eq!(r.take(address), None, "address {address:#x} was never inserted or was taken");
                model.insert(address, (r.insert(address, generation), generation));
            }
            if generation % 1000 == 0 {
                for (&a, &(slot, g)) in &model {
                    assert!(r.is_live(OperationId { generation: g, address: a, slot }));
                }
                assert!(r.index.len() >= 2 * r.slots.len());
                assert_eq!(r.index.iter().filter(|&&e| e != 0).count(), model.len());
            }
        }
        assert_eq!(r.take(0), None, "null is never live");
    }

    type Claimed = Mutex<Vec<Operation<Vec<u8>>>>;

    /// A header with one registered operation, counted as the submit path counts it.
    fn one_outstanding(header: &IoHeader) -> OperationId {
        let block = Operation::new(vec![7u8; 4]).into_raw();
        let id = header.register(block.as_ptr() as usize);
        header.outstanding.fetch_add(1, Ordering::SeqCst);
        header.obligation.publish_submission(|| ());
        id
    }

    static FORGED_FREES: AtomicUsize = AtomicUsize::new(0);

    /// Frees nothing: the forged header below lives on the stack.
    unsafe fn forged_free(_: NonNull<OpHeader>) {
        FORGED_FREES.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn foreign_and_stale_completions_are_ignored() {
        let header = IoHeader::default();
        let calls = AtomicUsize::new(0);
        let claimed = core::mem::ManuallyDrop::new(Claimed::default());
        let callback = |c: &IoCompletion| {
            calls.fetch_add(1, Ordering::SeqCst);
            if let Some(op) = c.claim::<Vec<u8>>() {
                claimed.lock().unwrap().push(op);
            }
        };
        let id = one_outstanding(&header);
        let io = 0x1230 as PTP_IO;
        let settled = |n: usize| (calls.load(Ordering::SeqCst), header.outstanding.load(Ordering::SeqCst), n);

        // A foreign OVERLAPPED on the stack, inside something laid out like
        // an operation block of the same payload type.
        let mut forged =
            OpHeader { overlapped: OVERLAPPED::default(), type_id: TypeId::of::<Vec<u8>>(), free: forged_free };
        let p = (&raw mut forged).cast::<c_void>();
        // SAFETY: `p` is not in the registry.
        unsafe { deliver(&header, &callback, p, 0, 4, io) };
        assert_eq!(settled(FORGED_FREES.load(Ordering::SeqCst)), (0, 1, 0), "a foreign completion was delivered");
        assert!(header.obligation.is_owed(), "a foreign completion settled the drain");

        // The real completion is delivered once...
        let address = id.overlapped_address() as *mut c_void;
        // SAFETY: the operation never reached the kernel, so it is done with it.
        unsafe { deliver(&header, &callback, address, 0, 4, io) };
        assert_eq!(settled(0), (1, 0, 0));
        assert!(!header.obligation.is_owed());
        assert_eq!(claimed.lock().unwrap()[0].payload(), &[7u8; 4]);
        // ...and a second packet for the same (still allocated) address is stale.
        // SAFETY: the address is no longer in the registry.
        unsafe { deliver(&header, &callback, address, 0, 4, io) };
        assert_eq!(settled(0), (1, 0, 0), "a delivered address was delivered again");
        assert_eq!(lock(&header.registry).take(id.overlapped_address()), None);

        // A null OVERLAPPED (a packet posted without one).
        // SAFETY: null is never in the registry.
        unsafe { deliver(&header, &callback, core::ptr::null_mut(), 0, 0, io) };
        assert_eq!(settled(0), (1, 0, 0));
        drop(core::mem::ManuallyDrop::into_inner(claimed));
    }

    /// With the `trace` feature, a foreign completion leaves its record (in a
    /// child process: the filter is read once per process).
    #[cfg(feature = "trace")]
    #[test]
    fn foreign_completions_are_traced() {
        const NAME: &str = "io::tests::foreign_completions_are_traced";
        const CHILD: &str = "WINDOWS_THREADPOOL_IO_TEST_CHILD";
        const DONE: i32 = 0x5A;
        if std::env::var_os(CHILD).is_some() {
            assert!(crate::trace::wants("io"), "the child's filter does not arm io");
            let header = IoHeader::default();
            let id = one_outstanding(&header);
            let mut ov = OVERLAPPED::default();
            // SAFETY: `ov` is not in the registry.
            unsafe {
                deliver(&header, &|_: &IoCompletion| unreachable!(), (&raw mut ov).cast(), 4321, 0, 0xABC0 as PTP_IO)
            };
            let dump = crate::trace::dump();
            let row = dump.lines().find(|l| l.contains(" io trampoline-foreign ")).unwrap_or_else(|| panic!("{dump}"));
            assert!(row.ends_with("io=0xabc0 result=4321"), "{row}");
            assert_eq!(header.outstanding.load(Ordering::SeqCst), 1);
            // SAFETY: the operation never reached the kernel.
            unsafe { deliver(&header, &|_: &IoCompletion| {}, id.overlapped_address() as *mut c_void, 0, 0, 0) };
            use std::io::Write;
            let _ = std::io::stdout().flush();
            std::process::exit(DONE);
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env(crate::trace::imp::FILTER_VAR, "io")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(DONE),
            "{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
