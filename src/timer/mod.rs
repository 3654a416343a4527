//! Thread-pool timers (`TP_TIMER`): [`Timer`] fires once per arming,
//! [`PeriodicTimer`] ticks every period until stopped, each running a
//! callback on a pool thread. In async code, await [`crate::time`]'s
//! `sleep`, `interval` and `timeout` instead.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use windows_threadpool::Timer;
//!
//! let (tx, rx) = mpsc::channel();
//! let timer = Timer::new(move |firing| {
//!     let _ = tx.send(());
//!     // Fire again 5 ms after this firing ends; the request applies once
//!     // the callback has returned, so firings never overlap.
//!     firing.rearm(Duration::from_millis(5));
//! })?;
//! timer.arm(Duration::from_millis(1));
//! for _ in 0..3 {
//!     rx.recv_timeout(Duration::from_secs(10)).expect("the timer fires");
//! }
//! timer.stop_and_drain(); // no firing is running or will start
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Why two types
//! A one-shot timer's callback never overlaps itself unless the owner re-arms
//! it from outside while it runs; a periodic timer's ticks can overlap (the
//! pool queues the next tick on schedule whether or not the previous one has
//! returned, and runs it on another thread). A `period` argument on one type
//! would silently change that concurrency contract, so the contract is in the
//! type: [`Timer`] for self-paced repetition
//! ([`TimerFiring::rearm`] with a delay: the next firing is due that long
//! after the previous one *ended*), [`PeriodicTimer`] for a fixed cadence.
//!
//! # Arming
//! Both types, and [`Wait`](crate::Wait), share one verb family: `arm`
//! (replaces any previous arming), `arm_with_window` (timers: the pool may
//! delay a firing by up to the window to coalesce timers), `disarm`, and
//! `is_armed`. Every `arm` takes `impl Into<`[`Deadline`]`>`: a [`Duration`]
//! from now, an `Instant`, a [`SystemTime`], or [`Deadline::NEVER`]. Arming
//! never fails; the conversions (rounded up, saturating) are described in
//! [`crate::time`].
//!
//! # Periods and windows
//! Periods are whole milliseconds (`u32`); anything else is rejected with
//! `InvalidInput` where the period is given, in
//! [`PeriodicTimer::new`], the one place it is checked. A coalescing window
//! is a tolerance, so it is rounded *down* to whole milliseconds and
//! saturates at `u32::MAX` ms.
//!
//! # Re-arming from inside a firing
//! [`TimerFiring::rearm`] only records a request (the last one wins); the
//! trampoline converts it to a due time and applies it with
//! `SetThreadpoolTimer` after the callback returns, so a delay counts from
//! the end of the firing and an `Instant` is exact. An arming or disarm from
//! outside (`arm*`, `disarm`) that happens while a firing runs takes
//! precedence: that firing's re-arm request is dropped.
//!
//! # Arms racing a stop
//! Every arming, from outside or a firing's re-arm, goes through the arming
//! gate that waits share (`crate::callback::arming`): `Drop` and
//! [`TimerObject::stop_and_drain`] raise it and disarm under its lock,
//! and an arming that takes the lock while a stop is in progress is
//! absorbed (it arms nothing and reports success, as if it had come before
//! the stop). So an arming cannot land between a stop's disarm and the end
//! of its drain.
//!
//! # Teardown
//! `Drop` stops arms, disarms, drains with
//! `WaitForThreadpoolTimerCallbacks(.., FALSE)` (never cancels), closes the
//! timer, then frees the callback. A drain waits only for callbacks already
//! queued or running: a due time still in the future has queued nothing,
//! which is why the disarm comes first.
//!
//! A callback may drop the last owner of its own timer (a one-shot that drops
//! itself after firing, a tick that ends its periodic timer): the drop
//! suppresses re-arms and disarms at once, and the drain, close and free run
//! on another thread once the callback has returned (see the
//! [crate docs](crate#a-callback-that-reaches-its-own-object)). A tick that
//! calls [`PeriodicTick::disarm`] before dropping its timer leaves no drain
//! owed. `wait`, `stop_and_drain` and `cancel_pending` called from the
//! timer's own callback panic: the drain would wait for the callback itself.
//!
//! A timer dropped while it still owes a drain (a one-shot armed and not yet
//! fired, or re-armed by its last firing; a periodic timer armed and not
//! stopped and drained since) is torn down just the same, and the debt is
//! recorded as `drain-owed`; with the `fail-fast` feature, `Drop` then panics
//! saying so. Call `stop_and_drain` first to drop a timer at rest.
//!
//! # Platform differences
//! On Windows, disarming a timer discarded a callback that had already been
//! queued but had not started, where measured (Microsoft's
//! `SetThreadpoolTimer` says instead that callbacks already queued still
//! occur, so count on neither); on Wine 8 that callback still runs. `disarm`
//! reports what it cancelled through `SetThreadpoolTimerEx` (Windows 8 and
//! later), looked up at run time; Wine 8 lacks it, and `disarm` returns
//! `None` there. Wine 8 also reads the period as a signed 32-bit
//! value, so a period above `i32::MAX` ms ticks continuously there. See
//! `docs/wine.md`.
//!
//! # Circular imports
//! `timercore` is the core that both public types own, `periodic` the periodic
//! timer's types: the core's trampolines hand out the tokens ([`TimerFiring`]
//! here, `PeriodicTick` in `periodic`) and the public types wrap the core, so
//! the three files are one module's parts and name each other.

