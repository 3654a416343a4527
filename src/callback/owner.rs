//! One owner, one teardown.
//!
//! Every pool object kind (work, timer, wait, I/O) is a *core*: the raw
//! object, its heap context and what else it owns. A core says how to go
//! through each phase of its teardown by implementing [`Lifecycle`] once;
//! the sequence itself is written here, once, and run by the two ways of
//! owning a core:
//!
//! - [`Owner`], inside a standalone type (`Work`, ...): its `Drop`
//!   runs [`tear_down`], or from the object's own callback stops it at once
//!   and hands the rest to another thread (`crate::callback::reentry`);
//! - a cleanup group, which runs [`before_release`] on every member, lets
//!   the native bulk release drain and close them all, then runs
//!   [`after_release`] on each.
//!
//! The public method set of a kind is written once too, on a *view* type
//! (`WorkObject`, `TimerObject`, ...), `#[repr(transparent)]` over the core
//! ([`ViewOf`]). The standalone type and the cleanup group's member type
//! both `Deref` to it, so they cannot offer different methods.

use core::ffi::c_void;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use std::sync::{PoisonError, RwLock};

use crate::callback::local::Local;
use crate::callback::obligation::{DrainObligation, report_drain_owed};
use crate::callback::reentry;

/// A trace record of the teardown sequence, written under the kind's target.
#[derive(Clone, Copy)]
pub(crate) enum Phase {
    /// `drop-begin`: the teardown started.
    Begin,
    /// `drop-drained`: nothing is queued or running, and nothing can queue.
    Drained,
    /// `drain-owed`: the teardown found a drain still owed.
    DrainOwed,
}

/// The phases of one kind's teardown. Implemented once per kind; only
/// [`Owner`], [`quiesce_for_teardown`] and the cleanup group sequence them.
pub(crate) trait Lifecycle: Send + Sync + Sized + 'static {
    /// The public type owning this object (`"Work"`,
    /// `"WorkMember"`, ...): reports and panics name it.
    fn owner_name(&self) -> &'static str;
    /// The context pointer, which identifies the object to its callbacks.
    fn context(&self) -> *const c_void;
    /// Writes `phase`'s trace record.
    fn record(&self, phase: Phase);
    /// The object's drain obligation.
    fn obligation(&self) -> &DrainObligation;
    /// Whether a drain is still owed (recorded as `drain-owed` if so; the
    /// owner reports it once everything is freed).
    fn drain_owed(&self) -> bool {
        let owed = self.obligation().is_owed();
        if owed {
            self.record(Phase::DrainOwed);
        }
        owed
    }
    /// Whether a drain is owed when the object is dropped from its own
    /// callback, which cannot drain it.
    fn drain_owed_in_own_callback(&self) -> bool {
        self.drain_owed()
    }
    /// The kind's one drain: waits for every queued and running callback
    /// (`cancel`: discards the queued ones first). Stops nothing. A kind
    /// whose native drain can cancel runs it under its [`DrainLock`].
    fn drain(&self, cancel: bool);
    /// Brings the object to rest and leaves it usable: stops, drains, then
    /// accepts arms again.
    fn stop_and_drain(&self) {
        self.drain(false);
    }
    /// Stops, for good and without blocking, whatever could queue another
    /// callback (refuses re-arms, disarms).
    fn stop(&self) {}
    /// Stops for good, then drains (`cancel`: discards queued callbacks
    /// first): on return nothing is queued or running, and nothing can be.
    /// Called by the core's owner tearing it down (a drop, a cleanup group's
    /// release), and by a kind's own `stop_and_drain` only where it says so.
    /// A drain here may skip the in-place flush ([`Access::Owned`]): the
    /// caller submits a task parked on this thread first.
    fn quiesce(&self, cancel: bool);
    /// Closes the native object, then frees what the core owns (the
    /// `drop-closed` record), giving its context's block back to `here`,
    /// this thread's state as the teardown read it.
    fn close_and_free(self, here: Option<&Local>);
}

/// A kind a cleanup group can own: the group's native release drains and
/// closes the object, then the core frees the rest.
pub(crate) trait Released: Lifecycle {
    /// What the member must do itself before the native release (`cancel`:
    /// the release discards queued callbacks): by default quiesce, so the
    /// release has nothing left to race.
    fn before_release(&self, cancel: bool) {
        self.quiesce(cancel);
    }
    /// Frees what the core owns once the native object is closed (the
    /// `drop-closed` record).
    fn free(self);
}

