//! This thread's state, in one thread-local.
//!
//! Four of the crate's rules keep state per thread: which of the crate's
//! callbacks is running on it (`crate::callback::reentry`), where a task it wakes may
//! be parked to be polled in place (`crate::callback::inplace`), which task callback's
//! instance `may_run_long` answers for (`crate::task`), and the context
//! blocks it keeps for reuse (`crate::callback::ctx::blocks`). They share one
//! [`Local`], so that a path needing several reads the thread-local once: a
//! standalone object's drop checks that it is not in the object's own
//! callback, submits a task parked on the thread and gives the context's
//! block back with one read ([`with`], the value handed down the teardown),
//! and a callback marks itself with one read and two plain stores.
//!
//! `x86_64-pc-windows-gnu` has no native thread-locals: each read is a
//! `TlsGetValue` (about 5 ns under Wine). A target with native
//! thread-locals (`msvc`) reads it with one instruction.
//!
//! The value is made at the thread's first use (std allocates it from the
//! system heap, not the global allocator, on targets without native
//! thread-locals) and dropped when the thread exits: a pool thread pays
//! that once, at its first callback. While it is being dropped [`with`]
//! hands out `None` (the thread is exiting, so no callback runs on it, and
//! a block given back then is freed instead of kept); a later thread-local
//! destructor that uses it may get a new one, which std drops in turn.
//!
//! A callback's guards ([`Mark`], which `CallbackScope` and the task's
//! `InstanceMark` hold, and the in-place `Entered`) keep the value's address
//! from entry to exit: they are `!Send`, made and dropped on one thread
//! inside one callback, and nothing drops or replaces the value then (it is
//! dropped at thread exit only, and its initializer is `const`, so no first
//! use can re-enter and replace it).
//!
//! # Circular imports
//! `Local` holds the kept blocks of `ctx` and the slot of `inplace`, and both
//! reach the thread's state through it: one thread-local read on each path is
//! what this module is for, so the three name each other.

use core::cell::Cell;
use core::ffi::c_void;

use crate::callback::ctx::blocks::Kept;

/// This thread's state.
pub(crate) struct Local {
    /// The context of the crate's callback running on this thread, null
    /// outside one (`crate::callback::reentry`).
    pub(crate) callback: Cell<*const c_void>,
    /// The in-place site of the callback running on this thread, null
    /// outside one (`crate::callback::inplace`).
    #[cfg(windows)]
    pub(crate) site: Cell<*const crate::callback::inplace::Site>,
    /// The in-place polls in a row on this thread (`crate::callback::inplace`).
    #[cfg(windows)]
    pub(crate) row: Cell<usize>,
    /// The instance of the task callback running on this thread, 0
    /// elsewhere (`crate::task`'s `may_run_long`).
    #[cfg(windows)]
    pub(crate) task_instance: Cell<windows_sys::Win32::System::Threading::PTP_CALLBACK_INSTANCE>,
    /// What the running task poll may still complete
    /// (`crate::task::budget`); unlimited outside one.
    pub(crate) budget: Cell<u32>,
    /// The data pointer of the waker of the task poll that owns `budget`.
    pub(crate) budget_waker: Cell<*const ()>,
    /// Blocks of freed contexts, kept for reuse (`crate::callback::ctx::blocks`).
    pub(crate) kept: Kept,
}

std::thread_local! {
    // Must stay `const`-initialised: guards keep its address (module docs).
    static LOCAL: Local = const {
        Local {
            callback: Cell::new(core::ptr::null()),
            #[cfg(windows)]
            site: Cell::new(core::ptr::null()),
            #[cfg(windows)]
            row: Cell::new(0),
            #[cfg(windows)]
            task_instance: Cell::new(0),
            budget: Cell::new(u32::MAX),
            budget_waker: Cell::new(core::ptr::null()),
            kept: Kept::new(),
        }
    };
}

/// Runs `f` with this thread's state, or with `None` while it is being
/// destroyed at thread exit (see the module docs). A caller that
/// needs the state several times reads it once here and hands it down.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(Option<&Local>) -> R) -> R {
    let mut f = Some(f);
    match LOCAL.try_with(|l| f.take().map(|f| f(Some(l)))) {
        Ok(Some(r)) => r,
        // `try_with` ran nothing: the value is gone.
        _ => f.take().map_or_else(|| unreachable!("`with` ran its function"), |f| f(None)),
    }
}

/// Sets one cell of this thread's [`Local`] until dropped, then puts the
/// value it replaced back: how a callback marks what runs on its thread
/// (nested callbacks restore in turn). Made and dropped inside one callback
/// (module docs).
pub(crate) struct Mark<T: Copy> {
    /// A cell of the value [`with`] handed out on this thread when the mark
    /// was made; a raw pointer, so the mark is `!Send` and dropped on this
    /// thread.
    cell: *const Cell<T>,
    outer: T,
}

impl<T: Copy> Mark<T> {
    /// Sets the cell `pick` selects in this thread's state to `value`;
    /// `None` while the state is being destroyed (the thread is exiting).
    #[inline]
    pub(crate) fn set(pick: fn(&Local) -> &Cell<T>, value: T) -> Option<Self> {
        with(|here| {
            let cell = pick(here?);
            Some(Self { cell, outer: cell.replace(value) })
        })
    }
}

impl<T: Copy> Drop for Mark<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `cell` is in (or, picked from a `'static`, outlives) the
        // value `with` handed out on this thread, which only its thread-local
        // destructor frees, at thread exit, and nothing replaces (its
        // initializer is `const`). A mark is a local of a callback's frame,
        // never stored past it, so it is dropped first (a frame that
        // `ExitThread` abandons leaks it instead). `!Send`: this thread.
        unsafe { (*self.cell).set(self.outer) };
    }
}
