//! [`Deadline`]: the one conversion of a point in time for arming.

use std::time::{Duration, Instant, SystemTime};

use super::{absolute_due, relative_due};

/// When a timer should fire or a wait time out: after a [`Duration`], at an
/// [`Instant`] or a [`SystemTime`], or [never](Self::NEVER). See the
/// [module docs](crate::time) for the conversions.
///
/// ```
/// use std::time::{Duration, Instant, SystemTime};
/// use windows_threadpool::time::Deadline;
///
/// let soon: Deadline = Duration::from_millis(5).into();
/// assert_eq!(soon, Deadline::after(Duration::from_millis(5)));
/// let _ = Deadline::from(Instant::now() + Duration::from_secs(1));
/// let _ = Deadline::from(SystemTime::now());
/// assert!(Deadline::NEVER.is_never());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline(Kind);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    After(Duration),
    Until(Instant),
    At(SystemTime),
    Never,
}

impl Deadline {
    /// At once: the documented zero due time.
    pub const NOW: Self = Self(Kind::After(Duration::ZERO));
    /// Never: a wait that does not time out; for a timer, the farthest
    /// representable due time.
    pub const NEVER: Self = Self(Kind::Never);

    /// `delay` after the arming call.
    pub const fn after(delay: Duration) -> Self {
        Self(Kind::After(delay))
    }

    /// At `instant` on the monotonic clock (converted to a delay when armed).
    pub const fn until(instant: Instant) -> Self {
        Self(Kind::Until(instant))
    }

    /// At the wall-clock time `time` (absolute: a clock change moves it).
    pub const fn at(time: SystemTime) -> Self {
        Self(Kind::At(time))
    }

    /// Whether this is [`NEVER`](Self::NEVER).
    pub const fn is_never(&self) -> bool {
        matches!(self.0, Kind::Never)
    }

    /// The due time as the pool takes it (see the module docs), `None` for
    /// never. Computed at the call: an `Instant` becomes a delay from now.
    pub(crate) fn due(self) -> Option<i64> {
        match self.0 {
            Kind::After(d) => Some(relative_due(d)),
            Kind::Until(i) => Some(relative_due(i.saturating_duration_since(Instant::now()))),
            Kind::At(t) => Some(absolute_due(t)),
            Kind::Never => None,
        }
    }

    /// The same moment, with a delay counted from now instead of from the
    /// arming (a delay too long to represent is never).
    pub(crate) fn fixed_now(self) -> Self {
        match self.0 {
            Kind::After(d) => Instant::now().checked_add(d).map_or(Self::NEVER, Self::until),
            _ => self,
        }
    }

    /// The due time for a timer, which has no "never" of its own (a null due
    /// time disarms): the farthest relative one.
    pub(crate) fn timer_due(self) -> i64 {
        self.due().unwrap_or(relative_due(Duration::MAX))
    }
}

impl From<Duration> for Deadline {
    fn from(delay: Duration) -> Self {
        Self::after(delay)
    }
}

impl From<Instant> for Deadline {
    fn from(instant: Instant) -> Self {
        Self::until(instant)
    }
}

impl From<SystemTime> for Deadline {
    fn from(time: SystemTime) -> Self {
        Self::at(time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::UNIX_EPOCH_FILETIME;

    #[test]
    fn each_kind_becomes_its_due_time() {
        assert_eq!(Deadline::NOW.due(), Some(0));
        assert_eq!(Deadline::from(Duration::from_millis(5)).due(), Some(-50_000));
        assert_eq!(Deadline::from(SystemTime::UNIX_EPOCH).due(), Some(UNIX_EPOCH_FILETIME));
        assert_eq!(Deadline::NEVER.due(), None);
        assert_eq!(Deadline::NEVER.timer_due(), -i64::MAX, "never, in practice");
        assert_eq!(Deadline::from(Duration::from_millis(5)).timer_due(), -50_000);
        assert_eq!(Deadline::from(Instant::now() - Duration::from_secs(1)).due(), Some(0), "past: at once");
        // An instant a minute ahead is a relative due time of at most a
        // minute, computed when converted.
        let due = Deadline::from(Instant::now() + Duration::from_secs(60)).due().unwrap();
        assert!((-600_000_000..0).contains(&due), "{due}");
        assert!(!Deadline::NOW.is_never() && Deadline::NEVER.is_never());
    }

    #[test]
    fn a_fixed_delay_counts_from_the_call() {
        let before = Instant::now();
        let Deadline(Kind::Until(at)) = Deadline::after(Duration::from_secs(60)).fixed_now() else {
            panic!("a delay fixes to an instant");
        };
        assert!(at >= before + Duration::from_secs(60) && at <= Instant::now() + Duration::from_secs(60));
        assert!(Deadline::after(Duration::MAX).fixed_now().is_never(), "too far is never");
        for d in [Deadline::NEVER, Deadline::until(before), Deadline::at(SystemTime::UNIX_EPOCH)] {
            assert_eq!(d.fixed_now(), d);
        }
    }
}