/// Under Wine, serialises an object's cancelling drains with its other
/// drains: a cancellation (`WaitFor*Callbacks(.., TRUE)`) holds it
/// exclusively, every other drain shared. Each kind's [`Lifecycle::drain`]
/// goes through it; on Windows it does nothing.
///
/// Under Wine 8 a cancellation discards the queued callbacks without waking
/// a drain that another thread is blocked in on them (`tp_object_cancel`
/// zeroes the object's pending count; `tp_object_wait` is woken only when a
/// callback of the object returns), so that drain sleeps until the object's
/// next callback returns: forever, for an object nobody arms or submits
/// again (docs/wine.md; a `cancel_pending` racing a `stop_and_drain` hung
/// the timer lifecycle model). Serialised, a cancellation comes either
/// before a drain, which then finds nothing queued, or after it, once the
/// callbacks it waited for have run.
///
/// The price, Wine only: a cancellation that meets a drain already in
/// progress waits for that drain, and so for the object's queued callbacks,
/// not only its running ones. A `cancel_pending` issued from another
/// object's callback on a pool with no other free thread, or while holding a
/// lock the object's callbacks take, can then deadlock, where without the
/// drain in progress it would not (documented on `cancel_pending`). Only a
/// system call runs under the lock, no callback takes it, and a drain is
/// never issued from the object's own callback, so the lock alone closes no
/// cycle. On Windows the race has not been measured, so nothing is
/// serialised there and a cancellation keeps its documented behaviour.
#[derive(Default)]
pub(crate) struct DrainLock(RwLock<()>);

/// Who else may drain an object while this drain runs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// A drain through a shared reference (`wait`, `cancel_pending`,
    /// `stop_and_drain`): another thread may drain or cancel at once.
    Shared,
    /// The owner's teardown (a drop, a cleanup group's release): nothing
    /// else can reach the object, so no other drain can run, and the lock
    /// has nothing to serialise.
    Owned,
}

impl DrainLock {
    pub(crate) const fn new() -> Self {
        Self(RwLock::new(()))
    }

    /// Runs the drain `f`, a cancelling one if `cancel`: through a shared
    /// reference under the lock under Wine, as it is on Windows, and
    /// without it for the owner ([`Access::Owned`]). A task parked to be
    /// polled in place on this thread is submitted first, since the drain
    /// may wait for it: here for a shared drain, by the teardown itself for
    /// the owner's ([`quiesce_for_teardown`], the cleanup group's release),
    /// which has read the thread's state already.
    pub(crate) fn drain<R>(&self, access: Access, cancel: bool, f: impl FnOnce() -> R) -> R {
        if access == Access::Owned {
            return f();
        }
        crate::callback::inplace::flush();
        if !crate::sys::on_wine() {
            return f();
        }
        // Nothing panics while it is held (a drain is a system call and
        // bookkeeping); recover rather than add a panic path.
        if cancel {
            let _alone = self.0.write().unwrap_or_else(PoisonError::into_inner);
            f()
        } else {
            let _shared = self.0.read().unwrap_or_else(PoisonError::into_inner);
            f()
        }
    }
}

/// A group member's teardown up to the native release; returns whether a
/// drain was owed when it began.
pub(crate) fn before_release<C: Released>(core: &C, cancel: bool) -> bool {
    core.record(Phase::Begin);
    let owed = core.drain_owed();
    core.before_release(cancel);
    owed
}

/// A group member's teardown after the native release drained and closed it.
pub(crate) fn after_release<C: Released>(core: C) {
    core.record(Phase::Drained);
    core.free();
}

/// A standalone teardown up to the close: stops, drains, and returns
/// whether a drain was owed when it began. `here` is this thread's state.
fn quiesce_for_teardown<C: Lifecycle>(core: &C, here: Option<&Local>) -> bool {
    core.record(Phase::Begin);
    let owed = core.drain_owed();
    // The drain may wait for a task parked on this thread.
    crate::callback::inplace::flush_in(here);
    core.quiesce(false);
    core.record(Phase::Drained);
    owed
}

/// The non-blocking part of a teardown from the object's own callback;
/// returns whether a drain was owed.
pub(crate) fn stop_in_own_callback<C: Lifecycle>(core: &C) -> bool {
    let owed = core.drain_owed_in_own_callback();
    core.stop();
    owed
}

/// A standalone object's whole teardown: quiesce, close, free, then report
/// a drain owed then or (`owed`) when it was handed off.
fn tear_down<C: Lifecycle>(core: C, owed: bool, here: Option<&Local>) {
    finish(core, owed, here, |core| core.close_and_free(here));
}

/// Quiesces, hands the core to `close`, then reports a drain owed then or
/// (`owed`) earlier: the one sequence of a standalone teardown, whatever
/// closes the object. `here` is this thread's state.
fn finish<C: Lifecycle, R>(core: C, owed: bool, here: Option<&Local>, close: impl FnOnce(C) -> R) -> R {
    let name = core.owner_name();
    let owed = quiesce_for_teardown(&core, here) | owed;
    let r = close(core);
    if owed {
        report_drain_owed(name);
    }
    r
}

