//! Operations: the heap block an overlapped operation lives in, its id, and
//! what its completion hands the callback.

use crate::instance::CallbackInstance;
use core::any::TypeId;
use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
#[cfg(any(test, feature = "test-hooks"))]
use core::sync::atomic::{AtomicUsize, Ordering};
use std::io;

use windows_sys::Win32::System::IO::OVERLAPPED;

/// Operations alive in the process (for tests: every block is freed, or
/// its engine operation finished, exactly once). Counted only when the
/// tests can read it.
#[cfg(any(test, feature = "test-hooks"))]
pub(super) static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// The next generation; process-wide, so an id never names another object's
/// operation either.
pub(super) static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// How many operations are alive in this process: [`Operation`]s, whether
/// outstanding, claimed or waiting to be submitted, and the operations of
/// the async types until their completion (or synchronous finish) has
/// finished them. A block such a type keeps for its next operation, or
/// that a forgotten future leaks, is not one. A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn live_operations() -> usize {
    LIVE_BLOCKS.load(Ordering::SeqCst)
}

/// One block more (`true`) or fewer alive; nothing unless the tests count.
#[inline(always)]
pub(super) fn count_block(allocated: bool) {
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
pub(super) struct OpHeader {
    /// First, so a completion's `OVERLAPPED*` is the block's address.
    pub(super) overlapped: OVERLAPPED,
    /// `TypeId` of the payload, checked by [`IoCompletion::claim`].
    pub(super) type_id: TypeId,
    /// Frees the whole block, payload included.
    pub(super) free: unsafe fn(NonNull<OpHeader>),
    /// How an engine's operation finishes from its completion, whatever its
    /// kind (see [`IoCompletion::claim_completing`]); `None` for a block
    /// the caller of [`Io::submit`](crate::io::Io::submit) made.
    pub(super) complete: Option<CompleteFn>,
    /// The span current when the operation was issued: its completion's
    /// parent. Taken by the completion; zero-sized without `tracing`.
    pub(super) parent: crate::callback::spans::Captured,
}

/// Finishes the operation whose block is at the header with its
/// completion's result, and lets go of the block (which goes back to the
/// cache if the completion is its last holder).
///
/// # Safety
/// The block is claimed by the caller, whose completion is being
/// delivered, and `cache` outlives the call.
pub(super) type CompleteFn = unsafe fn(NonNull<OpHeader>, io::Result<usize>, &super::kept::BlockCache);

#[repr(C)]
pub(super) struct OpBlock<P> {
    pub(super) header: OpHeader,
    pub(super) payload: P,
}

/// Frees a block built by [`Operation::new`] or [`Operation::new_in`] as
/// an `OpBlock<P>`.
///
/// # Safety
/// `h` must be such a block, owned by the caller, and not used afterwards.
pub(super) unsafe fn free_block<P>(h: NonNull<OpHeader>) {
    // SAFETY: guaranteed by the caller; `OpBlock` is `repr(C)` with the
    // header first, and its memory came from the global allocator with
    // `Layout::new::<OpBlock<P>>()` (`new_in`'s contract), which is what
    // `Box::from_raw` needs.
    drop(unsafe { Box::from_raw(h.cast::<OpBlock<P>>().as_ptr()) });
    count_block(false);
}

/// Gives the memory of an owned block, whose payload has been dropped or
/// moved out, to `cache` (which may free it), or frees it without one. Its
/// operation was counted finished already ([`count_block`]).
///
/// # Safety
/// `block` is a block of `layout` built by [`Operation::new_in`] (or
/// `new`), owned by the caller, its payload dropped or moved out; it is not
/// used after.
pub(super) unsafe fn retire(
    block: NonNull<OpHeader>,
    layout: core::alloc::Layout,
    cache: Option<&super::kept::BlockCache>,
) {
    // SAFETY: owned; the parent is the header's one field that owns anything.
    unsafe { core::ptr::drop_in_place(&raw mut (*block.as_ptr()).parent) };
    match cache {
        // SAFETY: allocated with `layout` (the caller's contract), and
        // nothing in it needs dropping any more.
        Some(cache) => unsafe { cache.keep(block.cast(), layout) },
        // SAFETY: as above.
        None => unsafe { std::alloc::dealloc(block.as_ptr().cast(), layout) },
    }
}

/// An operation's storage: a heap block holding the `OVERLAPPED` and a
/// payload `P`, which stay at a fixed address while the kernel owns them.
///
/// The safe operations make one from the buffer they are given;
/// [`IoCompletion::claim`] hands it back after the completion, and it can be
/// submitted again through [`Io::submit`](crate::io::Io::submit) without a new allocation.
#[must_use = "dropping it frees the payload"]
pub struct Operation<P: Send + 'static> {
    pub(super) block: NonNull<OpBlock<P>>,
    pub(super) _owns: PhantomData<OpBlock<P>>,
}

// SAFETY: the block is owned; its `OVERLAPPED` is plain data (the event
// handle in it is usable from any thread) and its captured span parent is
// `Send + Sync` (asserted in `spans`), so sending it is sending `P`.
unsafe impl<P: Send + 'static> Send for Operation<P> {}
// SAFETY: shared access only reads the payload and the plain `OVERLAPPED`.
unsafe impl<P: Send + Sync + 'static> Sync for Operation<P> {}

