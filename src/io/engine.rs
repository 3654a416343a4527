//! The engine under every async I/O type ([`AsyncIo`](super::AsyncIo), the
//! sockets of [`crate::net`]): one [`Io`] whose one callback completes
//! futures, and the future that issues one operation at its first poll.
//!
//! An operation kind is an [`AsyncOp`]: what it issues and what its result
//! becomes. All of an operation lives in one block: the `OVERLAPPED`, the
//! operation (its buffer, an address, an accepted socket), and what its
//! completion and its future share (the output, the waker, the count of
//! their two holds). The block's header says how its kind finishes
//! (`complete::<T>`), so the object's one callback finishes every kind
//! without knowing it. The last of the two holders retires the block into
//! the engine's [`BlockCache`], and the next operation of the same layout
//! takes it from there: in steady state an operation allocates nothing.
//!
//! Where the handle has skip-on-success (stream sockets, byte-mode pipes),
//! an operation that completes at once is finished inline by the future's
//! first poll: no completion is queued, and `IoCore::submit_op` balances
//! its start.
//!
//! # Teardown without waiting
//! An engine whose owner is dropped with operations in flight (a dropped
//! or forgotten future's) is orphaned, not run down by a thread that waits:
//! its operations are cancelled (`CancelIoEx`), and the completion that
//! brings the count of operations in flight to zero drops the engine on
//! that completion's thread, as its callback's last act
//! (`crate::callback::inplace::drop_when_left`): the thread is disassociated from the
//! callback first, so the drain waits only for the object's other
//! callbacks, which are past their last use of it. No thread waits for a
//! completion and none is handed a teardown, so a server closing 10,000
//! idle connections at once submits nothing to the pool for their close.
//! With in-place polling off (no site to leave), or for an object that
//! never takes part in it (a cleanup group's, or one whose environment
//! keeps a library loaded), the own-callback teardown
//! (`crate::callback::reentry::tear_down`) hands the close to another thread, which
//! waits only for the running callback to return. The object itself is
//! still drained, never cancelled through the pool.
//!
//! The count and the orphaned mark are one atomic word, so exactly one of
//! the owner's drop (which finds the count at zero as it marks) and the last
//! completion (which finds the mark as it takes the count to zero) drops the
//! engine.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::task::{Context, Poll};
use std::io;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, PoisonError};

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::iocore::Submitted;
use super::kept::BlockCache;
use super::op::AsyncOp;
use super::operation::{OpBlock, OpHeader};
use super::{Io, IoCompletion, Operation, OperationId};
use crate::callback::inplace;
use crate::callback::waker_slot::WakerSlot;
use crate::callback_env::CallbackEnviron;

/// What an operation's completion and its future share, inside the
/// operation's block.
struct Shared<O> {
    /// Who holds the block: the future and, from the operation's issue
    /// until its completion has finished with it, the completion. The last
    /// to let go retires the block ([`release`]).
    holders: AtomicUsize,
    /// Set once `output` holds the output; the completion writes nothing
    /// of `output` after.
    done: AtomicBool,
    waker: WakerSlot,
    /// Written by the completion before `done`, taken by the future after.
    output: UnsafeCell<Option<O>>,
    /// The block this lives in and its layout, for the last holder.
    block: NonNull<OpHeader>,
    layout: Layout,
}

/// An operation's payload: what its future shares, and the operation
/// itself until it finishes (taken by its completion, or by the issuing
/// thread when it finished synchronously).
struct Slot<T: AsyncOp> {
    shared: Shared<T::Output>,
    op: UnsafeCell<Option<T>>,
}

// SAFETY: the operation and its output are `Send`; the block pointer is
// the slot's own address, and the rest is atomics and a waker slot, which
// are `Send` and `Sync`. Two threads reach it at once only through
// `Shared`'s atomics and the `UnsafeCell`s their protocol orders.
unsafe impl<T: AsyncOp> Send for Slot<T> {}

