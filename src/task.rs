//! One-off tasks: [`spawn`], [`scope`], [`join`] and [`for_each`], with
//! results and panics carried back to the caller.
//!
//! ```
//! let handle = windows_threadpool::spawn(|| 6 * 7);
//! assert_eq!(handle.join().unwrap(), 42);
//!
//! let mut words = vec!["a", "b"];
//! windows_threadpool::scope(|s| {
//!     s.spawn(|| words.push("c")); // borrows `words` until the scope ends
//! });
//! assert_eq!(words, ["a", "b", "c"]);
//! ```
//!
//! # Design
//! **One allocation per task.** A task is one reference-counted block
//! (`Arc`) holding a header (state, scope link, a vtable), the result slot,
//! the pool reference and the closure. The pool callback
//! (`TrySubmitThreadpoolCallback`) owns one reference, the handle another
//! (and, for scoped tasks, the scope a third); nothing else is allocated.
//!
//! **Claimed once, by whoever comes first.** A task's state goes
//! `QUEUED -> RUNNING -> DONE`; the pool callback and any thread that waits
//! for the task race to claim it (`QUEUED -> RUNNING`), and the winner runs
//! the closure. So a thread that waits in [`JoinHandle::join`], at the end of
//! a [`scope`], in [`join`] or in [`for_each`] first runs the tasks it waits
//! for that no pool thread has started (help while waiting), and only blocks
//! (`WaitOnAddress`) on tasks that are already running elsewhere. This is
//! what keeps a pool with a thread maximum of 1 from deadlocking when a
//! callback on its only thread spawns and joins, or opens a scope: the
//! tasks queued behind it are run by the waiter itself. The pool callback of
//! a task claimed by a waiter finds it claimed and only drops its reference.
//! A task run by a waiter runs on the waiter's thread as that thread is:
//! with its affinity (placed only if the waiter is itself a placed
//! callback, see [`crate::placement`]), and without the environment's
//! priority or runs-long setting. A task that joins its own handle (passed
//! to it through shared state) waits for itself forever, as a thread that
//! joins itself would; a long chain of tasks each joining the next, all
//! run by waiters, runs on one stack.
//!
//! **Panics are caught inside the task** (`catch_unwind`), stored as the
//! result and returned by `join`, as `std::thread` does; no unwind reaches
//! the pool. This differs from the long-lived objects ([`Work`](crate::Work),
//! timers, waits, I/O), whose callbacks abort the process on panic: their
//! callback runs again and again on shared state with nobody to hand a
//! panic to, while a task runs once and has a handle (or a scope) waiting
//! for its outcome.
//!
//! **Teardown drains, never cancels.** A task is never cancelled: a dropped
//! [`JoinHandle`] detaches the task, which still runs; a scope returns only
//! after every task spawned in it has finished and its unjoined result has
//! been dropped. Tasks are never members of a cleanup group (the
//! environment's group, if any, is not passed on), so no group release can
//! discard one. A task keeps the private pool it runs on open until its
//! callback has returned; a callback that holds the pool's last reference
//! hands the close to the default pool (`reentry::hand_off`), as an
//! object's own-callback teardown does, rather than close the pool from one
//! of its own callbacks. None of the self-heal or drain-obligation
//! machinery of the long-lived objects applies: there is no object to drain
//! or to drop from its own callback, and nothing is ever cancelled.
//!
//! **A scope's tasks are finished before it returns.** [`scope`] collects its
//! tasks on a lock-free list; when its closure has returned (or panicked) it
//! claims or waits for each, takes the list again until it stays empty
//! (tasks may spawn more tasks into the scope), and only then drops the
//! results nobody joined. After that a task's block holds no closure and no
//! result, so the pool callback that drops the last reference later touches
//! nothing the scope borrowed. If the closure panicked, `scope` resumes that
//! panic; otherwise, if a task panicked and was not joined, `scope` panics,
//! as `std::thread::scope` does.
//!
//! **`for_each` runs chunks taken from the iterator.** Submitting one pool
//! callback per item costs microseconds (about 9 µs under Wine), so
//! [`for_each`] starts one helper task per other processor, and every
//! participant (the caller included) takes chunks of up to 1,024 items from
//! the iterator under one lock, into a buffer of its own, and visits them
//! without the lock, until the iterator is exhausted. Nothing is collected
//! up front (collecting 1,000,000 items into a fresh buffer costs more under
//! Wine than visiting them), and the allocations are one buffer per
//! participant whatever the number of items. Each item is moved out exactly
//! once: visited, or, if `f` panicked earlier in the same chunk, dropped
//! unvisited; the first panic is resumed once the iterator is exhausted and
//! every chunk finished.
//!
//! # Long-blocking tasks
//! A task that is about to block for long calls [`may_run_long`]
//! (`CallbackMayRunLong` on the instance of the pool callback it runs in),
//! as an object's callback calls `CallbackInstance::may_run_long`. It
//! returns `None` where there is no such callback: outside a task, or in a
//! task a waiter runs on its own thread (which is not the pool's to plan
//! for). Tasks that all block for long can instead run on an environment
//! that says so up front,
//! [`CallbackEnviron::with_runs_long`](crate::CallbackEnviron::with_runs_long)
//! (`SetThreadpoolCallbackRunsLong`):
//!
//! ```
//! let h = windows_threadpool::spawn(|| {
//!     let _more_threads = windows_threadpool::task::may_run_long();
//!     std::thread::sleep(std::time::Duration::from_millis(1)); // blocks
//! });
//! h.join().unwrap();
//! ```
//!
//! ```
//! use windows_threadpool::{CallbackEnviron, spawn_in};
//!
//! let env = CallbackEnviron::new().with_runs_long();
//! let h = spawn_in(|| std::thread::sleep(std::time::Duration::from_millis(1)), &env);
//! h.join().unwrap();
//! ```
//!
//! # Compile-time rules
//! A spawned closure must be `Send`:
//!
//! ```compile_fail,E0277
//! let rc = std::rc::Rc::new(1);
//! let _h = windows_threadpool::spawn(move || *rc);
//! ```
//!
//! An unscoped task cannot borrow from the stack:
//!
//! ```compile_fail,E0373
//! let v = vec![1, 2, 3];
//! let _h = windows_threadpool::spawn(|| v.len());
//! ```
//!
//! A scoped task may borrow only what outlives the scope:
//!
//! ```compile_fail,E0373
//! windows_threadpool::scope(|s| {
//!     let local = vec![1, 2, 3];
//!     s.spawn(|| local.len());
//! });
//! ```
//!
//! A scoped task is `Send` too:
//!
//! ```compile_fail,E0277
//! let rc = std::rc::Rc::new(1);
//! windows_threadpool::scope(|s| {
//!     s.spawn(|| *rc);
//! });
//! ```

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::any::Any;
use std::cell::UnsafeCell;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Mutex};
use std::thread;

