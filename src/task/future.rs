//! Async tasks: [`spawn`] polls a future on pool threads.
//!
//! A task is one reference-counted block: the shared [`Header`] and result
//! slot, a scheduling state, the pool work object (`TP_WORK`) that polls it,
//! and the future, pinned in place. A wake moves the state
//! `IDLE -> SCHEDULED` and submits the work object (`SubmitThreadpoolWork`):
//! one submission, nothing allocated; or, inside one of the crate's
//! callbacks of the task's class, parks the task there to be polled in
//! place, by the same code (see the module docs of `task`). A wake while the task is being polled
//! only records `NOTIFIED`, and the poll's end submits it again, so a task
//! is polled on one thread at a time and never misses a wake. The task's
//! wakers are references to the block (`RawWaker`), as are the submission
//! and the handle.
//!
//! When the future completes (or panics: the panic is caught and becomes the
//! result), the callback that polled it drops the future, closes the work
//! object (`CloseThreadpoolWork` from the object's own callback, or from
//! another callback polling the task in place, is allowed: nothing is queued
//! on it, since only `IDLE -> SCHEDULED` submits) and wakes the joiner.
//! A task whose future never completes and whose wakers are all gone is
//! freed with its last reference: the future is dropped and the work object
//! closed there (no callback can be queued, since each holds a reference).

use core::ffi::c_void;
use core::future::Future;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicIsize, AtomicU32, Ordering};
use core::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::cell::UnsafeCell;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::callback::unwind::or_abort;
use std::sync::Arc;

use windows_sys::Win32::System::Threading::{
    CloseThreadpoolWork, CreateThreadpoolWork, PTP_CALLBACK_INSTANCE, PTP_WORK, SubmitThreadpoolWork,
};

use super::blocking::without_cleanup_group;
use super::header::{Header, InstanceMark, JoinHandle, Prefix, RUNNING, VTable, discard, finish, release_pool};
use crate::callback::inplace::{self, Class, Parked};
use crate::callback::spans::{self, Kind};
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::placement;
use crate::pool::PoolRef;

/// Not scheduled and not being polled: a wake submits it.
const IDLE: u32 = 0;
/// Submitted; the callback will poll it.
const SCHEDULED: u32 = 1;
/// Being polled.
const POLLING: u32 = 2;
/// Being polled, and woken since the poll began: polled again after it.
const NOTIFIED: u32 = 3;
/// The future has completed; wakes do nothing.
const COMPLETE: u32 = 4;

#[repr(C)]
struct AsyncTask<F: Future> {
    /// First (`repr(C)`): the header and result slot every task starts with.
    prefix: Prefix<F::Output>,
    sched: AtomicU32,
    /// The work object that polls the task; 0 once closed.
    work: AtomicIsize,
    /// Keeps a private pool open while the task lives.
    pool: PoolRef,
    /// Where its work callback runs, for in-place polls (`crate::callback::inplace`).
    class: Option<Class>,
    /// Polled only by the callback that moved `SCHEDULED -> POLLING`;
    /// never moved (the block is never moved while it lives).
    future: UnsafeCell<Option<F>>,
}

