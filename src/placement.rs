//! Placement: running an object's callbacks on a chosen set of processors.
//!
//! [`CallbackEnviron::with_affinity`](crate::CallbackEnviron::with_affinity)
//! names a [`ProcessorSet`]; every object created from the environment runs
//! each of its callbacks there:
//!
//! ```
//! use windows_threadpool::{CallbackEnviron, ProcessorSet, Work};
//!
//! let env = CallbackEnviron::new(); // processor 0 of group 0
//! let work = Work::new_in(|_| { /* runs on processor 0 */ }, &env)?;
//! work.submit();
//! work.wait();
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # It places callbacks, not threads
//! The Windows thread pool API has no documented call that sets the
//! affinity of a pool's threads, and the pool creates and retires its
//! threads itself, so no affinity set on a thread once would stay with the
//! pool. The crate therefore places each callback: on entry the trampoline
//! moves the pool thread to the set (`SetThreadGroupAffinity`, which also
//! returns the thread's previous affinity), and before the thread goes back
//! to the pool it restores that previous affinity, so other objects'
//! callbacks on the same thread run unplaced. The restore is done by the
//! per-callback scope every trampoline enters first (`reentry::CallbackScope`),
//! from a copy on the trampoline's stack: it happens however the callback
//! ends its use of the object (returns, re-arms it, or drops it from its own
//! callback, which hands the teardown to another thread).
//!
//! An object's set is read from the environment when the object is
//! created and kept in the object's context, next to the state the
//! trampoline reads anyway: an object without placement pays one branch per
//! callback. A placed callback pays two `SetThreadGroupAffinity` calls.
//!
//! If the pool thread cannot be moved (a processor of the set went offline
//! after the set was validated, or the process's own affinity excludes the
//! set), the callback runs where it is, unplaced.

use core::ffi::c_void;
use std::io;

use windows_sys::Win32::System::SystemInformation::GROUP_AFFINITY;
use windows_sys::Win32::System::Threading::{
    GetActiveProcessorCount, GetActiveProcessorGroupCount, GetCurrentThread, GetThreadGroupAffinity,
    SetThreadGroupAffinity,
};

/// A set of logical processors in one processor group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessorSet {
    group: u16,
    mask: usize,
}

impl ProcessorSet {
    /// The processors of `group` whose bits are set in `mask` (bit `n` is
    /// processor `n` of the group).
    ///
    /// # Errors
    /// - [`io::ErrorKind::InvalidInput`] if `mask` is empty: no machine has
    ///   such a set;
    /// - [`io::ErrorKind::NotFound`] if this machine lacks the processors:
    ///   `group` is not an active processor group
    ///   (`GetActiveProcessorGroupCount`), or `mask` names a processor beyond
    ///   the group's active ones (`GetActiveProcessorCount`). A caller may
    ///   fall back to another set, or to none.
    pub fn new(group: u16, mask: usize) -> io::Result<Self> {
        if mask == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("processor set of group {group} is empty (mask 0)"),
            ));
        }
        // SAFETY: no preconditions.
        let groups = unsafe { GetActiveProcessorGroupCount() };
        if group >= groups {
            return Err(absent(format!("processor group {group} does not exist (active groups: {groups})")));
        }
        // SAFETY: no preconditions.
        let count = unsafe { GetActiveProcessorCount(group) };
        let active = if count >= usize::BITS { usize::MAX } else { (1usize << count) - 1 };
        if mask & !active != 0 {
            return Err(absent(format!(
                "processor mask {mask:#x} names processors beyond the {count} active in group {group} ({active:#x})"
            )));
        }
        Ok(Self { group, mask })
    }

    /// The affinity of the calling thread (`GetThreadGroupAffinity`).
    pub fn current() -> io::Result<Self> {
        let mut a = GROUP_AFFINITY::default();
        // SAFETY: the pseudo-handle names the calling thread; `a` is writable.
        if unsafe { GetThreadGroupAffinity(GetCurrentThread(), &mut a) } == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { group: a.Group, mask: a.Mask })
    }

    /// The processor group.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// The processors within the group, one bit each.
    pub fn mask(&self) -> usize {
        self.mask
    }
}

/// Processors this machine does not have.
fn absent(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, msg)
}

/// An object's placement, the first field of its context (`ctx::Shared`),
/// so the per-callback scope reads it without knowing the object's type.
/// A zero mask means none.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(crate) struct Placement(GROUP_AFFINITY);

impl Placement {
    pub(crate) const NONE: Self = Self(GROUP_AFFINITY { Mask: 0, Group: 0, Reserved: [0; 3] });

    pub(crate) fn of(set: Option<ProcessorSet>) -> Self {
        match set {
            Some(s) => Self(GROUP_AFFINITY { Mask: s.mask, Group: s.group, Reserved: [0; 3] }),
            None => Self::NONE,
        }
    }

    pub(crate) fn set(&self) -> Option<ProcessorSet> {
        (self.0.Mask != 0).then_some(ProcessorSet { group: self.0.Group, mask: self.0.Mask })
    }
}

/// The affinity to restore when a placed callback ends; a zero mask means
/// the callback was not placed.
pub(crate) struct Restore(GROUP_AFFINITY);

/// Places the calling thread as the object whose context is `context`
/// asks. The first thing a callback does (through `CallbackScope::enter`).
///
/// # Safety
/// `context` points to a live `repr(C)` value whose first field is a
/// [`Placement`] (a `ctx::Context`'s block, or a task's header).
#[inline]
pub(crate) unsafe fn enter(context: *mut c_void) -> Restore {
    // SAFETY: guaranteed by the caller: a context starts with its placement.
    let p = unsafe { &*context.cast::<Placement>() };
    if p.0.Mask == 0 { Restore(Placement::NONE.0) } else { place(&p.0) }
}

#[cold]
fn place(to: &GROUP_AFFINITY) -> Restore {
    let mut previous = GROUP_AFFINITY::default();
    // SAFETY: the pseudo-handle names the calling thread; both structures
    // are valid for the call.
    if unsafe { SetThreadGroupAffinity(GetCurrentThread(), to, &mut previous) } == 0 {
        // Unplaced (see the module docs); nothing to restore.
        return Restore(Placement::NONE.0);
    }
    Restore(previous)
}

impl Drop for Restore {
    #[inline]
    fn drop(&mut self) {
        if self.0.Mask != 0 {
            // SAFETY: the pseudo-handle names the calling thread, the one
            // `place` moved; `self.0` is the affinity it had before.
            unsafe { SetThreadGroupAffinity(GetCurrentThread(), &self.0, core::ptr::null_mut()) };
        }
    }
}