use core::cell::Cell;
use core::ffi::c_void;
use std::io;
use std::time::Duration;
#[cfg(doc)]
use std::time::SystemTime;

use windows_sys::Win32::System::Threading::{IsThreadpoolTimerSet, PTP_TIMER};

use crate::callback::ctx::Blocks;
use crate::callback::owner::{self, Lifecycle, Owner};
use crate::callback_env::CallbackEnviron;
use crate::instance::CallbackInstance;
use crate::sys::deadline::Deadline;

mod periodic;
mod timercore;
pub use periodic::{PeriodicTick, PeriodicTimer, PeriodicTimerObject};
pub(crate) use timercore::TimerCore;

/// A coalescing window in whole milliseconds, rounded down (the pool may
/// delay a firing by the window, so never by more than asked) and
/// saturating at `u32::MAX` ms.
fn window_millis(window: Duration) -> u32 {
    u32::try_from(window.as_millis()).unwrap_or(u32::MAX)
}

/// What a [`Timer`]'s callback receives: the handle for re-arming
/// the timer from inside its own firing.
///
/// A request is only recorded; it is applied after the callback returns
/// (the last request wins), so the next firing cannot overlap this one and
/// a delay counts from the end of this firing. It is dropped if the timer
/// is being dropped or drained by [`TimerObject::stop_and_drain`], or if
/// the owner armed or disarmed the timer while this firing ran.
///
/// Not `Send` or `Sync`: it lives for one firing on one thread.
pub struct TimerFiring<'a> {
    request: Cell<Option<Deadline>>,
    instance: CallbackInstance<'a>,
}

impl core::fmt::Debug for TimerFiring<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TimerFiring").field("rearm", &self.request.get()).finish()
    }
}

impl<'a> TimerFiring<'a> {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'a> {
        &self.instance
    }

    /// Re-arms the timer to fire at `deadline`, applied after this firing
    /// returns: a [`Duration`] counts from then (zero: immediately after), an
    /// `Instant` or [`SystemTime`] already past fires at once. A later
    /// request in the same firing replaces this one. See [`crate::time`].
    pub fn rearm(&self, deadline: impl Into<Deadline>) {
        let deadline = deadline.into();
        trace_record!("timer", "rearm-requested", deadline.timer_due(), 0);
        self.request.set(Some(deadline));
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Timer>();
    send_sync::<PeriodicTimer>();
    send_sync::<TimerObject>();
    send_sync::<PeriodicTimerObject>();
};

/// An owned one-shot timer (`CreateThreadpoolTimer`): each arming fires the
/// callback once. Its methods are [`TimerObject`]'s, which the cleanup
/// group's [`TimerMember`](crate::cleanup_group::TimerMember) offers too.
///
/// Arm it with [`arm`](TimerObject::arm) (a `Duration`, an `Instant` or a
/// `SystemTime`); arming again replaces the previous due time. From inside
/// the callback, [`TimerFiring::rearm`] schedules
/// the next firing without overlap. `Drop` suppresses any pending re-arm,
/// disarms, drains (never cancels), closes the timer, then frees the
/// callback; dropping an armed timer owes a drain (see
/// [the module docs](crate::timer#teardown)). The callback may drop the
/// timer's last owner (the teardown then completes once it returns);
/// draining the timer from its own callback panics.
///
/// ```
/// use std::sync::{Arc, Mutex, Condvar};
/// use std::time::{Duration, Instant};
/// use windows_threadpool::Timer;
///
/// let fired = Arc::new((Mutex::new(0), Condvar::new()));
/// let f = Arc::clone(&fired);
/// let timer = Timer::new(move |_| {
///     *f.0.lock().unwrap() += 1;
///     f.1.notify_all();
/// })?;
/// timer.arm(Instant::now() + Duration::from_millis(10));
/// let (lock, cv) = &*fired;
/// let n = cv.wait_while(lock.lock().unwrap(), |n| *n == 0).unwrap();
/// assert_eq!(*n, 1);
/// # drop(n);
/// // A delay too large to represent saturates: armed, never due in practice.
/// timer.arm(Duration::MAX);
/// assert!(timer.is_armed());
/// timer.stop_and_drain();
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping it disarms, drains and closes the timer"]
pub struct Timer {
    core: Owner<TimerCore>,
}

view! {
    /// A one-shot timer's methods, shared by its owners: [`Timer`] and
    /// the cleanup group's [`TimerMember`](crate::cleanup_group::TimerMember)
    /// both dereference to it.
    pub struct TimerObject(TimerCore); owned by Timer
}