/// Lets go of one holder of the block `s` lives in. The last one retires
/// the block: it gives back the output no one took, to drop where the
/// caller decides (user code: a buffer), and keeps the block's memory in
/// `kept`, or frees it where there is none.
///
/// # Safety
/// `s` is the `Shared` of a live engine block held by the caller, whose
/// operation has finished if the caller may be its last holder (the
/// completion has taken it, or the future saw `done`); the caller does not
/// use `s` after.
unsafe fn release<O>(s: NonNull<Shared<O>>, kept: Option<&BlockCache>) -> Option<O> {
    // SAFETY: held by the caller, so live.
    let shared = unsafe { s.as_ref() };
    if shared.holders.fetch_sub(1, Ordering::AcqRel) != 1 {
        return None;
    }
    let (block, layout) = (shared.block, shared.layout);
    // SAFETY: the last holder: the block is this thread's alone, and the
    // AcqRel above orders the other holder's accesses before these.
    let left = unsafe { (*shared.output.get()).take() };
    // SAFETY: as above. The rest of the payload is the operation, taken
    // already (an empty `Option` owns nothing).
    unsafe { core::ptr::drop_in_place(s.as_ptr()) };
    // SAFETY: an engine block of `layout`, owned, its payload dropped.
    unsafe { super::operation::retire(block, layout, kept) };
    left
}

/// Takes the operation out of its block, once, to finish it: from here it
/// no longer counts as alive (`live_operations`), whichever path finished
/// it (its completion, or the issuing thread when it finished at once).
///
/// # Safety
/// `block` is a live `Slot<T>` block whose operation the caller owns (the
/// completion's from the issue on; the issuing thread's if it never queued).
unsafe fn take_op<T: AsyncOp>(block: *mut OpBlock<Slot<T>>) -> T {
    // SAFETY: the caller owns the operation's cell.
    let op = unsafe { (*(*block).payload.op.get()).take() };
    super::operation::count_block(false);
    op.expect("an operation is finished once")
}

/// How an engine's operation of kind `T` finishes from its completion
/// (the block's [`CompleteFn`](super::operation::CompleteFn)): the output
/// is published, the completion lets go of the block, and the future is
/// woken.
///
/// # Safety
/// As `CompleteFn`'s: `h` is the claimed block of a queued `Slot<T>`
/// operation whose completion is being delivered.
unsafe fn complete<T: AsyncOp>(h: NonNull<OpHeader>, result: io::Result<usize>, kept: &BlockCache) {
    let block = h.cast::<OpBlock<Slot<T>>>().as_ptr();
    // SAFETY: the operation is the completion's from its issue on (the
    // future never touches it), and the kernel is done with it.
    let output = unsafe { take_op(block) }.finish(result);
    // SAFETY: the block is live (the completion holds it); only atomics and
    // the output's cell are reached through this shared reference.
    let shared = unsafe { NonNull::new_unchecked(&raw mut (*block).payload.shared) };
    // SAFETY: as above; the future reads `output` only after `done`.
    unsafe { *shared.as_ref().output.get() = Some(output) };
    // SAFETY: as above.
    unsafe { shared.as_ref() }.done.store(true, Ordering::Release);
    // SAFETY: as above.
    let waker = unsafe { shared.as_ref() }.waker.take();
    // The hold is given up before the wake, so the woken future is the
    // last holder and keeps the block before its task issues the next
    // operation, which then finds it.
    // If the future is gone, the output (buffer and all) drops here, after
    // the kernel is done with it, and so does a waker it registered after
    // the one taken above: user code, in a pool callback.
    crate::callback::unwind::or_abort("dropping an I/O future's buffer", move || {
        // SAFETY: the completion's hold, given up here, after its last use;
        // the operation was taken above.
        drop(unsafe { release(shared, Some(kept)) });
    });
    crate::callback::waker_slot::wake(waker);
}

/// Completions the engines of this process have delivered. Counted only
/// when the tests can read it.
#[cfg(any(test, feature = "test-hooks"))]
static COMPLETIONS: AtomicUsize = AtomicUsize::new(0);

/// How many completions of async I/O operations (files, pipes, sockets)
/// this process has delivered to their futures' callback; an operation
/// finished inline adds none. A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn async_completions() -> usize {
    COMPLETIONS.load(Ordering::SeqCst)
}

