//! The engine under every async I/O type ([`AsyncIo`](super::AsyncIo), the
//! sockets of [`crate::net`]): one [`Io`] whose one callback completes
//! futures, and the future that issues one operation at its first poll.
//!
//! An operation kind is an [`AsyncOp`]: what it issues and what its result
//! becomes. Its state (the buffer, an address, an accepted socket) lives in
//! one box inside the operation's block, beside an `Arc` of what the
//! completion and the future share, so the object's callback takes every
//! kind's payload as one type, `Erased`, and finishes it through a trait
//! object: three allocations per operation (the block, the box, the `Arc`).
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

use core::any::Any;
use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::{Context, Poll};
use std::io;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, PoisonError};

use windows_sys::Win32::Foundation::HANDLE;
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::iocore::Submitted;
use super::op::{AsyncOp, Issued};
use super::{Io, IoCompletion, Operation, OperationId};
use crate::callback::inplace;
use crate::callback::waker_slot::WakerSlot;
use crate::callback_env::CallbackEnviron;

/// What an operation's completion and its future share.
struct OpShared<T> {
    /// The output, published once.
    done: Mutex<Option<T>>,
    waker: WakerSlot,
}

impl<T> OpShared<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<T>> {
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An issued operation: its state and where its output goes.
struct Pending<T: AsyncOp> {
    op: T,
    shared: Arc<OpShared<T::Output>>,
}

/// The kind-erased view the object's one callback has of an operation.
trait ErasedOp: Send {
    fn prepare(&mut self) -> io::Result<()>;
    /// Finishes the operation with its completion's result, publishes the
    /// output and wakes its future.
    fn complete(self: Box<Self>, result: io::Result<usize>);
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: AsyncOp> ErasedOp for Pending<T> {
    fn prepare(&mut self) -> io::Result<()> {
        self.op.prepare()
    }
    fn complete(self: Box<Self>, result: io::Result<usize>) {
        let Pending { op, shared } = *self;
        let output = op.finish(result);
        *shared.lock() = Some(output);
        shared.waker.wake();
        // If the future is gone, the last `Arc` (and the output, buffer and
        // all) drops here, after the kernel is done with it: user code, in
        // a pool callback.
        crate::callback::unwind::or_abort("dropping an I/O future's buffer", move || drop(shared));
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Issues the `Pending<T>` at `p` ([`AsyncOp::issue`] through a plain
/// function pointer: a raw-pointer receiver cannot be called on a trait
/// object).
///
/// # Safety
/// As [`AsyncOp::issue`], with `p` pointing to a `Pending<T>`.
unsafe fn issue_pending<T: AsyncOp>(p: *mut (), handle: HANDLE, ov: *mut OVERLAPPED) -> io::Result<Issued> {
    // SAFETY: a raw projection of the caller's pointer; the contract is forwarded.
    unsafe { T::issue(&raw mut (*p.cast::<Pending<T>>()).op, handle, ov) }
}

type IssueFn = unsafe fn(*mut (), HANDLE, *mut OVERLAPPED) -> io::Result<Issued>;

/// The payload type of every operation of an engine's object: the boxed
/// operation and how to issue it.
struct Erased {
    op: Box<dyn ErasedOp>,
    issue: IssueFn,
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
    if let Some(op) = c.claim::<Erased>() {
        op.into_payload().op.complete(c.result());
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
        let shared = Arc::new(EngineShared { state: AtomicUsize::new(0), orphan: Mutex::new(None) });
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
/// Dropped without [`cancel`](Self::cancel), the operation runs to its
/// completion, which frees its state.
pub(crate) struct InFlight<O> {
    id: OperationId,
    shared: Arc<OpShared<O>>,
}

/// What [`Engine::start`] gives.
pub(crate) enum Started<O> {
    /// Finished synchronously (an inline completion or a synchronous error).
    Done(O),
    /// Its completion is to come.
    InFlight(InFlight<O>),
}

impl Engine {
    /// Issues `op`: its output at once if it finished synchronously.
    pub(crate) fn start<T: AsyncOp<Output = O>, O>(&self, op: T) -> Started<O> {
        let shared = Arc::new(OpShared { done: Mutex::new(None), waker: WakerSlot::new() });
        let pending: Box<dyn ErasedOp> = Box::new(Pending { op, shared: Arc::clone(&shared) });
        // Counted once prepared, before it is started: a `prepare` that
        // fails (or a buffer's `AsMut` that panics) leaves nothing counted.
        let counted = Uncount { state: &self.shared.state, armed: core::cell::Cell::new(false) };
        let prepare = |e: &mut Erased| {
            // One raw pointer to the boxed state, from which everything the
            // kernel is given derives; the box stays where it is, inside the
            // block, until the completion.
            let p: *mut dyn ErasedOp = &raw mut *e.op;
            // SAFETY: `p` is the live, uniquely owned box contents.
            unsafe { (*p).prepare() }?;
            self.shared.state.fetch_add(1, Ordering::SeqCst);
            counted.armed.set(true);
            Ok((NonNull::new(p.cast::<()>()).expect("a box is never null"), e.issue))
        };
        // SAFETY: `p` points to the prepared `Pending` in the block being
        // issued, and `f` is its own kind's issue.
        let issue = |h: HANDLE, ov: *mut OVERLAPPED, (p, f): (NonNull<()>, IssueFn)| unsafe { f(p.as_ptr(), h, ov) };
        let payload = Erased { op: pending, issue: issue_pending::<T> };
        // SAFETY: `issue_pending` meets `submit_op`'s contract (`AsyncOp::issue`'s).
        let submitted = unsafe { self.io.core.submit_op(Operation::new(payload), prepare, issue) };
        let (op, result) = match submitted {
            Ok(Submitted::Queued(id)) => {
                counted.armed.set(false); // the completion counts it done
                return Started::InFlight(InFlight { id, shared });
            }
            Ok(Submitted::Completed(op, bytes)) => (op, Ok(bytes)),
            Err(e) => {
                let (error, op) = e.into_parts();
                (op, Err(error))
            }
        };
        drop(counted);
        let pending = op.into_payload().op.into_any().downcast::<Pending<T>>();
        let pending = pending.unwrap_or_else(|_| unreachable!("an engine's payload is the future's own kind"));
        Started::Done(pending.op.finish(result))
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
    /// The output once it has arrived; the caller drops `self` then.
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<O> {
        // Register, then check (see `crate::callback::waker_slot`).
        self.shared.waker.register(cx.waker());
        match self.shared.lock().take() {
            Some(output) => Poll::Ready(output),
            None => Poll::Pending,
        }
    }

    /// Cancels the operation (`CancelIoEx`) without waiting, unless it has
    /// completed; the completion frees its state. `engine` is the one that
    /// started it (another's refuses the id).
    pub(crate) fn cancel(self, engine: &Engine) {
        if self.shared.lock().is_some() {
            return; // completed: the output drops with `shared`
        }
        self.shared.waker.clear();
        let id = self.id;
        // Released before the cancel so that the completion, whenever it
        // comes, holds the last reference and drops the buffer in its
        // callback rather than in this drop.
        drop(self.shared);
        // The completion still comes (normally ERROR_OPERATION_ABORTED)
        // and frees the state. An error means it is already on its way.
        let _ = engine.io.cancel(id);
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
        let Some(issued) = &this.issued else {
            panic!("an I/O future polled after completion");
        };
        let output = core::task::ready!(issued.poll(cx));
        this.issued = None;
        Poll::Ready(output)
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
