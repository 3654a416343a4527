//! Closure tasks: [`spawn_blocking`] and the tasks of scopes, `join` and
//! `for_each`, each one submission (`TrySubmitThreadpoolCallback`).

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::cell::UnsafeCell;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
#[cfg(feature = "test-hooks")]
use std::sync::atomic::Ordering;

use windows_sys::Win32::System::Threading::{
    PTP_CALLBACK_INSTANCE, TP_CALLBACK_ENVIRON_V3, TrySubmitThreadpoolCallback,
};

use super::header::{Header, InstanceMark, JoinHandle, Prefix, QUEUED, VTable, claim, discard, finish, release_pool};
use crate::callback::spans::{self, Kind};
use crate::callback_env::{CallbackEnviron, env_parts};
use crate::placement;
use crate::pool::PoolRef;

#[repr(C)]
struct Task<F, T> {
    /// First (`repr(C)`): the header and result slot every task starts with.
    prefix: Prefix<T>,
    /// Keeps a private pool open until the callback has returned.
    pool: PoolRef,
    /// Taken once by the claimer.
    f: UnsafeCell<Option<F>>,
}

impl<F: FnOnce() -> T + Send, T: Send> Task<F, T> {
    const VTABLE: VTable = VTable { run: run::<F, T>, discard: discard::<T>, release: release::<F, T> };
}

impl<F, T> Drop for Task<F, T> {
    fn drop(&mut self) {
        release_pool(self.pool.take());
    }
}

/// Runs a task this thread has claimed.
///
/// # Safety
/// `h` is a live `Task<F, T>` this thread claimed (`QUEUED -> RUNNING`) and
/// holds a reference to for the call.
unsafe fn run<F: FnOnce() -> T + Send, T: Send>(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    let task = unsafe { h.cast::<Task<F, T>>().as_ref() };
    // On a pool thread or a waiter's: either way the task's own span.
    let header = &task.prefix.header;
    // SAFETY: the claim makes this thread the only one touching `f`.
    let f = unsafe { (*task.f.get()).take() };
    // The span is entered and exited inside the unwind boundary: a
    // subscriber may panic, and on a joiner's thread (a scope's or `join`'s
    // waiter) nothing may unwind past `finish` while siblings still borrow
    // the caller's stack. Its panic is the task's.
    let r = catch_unwind(AssertUnwindSafe(move || {
        let _span = spans::enter(Kind::Spawn, h.as_ptr().addr(), || header.parent.clone(), None);
        f.map(|f| f())
    }));
    // `f` is always there: a task is claimed once.
    let r = r.map(|r| r.unwrap_or_else(|| unreachable!("task claimed twice")));
    // SAFETY: this thread claimed the task, so it is its only runner, and
    // holds a reference.
    unsafe { finish(&task.prefix, r) };
}

/// # Safety
/// `h` came from `Arc::<Task<F, T>>::into_raw`, and the caller gives up
/// that reference.
unsafe fn release<F: FnOnce() -> T + Send, T: Send>(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Arc::from_raw(h.cast::<Task<F, T>>().as_ptr()) });
}

/// The pool callback of every closure task.
unsafe extern "system" fn trampoline<F: FnOnce() -> T + Send, T: Send>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
) {
    // SAFETY: `context` is the reference `submit` gave this callback; the
    // callback runs once, and gives it up at the end.
    let h = unsafe { NonNull::new_unchecked(context.cast::<Header>()) };
    // SAFETY: this callback's reference keeps the task alive.
    if claim(unsafe { h.as_ref() }) {
        // SAFETY: the context is a live `repr(C)` `Task` whose first field
        // starts with `Header` (`repr(C)`), which starts with its `Placement`.
        let _placed = unsafe { placement::enter(context) };
        let _mark = InstanceMark::enter(instance);
        // SAFETY: claimed just now, reference held.
        unsafe { run::<F, T>(h) };
    }
    // SAFETY: this callback's own reference, given up once.
    let task = unsafe { Arc::from_raw(h.cast::<Task<F, T>>().as_ptr()) };
    // The last reference drops a detached task's result (or panic payload),
    // whose `Drop` may panic: no unwind may leave this callback.
    crate::callback::unwind::or_abort("dropping a detached task's result in a pool callback", move || drop(task));
}

