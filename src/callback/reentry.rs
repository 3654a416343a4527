//! Callbacks that reach their own object.
//!
//! A drain (`WaitFor*Callbacks`, a cleanup group's release, an I/O rundown)
//! waits for every running callback, including the one that calls it, so a
//! drain issued from an object's own callback can never return. Dropping the
//! last owner from inside the callback is ordinary Rust code (a one-shot
//! timer that drops itself after firing, a work item that removes itself from
//! a registry), so it must not hang; an explicit drain from there cannot
//! complete, so it panics (in a callback, that aborts the process) with a
//! message naming the call.
//!
//! **Which callback is running.** Every trampoline enters a
//! [`CallbackScope`] first: it stores the object's context pointer in a
//! thread-local slot for the duration of the callback and restores the
//! previous value when the trampoline returns. A context pointer identifies
//! its object while the object lives, and the object outlives every callback,
//! so "the slot holds my context" means "this thread is inside my callback".
//! The slot is a field of the thread's [`Local`](crate::callback::local): a callback
//! reads the thread-local once (about 5 ns under Wine) and keeps its
//! address for the restore, and a drop reads it once for this check and for
//! giving its context's block back.
//!
//! **Own-callback teardown.** [`tear_down`] runs an object's ordinary
//! teardown, unless the calling thread is inside that object's callback. Then
//! it does the non-blocking part here (refuse re-arms and disarm, so nothing
//! new is queued) and hands the ordinary teardown, the same function, to
//! another thread: a one-off callback on the process default pool
//! (`TrySubmitThreadpoolCallback` with no environment), or a new thread if
//! that submission fails. Its drain waits for the callback that dropped the
//! object to return, so what the callback captured is freed exactly once,
//! after it returns. The default pool, never the object's own: a private pool
//! limited to one thread would have to run the handoff on the thread that is
//! still inside the callback, and the handoff's drain also waits for the
//! object's queued callbacks, which need that pool's threads. The handoff
//! holds its own reference on the module that contains this code, released
//! only once its callback has returned (`FreeLibraryWhenCallbackReturns`):
//! the close it performs may release the last reference an environment's
//! `with_library` gave the object.
//!
//! **Async wrappers.** A future-facing type over a pool object (`AsyncIo`,
//! the armed wait of a wait future) is dropped by executors, in tasks, and
//! by its own completions (a buffer holding the wrapper's last `Arc`). Its
//! drop must never wait for a callback that is not running yet: the thread
//! dropping it may be the one that callback needs (the only thread of a busy
//! pool), or the callback itself. [`drop_unblocking`] is the one rule: an
//! object that is [`Settle::settled`] (at most a running callback left) is
//! dropped in place; any other is settled and dropped by a [`hand_off`].

use core::ffi::c_void;

use windows_sys::Win32::Foundation::HMODULE;
use windows_sys::Win32::System::LibraryLoader::{GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, GetModuleHandleExW};
use windows_sys::Win32::System::Threading::{
    FreeLibraryWhenCallbackReturns, PTP_CALLBACK_INSTANCE, TrySubmitThreadpoolCallback,
};

use crate::callback::local::{self, Local, Mark};
use crate::placement;

/// The context of the callback running on this thread, null outside one
/// (and once the thread's state is gone: it is exiting).
#[inline]
fn current(here: Option<&Local>) -> *const c_void {
    here.map_or(core::ptr::null(), |l| l.callback.get())
}

/// Marks this thread as inside the callback of the object whose context is
/// `context`, and places it as the object asks (`crate::placement`), until
/// dropped. The first statement of every trampoline.
pub(crate) struct CallbackScope {
    /// (The two fields drop in either order: `placement` touches no `Local`.)
    _marked: Mark<*const c_void>,
    /// Restores the thread's affinity on drop; a copy, so it needs nothing
    /// of the context (which a drop from the callback may hand to another
    /// thread to free).
    _placed: placement::Restore,
}