impl core::fmt::Debug for TimerObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(self.0.owner_name()).field("raw", &(self.0.raw as *const c_void)).finish()
    }
}

impl Timer {
    /// Creates a disarmed timer whose callback is `callback`, on the process
    /// default pool.
    pub fn new<F>(callback: F) -> io::Result<Self>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(TimerCore::new_one_shot("Timer", callback, None, Blocks::KEPT)?) })
    }

    /// Creates a disarmed timer whose callback is `callback`, on the pool and
    /// with the settings of `env`.
    pub fn new_in<F>(callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&TimerFiring<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(TimerCore::new_one_shot("Timer", callback, Some(env), Blocks::KEPT)?) })
    }
}

impl TimerObject {
    /// Arms the timer to fire once at `deadline` (a [`Duration`] from now,
    /// an `Instant`, a [`SystemTime`], or [`Deadline::NEVER`]; see
    /// [`crate::time`]), replacing any previous arming. A deadline already
    /// past fires at once; one too far off to represent saturates. An arm
    /// that races [`stop_and_drain`](Self::stop_and_drain) may be absorbed
    /// by it, as if it came first (this applies to every arming method).
    pub fn arm(&self, deadline: impl Into<Deadline>) {
        self.0.arm(deadline.into().timer_due(), 0, 0);
    }

    /// Like [`arm`](Self::arm), allowing the pool to delay the firing by up
    /// to `window` (rounded down to whole milliseconds, at most `u32::MAX`
    /// ms) to coalesce it with other timers.
    pub fn arm_with_window(&self, deadline: impl Into<Deadline>, window: Duration) {
        self.0.arm(deadline.into().timer_due(), 0, window_millis(window));
    }

    /// Disarms the timer. A firing already running continues, and its re-arm
    /// request is dropped. Whether a firing already queued still runs
    /// differs between systems: `docs/wine.md`, the row "Disarming a
    /// one-shot timer".
    ///
    /// Returns whether the disarm cancelled a pending expiry
    /// (`SetThreadpoolTimerEx`): `Some(true)` if the timer was armed and
    /// will not fire, `Some(false)` if it was not armed or its firing is
    /// running or about to start. `None` where the system lacks
    /// `SetThreadpoolTimerEx` (before Windows 8; Wine 8).
    pub fn disarm(&self) -> Option<bool> {
        self.0.disarm()
    }

    /// `IsThreadpoolTimerSet`: whether a due time is set. This is not "will
    /// fire again": the flag stays set after a one-shot fires (on Windows, as
    /// Wine's conformance test `test_tp_timer` records, and on Wine 8; see
    /// `tests/objects/timer.rs::is_armed_stays_true_after_a_one_shot_fires`),
    /// and is cleared only by [`disarm`](Self::disarm) and
    /// [`stop_and_drain`](Self::stop_and_drain).
    pub fn is_armed(&self) -> bool {
        // SAFETY: `self.0.raw` is a live timer.
        unsafe { IsThreadpoolTimerSet(self.0.raw) != 0 }
    }

    /// Returns after every callback already queued or running has finished
    /// (`WaitForThreadpoolTimerCallbacks(.., FALSE)`). It does not wait for a
    /// due time still in the future: that firing is not queued yet.
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&self.0);
    }

    /// Discards a firing that is queued but has not started and waits for a
    /// running one (`WaitForThreadpoolTimerCallbacks(.., TRUE)`). The timer
    /// stays armed: a future due time still fires.
    ///
    /// Under Wine it first waits for a drain of the same object racing it
    /// on another thread, and then for what that drain waits for, so from a
    /// callback on a pool with no other free thread it can deadlock:
    /// `docs/wine.md`, the row "A cancelling drain ... while another thread
    /// is blocked in a drain of the same object".
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn cancel_pending(&self) {
        owner::cancel_pending(&self.0);
    }

    /// Disarms and drains, like `Drop` but without closing: when it returns
    /// nothing is armed, queued or running, and no firing will start until
    /// the timer is armed again (which it may be).
    ///
    /// Arms that race it from other threads (or from a firing's re-arm
    /// request) do not break that: an arm that takes effect before its
    /// disarm is undone by it, and one made after the disarm and before it
    /// returns is absorbed (it arms nothing). An
    /// arm still in progress when it returns, or made after, is a new
    /// arming, ordered after the stop.
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn stop_and_drain(&self) {
        owner::stop_and_drain(&self.0);
    }

    /// The raw `PTP_TIMER`, valid while its owner is alive.
    pub fn as_raw(&self) -> PTP_TIMER {
        self.0.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_round_down_and_saturate() {
        assert_eq!(window_millis(Duration::ZERO), 0);
        assert_eq!(window_millis(Duration::from_micros(1999)), 1, "never a longer window than asked");
        assert_eq!(window_millis(Duration::from_millis(u32::MAX as u64)), u32::MAX);
        assert_eq!(window_millis(Duration::from_millis(u32::MAX as u64 + 1)), u32::MAX);
        assert_eq!(window_millis(Duration::MAX), u32::MAX);
    }
}
