//! The block every task starts with, and the handle that joins it.
//!
//! A closure task and an async task are both one reference-counted block
//! whose start is a [`Header`] followed by the result slot ([`Prefix`]), so
//! one [`JoinHandle`] type joins either: blocking ([`JoinHandle::join`]) or
//! by `.await`. The header's `state` is the join protocol (`QUEUED`,
//! `RUNNING`, `RUNNING_WAITED`, `DONE`, `TAKEN`); [`finish`] is the one
//! place a task is marked done and its joiners (a blocked thread, an
//! awaiting task) are woken.

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use core::task::{Context, Poll};
use std::cell::UnsafeCell;
use std::thread;

use windows_sys::Win32::System::Threading::{
    CallbackMayRunLong, INFINITE, PTP_CALLBACK_INSTANCE, WaitOnAddress, WakeByAddressAll,
};

use crate::callback::local::{self, Mark};
use crate::callback::reentry;
use crate::callback::spans::Captured;
use crate::callback::waker_slot::WakerSlot;
use crate::placement::Placement;
use crate::pool::PoolRef;

/// Not started: the pool callback or a waiter may claim it.
pub(super) const QUEUED: u32 = 0;
/// Claimed and running; nobody waits. An async task starts here: it is
/// never claimed by a waiter.
pub(super) const RUNNING: u32 = 1;
/// Claimed and running; a thread waits (`WaitOnAddress`) for `DONE`.
pub(super) const RUNNING_WAITED: u32 = 2;
/// The result is stored.
pub(super) const DONE: u32 = 3;
/// The result was taken, by a join or by the scope's clean-up: whoever
/// moves `DONE -> TAKEN` owns the result slot.
pub(super) const TAKEN: u32 = 4;