use windows_sys::Win32::System::Threading::{
    CallbackMayRunLong, INFINITE, PTP_CALLBACK_INSTANCE, TLS_OUT_OF_INDEXES, TP_CALLBACK_ENVIRON_V3, TlsGetValue,
    TlsSetValue, TrySubmitThreadpoolCallback, WaitOnAddress, WakeByAddressAll,
};

use crate::callback_env::{CallbackEnviron, env_parts};
use crate::placement::{self, Placement};
use crate::pool::PoolRef;
use crate::reentry;

/// Not started: the pool callback or a waiter may claim it.
const QUEUED: u32 = 0;
/// Claimed and running; nobody waits.
const RUNNING: u32 = 1;
/// Claimed and running; a thread waits (`WaitOnAddress`) for `DONE`.
const RUNNING_WAITED: u32 = 2;
/// The result is stored.
const DONE: u32 = 3;
/// The result was taken, by a join or by the scope's clean-up: whoever
/// moves `DONE -> TAKEN` owns the result slot.
const TAKEN: u32 = 4;

/// Moves `DONE -> TAKEN`; true for the one caller that may take the result.
fn take_claim(h: &Header) -> bool {
    h.state.compare_exchange(DONE, TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// What code that does not know the task's closure type calls.
struct VTable {
    /// Runs a claimed task: closure, result, `DONE`.
    run: unsafe fn(NonNull<Header>),
    /// Drops a result nobody took; returns whether it was a panic.
    discard: unsafe fn(NonNull<Header>) -> bool,
    /// Releases one reference.
    release: unsafe fn(NonNull<Header>),
}

/// The type-independent start of every task.
#[repr(C)]
struct Header {
    /// First: `placement::enter` reads it through the bare context pointer.
    placement: Placement,
    state: AtomicU32,
    /// The next task on its scope's list.
    next: AtomicPtr<Header>,
    /// 1 while its scoped join handle lives (the scope's clean-up drops
    /// such a task's result last; see `Scope::discard_all`).
    handle_alive: AtomicU32,
    vtable: &'static VTable,
}

/// The start of a `Task<F, T>` that does not depend on `F` (`repr(C)`:
/// a prefix of the same fields has the same offsets).
#[repr(C)]
struct Prefix<T> {
    header: Header,
    result: UnsafeCell<Option<thread::Result<T>>>,
}

#[repr(C)]
struct Task<F, T> {
    header: Header,
    /// Written once by the claimer before `DONE`; read after `DONE`.
    result: UnsafeCell<Option<thread::Result<T>>>,
    /// Keeps a private pool open until the callback has returned.
    _pool: PoolRef,
    /// Taken once by the claimer.
    f: UnsafeCell<Option<F>>,
}

impl<F: FnOnce() -> T + Send, T: Send> Task<F, T> {
    const VTABLE: VTable = VTable { run: run::<F, T>, discard: discard::<F, T>, release: release::<F, T> };
}

/// Runs a task this thread has claimed.
///
/// # Safety
/// `h` is a live `Task<F, T>` this thread claimed (`QUEUED -> RUNNING`) and
/// holds a reference to for the call.
unsafe fn run<F: FnOnce() -> T + Send, T: Send>(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    let task = unsafe { h.cast::<Task<F, T>>().as_ref() };
    // SAFETY: the claim makes this thread the only one touching `f` and,
    // until `DONE`, `result`.
    let f = unsafe { (*task.f.get()).take() };
    let r = catch_unwind(AssertUnwindSafe(move || f.map(|f| f())));
    // `f` is always there: a task is claimed once.
    let r = r.map(|r| r.unwrap_or_else(|| unreachable!("task claimed twice")));
    // SAFETY: as above: no other thread reads `result` before `DONE`.
    unsafe { *task.result.get() = Some(r) };
    if task.header.state.swap(DONE, Ordering::AcqRel) == RUNNING_WAITED {
        // SAFETY: the address is the state word, valid while this thread
        // holds its reference.
        unsafe { WakeByAddressAll(core::ptr::from_ref(&task.header.state).cast()) };
    }
}

/// Drops the result if nobody has taken it; returns whether it was a panic.
///
/// # Safety
/// `h` is a live `Task<F, T>` that has finished (`DONE` or `TAKEN`).
unsafe fn discard<F: FnOnce() -> T + Send, T: Send>(h: NonNull<Header>) -> bool {
    // SAFETY: guaranteed by the caller.
    let task = unsafe { h.cast::<Task<F, T>>().as_ref() };
    if !take_claim(&task.header) {
        // Joined already (possibly by a handle kept in another result).
        return false;
    }
    // SAFETY: `take_claim` made this thread the slot's only user; the
    // claimer's write was published by `DONE` (read with Acquire).
    let r = unsafe { (*task.result.get()).take() };
    let panicked = matches!(r, Some(Err(_)));
    // A result or payload that panics on drop would unwind out of the scope
    // before it had finished; std aborts there too.
    if catch_unwind(AssertUnwindSafe(move || drop(r))).is_err() {
        eprintln!("windows-threadpool: a task's result panicked on drop; aborting");
        std::process::abort();
    }
    panicked
}

/// # Safety
/// `h` came from `Arc::<Task<F, T>>::into_raw`, and the caller gives up
/// that reference.
unsafe fn release<F: FnOnce() -> T + Send, T: Send>(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Arc::from_raw(h.cast::<Task<F, T>>().as_ptr()) });
}