/// The object's callback: finishes the operation and wakes its future, a
/// task of `class` in place (`crate::callback::inplace`), then counts it done.
fn on_completion(c: &IoCompletion, shared: &EngineShared, class: Option<inplace::Class>) {
    #[cfg(any(test, feature = "test-hooks"))]
    COMPLETIONS.fetch_add(1, Ordering::SeqCst);
    let _armed = inplace::arm(class);
    if let Some((block, complete)) = c.claim_completing() {
        // SAFETY: claimed here, from the completion being delivered; every
        // block with a `complete` is an engine's, built by `Engine::start`
        // with its own kind's function.
        unsafe { complete(block, c.result(), &shared.kept) };
        shared.done_one(class.is_some());
    }
}

/// Set in [`EngineShared::state`] once the owner has dropped the engine
/// with operations in flight.
const ORPHANED: usize = 1 << (usize::BITS - 1);

/// What an engine's callback shares with the engine.
#[derive(Debug)]
struct EngineShared {
    /// The operations in flight, counted from before one is issued until
    /// its completion has published the output, woken its future and
    /// dropped what the future left (user code, all of it), or until it
    /// finished synchronously; and [`ORPHANED`].
    state: AtomicUsize,
    /// An orphaned engine, for the completion that ends its last operation.
    orphan: Mutex<Option<Engine>>,
    /// Blocks of finished operations, for the next ones.
    kept: BlockCache,
}

impl EngineShared {
    fn in_flight(&self) -> usize {
        self.state.load(Ordering::SeqCst) & !ORPHANED
    }

    /// One operation fewer in flight; the last one of an orphaned engine
    /// drops it. From a callback that may take part in in-place polling
    /// (`inplace`: its object has a class), once that callback is done
    /// with the object, on this thread: disassociated from the callback,
    /// the drain waits only for the object's other callbacks, so no
    /// teardown is handed to another thread. Otherwise here, which hands
    /// the close off (`crate::callback::reentry`): an object in a cleanup group, or
    /// whose environment keeps a library loaded (which the pool may hold
    /// only while the callback counts), never takes part.
    fn done_one(&self, in_place: bool) {
        if self.state.fetch_sub(1, Ordering::SeqCst) == ORPHANED | 1 {
            let orphan = self.orphan.lock().unwrap_or_else(PoisonError::into_inner).take();
            match orphan {
                Some(engine) if in_place => inplace::drop_when_left(engine),
                orphan => drop(orphan),
            }
        }
    }

    /// Hands `engine` (whose shared state `self` is) to its last completion;
    /// gives it back if none is to come.
    fn orphan(&self, engine: Engine) -> Option<Engine> {
        *self.orphan.lock().unwrap_or_else(PoisonError::into_inner) = Some(engine);
        if self.state.fetch_or(ORPHANED, Ordering::SeqCst) & !ORPHANED != 0 {
            return None; // the last completion takes it
        }
        self.orphan.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// An I/O object driven by futures, and its count of operations whose
/// output has not reached their future yet.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) io: Io,
    shared: Arc<EngineShared>,
}

impl Engine {
    /// Binds `handle` to the pool (of `env`, or the default one).
    pub(crate) fn bind(handle: super::iocore::BoundHandle, env: Option<&CallbackEnviron>) -> io::Result<Self> {
        // The sites an orphaned engine is dropped from (`done_one`).
        inplace::ensure();
        let shared = Arc::new(EngineShared {
            state: AtomicUsize::new(0),
            orphan: Mutex::new(None),
            kept: BlockCache::default(),
        });
        let counted = Arc::clone(&shared);
        let class = inplace::Class::of_completions(env);
        let callback = move |c: &IoCompletion| on_completion(c, &counted, class);
        let io = Io::bind(handle, callback, env)?;
        Ok(Self { io, shared })
    }
}

/// An [`Engine`] owned by a public async type, dropped without waiting for
/// a completion: a dropped future's cancelled completion, or a forgotten
/// future's operation, may still be in flight, and waiting for it could
/// wait for the dropping thread itself (an executor's, or the only one of a
/// busy pool), or for the callback the drop runs in (see [Teardown without
/// waiting](self#teardown-without-waiting)).
#[derive(Debug)]
pub(crate) struct Unblocking(ManuallyDrop<Engine>);

impl Unblocking {
    pub(crate) fn new(engine: Engine) -> Self {
        Self(ManuallyDrop::new(engine))
    }