impl CallbackScope {
    #[inline]
    pub(crate) fn enter(context: *mut c_void) -> Self {
        // Unmarked, an own-callback drop would wait for itself.
        let _marked = Mark::set(|l| &l.callback, context.cast_const()).unwrap_or_else(|| unmarked_callback());
        // SAFETY: a trampoline's context is a live `ctx::Context`.
        let _placed = unsafe { placement::enter(context) };
        Self { _marked, _placed }
    }
}

#[cold]
fn unmarked_callback() -> ! {
    crate::callback::unwind::say_and_abort(format_args!(
        "windows-threadpool: a callback ran on a thread whose thread-locals are gone; aborting"
    ))
}

/// Whether this thread is inside the callback of the object whose context is
/// `context`.
pub(crate) fn in_own_callback(context: *const c_void) -> bool {
    local::with(|here| current(here) == context)
}

/// Whether this thread is inside the callback of any of `contexts`.
pub(crate) fn in_callback_of(mut contexts: impl Iterator<Item = *const c_void>) -> bool {
    let now = local::with(current);
    !now.is_null() && contexts.any(|c| c == now)
}

/// The one message for a drain (`Type::method`) from a callback it would
/// wait for; `whose` names the callback ("the object's own", "a member's").
#[cold]
#[track_caller]
pub(crate) fn drain_would_wait_for_itself(type_name: &str, method: &str, whose: &str) -> ! {
    panic!(
        "windows-threadpool: {type_name}::{method}() called from {whose} callback can never return (it would wait \
         for itself)"
    )
}

/// Tears `object` down with `finish(object, false, here)`, its ordinary
/// teardown, `here` being this thread's state (read once, for this check
/// and for `finish`). From inside the callback of the object whose context
/// is `context`, runs `stop` here (the non-blocking part: stop queuing
/// callbacks; it returns whether a drain is owed at this moment, the moment
/// an ordinary teardown checks) and hands `finish(object, owed, ..)` to
/// another thread (see the module docs). `finish` reports a drain owed if
/// its argument or its own check says so.
pub(crate) fn tear_down<T: Send + 'static>(
    context: *const c_void,
    object: T,
    stop: impl FnOnce(&T) -> bool,
    finish: impl FnOnce(T, bool, Option<&Local>) + Send + 'static,
) {
    local::with(|here| {
        if current(here) == context {
            let owed = stop(&object);
            hand_off(move || local::with(|there| finish(object, owed, there)));
        } else {
            finish(object, false, here);
        }
    });
}

/// A pool object behind a future-facing type (an [`AsyncIo`](crate::io::AsyncIo),
/// the armed wait of a [`Signalled`](crate::wait::Signalled)), whose drop
/// must never block: it may run on an executor's thread, or in a task on a
/// pool whose every thread is busy, where a drain that waits for a queued
/// callback would wait for the very thread it holds.
pub(crate) trait Settle: Send + Sized + 'static {
    /// Whether nothing of the object is queued or outstanding, so that its
    /// drop waits at most for a callback already running.
    fn settled(&self) -> bool;
    /// Brings the object to rest without cancelling a queued callback, so
    /// that its drop owes nothing (`fail-fast` reports a drop that does).
    fn settle(&self);
}

/// Drops `object` without blocking on its callbacks: here if it is
/// [settled](Settle::settled), otherwise [`settle`](Settle::settle) and the
/// drop run on another thread ([`hand_off`]). The one teardown rule of every
/// async wrapper over a pool object.
pub(crate) fn drop_unblocking<T: Settle>(object: T) {
    if object.settled() {
        drop(object);
    } else {
        hand_off(move || {
            object.settle();
            drop(object);
        });
    }
}

/// Teardowns handed off so far in this process.
#[cfg(any(test, feature = "test-hooks"))]
static HANDOFFS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many teardowns this process has handed to another thread. A test
/// hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn handoffs() -> usize {
    HANDOFFS.load(core::sync::atomic::Ordering::SeqCst)
}