/// Claims `h` for this thread.
fn claim(h: &Header) -> bool {
    h.state.compare_exchange(QUEUED, RUNNING, Ordering::Acquire, Ordering::Relaxed).is_ok()
}

/// Runs `h` here if no thread has started it, else waits until it is done.
///
/// # Safety
/// `h` is a live task the caller holds a reference to.
unsafe fn help_or_wait(h: NonNull<Header>) {
    // SAFETY: guaranteed by the caller.
    let header = unsafe { h.as_ref() };
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

/// The TLS index holding, on each thread, the instance of the task callback
/// running there (null elsewhere); `TLS_OUT_OF_INDEXES` until allocated. A
/// raw slot, not `thread_local!`, for the reason `crate::reentry` gives.
static INSTANCE_SLOT: AtomicU32 = AtomicU32::new(TLS_OUT_OF_INDEXES);

/// Allocates [`INSTANCE_SLOT`] if needed; every submission calls it first.
fn ensure_instance_slot() -> io::Result<()> {
    reentry::ensure_tls_index(&INSTANCE_SLOT)
}

/// Marks this thread as running a task callback with `instance` until dropped.
struct InstanceMark {
    slot: u32,
    outer: *mut c_void,
}

impl InstanceMark {
    fn enter(instance: PTP_CALLBACK_INSTANCE) -> Self {
        // Allocated before the submission this callback comes from.
        let slot = INSTANCE_SLOT.load(Ordering::Relaxed);
        // SAFETY: `slot` is an allocated index, never freed.
        let outer = unsafe { TlsGetValue(slot) };
        // SAFETY: as above. On failure `may_run_long` only answers `None`.
        // The instance is an opaque handle value, stored as it is.
        unsafe { TlsSetValue(slot, core::ptr::without_provenance(instance as usize)) };
        Self { slot, outer }
    }
}

impl Drop for InstanceMark {
    fn drop(&mut self) {
        // SAFETY: the index `enter` used.
        unsafe { TlsSetValue(self.slot, self.outer) };
    }
}

/// Tells the pool that the task running on this thread may run long
/// (`CallbackMayRunLong`), so it should not count on this thread for other
/// callbacks; returns whether another thread is available for them (`false`
/// when the pool is at its thread maximum with every thread busy).
///
/// `None` outside a task's pool callback: on a thread that is not running a
/// task, or in a task a waiting thread runs itself (see the
/// [module docs](self#long-blocking-tasks)).
pub fn may_run_long() -> Option<bool> {
    let slot = INSTANCE_SLOT.load(Ordering::Acquire);
    if slot == TLS_OUT_OF_INDEXES {
        return None;
    }
    // SAFETY: `slot` is an allocated index, never freed.
    let instance = unsafe { TlsGetValue(slot) };
    if instance.is_null() {
        return None;
    }
    // SAFETY: a non-null value is the instance of the task callback running
    // on this thread (set by its trampoline, reset before it returns).
    Some(unsafe { CallbackMayRunLong(instance.addr() as PTP_CALLBACK_INSTANCE) } != 0)
}

/// The pool callback of every task.
unsafe extern "system" fn trampoline<F: FnOnce() -> T + Send, T: Send>(
    instance: PTP_CALLBACK_INSTANCE,
    context: *mut c_void,
) {
    // SAFETY: `context` is the reference `submit` gave this callback; the
    // callback runs once, and gives it up at the end.
    let h = unsafe { NonNull::new_unchecked(context.cast::<Header>()) };
    // SAFETY: this callback's reference keeps the task alive.
    if claim(unsafe { h.as_ref() }) {
        // SAFETY: the context is a live `repr(C)` `Task` whose first field,
        // `Header` (`repr(C)`), starts with its `Placement`.
        let _placed = unsafe { placement::enter(context) };
        let _mark = InstanceMark::enter(instance);
        // SAFETY: claimed just now, reference held.
        unsafe { run::<F, T>(h) };
    }
    // SAFETY: this callback's own reference, given up once.
    let task = unsafe { Arc::from_raw(h.cast::<Task<F, T>>().as_ptr()) };
    // The last reference drops a detached task's result (or panic payload),
    // whose `Drop` may panic: no unwind may leave this callback.
    let released = catch_unwind(AssertUnwindSafe(move || {
        if let Some(Task { _pool: Some(pool), .. }) = Arc::into_inner(task)
            && let Some(last) = Arc::into_inner(pool)
        {
            // The last reference to this private pool (decided by one
            // atomic step, so exactly one holder gets here): close it from
            // the default pool, not from a callback of the pool being closed.
            reentry::hand_off(move || drop(last));
        }
    }));
    if released.is_err() {
        eprintln!("windows-threadpool: a detached task's result panicked on drop; aborting");
        std::process::abort();
    }
}

/// Creates a task for `f` and submits it; returns it with `extra + 1`
/// references for the caller (the callback holds one more).
fn submit<F, T>(f: F, env: Option<&CallbackEnviron>, extra: usize) -> io::Result<NonNull<Header>>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    ensure_instance_slot()?;
    let (raw_env, pool, placement) = env_parts(env);
    let task = Arc::new(Task::<F, T> {
        header: Header {
            placement,
            state: AtomicU32::new(QUEUED),
            next: AtomicPtr::new(core::ptr::null_mut()),
            handle_alive: AtomicU32::new(1),
            vtable: &Task::<F, T>::VTABLE,
        },
        result: UnsafeCell::new(None),
        _pool: pool,
        f: UnsafeCell::new(Some(f)),
    });
    for _ in 0..extra + 1 {
        // One reference for the callback, `extra` more for the caller.
        // SAFETY: `task` holds a reference, so the count is at least one.
        unsafe { Arc::increment_strong_count(Arc::as_ptr(&task)) };
    }
    let p = Arc::into_raw(task).cast_mut();
    // Never a member of a cleanup group: a group release could discard the
    // callback (see the module docs).
    let env_copy: Option<TP_CALLBACK_ENVIRON_V3> = (!raw_env.is_null()).then(|| {
        // SAFETY: a non-null pointer from `env_parts` is a live environment.
        let mut e = unsafe { *raw_env };
        e.CleanupGroup = 0;
        e.CleanupGroupCancelCallback = None;
        e
    });
    let env_ptr = env_copy.as_ref().map_or(core::ptr::null(), core::ptr::from_ref);
    // SAFETY: the trampoline is instantiated for the task's type and owns one
    // reference exactly when the submission succeeds; `env_ptr` is null or a
    // valid environment for the call.
    if unsafe { TrySubmitThreadpoolCallback(Some(trampoline::<F, T>), p.cast(), env_ptr) } == 0 {
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

/// Takes the result of a finished task.
///
/// # Panics
/// If the result is gone: a scoped task's result that the scope's clean-up
/// dropped first, which only a handle kept inside another task's result
/// and joined from its `Drop` can observe.
///
/// # Safety
/// `h` is a live `Task<_, T>` that has finished (`DONE` or `TAKEN`).
unsafe fn take<T>(h: NonNull<Header>) -> thread::Result<T> {
    // SAFETY: guaranteed by the caller; `Prefix<T>` is the task's start.
    let prefix = unsafe { h.cast::<Prefix<T>>().as_ref() };
    assert!(
        take_claim(&prefix.header),
        "windows-threadpool: this scoped task's result was already dropped by its scope"
    );
    // SAFETY: `take_claim` made this thread the slot's only user; the
    // claimer's write was published by `DONE` (read with Acquire).
    unsafe { (*prefix.result.get()).take() }.unwrap_or_else(|| unreachable!("a result is stored before DONE"))
}

/// Runs `f` once on the process default pool and returns a handle to its
/// result (`TrySubmitThreadpoolCallback`).
///
/// # Panics
/// If the system refuses the submission, as `std::thread::spawn` panics when
/// it cannot create a thread; [`try_spawn`] returns the error instead.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    try_spawn(f).expect("windows-threadpool: TrySubmitThreadpoolCallback failed")
}

/// [`spawn`], returning the OS error if the submission fails.
pub fn try_spawn<F, T>(f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(JoinHandle { task: submit(f, None, 0)?, _result: PhantomData })
}

/// [`spawn`] on the pool and with the settings (priority, placement, runs
/// long, library) of `env`.
///
/// # Panics
/// If the system refuses the submission; see [`try_spawn_in`].
pub fn spawn_in<F, T>(f: F, env: &CallbackEnviron) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    try_spawn_in(f, env).expect("windows-threadpool: TrySubmitThreadpoolCallback failed")
}

