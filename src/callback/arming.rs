//! The arming gate: how a stop absorbs the arms that race it, for timers and
//! waits alike.
//!
//! An object is armed from outside (`arm`, `arm_with_window`) or from its
//! own callback (a re-arm), and brought to rest by `stop_and_drain` or by
//! teardown: disarm, then drain. A drain waits only for callbacks already
//! queued or running, so an arm landing between the disarm and the end of
//! the drain would leave the object armed when the stop returns. Every arm
//! and every stop therefore goes through one [`ArmGate`]: a stop raises the
//! gate and disarms under its lock, and while the gate is raised every arm
//! is *absorbed* (it publishes nothing, as if it had come before the stop's
//! disarm). `stop_and_drain` lowers the gate when it has drained; teardown
//! never does.
//!
//! So for an arm that overlaps a stop, one of two things holds: it took the
//! lock before the stop raised the gate, and the stop's disarm and drain
//! undo it; or it took the lock while the gate was raised, and it was
//! absorbed. Only an arm that takes the lock after the stop lowered the gate
//! arms the object, and that is a new arming, ordered after the stop.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// The lock arming and stopping share, with the count of stops in progress
/// and the object's own arming state `S`.
pub(crate) struct ArmGate<S> {
    inner: Mutex<Gated<S>>,
}

/// What the gate's lock protects.
pub(crate) struct Gated<S> {
    /// Stops in progress: `stop_and_drain` calls and teardowns.
    stops: u32,
    /// The object's arming state, reached only under the lock.
    pub(crate) state: S,
}

impl<S> ArmGate<S> {
    pub(crate) const fn new(state: S) -> Self {
        Self { inner: Mutex::new(Gated { stops: 0, state }) }
    }

    /// The lock, for what is neither an arm nor a stop (a disarm, a flush).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Gated<S>> {
        // A callback that panics aborts the process, so poisoning cannot be
        // observed; recover rather than add a panic path.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The one arming rule: runs `arm` under the lock unless a stop is in
    /// progress; `None` when the arm was absorbed.
    pub(crate) fn arm<R>(&self, arm: impl FnOnce(&mut S) -> R) -> Option<R> {
        let mut g = self.lock();
        if g.stops > 0 { None } else { Some(arm(&mut g.state)) }
    }

    /// Raises the gate and runs `disarm` under the same hold of the lock, so
    /// no arm lands between the two; arms are absorbed until
    /// [`end_stop`](Self::end_stop) (a teardown never calls it).
    pub(crate) fn begin_stop<R>(&self, disarm: impl FnOnce(&mut S) -> R) -> R {
        let mut g = self.lock();
        g.stops += 1;
        disarm(&mut g.state)
    }

    /// Ends a stop the caller began and has drained; when it was the last
    /// one in progress, `at_rest` runs under the lock before arms are
    /// accepted again.
    pub(crate) fn end_stop(&self, at_rest: impl FnOnce(&mut S)) {
        let mut g = self.lock();
        g.stops -= 1;
        if g.stops == 0 {
            at_rest(&mut g.state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_are_absorbed_from_begin_to_the_last_end() {
        let gate = ArmGate::new(0u32);
        assert_eq!(gate.arm(|n| *n += 1), Some(()));
        gate.begin_stop(|n| *n = 0);
        gate.begin_stop(|_| ());
        assert_eq!(gate.arm(|n| *n += 1), None, "an arm during a stop is absorbed");
        let mut rested = 0;
        gate.end_stop(|_| rested += 1);
        assert_eq!(rested, 0, "one stop is still in progress");
        assert_eq!(gate.arm(|n| *n += 1), None);
        gate.end_stop(|_| rested += 1);
        assert_eq!(rested, 1);
        assert_eq!(gate.arm(|n| *n += 1), Some(()));
        assert_eq!(gate.lock().state, 1);
    }
}