    /// An engine for `socket`, bound to the pool (of `env`, or the default one).
    pub(crate) fn bind_socket(
        socket: std::os::windows::io::OwnedSocket,
        env: Option<&CallbackEnviron>,
    ) -> io::Result<Self> {
        Engine::bind(super::iocore::BoundHandle::Socket(socket), env).map(Self::new)
    }

    /// The socket, with the object run down, closed and no longer
    /// associated with the pool's port; or, where the association cannot be
    /// ended, `self` (run down, still usable) and the error.
    pub(crate) fn into_socket(self) -> Result<std::os::windows::io::OwnedSocket, (Self, io::Error)> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: taken once; `this` is never dropped.
        let Engine { io, shared } = unsafe { ManuallyDrop::take(&mut this.0) };
        match io.into_bound() {
            Ok(h) => Ok(h.into_socket().expect("a socket's engine is bound to a socket")),
            Err((io, e)) => Err((Self::new(Engine { io, shared }), e)),
        }
    }
}

impl core::ops::Deref for Unblocking {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.0
    }
}

impl Drop for Unblocking {
    /// Drops the engine here if nothing is in flight; otherwise cancels what
    /// is and orphans it (see [Teardown without waiting](self#teardown-without-waiting)).
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and nothing uses `self.0` after it.
        let engine = unsafe { ManuallyDrop::take(&mut self.0) };
        if engine.shared.in_flight() == 0 {
            return drop(engine);
        }
        // A failure leaves the operations to complete by themselves; the
        // last one still drops the engine.
        let _ = engine.io.cancel_all();
        let shared = Arc::clone(&engine.shared);
        drop(shared.orphan(engine));
    }
}

/// An operation issued by [`Engine::start`] whose output has not been
/// taken: what its future keeps, without a borrow of the engine, so an
/// owner of the engine (a poll-based adapter) can keep it beside the engine.
/// Dropped without [`cancel`](Self::cancel) or its output taken
/// ([`poll_slot`](Self::poll_slot)), the operation runs to its completion,
/// which frees its state.
pub(crate) struct InFlight<O> {
    id: OperationId,
    /// In the operation's block, held by this future.
    shared: NonNull<Shared<O>>,
}

// SAFETY: it holds the block as an `Arc` would hold shared state: the
// output it takes is `Send`, and everything else it reaches is atomics and
// a waker slot. Every method that reaches the output takes `&mut self` or
// `self`, so a shared `InFlight` reaches nothing.
unsafe impl<O: Send> Send for InFlight<O> {}
// SAFETY: as above.
unsafe impl<O: Send> Sync for InFlight<O> {}

/// What [`Engine::start`] gives.
pub(crate) enum Started<O> {
    /// Finished synchronously (an inline completion or a synchronous error).
    Done(O),
    /// Its completion is to come.
    InFlight(InFlight<O>),
}

