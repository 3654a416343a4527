//! The `Work` model.
//!
//! Operations: create, submit (1 to 3 times), `wait`, `stop_and_drain`,
//! `cancel_pending`, drop, drop from the own callback.
//!
//! Exactly once: every submission runs once, unless a `cancel_pending`
//! discarded it. At a drain no other thread raced (and at every drop, which
//! excludes every other operation) the runs are reconciled: equal to the
//! submissions less those discarded by earlier cancels; after a cancel, at
//! most that, and what is missing is put down to the cancel. At every
//! barrier the runs never exceed that bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use proptest::prelude::*;
use windows_threadpool::Work;

use super::engine::{self, Model, Owned, Probe, Slots, Step, tear_down};

#[derive(Debug, Clone)]
pub enum Op {
    Create(usize),
    Submit(usize, u8),
    Wait(usize),
    StopAndDrain(usize),
    CancelPending(usize),
    Drop(usize),
    DropFromCallback(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..engine::SLOTS;
    prop_oneof![
        1 => s.clone().prop_map(Op::Create),
        4 => (s.clone(), 1u8..=3).prop_map(|(s, n)| Op::Submit(s, n)),
        2 => s.clone().prop_map(Op::Wait),
        2 => s.clone().prop_map(Op::StopAndDrain),
        2 => s.clone().prop_map(Op::CancelPending),
        1 => s.clone().prop_map(Op::Drop),
        1 => s.prop_map(Op::DropFromCallback),
    ]
}

struct Obj {
    work: Work,
    probe: Arc<Probe>,
    acct: Acct,
}

/// The submissions of one object.
#[derive(Default)]
struct Acct {
    submitted: AtomicUsize,
    /// Submissions put down to a cancel at a reconciliation.
    discarded: AtomicUsize,
    /// A `cancel_pending` ran since the last reconciliation.
    cancelled: AtomicBool,
}

impl Acct {
    /// Nothing queued or running, and nothing raced: the runs are final.
    #[track_caller]
    fn reconcile(&self, probe: &Probe) {
        let (runs, sub, disc) = (probe.runs(), self.submitted.load(SeqCst), self.discarded.load(SeqCst));
        if self.cancelled.swap(false, SeqCst) {
            assert!(runs <= sub - disc, "work: {runs} runs for {sub} submissions ({disc} discarded before)");
            self.discarded.store(sub - runs, SeqCst);
        } else {
            assert_eq!(runs, sub - disc, "work: runs vs submissions less discarded ({disc}) after a drain");
        }
    }

    /// At a barrier: never more runs than submissions not discarded.
    #[track_caller]
    fn bound(&self, probe: &Probe) {
        let (runs, sub, disc) = (probe.runs(), self.submitted.load(SeqCst), self.discarded.load(SeqCst));
        assert!(runs <= sub - disc, "work: {runs} runs for {sub} submissions ({disc} discarded)");
    }
}

impl Obj {
    fn new() -> Self {
        let probe = Probe::new();
        let guard = probe.guard();
        let work = Work::new(move |_| {
            let p = guard.probe();
            p.enter();
            p.take_self();
        })
        .expect("Work::new");
        Self { work, probe, acct: Acct::default() }
    }

    fn submit(&self) {
        self.probe.arming(|| {
            self.acct.submitted.fetch_add(1, SeqCst);
            self.work.submit();
        });
    }
}

impl Owned for Obj {
    fn probe(&self) -> &Arc<Probe> {
        &self.probe
    }

    /// Drops the work object from this thread; a drop drains and excludes
    /// every other operation, so it reconciles.
    fn drop_owner(self) -> Arc<Probe> {
        let Self { work, probe, acct } = self;
        tear_down(|| drop(work));
        probe.owner_dropped();
        acct.reconcile(&probe);
        probe
    }
}

struct WorkModel {
    slots: Slots<Obj>,
}

impl Model for WorkModel {
    type Op = Op;

    fn slot(op: &Op) -> usize {
        match *op {
            Op::Create(s)
            | Op::Submit(s, _)
            | Op::Wait(s)
            | Op::StopAndDrain(s)
            | Op::CancelPending(s)
            | Op::Drop(s)
            | Op::DropFromCallback(s) => s,
        }
    }

    fn apply(&self, op: &Op, alone: bool) {
        let slot = Self::slot(op);
        match *op {
            Op::Create(_) => self.slots.fill(slot, Obj::new),
            Op::Submit(_, n) => {
                self.slots.with(slot, |o| (0..n).for_each(|_| o.submit()));
            }
            Op::Wait(_) | Op::StopAndDrain(_) => {
                self.slots.with(slot, |o| {
                    if matches!(op, Op::Wait(_)) {
                        o.work.wait()
                    } else {
                        o.work.stop_and_drain()
                    }
                    o.probe.drained(alone);
                    if alone {
                        o.acct.reconcile(&o.probe);
                    }
                });
            }
            Op::CancelPending(_) => {
                self.slots.with(slot, |o| {
                    o.acct.cancelled.store(true, SeqCst);
                    o.work.cancel_pending();
                });
            }
            Op::Drop(_) => self.slots.drop_slot(slot),
            Op::DropFromCallback(_) => {
                if let Some(o) = self.slots.take(slot) {
                    // Nothing else may be owed when the callback drops it
                    // (with `fail-fast` that would abort in the handed-off
                    // teardown): drain first, then one submission.
                    o.work.stop_and_drain();
                    o.acct.reconcile(&o.probe);
                    o.probe.rested_for_one_more();
                    let probe = Arc::clone(&o.probe);
                    self.slots.retire(&probe, true);
                    probe.hand_to_callback(o.work, |w| probe.arming(|| w.submit()));
                }
            }
        }
    }

    fn after_step(&self, _step: &Step<Op>) {
        self.slots.each(|i, o| {
            o.probe.check(&format!("work slot {i}"));
            o.acct.bound(&o.probe);
        });
        self.slots.check_retired("work (retired)");
    }

    fn finish(&self) {
        self.slots.finish("work");
    }
}

proptest! {
    #![proptest_config(engine::config(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/work.proptest-regressions")))]

    fn work_lifecycle_cases(steps in engine::steps(op(), 12)) {
        engine::run("work", || WorkModel { slots: Slots::new(Obj::new) }, &steps);
    }
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn work_lifecycle() {
    crate::support::alone("lifecycle::work::work_lifecycle", work_lifecycle_cases);
}