/// A teardown handed to another thread, owned through a raw pointer.
struct HandoffPtr<F>(*mut F);

// SAFETY: the pointer owns an `F: Send` (a `Handoff` is `Send` when its
// teardown is: a module handle may be released from any thread), and only the
// thread it is moved to uses it.
unsafe impl<F: Send> Send for HandoffPtr<Handoff<F>> {}

impl<F: FnOnce()> HandoffPtr<Handoff<F>> {
    /// Runs the handoff, frees it, and returns its module reference.
    ///
    /// # Safety
    /// `self.0` came from `Box::into_raw` and has not been run.
    unsafe fn run(self) -> HMODULE {
        // SAFETY: guaranteed by the caller.
        let h = unsafe { Box::from_raw(self.0) };
        let Handoff { module, teardown } = *h;
        teardown();
        module
    }
}

/// A handoff and the reference it holds on the module that contains this
/// code (null if none could be taken).
struct Handoff<F> {
    module: HMODULE,
    teardown: F,
}

unsafe extern "system" fn run_handoff<F: FnOnce()>(instance: PTP_CALLBACK_INSTANCE, context: *mut c_void) {
    // A panic there (a `fail-fast` report) ends the process, saying so.
    // SAFETY: `context` is the handoff `hand_off` submitted, run once, here.
    let module = crate::callback::unwind::or_abort("a handed-off teardown", || unsafe {
        HandoffPtr(context.cast::<Handoff<F>>()).run()
    });
    if !module.is_null() {
        // The pool releases the module only after this callback has returned,
        // so its code stays mapped while it runs.
        // SAFETY: `module` is a reference `hand_off` took and nothing else releases.
        unsafe { FreeLibraryWhenCallbackReturns(instance, module) };
    }
}

/// A counted reference to the module (EXE or DLL) that contains this crate's
/// code. The object being torn down may have kept its DLL loaded
/// (`with_library`); its close releases that reference while the handoff's
/// code still runs, so the handoff holds its own.
fn pin_own_module() -> HMODULE {
    let mut module: HMODULE = core::ptr::null_mut();
    let anchor = pin_own_module as fn() -> HMODULE as *const u16;
    // SAFETY: `anchor` is an address inside this module; `module` is a valid out-pointer.
    let ok = unsafe { GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, anchor, &mut module) };
    if ok == 0 { core::ptr::null_mut() } else { module }
}

/// Runs `teardown` on another thread: a one-off callback on the process
/// default pool, or a new thread if that cannot be submitted. If neither can
/// be had, what `teardown` owns is leaked, which is safe (nothing is freed
/// while a callback may use it).
pub(crate) fn hand_off<F: FnOnce() + Send + 'static>(teardown: F) {
    #[cfg(any(test, feature = "test-hooks"))]
    HANDOFFS.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
    let h = Box::into_raw(Box::new(Handoff { module: pin_own_module(), teardown }));
    // SAFETY: `run_handoff::<F>` takes ownership of `h` exactly when the
    // submission succeeds; a null environment is the process default pool.
    if unsafe { TrySubmitThreadpoolCallback(Some(run_handoff::<F>), h.cast(), core::ptr::null()) } != 0 {
        return;
    }
    // On the fallback thread the module reference is kept for good: a thread
    // cannot release the module its own code runs in and then return into it.
    let h = HandoffPtr(h);
    // On failure the closure is dropped unrun, holding only the raw pointer.
    let _ = std::thread::Builder::new().name("windows-threadpool teardown".into()).spawn(move || {
        // A panic here (a `fail-fast` report) ends the process, as it would
        // on a pool thread.
        // SAFETY: the submission failed, so this thread owns the handoff.
        let _kept_for_good = crate::callback::unwind::or_abort("a handed-off teardown", || unsafe { h.run() });
    });
}
