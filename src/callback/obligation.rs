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
//!
//! Platform-independent: the host build checks the mark/settle protocol with
//! loom (`loom_tests` below), the publication standing in for the Win32 call.

use crate::sync::{AtomicUsize, Ordering};

#[derive(Debug)]
pub(crate) struct DrainObligation {
    /// Dispatches still expected: 1 for an arming (a new arming replaces the
    /// old), one per submission for work.
    owed: AtomicUsize,
}

// Not derived: a loom atomic has no `Default`.
impl Default for DrainObligation {
    fn default() -> Self {
        Self { owed: AtomicUsize::new(0) }
    }
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
    #[inline]
    pub(crate) fn dispatched(&self) {
        let _ = self.owed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }

    /// An explicit drain (or a stop that leaves nothing to dispatch) settled everything.
    #[inline]
    pub(crate) fn drained(&self) {
        // Stored only when something was owed: a teardown's drain, the
        // common case, then writes nothing (a `SeqCst` store is an `xchg`).
        // A publication racing this drain is no more lost than by a store.
        if self.owed.load(Ordering::SeqCst) != 0 {
            self.owed.store(0, Ordering::SeqCst);
        }
    }

    /// Whether a drain is still owed.
    #[inline]
    pub(crate) fn is_owed(&self) -> bool {
        self.owed.load(Ordering::SeqCst) != 0
    }
}

/// Reports a drain found owed at teardown, once the teardown has drained and
/// freed everything (the report must not itself cause a violation). With the
/// `fail-fast` feature it panics; on a thread that is already unwinding that
/// aborts the process, which is the fail-fast outcome there. Without the
/// feature the `drain-owed` trace record (written by the object) is the report.
pub(crate) fn report_drain_owed(type_name: &'static str) {
    #[cfg(feature = "fail-fast")]
    panic!(
        "windows-threadpool: {type_name} was torn down with a drain still owed (it was armed or had callbacks \
         pending); call {type_name}::stop_and_drain() before dropping it"
    );
    #[cfg(not(feature = "fail-fast"))]
    let _ = type_name;
}

#[cfg(all(test, not(loom)))]
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

/// The mark/settle protocol under every interleaving (up to three
/// preemptions, `crate::sync::model`) of an owner that
/// publishes and pool threads that dispatch what they see published. At the
/// end, the debt is exactly what was published and not dispatched: no stale
/// debt (a dispatch settling before its mark), none forgotten.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::atomic::Ordering::{AcqRel, Acquire, Release};

    /// A timer: the owner arms; the pool fires the arming if it sees it.
    /// Publishing before the mark fails it (a stale debt after the firing).
    #[test]
    fn loom_an_arming_dispatched_at_once_leaves_no_debt() {
        crate::sync::model(|| {
            let o = Arc::new(DrainObligation::default());
            // The arming as the pool sees it (`SetThreadpoolTimer`).
            let armed = Arc::new(AtomicUsize::new(0));
            let pool = {
                let (o, armed) = (Arc::clone(&o), Arc::clone(&armed));
                loom::thread::spawn(move || {
                    let fired = armed.swap(0, AcqRel) == 1;
                    if fired {
                        o.dispatched();
                    }
                    fired
                })
            };
            o.publish_arming(|| armed.store(1, Release));
            let fired = pool.join().unwrap();
            assert_eq!(o.is_owed(), !fired, "fired: {fired}, owed: {}", o.owed.load(Ordering::SeqCst));
        });
    }

    /// Work: two submissions, two pool threads each dispatching one
    /// submission if one is queued. Publishing before the mark fails it.
    #[test]
    fn loom_submissions_owe_exactly_the_undispatched_ones() {
        crate::sync::model(|| {
            let o = Arc::new(DrainObligation::default());
            // Submissions queued and not yet taken (`SubmitThreadpoolWork`).
            let queued = Arc::new(AtomicUsize::new(0));
            let worker = || {
                let (o, queued) = (Arc::clone(&o), Arc::clone(&queued));
                loom::thread::spawn(move || {
                    let took = queued.fetch_update(AcqRel, Acquire, |n| n.checked_sub(1)).is_ok();
                    if took {
                        o.dispatched();
                    }
                })
            };
            let workers = [worker(), worker()];
            for _ in 0..2 {
                o.publish_submission(|| queued.fetch_add(1, Release));
            }
            for w in workers {
                w.join().unwrap();
            }
            assert_eq!(
                o.owed.load(Ordering::SeqCst),
                queued.load(Acquire),
                "the debt is not the undispatched submissions"
            );
        });
    }
}