impl Engine {
    /// Issues `op`: its output at once if it finished synchronously. Its
    /// block is one the engine kept from an earlier operation of the same
    /// layout where there is one, so in steady state nothing is allocated.
    pub(crate) fn start<T: AsyncOp<Output = O>, O>(&self, op: T) -> Started<O> {
        let kept = &self.shared.kept;
        let layout = Operation::<Slot<T>>::LAYOUT;
        let memory = kept.memory(layout);
        let shared = Shared {
            holders: AtomicUsize::new(2),
            done: AtomicBool::new(false),
            waker: WakerSlot::new(),
            output: UnsafeCell::new(None),
            block: memory.cast(),
            layout,
        };
        // SAFETY: memory of the block's layout from the global allocator
        // (the cache's contract), owned and not used otherwise.
        let operation =
            unsafe { Operation::new_in(memory, Slot { shared, op: UnsafeCell::new(Some(op)) }, Some(complete::<T>)) };
        let block = operation.block;
        // Counted once prepared, before it is started: a `prepare` that
        // fails (or a buffer's `AsMut` that panics) leaves nothing counted.
        let counted = Uncount { state: &self.shared.state, armed: core::cell::Cell::new(false) };
        let prepare = |slot: &mut Slot<T>| {
            // One raw pointer to the operation, from which everything the
            // kernel is given derives; it stays where it is, in the block,
            // until the completion.
            let p: *mut T = slot.op.get_mut().as_mut().expect("an operation is issued once");
            // SAFETY: `p` is the live operation, owned by the issuing thread.
            unsafe { (*p).prepare() }?;
            self.shared.state.fetch_add(1, Ordering::SeqCst);
            counted.armed.set(true);
            Ok(NonNull::new(p).expect("a reference is never null"))
        };
        // SAFETY: `p` points to the prepared operation in the block being
        // issued; `AsyncOp::issue`'s contract is `submit_op`'s.
        let issue = |h: HANDLE, ov: *mut OVERLAPPED, p: NonNull<T>| unsafe { T::issue(p.as_ptr(), h, ov) };
        // SAFETY: as above.
        let submitted = unsafe { self.io.core.submit_op(operation, prepare, issue) };
        let (op, result) = match submitted {
            Ok(Submitted::Queued(id)) => {
                counted.armed.set(false); // the completion counts it done
                // SAFETY: the block stays live while this future holds it
                // (one of its two holders); a raw projection, no reference.
                let shared = unsafe { NonNull::new_unchecked(&raw mut (*block.as_ptr()).payload.shared) };
                return Started::InFlight(InFlight { id, shared });
            }
            Ok(Submitted::Completed(op, bytes)) => (op, Ok(bytes)),
            Err(e) => {
                let (error, op) = e.into_parts();
                (op, Err(error))
            }
        };
        drop(counted);
        // Never queued: the block is the issuing thread's alone.
        let block = op.into_raw();
        // SAFETY: owned.
        let op = unsafe { take_op(block.as_ptr()) };
        // SAFETY: owned; what is left of the payload (the shared part, whose
        // output was never written) drops once, then the block is retired.
        unsafe {
            core::ptr::drop_in_place(&raw mut (*block.as_ptr()).payload);
            super::operation::retire(block.cast(), layout, Some(kept));
        }
        Started::Done(op.finish(result))
    }
}

/// Takes an operation's count back unless it went in flight: when it
/// finished synchronously, and when `submit_op` unwinds (which happens only
/// before the operation is issued: a panic in the issuing call aborts). The
/// owner borrows the engine meanwhile, so it is not orphaned.
struct Uncount<'a> {
    state: &'a AtomicUsize,
    armed: core::cell::Cell<bool>,
}