impl<F: Future + Send + 'static> AsyncTask<F>
where
    F::Output: Send + 'static,
{
    const VTABLE: VTable = VTable { run: never_claimed, discard: discard::<F::Output>, release: release::<F> };
    const WAKER: RawWakerVTable =
        RawWakerVTable::new(waker_clone::<F>, waker_wake::<F>, waker_wake_by_ref::<F>, waker_drop::<F>);

    /// Submits the task if it is idle, or notes the wake if it is being polled.
    ///
    /// # Safety
    /// `this` is a live `AsyncTask<F>` the caller holds a reference to for
    /// the call.
    unsafe fn schedule(this: *const Self) {
        // SAFETY: guaranteed by the caller.
        let task = unsafe { &*this };
        let mut s = task.sched.load(Ordering::Relaxed);
        loop {
            // Every path is a read-modify-write, so the poll that follows
            // (its own `swap`) sees whatever the waker published before.
            let next = match s {
                IDLE => SCHEDULED,
                POLLING => NOTIFIED,
                _ => s,
            };
            match task.sched.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if s == IDLE {
            #[cfg(any(test, feature = "test-hooks"))]
            IDLE_WAKES.fetch_add(1, Ordering::SeqCst);
            // The submission's reference, given up by the callback (or by
            // the in-place poll).
            // SAFETY: the caller's reference keeps the count above zero.
            unsafe { Arc::increment_strong_count(this) };
            let parked = Parked { task: this.cast(), poll: poll_in_place::<F>, submit: submit::<F> };
            if inplace::park(task.class, parked) {
                return;
            }
            // SAFETY: the reference just taken, handed to the submission.
            unsafe { submit::<F>(this.cast()) };
        }
    }
}

/// Wakes that found their task idle (and so parked or submitted it).
#[cfg(any(test, feature = "test-hooks"))]
static IDLE_WAKES: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many wakes of async tasks found the task idle, so parked it for an
/// in-place poll or submitted it; a wake that finds its task being polled
/// only marks it. A test hook, not API: a test compares it with
/// [`inplace_polls`](crate::callback::inplace::inplace_polls).
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn idle_wakes() -> usize {
    IDLE_WAKES.load(Ordering::SeqCst)
}

/// Submits the task's work object, handing it the caller's reference.
///
/// # Safety
/// `p` is an `AsyncTask<F>` that was just moved `IDLE -> SCHEDULED`, and the
/// caller owns a reference to it for the submission.
unsafe fn submit<F: Future>(p: *const ()) {
    // SAFETY: the caller's reference keeps it alive.
    let task = unsafe { &*p.cast::<AsyncTask<F>>() };
    // SAFETY: the work object is open until the task completes (`COMPLETE`
    // is never left, and `IDLE` never follows it).
    unsafe { SubmitThreadpoolWork(task.work.load(Ordering::Relaxed)) };
}

/// Polls a task parked in an in-place site, on the callback that parked it.
///
/// # Safety
/// As [`submit`]; the reference is given up by the poll.
unsafe fn poll_in_place<F: Future + Send + 'static>(p: *const (), instance: PTP_CALLBACK_INSTANCE)
where
    F::Output: Send + 'static,
{
    // SAFETY: guaranteed by the caller.
    unsafe { poll_once::<F>(instance, p.cast()) };
}

impl<F: Future> Drop for AsyncTask<F> {
    fn drop(&mut self) {
        let work = *self.work.get_mut();
        if work != 0 {
            // SAFETY: open (only the completing callback closes it, and sets
            // 0), and closed once: this is the last reference. No callback is
            // queued, since each submission holds a reference; the callback
            // that gave up its reference after a `Pending` poll may still be
            // returning (this may even run inside it), which is allowed: the
            // object is then freed once that callback returns.
            unsafe { CloseThreadpoolWork(work) };
        }
        release_pool(self.pool.take());
    }
}

/// # Safety
/// Never called: an async task is never `QUEUED`, so never claimed.
unsafe fn never_claimed(_: NonNull<Header>) {
    unreachable!("an async task is never claimed by a waiter")
}

/// # Safety
/// `h` came from `Arc::<AsyncTask<F>>::into_raw`, and the caller gives up
/// that reference.
unsafe fn release<F: Future>(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Arc::from_raw(h.cast::<AsyncTask<F>>().as_ptr()) });
}

/// # Safety (all four waker functions)
/// `p` is an `AsyncTask<F>` the waker holds a reference to.
unsafe fn waker_clone<F: Future + Send + 'static>(p: *const ()) -> RawWaker
where
    F::Output: Send + 'static,
{
    // SAFETY: the waker's reference keeps the count above zero.
    unsafe { Arc::increment_strong_count(p.cast::<AsyncTask<F>>()) };
    RawWaker::new(p, &AsyncTask::<F>::WAKER)
}

unsafe fn waker_wake<F: Future + Send + 'static>(p: *const ())
where
    F::Output: Send + 'static,
{
    // SAFETY: the waker holds a reference until the drop below.
    unsafe { AsyncTask::<F>::schedule(p.cast()) };
    // SAFETY: the waker's own reference, given up by `wake`.
    unsafe { waker_drop::<F>(p) };
}

unsafe fn waker_wake_by_ref<F: Future + Send + 'static>(p: *const ())
where
    F::Output: Send + 'static,
{
    // SAFETY: the waker holds a reference.
    unsafe { AsyncTask::<F>::schedule(p.cast()) };
}

