//! The periodic timer: [`PeriodicTimer`], its view
//! [`PeriodicTimerObject`], the [`PeriodicTick`] its callback receives, and
//! the checks of a period.

use core::ffi::c_void;
use core::sync::atomic::Ordering;
use std::io;
use std::time::Duration;
#[cfg(doc)]
use std::time::SystemTime;

use windows_sys::Win32::System::Threading::PTP_TIMER;

use super::timercore::{TimerCore, TimerHeader};
use super::window_millis;
#[cfg(doc)]
use super::{Timer, TimerFiring, TimerObject};
use crate::callback::ctx::Blocks;
use crate::callback::owner::{self, Lifecycle, Owner};
use crate::callback_env::CallbackEnviron;
use crate::instance::CallbackInstance;
use crate::sys::deadline::Deadline;

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A period or window as the pool takes it: whole milliseconds in a `u32`.
fn whole_millis(what: &str, d: Duration) -> io::Result<u32> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(invalid(format!(
            "timer {what} {d:?} is not a whole number of milliseconds: the pool takes it in whole milliseconds"
        )));
    }
    u32::try_from(d.as_millis()).map_err(|_| {
        invalid(format!(
            "timer {what} {d:?} is above the maximum of u32::MAX ms (about 49.7 days): the pool takes it as a \
             32-bit count of milliseconds"
        ))
    })
}

/// Validates a periodic timer's period (see [`PeriodicTimer::new`]).
pub(crate) fn period_millis(period: Duration) -> io::Result<u32> {
    if period < PeriodicTimer::MIN_PERIOD {
        return Err(invalid(format!(
            "timer period {period:?} is below the minimum of 1 ms: the pool takes the period in whole \
             milliseconds, and a period of zero would mean \"do not repeat\" (use Timer for a one-shot)"
        )));
    }
    whole_millis("period", period)
}

/// What a [`PeriodicTimer`]'s callback receives on each tick.
///
/// Not `Send` or `Sync`: it lives for one tick on one thread.
pub struct PeriodicTick<'a> {
    pub(super) header: &'a TimerHeader,
    pub(super) raw: PTP_TIMER,
    pub(super) began_at: u64,
    pub(super) instance: CallbackInstance<'a>,
}

impl core::fmt::Debug for PeriodicTick<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PeriodicTick").field("timer", &(self.raw as *const c_void)).finish()
    }
}

impl<'a> PeriodicTick<'a> {
    /// The running callback's instance: what it can ask of the pool (see
    /// [`crate::instance`]).
    pub fn instance(&self) -> &CallbackInstance<'a> {
        &self.instance
    }

    /// Disarms the timer from inside a tick, at once: no further tick is
    /// scheduled. Ticks already running keep running; whether a tick already
    /// queued still runs differs between systems (`docs/wine.md`, the row
    /// "Disarming a periodic timer"). Ignored if
    /// the owner armed or disarmed the timer since this tick began.
    pub fn disarm(&self) {
        let g = self.header.lock();
        let applied = self.header.generation.load(Ordering::SeqCst) == self.began_at;
        trace_record!("timer-periodic", "disarm-requested", self.raw, applied);
        if applied {
            self.header.generation.fetch_add(1, Ordering::SeqCst);
            let _ = self.header.set_locked(&g.state, self.raw, None, 0, 0);
        }
    }
}

/// An owned periodic timer: once [armed](PeriodicTimerObject::arm) it
/// ticks every [`period`](PeriodicTimerObject::period) until disarmed. Its
/// methods are [`PeriodicTimerObject`]'s, which the cleanup group's
/// [`PeriodicTimerMember`](crate::cleanup_group::PeriodicTimerMember) offers
/// too.
///
/// **Ticks may overlap.** The pool queues each tick on schedule whether or
/// not the previous one has returned, and runs it on another thread; a
/// callback that can take longer than the period must tolerate running
/// concurrently with itself. (Use [`Timer`] with
/// [`TimerFiring::rearm`] for repetition that never overlaps.)
///
/// `Drop` stops the timer, drains (never cancels), closes it, then frees the
/// callback; dropping a running timer owes a drain (see
/// [the module docs](crate::timer#teardown)). A tick may drop the timer's
/// last owner (the teardown then completes once the ticks still queued or
/// running have returned; call [`PeriodicTick::disarm`] first to owe nothing);
/// draining the timer from its own tick panics.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::time::Duration;
/// use windows_threadpool::timer::PeriodicTimer;
///
/// let ticks = Arc::new(AtomicUsize::new(0));
/// let t = Arc::clone(&ticks);
/// let timer = PeriodicTimer::new(Duration::from_millis(2), move |tick| {
///     if t.fetch_add(1, Ordering::SeqCst) + 1 == 5 {
///         tick.disarm(); // ends the timer from inside a tick
///     }
/// })?;
/// timer.arm(timer.period());
/// while timer.is_armed() {
///     std::thread::sleep(Duration::from_millis(1));
/// }
/// timer.wait(); // ticks already queued or running have finished
/// assert!(ticks.load(Ordering::SeqCst) >= 5);
/// // A period the pool cannot take is rejected with a reason.
/// let err = PeriodicTimer::new(Duration::from_micros(1500), |_| {}).unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping it stops, drains and closes the timer"]
pub struct PeriodicTimer {
    core: Owner<TimerCore>,
}