impl Drop for Uncount<'_> {
    fn drop(&mut self) {
        if self.armed.get() {
            self.state.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl<O> InFlight<O> {
    /// Polls the operation in `slot` (which holds one): once its output is
    /// there, empties the slot and gives the block to `engine`, the one
    /// that started it, for its next operation.
    pub(crate) fn poll_slot(slot: &mut Option<Self>, engine: &Engine, cx: &mut Context<'_>) -> Poll<O> {
        let this = slot.as_mut().expect("an operation in flight is polled");
        // SAFETY: held by `this`, so live.
        let shared = unsafe { this.shared.as_ref() };
        // Done already (the poll its completion's wake caused): no waker to
        // register, since none is to come. Otherwise register, then check
        // again (see `crate::callback::waker_slot`).
        if !shared.done.load(Ordering::Acquire) {
            shared.waker.register(cx.waker());
            if !shared.done.load(Ordering::Acquire) {
                return Poll::Pending;
            }
        }
        // SAFETY: `done` (Acquire) orders the completion's write before this
        // read, and it writes nothing of `output` after; `&mut` makes this
        // the one taker on the future's side, and the completion's
        // `release` takes nothing while this future still holds the block.
        let output = unsafe { (*shared.output.get()).take() }.expect("an output is taken once");
        let this = ManuallyDrop::new(slot.take().expect("checked above"));
        // SAFETY: this future's hold, given up once (its drop does not
        // run); the operation finished (`done`).
        let left = unsafe { release(this.shared, Some(&engine.shared.kept)) };
        debug_assert!(left.is_none(), "the output was taken");
        Poll::Ready(output)
    }

    /// Cancels the operation (`CancelIoEx`) without waiting, unless it has
    /// completed; the completion frees its state. `engine` is the one that
    /// started it (another's refuses the id).
    pub(crate) fn cancel(self, engine: &Engine) {
        let this = ManuallyDrop::new(self);
        // SAFETY: held by `this`, so live.
        let shared = unsafe { this.shared.as_ref() };
        if shared.done.load(Ordering::Acquire) {
            // Completed: the output drops here, or in the completion if it
            // has not let go of the block yet.
            // SAFETY: this future's hold, given up once; the operation finished.
            drop(unsafe { release(this.shared, Some(&engine.shared.kept)) });
            return;
        }
        shared.waker.clear();
        let id = this.id;
        // Given up before the cancel so that the completion, whenever it
        // comes, is the last holder and drops the buffer in its callback
        // rather than in this drop; if it came meanwhile, the output drops
        // here.
        // SAFETY: this future's hold, given up once; if it is the last, the
        // completion has taken the operation.
        drop(unsafe { release(this.shared, Some(&engine.shared.kept)) });
        // The completion still comes (normally ERROR_OPERATION_ABORTED)
        // and frees the state. An error means it is already on its way.
        let _ = engine.io.cancel(id);
    }
}

impl<O> Drop for InFlight<O> {
    /// Lets the operation run to its completion, which frees its state; an
    /// output already there drops here (no engine to keep the block).
    fn drop(&mut self) {
        // SAFETY: held by `self`, so live.
        unsafe { self.shared.as_ref() }.waker.clear();
        // SAFETY: this future's hold, given up once; if it is the last, the
        // completion has taken the operation.
        drop(unsafe { release(self.shared, None) });
    }
}

/// The future of one operation of kind `T` on `engine`: issued at the first
/// poll; dropped after that, it cancels the operation (`CancelIoEx`) without
/// waiting, and the completion frees the operation's state.
///
/// `O` is `T::Output`, named as a parameter of its own: a field of a
/// projected type would make the future's `Send` depend on `T`'s impl for
/// every lifetime, which a buffer such as `&'static [u8]` fails inside an
/// async block.
pub(crate) struct OpFuture<'a, T, O = <T as AsyncOp>::Output> {
    engine: &'a Engine,
    /// The operation until it is issued.
    op: Option<T>,
    /// The issued operation until its output is taken.
    issued: Option<InFlight<O>>,
}

impl<'a, T: AsyncOp<Output = O>, O> OpFuture<'a, T, O> {
    pub(crate) fn new(engine: &'a Engine, op: T) -> Self {
        Self { engine, op: Some(op), issued: None }
    }
}

impl<T: AsyncOp<Output = O>, O> Future for OpFuture<'_, T, O> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let this = self.get_mut();
        crate::task::budget::guard(cx, |cx| this.poll_op(cx))
    }
}

impl<T: AsyncOp<Output = O>, O> OpFuture<'_, T, O> {
    fn poll_op(&mut self, cx: &mut Context<'_>) -> Poll<O> {
        let this = self;
        if let Some(op) = this.op.take() {
            match this.engine.start(op) {
                Started::Done(output) => return Poll::Ready(output),
                Started::InFlight(f) => this.issued = Some(f),
            }
        }
        if this.issued.is_none() {
            panic!("an I/O future polled after completion");
        }
        InFlight::poll_slot(&mut this.issued, this.engine, cx)
    }
}

// The operation is never pinned: it moves into its block at the first poll.
impl<T, O> OpFuture<'_, T, O> {
    /// The operation, until it is issued.
    pub(crate) fn op(&self) -> Option<&T> {
        self.op.as_ref()
    }

    /// The issued operation's id, until its output is taken.
    pub(crate) fn id(&self) -> Option<OperationId> {
        self.issued.as_ref().map(|f| f.id)
    }
}

impl<T, O> Unpin for OpFuture<'_, T, O> {}

impl<T, O> Drop for OpFuture<'_, T, O> {
    fn drop(&mut self) {
        if let Some(issued) = self.issued.take() {
            issued.cancel(self.engine);
        }
    }
}
