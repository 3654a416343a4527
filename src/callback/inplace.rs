//! The in-place slot: a task woken by one of the crate's pool callbacks is
//! polled on that callback's thread once the callback's own work is done,
//! instead of being submitted to another pool thread (one hand-off saved:
//! 10 to 20 µs under Wine). The rules and their reasons are in the task
//! module docs ([`crate::task`], "In-place polling"); this is the mechanism.
//!
//! A trampoline that may wake a task enters a [`Site`] first (so it is left
//! last): a value on its stack whose address the thread's
//! [`Local`](crate::callback::local) holds while the callback runs. The code that completes futures arms it with the
//! [`Class`] of its object ([`arm`]): pool, priority, runs-long and
//! placement. A wake that moves a task `IDLE -> SCHEDULED` asks [`park`]
//! first: if this thread's site is armed with the task's class, nothing is
//! parked yet and the budget allows, the task's reference goes into the
//! site and nothing is submitted. When the site is left (the trampoline's
//! last act), the thread's site is restored first, so a wake from the
//! in-place poll submits, and the parked task is polled; if the thread is unwinding
//! it is submitted instead. Either way a parked task is never lost.
//!
//! A site also holds at most one value to drop once it is left
//! ([`drop_when_left`]), after the thread has been disassociated from the
//! callback's object: the I/O engine whose last completion is running, so
//! its close drains only the object's other callbacks, on this thread,
//! instead of being handed to another thread to wait for this one.

use core::cell::Cell;
use core::sync::atomic::{AtomicU8, Ordering};

use windows_sys::Win32::System::Threading::{DisassociateCurrentThreadFromCallback, PTP_CALLBACK_INSTANCE};

use crate::callback::local::{self, Local};
use crate::callback_env::CallbackEnviron;

/// In-place polls in a row on one thread after which the next wake is
/// submitted. The thread returns to the pool after every in-place poll (one
/// per callback), so this bounds how often one thread's tasks overtake
/// callbacks already queued on the pool, not how long it is held; 16 makes
/// the forced hand-off cost about a sixteenth of one per wake (1 µs under
/// Wine) while a queued callback is overtaken at most 16 times in a row.
pub(crate) const BUDGET: usize = 16;

/// Where and how a callback runs: two callbacks of one class are
/// interchangeable for the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Class {
    /// The pool (`PTP_POOL`), 0 for the process default pool.
    pool: usize,
    priority: i32,
    runs_long: bool,
    /// The placement's group and mask (0: none).
    group: u16,
    mask: usize,
}

impl Class {
    /// The class of an object created with no environment.
    pub(crate) const DEFAULT: Self = Self { pool: 0, priority: 1, runs_long: false, group: 0, mask: 0 };

    /// The class of a task spawned with `env` (a task never joins a cleanup
    /// group); `None`, never polled in place, with a library reference
    /// (`with_library`): the pool keeps that module loaded only for the
    /// task's own callback.
    pub(crate) fn of_task(env: Option<&CallbackEnviron>) -> Option<Self> {
        let Some(env) = env else { return Some(Self::DEFAULT) };
        let raw = env.as_inner();
        if !raw.RaceDll.is_null() {
            return None;
        }
        let (group, mask) = env.affinity().map_or((0, 0), |s| (s.group(), s.mask()));
        Some(Self { pool: raw.Pool as usize, priority: raw.CallbackPriority, runs_long: env.runs_long(), group, mask })
    }

    /// The class a completion callback of an object created with `env` arms
    /// its site with; `None` (no in-place poll) for an object in a cleanup
    /// group, whose release waits for the callback however it ends.
    pub(crate) fn of_completions(env: Option<&CallbackEnviron>) -> Option<Self> {
        match env {
            Some(e) if e.as_inner().CleanupGroup != 0 => None,
            _ => Self::of_task(env),
        }
    }
}

/// A parked task: its reference (given up by whoever runs or submits it)
/// and what runs or submits it. Not `Copy`: it owns the reference.
pub(crate) struct Parked {
    pub(crate) task: *const (),
    /// Polls the task once, as its work callback does, with this callback's
    /// instance; takes the reference.
    pub(crate) poll: unsafe fn(*const (), PTP_CALLBACK_INSTANCE),
    /// Submits the task's work object, handing it the reference.
    pub(crate) submit: unsafe fn(*const ()),
}