/// Panics if this thread is inside `core`'s own callback: `method` would
/// wait for that callback, that is for itself.
#[track_caller]
pub(crate) fn forbid_drain_in_own_callback<C: Lifecycle>(core: &C, method: &str) {
    if reentry::in_own_callback(core.context()) {
        reentry::drain_would_wait_for_itself(core.owner_name(), method, "the object's own");
    }
}

/// The public `wait` of every kind: [`Lifecycle::drain`], refused from the
/// object's own callback.
#[track_caller]
pub(crate) fn wait<C: Lifecycle>(core: &C) {
    forbid_drain_in_own_callback(core, "wait");
    core.drain(false);
}

/// The public `cancel_pending`: a cancelling [`Lifecycle::drain`], refused
/// from the object's own callback.
#[track_caller]
pub(crate) fn cancel_pending<C: Lifecycle>(core: &C) {
    forbid_drain_in_own_callback(core, "cancel_pending");
    core.drain(true);
}

/// The public `stop_and_drain`: [`Lifecycle::stop_and_drain`], refused from
/// the object's own callback.
#[track_caller]
pub(crate) fn stop_and_drain<C: Lifecycle>(core: &C) {
    forbid_drain_in_own_callback(core, "stop_and_drain");
    core.stop_and_drain();
}

/// The sole owner of a standalone object's core; dropping it tears the
/// object down.
pub(crate) struct Owner<C: Lifecycle> {
    /// Taken only by `Drop`.
    core: ManuallyDrop<C>,
}

impl<C: Lifecycle> Owner<C> {
    pub(crate) fn new(core: C) -> Self {
        Self { core: ManuallyDrop::new(core) }
    }

    /// Tears the object down as dropping it does, but closes it with
    /// `close` (a conversion that keeps what the core owns). Refused from
    /// the object's own callback, which the drain would wait for.
    #[track_caller]
    pub(crate) fn tear_down_with<R>(self, method: &str, close: impl FnOnce(C) -> R) -> R {
        // Checked while `self` still owns the core: a panic drops it properly.
        forbid_drain_in_own_callback(&*self.core, method);
        let mut this = ManuallyDrop::new(self);
        // SAFETY: taken once, here; `this` is never dropped, so `Drop` cannot take it again.
        let core = unsafe { ManuallyDrop::take(&mut this.core) };
        crate::callback::local::with(|here| finish(core, false, here, close))
    }
}

impl<C: Lifecycle> Deref for Owner<C> {
    type Target = C;
    #[inline]
    fn deref(&self) -> &C {
        &self.core
    }
}

impl<C: Lifecycle> Drop for Owner<C> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.core` is not used again.
        let core = unsafe { ManuallyDrop::take(&mut self.core) };
        reentry::tear_down(core.context(), core, stop_in_own_callback::<C>, tear_down::<C>);
    }
}

/// A public view of the core `C`: the type is `#[repr(transparent)]` over
/// `C`, so a `&C` is a valid `&Self`.
///
/// # Safety
/// The implementing type must be `#[repr(transparent)]` with `C` as its one
/// non-zero-sized field, and must never be constructed or dropped by value
/// (only reached by reference from a live core): dropping a core outside
/// its owner's teardown would free the context while the native object
/// still exists.
pub(crate) unsafe trait ViewOf<C> {}

/// `core` seen as its public view.
#[inline]
pub(crate) fn view<V: ViewOf<C>, C>(core: &C) -> &V {
    // SAFETY: `V` is `repr(transparent)` over `C` (`ViewOf`'s contract), so
    // the pointer is a valid `&V` for the same lifetime.
    unsafe { &*(core as *const C).cast::<V>() }
}

/// `impl Deref<Target = $view>` for an owning or member type, through the
/// expression `$core` (a `&Core`) of `$self`.
macro_rules! deref_to_view {
    ($ty:ty => $view:ty, |$self:ident| $core:expr) => {
        impl core::ops::Deref for $ty {
            type Target = $view;
            #[inline]
            fn deref(&self) -> &$view {
                let $self = self;
                $crate::callback::owner::view($core)
            }
        }
    };
}

/// Declares `$view`, a kind's public method set, `#[repr(transparent)]` over
/// `$core`, and makes the standalone `$owner` (whose `core` field is an
/// `Owner<$core>`) dereference to it and debug-print as it.
macro_rules! view {
    ($(#[$attr:meta])* pub struct $view:ident($core:ty); owned by $owner:ty) => {
        $(#[$attr])*
        #[repr(transparent)]
        pub struct $view($core);

        // SAFETY: `repr(transparent)` over the core, as declared just above.
        unsafe impl $crate::callback::owner::ViewOf<$core> for $view {}

        deref_to_view!($owner => $view, |s| &*s.core);

        impl core::fmt::Debug for $owner {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&**self, f)
            }
        }
    };
}