/// [`spawn_in`], returning the OS error if the submission fails.
pub fn try_spawn_in<F, T>(f: F, env: &CallbackEnviron) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(JoinHandle { task: submit(f, Some(env), 0)?, _result: PhantomData })
}

/// An owned permission to join a task: [`join`](Self::join) returns its
/// result. Dropping it detaches the task, which still runs.
pub struct JoinHandle<T> {
    task: NonNull<Header>,
    _result: PhantomData<T>,
}

// SAFETY: the handle owns a reference to a task whose state is atomic; the
// only non-atomic access, taking the result, needs the handle by value, and
// moves a `T: Send` to the joining thread.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: through `&JoinHandle` only the atomic state is read.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> core::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("JoinHandle").field("finished", &self.is_finished()).finish()
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the task and returns its result, or the payload of its
    /// panic. If no pool thread has started the task yet, it runs here, on
    /// the calling thread (see the [module docs](self#design)).
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

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: the handle's own reference, given up once.
        unsafe { (self.task.as_ref().vtable.release)(self.task) };
    }
}

/// A scope to spawn tasks that borrow from the stack; see [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    /// Tasks spawned in the scope, most recent first; each holds a reference.
    head: AtomicPtr<Header>,
    env: Option<&'env CallbackEnviron>,
    /// Invariant in both lifetimes, as `std::thread::Scope` is.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl core::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scope").field("env", &self.env).finish_non_exhaustive()
    }
}