/// Unknown until the first spawn reads the environment.
const UNKNOWN: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;
static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The environment variable that turns in-place polling off (`1`), read
/// once, at the first spawn.
pub(crate) const OFF_VAR: &str = "WINDOWS_THREADPOOL_NO_INPLACE";

/// Reads [`OFF_VAR`], once; every spawn calls it first. Until it has run,
/// or when it found the variable set, no site is ever entered, so nothing
/// is parked, and a drain reads no thread-local to find a parked task.
pub(crate) fn ensure() {
    if MODE.load(Ordering::Relaxed) != UNKNOWN {
        return;
    }
    let off = std::env::var_os(OFF_VAR).is_some_and(|v| v == "1");
    // Decided once: two first spawns that read the variable apart cannot
    // turn it off after a task was parked (a flush would then miss it).
    let _ = MODE.compare_exchange(UNKNOWN, if off { OFF } else { ON }, Ordering::Relaxed, Ordering::Relaxed);
}

/// Whether sites are entered (see [`ensure`]).
#[inline]
fn on() -> bool {
    MODE.load(Ordering::Relaxed) == ON
}

/// In-place polls this process has run. Counted only when the tests can read it.
#[cfg(any(test, feature = "test-hooks"))]
static POLLS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// How many tasks this process has polled in place (woken inside one of the
/// crate's callbacks and polled there). A test hook, not API.
#[cfg(any(test, feature = "test-hooks"))]
#[doc(hidden)]
pub fn inplace_polls() -> usize {
    POLLS.load(Ordering::SeqCst)
}

/// One callback's in-place slot, on its trampoline's stack.
pub(crate) struct Site {
    instance: PTP_CALLBACK_INSTANCE,
    /// Disassociate the thread from the callback's object before the
    /// in-place poll (see the task module docs).
    disassociate: bool,
    armed: Cell<Option<Class>>,
    was_armed: Cell<bool>,
    parked: Cell<Option<Parked>>,
    /// What [`drop_when_left`] left here, dropped once the thread is
    /// disassociated from the callback's object.
    deferred: Cell<Option<Box<dyn Send>>>,
}

impl Site {
    #[inline]
    pub(crate) fn new(instance: PTP_CALLBACK_INSTANCE, disassociate: bool) -> Self {
        Self {
            instance,
            disassociate,
            armed: Cell::new(None),
            was_armed: Cell::new(false),
            parked: Cell::new(None),
            deferred: Cell::new(None),
        }
    }

    /// Makes this the thread's site until the guard is dropped, which then
    /// polls (or submits) the task parked here.
    #[inline]
    pub(crate) fn enter(&self) -> Entered<'_> {
        let not_entered = Entered { site: self, here: core::ptr::null(), outer: core::ptr::null() };
        if !on() {
            return not_entered;
        }
        local::with(|here| match here {
            Some(l) => Entered { site: self, here: l, outer: l.site.replace(self) },
            // The thread is exiting: no site, every wake submits.
            None => not_entered,
        })
    }

    /// Arms the site for tasks of `class` (`None`: disarms), unless a task
    /// is parked already: at most one in-place poll per callback.
    #[inline]
    pub(crate) fn arm(&self, class: Option<Class>) {
        if class.is_some() {
            let parked = self.parked.take();
            let full = parked.is_some();
            self.parked.set(parked);
            if full {
                return;
            }
            self.was_armed.set(true);
        }
        self.armed.set(class);
    }
}

/// The site of the callback running on the thread whose state is `here`,
/// null outside one.
#[inline]
fn site_of(here: Option<&Local>) -> *const Site {
    here.map_or(core::ptr::null(), |l| l.site.get())
}

/// The site of the callback running on this thread, null outside one.
#[inline]
fn current() -> *const Site {
    if !on() {
        return core::ptr::null();
    }
    local::with(site_of)
}

/// The thread's site, armed while code that completes futures runs (an
/// I/O completion, the time driver's firing, a wait future's callback).
pub(crate) struct Armed(*const Site);

/// Arms this thread's site with `class` until the guard is dropped; does
/// nothing outside a site or for `None`.
#[inline]
pub(crate) fn arm(class: Option<Class>) -> Armed {
    let site = if class.is_some() { current() } else { core::ptr::null() };
    // SAFETY: a non-null value is the site of the trampoline running on this
    // thread, which outlives the code it calls (this guard included).
    if let Some(s) = unsafe { site.as_ref() } {
        s.arm(class);
    }
    Armed(site)
}