view! {
    /// A periodic timer's methods, shared by its owners:
    /// [`PeriodicTimer`] and the cleanup group's
    /// [`PeriodicTimerMember`](crate::cleanup_group::PeriodicTimerMember) both
    /// dereference to it.
    pub struct PeriodicTimerObject(TimerCore); owned by PeriodicTimer
}

/// A validated period: its duration and whole milliseconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Period {
    period: Duration,
    millis: u32,
}

impl Period {
    pub(super) fn new(period: Duration) -> io::Result<Self> {
        Ok(Self { period, millis: period_millis(period)? })
    }
}

impl core::fmt::Debug for PeriodicTimerObject {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct(self.0.owner_name())
            .field("raw", &(self.0.raw as *const c_void))
            .field("period", &self.0.header().period)
            .finish()
    }
}

impl PeriodicTimer {
    /// The shortest period: 1 ms (the pool counts periods in whole
    /// milliseconds, and zero would mean "do not repeat").
    pub const MIN_PERIOD: Duration = Duration::from_millis(1);
    /// The longest period: `u32::MAX` ms, about 49.7 days. (Wine 8 reads the
    /// period as signed: above `i32::MAX` ms it ticks continuously there.)
    pub const MAX_PERIOD: Duration = Duration::from_millis(u32::MAX as u64);

    /// Creates a stopped periodic timer on the process default pool. This is
    /// the one place a period is checked.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`], with a message saying why, for a
    /// period below [`MIN_PERIOD`](Self::MIN_PERIOD), above
    /// [`MAX_PERIOD`](Self::MAX_PERIOD), or not a whole number of
    /// milliseconds; otherwise the OS error if `CreateThreadpoolTimer` fails.
    pub fn new<F>(period: Duration, callback: F) -> io::Result<Self>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        Ok(Self { core: Owner::new(TimerCore::new_periodic("PeriodicTimer", period, callback, None, Blocks::KEPT)?) })
    }

    /// Creates a stopped periodic timer on the pool and with the settings of
    /// `env`.
    ///
    /// # Errors
    /// As for [`new`](Self::new).
    pub fn new_in<F>(period: Duration, callback: F, env: &CallbackEnviron) -> io::Result<Self>
    where
        F: Fn(&PeriodicTick<'_>) + Send + Sync + 'static,
    {
        Ok(Self {
            core: Owner::new(TimerCore::new_periodic("PeriodicTimer", period, callback, Some(env), Blocks::KEPT)?),
        })
    }
}

impl PeriodicTimerObject {
    fn period_of(&self) -> Period {
        self.0.header().period.expect("a periodic timer's core has a period")
    }

    /// The period between ticks.
    pub fn period(&self) -> Duration {
        self.period_of().period
    }

    /// Arms (or re-arms) the timer: the first tick at `first` (a
    /// [`Duration`] from now, an `Instant`, a [`SystemTime`]; see
    /// [`crate::time`]; `timer.arm(timer.period())` ticks on the period from
    /// now), then one every period, until disarmed. A first tick already
    /// past comes at once.
    pub fn arm(&self, first: impl Into<Deadline>) {
        self.0.arm(first.into().timer_due(), self.period_of().millis, 0);
    }

    /// Like [`arm`](Self::arm), allowing the pool to delay each tick by up
    /// to `window` (rounded down to whole milliseconds, at most `u32::MAX`
    /// ms) to coalesce it with other timers.
    pub fn arm_with_window(&self, first: impl Into<Deadline>, window: Duration) {
        self.0.arm(first.into().timer_due(), self.period_of().millis, window_millis(window));
    }

    /// Disarms the timer: no further tick is scheduled. Ticks already
    /// running keep running; whether a tick already queued still runs differs
    /// between systems (`docs/wine.md`, the row "Disarming a periodic
    /// timer"). Use [`stop_and_drain`](Self::stop_and_drain)
    /// to also wait for them. Returns what [`TimerObject::disarm`] returns.
    pub fn disarm(&self) -> Option<bool> {
        self.0.disarm()
    }

    /// Whether the timer has been armed and not disarmed since (by
    /// [`disarm`](Self::disarm), [`PeriodicTick::disarm`] or
    /// [`stop_and_drain`](Self::stop_and_drain)). Ticks may still be running
    /// when this is false.
    pub fn is_armed(&self) -> bool {
        self.0.header().armed.load(Ordering::SeqCst)
    }

    /// Returns after every tick already queued or running has finished. A
    /// running timer keeps ticking: to stop and wait, use
    /// [`stop_and_drain`](Self::stop_and_drain).
    ///
    /// # Panics
    /// If called from this timer's own callback: it would wait for itself.
    pub fn wait(&self) {
        owner::wait(&self.0);
    }

    /// Stops the timer and drains, like `Drop` but without closing: when it
    /// returns no tick is running or queued, and none will start until the
    /// timer is armed again. Arms that race it are undone or absorbed
    /// as for [`TimerObject::stop_and_drain`].
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
    fn periods_are_whole_milliseconds_in_range() {
        assert_eq!(period_millis(Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(period_millis(PeriodicTimer::MAX_PERIOD).unwrap(), u32::MAX);
        let cases = [
            (Duration::ZERO, "do not repeat"),
            (Duration::from_micros(999), "below the minimum"),
            (Duration::from_micros(1500), "whole number of milliseconds"),
            (PeriodicTimer::MAX_PERIOD + Duration::from_millis(1), "above the maximum"),
            (Duration::MAX, "whole number of milliseconds"),
        ];
        for (p, why) in cases {
            let e = period_millis(p).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains(why), "{p:?}: {e}");
        }
    }
}