/// Runs `f` with a [`Scope`] whose tasks may borrow anything that outlives
/// the call; returns once every task spawned in it has finished.
///
/// While waiting, the calling thread runs the scope's tasks no pool thread
/// has started (see the [module docs](self)).
///
/// # Panics
/// If `f` panics, after every task has finished, with `f`'s panic.
/// Otherwise, if a task panicked and was not joined, after every task has
/// finished.
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    run_scope(None, f)
}

/// [`scope`] whose tasks run on the pool and with the settings of `env`.
pub fn scope_in<'env, F, R>(f: F, env: &'env CallbackEnviron) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    run_scope(Some(env), f)
}

fn run_scope<'env, F, R>(env: Option<&'env CallbackEnviron>, f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let scope = Scope { head: AtomicPtr::new(core::ptr::null_mut()), env, _scope: PhantomData, _env: PhantomData };
    let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    let unjoined_panic = scope.finish();
    match r {
        Err(payload) => resume_unwind(payload),
        Ok(_) if unjoined_panic => panic!("a scoped task panicked"),
        Ok(r) => r,
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns `f` in the scope: it may borrow anything that outlives the
    /// scope, and is joined before [`scope`] returns.
    ///
    /// # Panics
    /// If the system refuses the submission (`TrySubmitThreadpoolCallback`).
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        // Two references: the handle's and the scope list's.
        let h = submit(f, self.env, 1).expect("windows-threadpool: TrySubmitThreadpoolCallback failed");
        // SAFETY: `submit` returned a live task with our references.
        let header = unsafe { h.as_ref() };
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            header.next.store(head, Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, h.as_ptr(), Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        ScopedJoinHandle { task: h, _scope: PhantomData }
    }

    /// Finishes every task; drops the results nobody joined and returns
    /// whether one of them was a panic. Runs once, after the scope's closure.
    fn finish(&self) -> bool {
        let mut unjoined_panic = false;
        // Dropping a result runs user code, which may spawn again into the
        // scope (a result may hold `&Scope`): repeat until nothing is left.
        loop {
            let done = self.wait_all();
            if done.is_null() {
                return unjoined_panic;
            }
            unjoined_panic |= Self::discard_all(done);
        }
    }

    /// Runs or waits for every task on the list until it stays empty; returns
    /// them, linked through `next`. No result is dropped before all are done:
    /// a running task may still join another.
    fn wait_all(&self) -> *mut Header {
        let mut done: *mut Header = core::ptr::null_mut();
        loop {
            let mut batch = self.head.swap(core::ptr::null_mut(), Ordering::Acquire);
            if batch.is_null() {
                return done;
            }
            while let Some(h) = NonNull::new(batch) {
                // SAFETY: the list holds a reference to every task on it.
                let header = unsafe { h.as_ref() };
                batch = header.next.load(Ordering::Relaxed);
                // SAFETY: as above.
                unsafe { help_or_wait(h) };
                header.next.store(done, Ordering::Relaxed);
                done = h.as_ptr();
            }
        }
    }

    /// Drops the results nobody took and the list's references.
    ///
    /// A handle kept in another task's result may still join its task, from
    /// that result's `Drop` (here, or on another thread it hands the handle
    /// to). So results are dropped first where the task's scoped join
    /// handle is gone, in rounds, which lets such a `Drop` find its task's
    /// result still there; what remains when a round drops nothing (a
    /// handle forgotten, or kept in its own task's result) is dropped then.
    /// Either way `take_claim` decides who owns a result.
    fn discard_all(mut left: *mut Header) -> bool {
        let mut unjoined_panic = false;
        let mut force = false;
        while !left.is_null() {
            let (mut kept, mut cur, mut dropped_any) = (core::ptr::null_mut::<Header>(), left, false);
            while let Some(h) = NonNull::new(cur) {
                // SAFETY: the list's reference; every task has finished.
                unsafe {
                    cur = h.as_ref().next.load(Ordering::Relaxed);
                    let vt = h.as_ref().vtable;
                    if !force && h.as_ref().handle_alive.load(Ordering::Acquire) != 0 {
                        h.as_ref().next.store(kept, Ordering::Relaxed);
                        kept = h.as_ptr();
                        continue;
                    }
                    unjoined_panic |= (vt.discard)(h);
                    (vt.release)(h);
                }
                dropped_any = true;
            }
            left = kept;
            force = !dropped_any;
        }
        unjoined_panic
    }
}