/// Moves `DONE -> TAKEN`; true for the one caller that may take the result.
fn take_claim(h: &Header) -> bool {
    h.state.compare_exchange(DONE, TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// What code that does not know the task's type calls.
pub(super) struct VTable {
    /// Runs a claimed closure task: closure, result, `DONE`. Never called
    /// for an async task, which is never `QUEUED`.
    pub(super) run: unsafe fn(NonNull<Header>),
    /// Drops a result nobody took; returns whether it was a panic.
    pub(super) discard: unsafe fn(NonNull<Header>) -> bool,
    /// Releases one reference.
    pub(super) release: unsafe fn(NonNull<Header>),
}

/// The type-independent start of every task.
#[repr(C)]
pub(super) struct Header {
    /// First: `placement::enter` reads it through the bare context pointer.
    pub(super) placement: Placement,
    pub(super) state: AtomicU32,
    /// The next task on its scope's list.
    pub(super) next: AtomicPtr<Header>,
    /// 1 while its scoped join handle lives (the scope's clean-up drops
    /// such a task's result last; see `Scope::discard_all`).
    pub(super) handle_alive: AtomicU32,
    /// The task awaiting this one through its `JoinHandle`.
    pub(super) joiner: WakerSlot,
    pub(super) vtable: &'static VTable,
    /// The span current at the spawn: the parent of the task's callback
    /// spans (feature `tracing`; zero-sized without it).
    pub(super) parent: Captured,
}

impl Header {
    /// A header made on the spawning thread, which captures the current span.
    pub(super) fn new(placement: Placement, state: u32, vtable: &'static VTable) -> Self {
        Self {
            placement,
            state: AtomicU32::new(state),
            next: AtomicPtr::new(core::ptr::null_mut()),
            handle_alive: AtomicU32::new(1),
            joiner: WakerSlot::new(),
            vtable,
            parent: Captured::current(),
        }
    }
}

/// The start of every task block that does not depend on its closure or
/// future type (`repr(C)`: a prefix of the same fields has the same offsets).
#[repr(C)]
pub(super) struct Prefix<T> {
    pub(super) header: Header,
    /// Written once by the runner before `DONE`; read after `DONE`.
    pub(super) result: UnsafeCell<Option<thread::Result<T>>>,
}

/// Stores the result of a task the caller runs and marks it done, waking a
/// blocked joiner and an awaiting one.
///
/// # Safety
/// The caller is the task's only runner, holds a reference to it for the
/// call, and has not finished it before.
pub(super) unsafe fn finish<T>(prefix: &Prefix<T>, r: thread::Result<T>) {
    // SAFETY: only the runner writes `result`, and nothing reads it before `DONE`.
    unsafe { *prefix.result.get() = Some(r) };
    let header = &prefix.header;
    if header.state.swap(DONE, Ordering::AcqRel) == RUNNING_WAITED {
        // SAFETY: the address is the state word, valid while the caller
        // holds its reference.
        unsafe { WakeByAddressAll(core::ptr::from_ref(&header.state).cast()) };
    }
    header.joiner.wake();
}

/// Drops the result if nobody has taken it; returns whether it was a panic.
///
/// # Safety
/// `h` is a live task with result type `T` that has finished (`DONE` or `TAKEN`).
pub(super) unsafe fn discard<T>(h: NonNull<Header>) -> bool {
    // SAFETY: guaranteed by the caller; `Prefix<T>` is the task's start.
    let prefix = unsafe { h.cast::<Prefix<T>>().as_ref() };
    if !take_claim(&prefix.header) {
        // Joined already (possibly by a handle kept in another result).
        return false;
    }
    // SAFETY: `take_claim` made this thread the slot's only user; the
    // runner's write was published by `DONE` (read with Acquire).
    let r = unsafe { (*prefix.result.get()).take() };
    let panicked = matches!(r, Some(Err(_)));
    // A result or payload that panics on drop would unwind out of the scope
    // before it had finished; std aborts there too.
    crate::callback::unwind::or_abort("dropping a task's result", move || drop(r));
    panicked
}

/// Claims `h` for this thread.
pub(super) fn claim(h: &Header) -> bool {
    h.state.compare_exchange(QUEUED, RUNNING, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// Runs `h` here if no thread has started it, else waits until it is done.
///
/// # Safety
/// `h` is a live task the caller holds a reference to.
pub(super) unsafe fn help_or_wait(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    let header = unsafe { h.as_ref() };
    // About to run `h` or wait for it, either of which may take long: a task
    // this callback parked would wait for it.
    crate::callback::inplace::flush();
    if claim(header) {
        // SAFETY: claimed just now; the caller's reference keeps it alive.
        unsafe { (header.vtable.run)(h) };
        return;
    }
    let state = &header.state;
    loop {
        match state.load(Ordering::Acquire) {
            DONE | TAKEN => return,
            RUNNING
                if state.compare_exchange(RUNNING, RUNNING_WAITED, Ordering::Acquire, Ordering::Acquire).is_err() =>
            {
                continue;
            }
            _ => {}
        }
        let expect = RUNNING_WAITED;
        // SAFETY: both addresses are valid 4-byte words for the call; a
        // spurious or early return is handled by the loop.
        unsafe { WaitOnAddress(core::ptr::from_ref(state).cast(), core::ptr::from_ref(&expect).cast(), 4, INFINITE) };
    }
}

/// Takes the result of a finished task.
///
/// # Panics
/// If the result is gone: a scoped task's result that the scope's clean-up
/// dropped first, which only a handle kept inside another task's result
/// and joined from its `Drop` can observe.
///
/// # Safety
/// `h` is a live task with result type `T` that has finished (`DONE` or `TAKEN`).
pub(super) unsafe fn take<T>(h: NonNull<Header>) -> thread::Result<T> {
    // SAFETY: guaranteed by the caller; `Prefix<T>` is the task's start.
    let prefix = unsafe { h.cast::<Prefix<T>>().as_ref() };
    assert!(
        take_claim(&prefix.header),
        "windows-threadpool: this scoped task's result was already dropped by its scope"
    );
    // SAFETY: `take_claim` made this thread the slot's only user; the
    // runner's write was published by `DONE` (read with Acquire).
    unsafe { (*prefix.result.get()).take() }.unwrap_or_else(|| unreachable!("a result is stored before DONE"))
}

/// Drops a task's reference to its private pool. The last reference is
/// closed from the default pool (`reentry::hand_off`): a task is freed on
/// whatever thread drops its last reference, which may be one of the pool's
/// own callbacks, and a pool is not closed from one of its callbacks.
pub(super) fn release_pool(pool: PoolRef) {
    if let Some(pool) = pool
        && let Some(last) = std::sync::Arc::into_inner(pool)
    {
        // Decided by one atomic step, so exactly one holder gets here.
        reentry::hand_off(move || drop(last));
    }
}

/// Marks this thread as running a task callback with `instance` until dropped.
pub(super) struct InstanceMark {
    /// `None` on a thread that is exiting: `may_run_long` answers `None` there.
    _mark: Option<Mark<PTP_CALLBACK_INSTANCE>>,
}

impl InstanceMark {
    pub(super) fn enter(instance: PTP_CALLBACK_INSTANCE) -> Self {
        Self { _mark: Mark::set(|l| &l.task_instance, instance) }
    }
}

/// Tells the pool that the task running on this thread may run long
/// (`CallbackMayRunLong`), so it should not count on this thread for other
/// callbacks; returns whether another thread is available for them (`false`
/// when the pool is at its thread maximum with every thread busy).
///
/// `None` outside a task's pool callback: on a thread that is not running a
/// task, or in a task a waiting thread runs itself (see the
/// [module docs](super#long-blocking-tasks)).
pub fn may_run_long() -> Option<bool> {
    // The caller is about to block: run a task its callback parked elsewhere.
    crate::callback::inplace::flush();
    let instance = local::with(|here| here.map_or(0, |l| l.task_instance.get()));
    if instance == 0 {
        return None;
    }
    // SAFETY: a nonzero value is the instance of the callback running this
    // task on this thread (its own work callback, or the I/O, timer or wait
    // callback that polls it in place, disassociated but still running; set
    // by the trampoline, reset before it returns).
    Some(unsafe { CallbackMayRunLong(instance) } != 0)
}

/// An owned permission to join a task, made by [`spawn`](super::spawn) or
/// [`spawn_blocking`](super::spawn_blocking): [`join`](Self::join) blocks
/// for its result, `.await` waits for it without blocking. Dropping it
/// detaches the task, which still runs to completion.
///
/// Either way the result is the task's output, or the payload of its panic
/// (caught in the task, as `std::thread` does).
pub struct JoinHandle<T> {
    pub(super) task: NonNull<Header>,
    pub(super) _result: PhantomData<T>,
}

// SAFETY: the handle owns a reference to a task whose state is atomic; the
// only non-atomic access, taking the result, needs the handle by value or
// pinned-mutably, and moves a `T: Send` to the joining thread.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: through `&JoinHandle` only the atomic state is read.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

// The handle holds a pointer, never the task's future or result in place.
impl<T> Unpin for JoinHandle<T> {}

impl<T> core::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

impl<T> JoinHandle<T> {
    /// Blocks until the task has finished and returns its result, or the
    /// payload of its panic. A closure task no pool thread has started yet
    /// runs here, on the calling thread (see the [module docs](super#design-of-closure-tasks));
    /// an async task is only waited for. So joining an async task blocks the
    /// thread: from inside a task on a pool limited to one thread (or from
    /// the task's own poll) it waits forever, as a thread joining itself
    /// would. In async code, `.await` the handle instead.
    pub fn join(self) -> thread::Result<T> {
        // SAFETY: the handle holds a reference.
        unsafe { help_or_wait(self.task) };
        // SAFETY: `DONE` now; only this handle takes the result.
        unsafe { take::<T>(self.task) }
    }

    /// Whether the task has finished (returned or panicked).
    pub fn is_finished(&self) -> bool {
        // SAFETY: the handle holds a reference.
        unsafe { self.task.as_ref() }.state.load(Ordering::Acquire) >= DONE
    }
}

/// Resolves to the task's result, or the payload of its panic. Awaiting
/// never runs a closure task on the awaiting thread.
///
/// # Panics
/// If polled again after it returned `Ready`.
impl<T> Future for JoinHandle<T> {
    type Output = thread::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: the handle holds a reference.
        let header = unsafe { self.task.as_ref() };
        // Register, then check (see `crate::callback::waker_slot`).
        header.joiner.register(cx.waker());
        match header.state.load(Ordering::Acquire) {
            DONE => {
                header.joiner.clear();
                // SAFETY: `DONE`; only this handle takes the result.
                Poll::Ready(unsafe { take::<T>(self.task) })
            }
            TAKEN => panic!("windows-threadpool: JoinHandle polled after it completed"),
            _ => Poll::Pending,
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // The waker a poll registered belongs to whoever awaited the handle;
        // with the handle gone nobody awaits, so it must not stay in the
        // task (keeping the awaiting task alive, and waking it, until this
        // task ends, which may be never). Dropped after the release: a
        // waker's drop may run arbitrary code, even panic.
        // SAFETY: the handle holds a reference.
        let waker = unsafe { self.task.as_ref() }.joiner.take();
        // SAFETY: the handle's own reference, given up once.
        unsafe { (self.task.as_ref().vtable.release)(self.task) };
        drop(waker);
    }
}