/// Creates a task for `f` and submits it; returns it with `extra + 1`
/// references for the caller (the callback holds one more).
pub(super) fn submit<F, T>(f: F, env: Option<&CallbackEnviron>, extra: usize) -> io::Result<NonNull<Header>>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let (raw_env, pool, placement) = env_parts(env);
    let task = Arc::new(Task::<F, T> {
        prefix: Prefix { header: Header::new(placement, QUEUED, &Task::<F, T>::VTABLE), result: UnsafeCell::new(None) },
        pool,
        f: UnsafeCell::new(Some(f)),
    });
    for _ in 0..extra + 1 {
        // One reference for the callback, `extra` more for the caller.
        // SAFETY: `task` holds a reference, so the count is at least one.
        unsafe { Arc::increment_strong_count(Arc::as_ptr(&task)) };
    }
    let p = Arc::into_raw(task).cast_mut();
    let env_copy = without_cleanup_group(raw_env);
    let env_ptr = env_copy.as_ref().map_or(core::ptr::null(), core::ptr::from_ref);
    // SAFETY: the trampoline is instantiated for the task's type and owns one
    // reference exactly when the submission succeeds; `env_ptr` is null or a
    // valid environment for the call.
    if unsafe { try_submit(Some(trampoline::<F, T>), p.cast(), env_ptr) } == 0 {
        let err = io::Error::last_os_error();
        // SAFETY: `p` came from `into_raw` and held `extra + 2` references,
        // which nobody else has seen: all are given back.
        unsafe {
            for _ in 0..extra + 2 {
                Arc::decrement_strong_count(p.cast_const());
            }
        }
        return Err(err);
    }
    // SAFETY: from `Arc::into_raw`, never null.
    Ok(unsafe { NonNull::new_unchecked(p.cast::<Header>()) })
}

/// `TrySubmitThreadpoolCallback`; with the `test-hooks` feature, the
/// submissions [`fail_next_submits`] asks for fail as the call does when out
/// of memory, so the tests reach the failure path.
///
/// # Safety
/// `env` is null or points to a valid `TP_CALLBACK_ENVIRON_V3` for the call;
/// `context` meets `callback`'s requirements until `callback` has run, which
/// it does exactly once if this returns nonzero, and never if it returns 0.
unsafe fn try_submit(
    callback: windows_sys::Win32::System::Threading::PTP_SIMPLE_CALLBACK,
    context: *mut c_void,
    env: *const TP_CALLBACK_ENVIRON_V3,
) -> windows_sys::core::BOOL {
    #[cfg(feature = "test-hooks")]
    if FAIL_SUBMITS.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok() {
        // SAFETY: no preconditions.
        unsafe {
            windows_sys::Win32::Foundation::SetLastError(windows_sys::Win32::Foundation::ERROR_NOT_ENOUGH_MEMORY)
        };
        return 0;
    }
    // SAFETY: guaranteed by the caller.
    unsafe { TrySubmitThreadpoolCallback(callback, context, env) }
}

/// Closure-task submissions still to fail (a test hook).
#[cfg(feature = "test-hooks")]
static FAIL_SUBMITS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Makes the next `n` closure-task submissions of this process fail with
/// `ERROR_NOT_ENOUGH_MEMORY`. A test hook, not API.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn fail_next_submits(n: usize) {
    FAIL_SUBMITS.store(n, Ordering::SeqCst);
}

/// A copy of the environment at `raw_env` (null: none) that names no cleanup
/// group: a task is never a group member, since a group release could
/// discard its callback (see the module docs).
pub(super) fn without_cleanup_group(raw_env: *const TP_CALLBACK_ENVIRON_V3) -> Option<TP_CALLBACK_ENVIRON_V3> {
    (!raw_env.is_null()).then(|| {
        // SAFETY: a non-null pointer from `env_parts` is a live environment.
        let mut e = unsafe { *raw_env };
        e.CleanupGroup = 0;
        e.CleanupGroupCancelCallback = None;
        e
    })
}

/// Runs `f` once on a thread of the process default pool and returns a
/// handle to its result (`TrySubmitThreadpoolCallback`): the closure form of
/// [`spawn`](super::spawn), for CPU work and blocking calls.
///
/// # Panics
/// If the system refuses the submission, as `std::thread::spawn` panics when
/// it cannot create a thread; [`try_spawn_blocking`] returns the error instead.
pub fn spawn_blocking<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    try_spawn_blocking(f).expect("windows-threadpool: TrySubmitThreadpoolCallback failed")
}

/// [`spawn_blocking`], returning the OS error if the submission fails.
pub fn try_spawn_blocking<F, T>(f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(JoinHandle { task: submit(f, None, 0)?, _result: PhantomData })
}

/// [`spawn_blocking`] on the pool and with the settings (priority,
/// placement, runs long, library) of `env`.
///
/// # Panics
/// If the system refuses the submission; see [`try_spawn_blocking_in`].
pub fn spawn_blocking_in<F, T>(f: F, env: &CallbackEnviron) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    try_spawn_blocking_in(f, env).expect("windows-threadpool: TrySubmitThreadpoolCallback failed")
}

/// [`spawn_blocking_in`], returning the OS error if the submission fails.
pub fn try_spawn_blocking_in<F, T>(f: F, env: &CallbackEnviron) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(JoinHandle { task: submit(f, Some(env), 0)?, _result: PhantomData })
}