/// A permission to join a scoped task; see [`JoinHandle`].
pub struct ScopedJoinHandle<'scope, T> {
    task: NonNull<Header>,
    _scope: PhantomData<&'scope T>,
}

// SAFETY: as for `JoinHandle`.
unsafe impl<T: Send> Send for ScopedJoinHandle<'_, T> {}
// SAFETY: as for `JoinHandle`.
unsafe impl<T: Send> Sync for ScopedJoinHandle<'_, T> {}

impl<T> core::fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ScopedJoinHandle").field("finished", &self.is_finished()).finish()
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the task and returns its result, or the payload of its
    /// panic (which the scope then no longer reports). If no pool thread has
    /// started the task yet, it runs here.
    pub fn join(self) -> thread::Result<T> {
        // SAFETY: the handle holds a reference.
        unsafe { help_or_wait(self.task) };
        // SAFETY: finished now; the handle holds a reference.
        unsafe { take::<T>(self.task) }
    }

    /// Whether the task has finished (returned or panicked).
    pub fn is_finished(&self) -> bool {
        // SAFETY: the handle holds a reference.
        unsafe { self.task.as_ref() }.state.load(Ordering::Acquire) >= DONE
    }
}

impl<T> Drop for ScopedJoinHandle<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the handle holds a reference.
        unsafe { self.task.as_ref() }.handle_alive.store(0, Ordering::Release);
        // SAFETY: the handle's own reference, given up once.
        unsafe { (self.task.as_ref().vtable.release)(self.task) };
    }
}

