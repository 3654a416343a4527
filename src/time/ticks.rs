//! [`interval`]: a tick every period.

use core::future::poll_fn;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::delay::{Sleep, sleep_until};

/// What an [`Interval`] does when a tick is late by a period or more (the
/// consumer was busy, or the system suspended).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissedTickBehavior {
    /// Ticks at once until caught up with the schedule (`start + k·period`).
    #[default]
    Burst,
    /// Starts the schedule again: the next tick is a period after the late one.
    Delay,
    /// Keeps the schedule but drops the missed ticks: the next tick is the
    /// first scheduled one after now.
    Skip,
}

/// Ticks every period; made by [`interval`] or [`interval_at`].
#[derive(Debug)]
pub struct Interval {
    sleep: Sleep,
    period: Duration,
    missed: MissedTickBehavior,
}

/// Ticks at once, then every `period`.
///
/// # Panics
/// If `period` is zero, as `tokio::time::interval` does.
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks at `start`, then every `period`.
///
/// # Panics
/// If `period` is zero.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(!period.is_zero(), "windows-threadpool: an interval's period must be non-zero");
    Interval { sleep: sleep_until(start), period, missed: MissedTickBehavior::default() }
}

impl Interval {
    /// Completes at the next tick; returns when it was scheduled.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (for hand-written futures): `Ready` with when
    /// it was scheduled, and the next one is scheduled.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        // A never-completing sleep is not possible here: its deadline is set
        // from representable instants below (saturating to never otherwise).
        let Some(scheduled) = self.sleep.deadline() else { return Poll::Pending };
        let now = Instant::now();
        let next = self.next_after(scheduled, now);
        match next {
            Some(next) => self.sleep.reset(next),
            None => self.sleep = super::delay::sleep(Duration::MAX),
        }
        Poll::Ready(scheduled)
    }

    /// The tick after `scheduled`, fired at `now`; `None` if unrepresentable.
    fn next_after(&self, scheduled: Instant, now: Instant) -> Option<Instant> {
        let next = scheduled.checked_add(self.period)?;
        if next > now {
            return Some(next);
        }
        match self.missed {
            MissedTickBehavior::Burst => Some(next),
            MissedTickBehavior::Delay => now.checked_add(self.period),
            MissedTickBehavior::Skip => {
                // The first `scheduled + k·period` after `now`.
                let behind = now.duration_since(scheduled).as_nanos();
                let periods = behind / self.period.as_nanos() + 1;
                let skip = self.period.checked_mul(u32::try_from(periods).ok()?)?;
                scheduled.checked_add(skip)
            }
        }
    }

    /// Schedules the next tick a period from now.
    pub fn reset(&mut self) {
        match Instant::now().checked_add(self.period) {
            Some(next) => self.sleep.reset(next),
            None => self.sleep = super::delay::sleep(Duration::MAX),
        }
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What late ticks do.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed
    }

    /// Sets what late ticks do.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed = behavior;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn late_ticks_follow_the_missed_tick_behavior() {
        let t0 = Instant::now();
        let mut i = interval_at(t0, Duration::from_millis(10));
        // On time: the next tick is a period later, whatever the behaviour.
        for b in [MissedTickBehavior::Burst, MissedTickBehavior::Delay, MissedTickBehavior::Skip] {
            i.set_missed_tick_behavior(b);
            assert_eq!(i.next_after(t0, at(t0, 3)), Some(at(t0, 10)), "{b:?}");
        }
        // 35 ms late.
        i.set_missed_tick_behavior(MissedTickBehavior::Burst);
        assert_eq!(i.next_after(t0, at(t0, 35)), Some(at(t0, 10)));
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        assert_eq!(i.next_after(t0, at(t0, 35)), Some(at(t0, 45)));
        i.set_missed_tick_behavior(MissedTickBehavior::Skip);
        assert_eq!(i.next_after(t0, at(t0, 35)), Some(at(t0, 40)));
        // Exactly on a later tick: the one after it.
        assert_eq!(i.next_after(t0, at(t0, 40)), Some(at(t0, 50)));
    }

    #[test]
    #[should_panic(expected = "period must be non-zero")]
    fn a_zero_period_panics() {
        let _ = interval(Duration::ZERO);
    }
}