impl Drop for Armed {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: as in `arm`.
        if let Some(s) = unsafe { self.0.as_ref() } {
            s.armed.set(None);
        }
    }
}

/// Parks `task` (of `class`) in this thread's site if the site is armed for
/// that class, holds nothing yet and the budget allows; returns whether it
/// did (the site now owns the reference). Otherwise the caller submits.
#[inline]
pub(crate) fn park(class: Option<Class>, task: Parked) -> bool {
    if class.is_none() || !on() {
        return false;
    }
    local::with(|here| {
        let Some(l) = here else { return false };
        // SAFETY: as in `arm`.
        let Some(site) = (unsafe { l.site.get().as_ref() }) else { return false };
        if site.armed.get() != class {
            return false;
        }
        // Whatever happens now, this callback parks nothing more.
        site.armed.set(None);
        if l.row.get() >= BUDGET {
            l.row.set(0);
            return false;
        }
        site.parked.set(Some(task));
        true
    })
}

/// Drops `value` when this thread's site is left, after the thread has been
/// disassociated from the callback's object, if the site disassociates and
/// holds nothing deferred yet; otherwise here. For an object whose last
/// completion drops it: its drain then waits only for its other callbacks,
/// not for this one, so its teardown runs on this thread instead of being
/// handed to another (`crate::callback::reentry`).
pub(crate) fn drop_when_left<T: Send + 'static>(value: T) {
    let site = current();
    // SAFETY: as in `arm`.
    match unsafe { site.as_ref() } {
        Some(s) if s.disassociate => {
            let held = s.deferred.take();
            if held.is_none() {
                s.deferred.set(Some(Box::new(value)));
                return;
            }
            s.deferred.set(held);
            drop(value);
        }
        _ => drop(value),
    }
}

/// Submits the task parked in this thread's site, if any, and disarms the
/// site: the callback is about to block (a join, `block_on`,
/// `may_run_long`, any drain of a pool object or a cleanup group's
/// release), and a parked task would wait for it.
pub(crate) fn flush() {
    if on() {
        local::with(flush_in);
    }
}

/// [`flush`] with this thread's state read by the caller.
pub(crate) fn flush_in(here: Option<&Local>) {
    // SAFETY: as in `arm`.
    let Some(site) = (unsafe { site_of(here).as_ref() }) else { return };
    site.armed.set(None);
    if let Some(p) = site.parked.take() {
        // SAFETY: the parked reference, handed to the submission.
        unsafe { (p.submit)(p.task) };
    }
}

/// A site made current; dropping it leaves the site and runs what it holds.
pub(crate) struct Entered<'a> {
    site: &'a Site,
    /// This thread's state (null: the site was not entered). It outlives
    /// the guard, which is dropped on this thread before the callback
    /// returns (a thread's state is dropped only when it exits).
    here: *const Local,
    outer: *const Site,
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: null or this thread's state, alive (see the field): the
        // guard is `!Send` (raw pointers), so this is the thread it was made on.
        let Some(here) = (unsafe { self.here.as_ref() }) else { return };
        // Left first: a wake during the in-place poll finds no site and
        // submits (no recursion).
        here.site.set(self.outer);
        let site = self.site;
        let deferred = site.deferred.take();
        let parked = site.parked.take();
        let poll = parked.is_some() && !std::thread::panicking();
        if site.disassociate && (poll || deferred.is_some()) {
            // SAFETY: the instance of the callback running on this thread,
            // which touches nothing of its object any more.
            unsafe { DisassociateCurrentThreadFromCallback(site.instance) };
        }
        // Only a site that disassociates holds one (`drop_when_left`).
        if std::thread::panicking() {
            // Leaked: the callback did not finish with its object (its
            // count of completions may still hold this one), so its drain
            // could wait for good; the unwind ends in an abort anyway.
            core::mem::forget(deferred);
        } else {
            drop(deferred);
        }
        let Some(p) = parked else {
            if site.was_armed.get() && here.row.get() != 0 {
                here.row.set(0);
            }
            return;
        };
        if !poll {
            // SAFETY: the parked reference, handed to the submission.
            unsafe { (p.submit)(p.task) };
            return;
        }
        here.row.set(here.row.get() + 1);
        #[cfg(any(test, feature = "test-hooks"))]
        POLLS.fetch_add(1, Ordering::SeqCst);
        // SAFETY: the parked reference, given to the poll, which runs the
        // task's work callback's code on this callback's instance.
        unsafe { (p.poll)(p.task, site.instance) };
    }
}