/// Runs `a` here and `b` as a task on the default pool, and returns both
/// results. If no pool thread has started `b` once `a` returns, `b` runs
/// here too.
///
/// # Panics
/// With `a`'s panic if `a` panicked, else with `b`'s; always after both
/// have finished.
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_with(None, a, b)
}

/// [`join`] with `b` on the pool and with the settings of `env`.
pub fn join_in<A, B, RA, RB>(a: A, b: B, env: &CallbackEnviron) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_with(Some(env), a, b)
}

fn join_with<A, B, RA, RB>(env: Option<&CallbackEnviron>, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let (ra, rb) = run_scope(env, |s| {
        let hb = s.spawn(b);
        let ra = catch_unwind(AssertUnwindSafe(a));
        (ra, hb.join())
    });
    match (ra, rb) {
        (Err(p), _) | (Ok(_), Err(p)) => resume_unwind(p),
        (Ok(ra), Ok(rb)) => (ra, rb),
    }
}

/// Calls `f` on every item of `items`, in parallel on the default pool and
/// the calling thread; returns once every item has been visited.
///
/// The caller and one task per other processor take chunks of items from
/// the iterator, under a lock, until it is exhausted, and visit each chunk
/// without it (see the [module docs](self)), so the cost per item
/// approaches a plain loop's. The iterator is therefore advanced on several
/// threads, one at a time (`I::IntoIter: Send`). Each item is visited
/// exactly once, in no particular order.
///
/// # Panics
/// If `f` panics: with its first panic, once every chunk has been finished.
/// The items left in the chunk where `f` panicked are dropped unvisited;
/// every other item is visited.
pub fn for_each<I, F>(items: I, f: F)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    for_each_with(None, items, f);
}