unsafe fn waker_drop<F: Future + Send + 'static>(p: *const ())
where
    F::Output: Send + 'static,
{
    // The last reference drops an unfinished future, whose `Drop` may panic
    // on whatever thread drops the waker; that unwinds there, as dropping
    // the future itself would.
    // SAFETY: the waker's own reference, given up once.
    unsafe { Arc::decrement_strong_count(p.cast::<AsyncTask<F>>()) };
}

/// The work callback: polls the task once, then, in place, a task of its
/// class that the poll woke (`crate::callback::inplace`).
unsafe extern "system" fn poll_task<F: Future + Send + 'static>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
    _work: PTP_WORK,
) where
    F::Output: Send + 'static,
{
    let p = context.cast_const().cast::<AsyncTask<F>>();
    // First, so it is left last, when nothing of this task is touched any
    // more. Never disassociated: nothing drains a task's work object.
    let site = inplace::Site::new(instance, false);
    let _inplace = site.enter();
    // SAFETY: the submission's reference keeps the task alive until
    // `poll_once` gives it up.
    site.arm(unsafe { (*p).class });
    // SAFETY: as above.
    unsafe { poll_once::<F>(instance, p) };
}

/// Polls the task once: the work callback's code, also run by an in-place
/// poll.
///
/// # Safety
/// `p` is an `AsyncTask<F>` moved to `SCHEDULED`, and the caller gives up
/// the reference that scheduling took.
unsafe fn poll_once<F: Future + Send + 'static>(instance: PTP_CALLBACK_INSTANCE, p: *const AsyncTask<F>)
where
    F::Output: Send + 'static,
{
    let context = p.cast_mut().cast::<c_void>();
    // SAFETY: the submission's reference keeps the task alive until this
    // poll gives it up.
    let task = unsafe { &*p };
    // SAFETY: the context is a live `repr(C)` block whose first field starts
    // with `Header` (`repr(C)`), which starts with its `Placement`.
    let _placed = unsafe { placement::enter(context) };
    let _mark = InstanceMark::enter(instance);
    task.sched.swap(POLLING, Ordering::AcqRel);
    // A waker borrowed from the submission's reference: cloning it takes
    // one of its own.
    // SAFETY: the vtable's functions are those of `AsyncTask<F>`.
    let waker = ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(p.cast(), &AsyncTask::<F>::WAKER)) });
    let _budget = super::budget::Scope::enter(&waker);
    let header = &task.prefix.header;
    let polled = catch_unwind(AssertUnwindSafe(|| {
        // The span covers the poll, inside the unwind boundary: a subscriber
        // that panics completes the task with its panic, as a poll would.
        let _span = spans::enter(Kind::Task, p.addr(), || header.parent.clone(), None);
        // SAFETY: only the callback that moved the task to `POLLING` touches
        // the future, and the block never moves, so pinning it is sound.
        let fut = unsafe { (*task.future.get()).as_mut() }.expect("a task is polled only until it completes");
        // SAFETY: as above.
        unsafe { Pin::new_unchecked(fut) }.poll(&mut Context::from_waker(&waker))
    }));
    let result = match polled {
        Ok(Poll::Pending) => {
            if task.sched.compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                // SAFETY: this callback's reference, given up once; the task
                // is not touched after it.
                or_abort("dropping an unfinished task in a pool callback", || unsafe { release_ref(p) });
                return;
            }
            // Woken during the poll: submit again, handing this callback's
            // reference to the new submission.
            task.sched.swap(SCHEDULED, Ordering::AcqRel);
            // SAFETY: open until the task completes.
            unsafe { SubmitThreadpoolWork(task.work.load(Ordering::Relaxed)) };
            return;
        }
        Ok(Poll::Ready(v)) => Ok(v),
        Err(payload) => Err(payload),
    };
    // Dropped in place (assigning drops the old value where it is), never
    // moved out first: the pin guarantee holds until the drop, and a future
    // that registered its own address (an intrusive waiter) finds it there.
    // SAFETY: as for the poll; the future is not touched again.
    or_abort("dropping a completed future in a pool callback", || unsafe { *task.future.get() = None });
    task.sched.swap(COMPLETE, Ordering::AcqRel);
    let work = task.work.swap(0, Ordering::Relaxed);
    // SAFETY: closed once, from its own callback or an in-place poll, with
    // nothing else queued: only `IDLE -> SCHEDULED` submits (or parks), and
    // the state is now `COMPLETE`. A callback of it still returning on
    // another thread is allowed: the object is freed after it returns.
    unsafe { CloseThreadpoolWork(work) };
    // SAFETY: this callback is the task's only runner, holds a reference,
    // and the task has not finished before.
    unsafe { finish(&task.prefix, result) };
    // The last reference drops a detached task's result.
    // SAFETY: this callback's reference, given up once, last.
    or_abort("dropping a detached task's result in a pool callback", || unsafe { release_ref(p) });
}

