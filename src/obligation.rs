//! Drain obligations: whether an object still owes a drain.
//!
//! An object owes a drain from the moment it publishes an arming or a
//! submission until a callback dispatch or an explicit drain settles it.
//! Teardown always drains; a drain still owed at teardown means the owner
//! dropped an armed object or one with callbacks pending, which is recorded as
//! `drain-owed` (and with the `fail-fast` feature, reported). The mark must
//! precede the publication, or a dispatch racing the publication could settle
//! before the mark and leave a stale debt: [`DrainObligation::publish_arming`]
//! and [`DrainObligation::publish_submission`] are the only way to publish, so
//! the inverted order cannot be written.

use core::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub(crate) struct DrainObligation {
    /// Dispatches still expected: 1 for an arming (a new arming replaces the
    /// old), one per submission for work.
    owed: AtomicUsize,
}

impl DrainObligation {
    /// Marks a drain owed for an arming (timer, wait, I/O), then publishes it.
    pub(crate) fn publish_arming<R>(&self, publish: impl FnOnce() -> R) -> R {
        self.owed.store(1, Ordering::SeqCst);
        publish()
    }

    /// Marks one more dispatch owed (a work submission), then publishes it.
    pub(crate) fn publish_submission<R>(&self, publish: impl FnOnce() -> R) -> R {
        self.owed.fetch_add(1, Ordering::SeqCst);
        publish()
    }

    /// A callback was dispatched: one owed dispatch is settled.
    pub(crate) fn dispatched(&self) {
        let _ = self.owed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// An explicit drain (or a stop that leaves nothing to dispatch) settled everything.
    pub(crate) fn drained(&self) {
        self.owed.store(0, Ordering::SeqCst);
    }

    /// Whether a drain is still owed.
    pub(crate) fn is_owed(&self) -> bool {
        self.owed.load(Ordering::SeqCst) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn submissions_are_settled_one_dispatch_each() {
        let o = DrainObligation::default();
        o.publish_submission(|| ());
        o.publish_submission(|| ());
        o.dispatched();
        assert!(o.is_owed());
        o.dispatched();
        assert!(!o.is_owed());
        o.dispatched();
        assert!(!o.is_owed(), "an extra dispatch must not underflow");
    }

    #[test]
    fn an_arming_replaces_the_previous_one() {
        let o = DrainObligation::default();
        o.publish_arming(|| ());
        o.publish_arming(|| ());
        o.dispatched();
        assert!(!o.is_owed());
    }

    #[test]
    fn the_mark_precedes_the_publication() {
        let o = DrainObligation::default();
        let seen = o.publish_arming(|| o.is_owed());
        assert!(seen, "publish ran before the drain was marked owed");
        o.drained();
        assert!(!o.is_owed());
        assert!(o.publish_submission(|| o.is_owed()));
    }
}