/// [`for_each`] with its tasks on the pool and with the settings of `env`.
pub fn for_each_in<I, F>(items: I, f: F, env: &CallbackEnviron)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    for_each_with(Some(env), items, f);
}

/// Items per chunk at most: large enough that the source's lock costs
/// nothing per item, small enough to balance ~1 µs items.
const MAX_CHUNK: usize = 1024;
/// Chunks per participant at least, for balance when items are few.
const CHUNKS_EACH: usize = 4;

/// The processors of this process, read once.
fn parallelism() -> usize {
    static N: AtomicUsize = AtomicUsize::new(0);
    match N.load(Ordering::Relaxed) {
        0 => {
            let n = thread::available_parallelism().map_or(1, |n| n.get());
            N.store(n, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Items per chunk when the iterator does not say how many it holds.
const UNKNOWN_CHUNK: usize = 64;

/// Takes chunks from `source` into a buffer of this participant's and calls
/// `f` on each item until the source is exhausted. If `f` panics, the rest of
/// its chunk is dropped and the first such panic returned.
fn drive<It: Iterator>(source: &Mutex<It>, chunk: usize, f: &impl Fn(It::Item)) -> Option<Box<dyn Any + Send>> {
    // Allocated by the first chunk taken: a helper that finds the source
    // exhausted allocates nothing.
    let mut buf = Vec::new();
    let mut first_panic = None;
    loop {
        // A panic of the iterator itself poisons the lock; the others go on
        // with what is left of it, and the panic reaches the caller.
        buf.extend(source.lock().unwrap_or_else(std::sync::PoisonError::into_inner).by_ref().take(chunk));
        if buf.is_empty() {
            return first_panic;
        }
        // `drain` drops the items left in the chunk if `f` panics.
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| buf.drain(..).for_each(f))) {
            first_panic.get_or_insert(p);
        }
    }
}

fn for_each_with<I, F>(env: Option<&CallbackEnviron>, items: I, f: F)
where
    I: IntoIterator,
    I::IntoIter: Send,
    I::Item: Send,
    F: Fn(I::Item) + Sync,
{
    let items = items.into_iter().fuse();
    let (low, high) = items.size_hint();
    if high == Some(0) {
        return;
    }
    let known = high.unwrap_or(low).max(low);
    let most = parallelism() - 1;
    let helpers = if known == 0 { most } else { most.min(known - 1) };
    let chunk = if known == 0 { UNKNOWN_CHUNK } else { (known / ((helpers + 1) * CHUNKS_EACH)).clamp(1, MAX_CHUNK) };
    let source = Mutex::new(items);
    let first_panic = Mutex::new(None);
    let run = || {
        if let Some(p) = drive(&source, chunk, &f) {
            first_panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(p);
        }
    };
    run_scope(env, |s| {
        for _ in 0..helpers {
            // Helpers the pool has not started by the time the caller is
            // done are claimed here and find the source exhausted.
            let _ = s.spawn(run);
        }
        run();
    });
    if let Some(p) = first_panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
        resume_unwind(p);
    }
}