impl<P: Send + 'static> Operation<P> {
    /// Allocates the block for `payload`.
    pub fn new(payload: P) -> Self {
        let layout = Self::LAYOUT;
        // SAFETY: a block is never zero-sized (it holds an `OVERLAPPED`).
        let memory = NonNull::new(unsafe { std::alloc::alloc(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: just allocated with the block's layout, and owned.
        unsafe { Self::new_in(memory, payload, None) }
    }

    /// The layout of the block: what [`new_in`](Self::new_in) takes.
    pub(super) const LAYOUT: core::alloc::Layout = core::alloc::Layout::new::<OpBlock<P>>();

    /// Builds the block for `payload` in `memory`, with the completion
    /// `complete` (an engine's).
    ///
    /// # Safety
    /// `memory` was allocated by the global allocator with
    /// [`LAYOUT`](Self::LAYOUT), is owned by the caller, and is not used
    /// otherwise from here on (the block frees it as a `Box` would).
    pub(super) unsafe fn new_in(memory: NonNull<u8>, payload: P, complete: Option<CompleteFn>) -> Self {
        let block = memory.cast::<OpBlock<P>>();
        let header = OpHeader {
            overlapped: OVERLAPPED::default(),
            type_id: TypeId::of::<P>(),
            free: free_block::<P>,
            complete,
            parent: crate::callback::spans::Captured::NONE,
        };
        // SAFETY: `memory` is owned and sized and aligned for the block.
        unsafe { block.as_ptr().write(OpBlock { header, payload }) };
        count_block(true);
        Self { block, _owns: PhantomData }
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
    #[must_use = "the payload is dropped if unused"]
    pub fn into_payload(self) -> P {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the block's memory came from the global allocator with the
        // block's layout (`new_in`'s contract), as a `Box`'s would; `this`
        // will not free it again.
        let block = unsafe { Box::from_raw(this.block.as_ptr()) };
        count_block(false);
        block.payload
    }

    pub(super) fn into_raw(self) -> NonNull<OpBlock<P>> {
        core::mem::ManuallyDrop::new(self).block
    }

    /// # Safety
    /// `block` must come from [`Operation::into_raw`] (or a header of such a
    /// block) and be owned by the caller.
    pub(super) unsafe fn from_raw(block: NonNull<OpBlock<P>>) -> Self {
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
    pub(super) generation: u64,
    pub(super) address: usize,
    pub(super) slot: usize,
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
#[must_use = "it holds the payload that was not issued"]
pub struct SubmitError<T> {
    pub(super) error: io::Error,
    pub(super) payload: T,
}

impl<T> SubmitError<T> {
    /// The error the issuing call (or the argument check) reported.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// The payload, given back.
    #[must_use = "the payload is dropped if unused"]
    pub fn into_payload(self) -> T {
        self.payload
    }

    /// The error and the payload.
    #[must_use = "the payload is dropped if unused"]
    pub fn into_parts(self) -> (io::Error, T) {
        (self.error, self.payload)
    }

    pub(super) fn map<U>(self, f: impl FnOnce(T) -> U) -> SubmitError<U> {
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
    pub(super) instance: CallbackInstance<'static>,
    /// The operation's block until claimed.
    pub(super) block: Cell<Option<NonNull<OpHeader>>>,
    pub(super) type_id: TypeId,
    pub(super) id: OperationId,
    pub(super) result: u32,
    pub(super) bytes: usize,
}

impl IoCompletion {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'_> {
        &self.instance
    }

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
    /// Match these on [`raw_os_error`](io::Error::raw_os_error): `std` gives
    /// `ERROR_OPERATION_ABORTED` the kind `TimedOut`, and the other two no
    /// stable kind.
    pub fn error(&self) -> Option<io::Error> {
        (self.result != 0).then(|| io::Error::from_raw_os_error(self.result as i32))
    }

    /// The operation's outcome: the bytes transferred on success, the
    /// status as an error otherwise (as [`error`](Self::error) gives it).
    /// After `ERROR_MORE_DATA` the buffer holds the start of the message, and
    /// [`bytes_transferred`](Self::bytes_transferred) says how much.
    pub fn result(&self) -> io::Result<usize> {
        match self.error() {
            None => Ok(self.bytes),
            Some(e) => Err(e),
        }
    }

    /// Takes an engine's operation, whatever its kind, with how it
    /// finishes; `None` for a block without one (or claimed already).
    pub(super) fn claim_completing(&self) -> Option<(NonNull<OpHeader>, CompleteFn)> {
        let block = self.block.get()?;
        // SAFETY: the completion was delivered, so the kernel is done with
        // the block, and it is unclaimed: the header is this callback's to read.
        let complete = unsafe { (*block.as_ptr()).complete }?;
        self.block.set(None);
        Some((block, complete))
    }

    /// Takes the operation (and its payload) back, if it carries a `P` and
    /// has not been claimed yet. Unclaimed, it is freed when the callback
    /// returns.
    #[must_use = "a claimed operation is freed, payload and all, if unused"]
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