/// Gives up one reference to the task.
///
/// # Safety
/// `p` came from `Arc::<AsyncTask<F>>::into_raw` (or is a copy of such a
/// pointer) and the caller owns one reference, which it gives up.
unsafe fn release_ref<F: Future>(p: *const AsyncTask<F>) {
    // SAFETY: guaranteed by the caller.
    unsafe { Arc::decrement_strong_count(p) };
}

fn spawn_with<F>(future: F, env: Option<&CallbackEnviron>) -> io::Result<JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    inplace::ensure();
    let (raw_env, pool, placement) = env_parts(env);
    let task = Arc::new(AsyncTask {
        prefix: Prefix {
            header: Header::new(placement, RUNNING, &AsyncTask::<F>::VTABLE),
            result: UnsafeCell::new(None),
        },
        sched: AtomicU32::new(SCHEDULED),
        work: AtomicIsize::new(0),
        pool,
        class: Class::of_task(env),
        future: UnsafeCell::new(Some(future)),
    });
    let env_copy = without_cleanup_group(raw_env);
    let env_ptr = env_copy.as_ref().map_or(core::ptr::null(), core::ptr::from_ref);
    let p = Arc::as_ptr(&task);
    // SAFETY: the callback is instantiated for the task's type and receives
    // `p`, which the submission's reference keeps alive for each call;
    // `env_ptr` is null or a valid environment for the call.
    let work = unsafe { CreateThreadpoolWork(Some(poll_task::<F>), p.cast_mut().cast(), env_ptr) };
    if work == 0 {
        return Err(io::Error::last_os_error());
    }
    task.work.store(work, Ordering::Relaxed);
    // One reference for the handle (`task`'s), one for the first submission.
    let p = Arc::into_raw(task);
    // SAFETY: `p` holds a reference.
    unsafe { Arc::increment_strong_count(p) };
    // SAFETY: just created, not closed.
    unsafe { SubmitThreadpoolWork(work) };
    // SAFETY: from `Arc::into_raw`, never null.
    Ok(JoinHandle { task: unsafe { NonNull::new_unchecked(p.cast_mut().cast::<Header>()) }, _result: PhantomData })
}

/// Runs `future` on the process default pool: it is polled on pool threads,
/// each wake scheduling one poll (one `SubmitThreadpoolWork`, or none when
/// the crate's own callback that woke it polls it in place: see the
/// [module docs](super#in-place-polling)). Returns a
/// handle that resolves (`.await`) or blocks ([`JoinHandle::join`]) to the
/// future's output, or to the payload of its panic.
///
/// Dropping the handle detaches the task; it still runs to completion.
///
/// # Panics
/// If the system refuses to create the task's work object
/// (`CreateThreadpoolWork`); [`try_spawn`] returns the error instead.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    try_spawn(future).expect("windows-threadpool: CreateThreadpoolWork failed")
}

/// [`spawn`], returning the OS error if the work object cannot be created.
pub fn try_spawn<F>(future: F) -> io::Result<JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_with(future, None)
}

/// [`spawn`] on the pool and with the settings (priority, placement, runs
/// long, library) of `env`.
///
/// # Panics
/// If the system refuses to create the work object; see [`try_spawn_in`].
pub fn spawn_in<F>(future: F, env: &CallbackEnviron) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    try_spawn_in(future, env).expect("windows-threadpool: CreateThreadpoolWork failed")
}

/// [`spawn_in`], returning the OS error if the work object cannot be created.
pub fn try_spawn_in<F>(future: F, env: &CallbackEnviron) -> io::Result<JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    spawn_with(future, Some(env))
}
