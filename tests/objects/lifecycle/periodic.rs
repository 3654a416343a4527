//! The `PeriodicTimer` model.
//!
//! Operations: create, arm (first tick now, in 1 to 3 ms, or in an hour),
//! disarm, disarm from the next tick (`PeriodicTick::disarm`), `wait`,
//! `stop_and_drain`, drop, drop from the own tick. Slot 0 ticks every 1 ms,
//! slot 1 every 3 ms.
//!
//! Delivered: an arm that was the only operation on its timer in its step,
//! with its first tick due within the case, ticks (the barrier waits for
//! one). Ticks are not bounded otherwise: a periodic timer ticks until
//! stopped, and on Wine 8 a tick already queued runs after a disarm
//! (docs/wine.md). `stop_and_drain` and drop are fences: no tick after
//! them unless armed again; `wait` and `disarm` are not.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::Duration;

use proptest::prelude::*;
use windows_threadpool::PeriodicTimer;

use super::engine::{self, Model, Owned, Probe, Slots, Step, tear_down};
use super::timer::{Due, due};

#[derive(Debug, Clone)]
pub enum Op {
    Create(usize),
    Arm(usize, Due),
    Disarm(usize),
    DisarmFromTick(usize),
    Wait(usize),
    StopAndDrain(usize),
    /// Arm, then `stop_and_drain` at once on the same thread.
    ArmThenStop(usize, Due),
    Drop(usize),
    DropFromCallback(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..engine::SLOTS;
    prop_oneof![
        1 => s.clone().prop_map(Op::Create),
        4 => (s.clone(), due()).prop_map(|(s, d)| Op::Arm(s, d)),
        2 => s.clone().prop_map(Op::Disarm),
        1 => s.clone().prop_map(Op::DisarmFromTick),
        1 => s.clone().prop_map(Op::Wait),
        2 => s.clone().prop_map(Op::StopAndDrain),
        1 => (s.clone(), due()).prop_map(|(s, d)| Op::ArmThenStop(s, d)),
        1 => s.clone().prop_map(Op::Drop),
        1 => s.prop_map(Op::DropFromCallback),
    ]
}

struct Obj {
    timer: PeriodicTimer,
    probe: Arc<Probe>,
    /// The next tick disarms the timer.
    disarm_next: Arc<AtomicBool>,
}

impl Obj {
    fn new(slot: usize) -> Self {
        let probe = Probe::new();
        let disarm_next = Arc::new(AtomicBool::new(false));
        let (guard, d) = (probe.guard(), Arc::clone(&disarm_next));
        let period = Duration::from_millis(if slot == 0 { 1 } else { 3 });
        let timer = PeriodicTimer::new(period, move |tick| {
            let p = guard.probe();
            p.enter();
            if d.swap(false, SeqCst) {
                tick.disarm();
            }
            // A tick that drops its timer disarms it first (nothing owed).
            p.take_self_with(|| tick.disarm());
        })
        .expect("PeriodicTimer::new");
        Self { timer, probe, disarm_next }
    }
}

impl Owned for Obj {
    fn probe(&self) -> &Arc<Probe> {
        &self.probe
    }

    fn drop_owner(self) -> Arc<Probe> {
        let Self { timer, probe, .. } = self;
        tear_down(|| drop(timer));
        probe.owner_dropped();
        probe
    }
}

struct PeriodicModel {
    slots: Slots<Obj>,
    before: Mutex<Vec<usize>>,
}

impl Model for PeriodicModel {
    type Op = Op;

    fn slot(op: &Op) -> usize {
        match *op {
            Op::Create(s)
            | Op::Arm(s, _)
            | Op::Disarm(s)
            | Op::DisarmFromTick(s)
            | Op::Wait(s)
            | Op::StopAndDrain(s)
            | Op::ArmThenStop(s, _)
            | Op::Drop(s)
            | Op::DropFromCallback(s) => s,
        }
    }

    fn apply(&self, op: &Op, alone: bool) {
        let slot = Self::slot(op);
        match *op {
            Op::Create(_) => self.slots.fill(slot, || Obj::new(slot)),
            Op::Arm(_, due) => {
                self.slots.with(slot, |o| o.probe.arming(|| o.timer.arm(due.duration())));
            }
            Op::Disarm(_) => {
                self.slots.with(slot, |o| o.timer.disarm());
            }
            Op::DisarmFromTick(_) => {
                self.slots.with(slot, |o| o.disarm_next.store(true, SeqCst));
            }
            Op::Wait(_) => {
                self.slots.with(slot, |o| o.timer.wait());
            }
            Op::StopAndDrain(_) => {
                self.slots.with(slot, |o| {
                    o.timer.stop_and_drain();
                    o.probe.drained(alone);
                });
            }
            Op::ArmThenStop(_, due) => {
                self.slots.with(slot, |o| {
                    o.probe.arming(|| o.timer.arm(due.duration()));
                    o.timer.stop_and_drain();
                    o.probe.drained(alone);
                });
            }
            Op::Drop(_) => self.slots.drop_slot(slot),
            Op::DropFromCallback(_) => {
                if let Some(o) = self.slots.take(slot) {
                    o.timer.stop_and_drain();
                    o.probe.drained(true);
                    let probe = Arc::clone(&o.probe);
                    self.slots.retire(&probe, true);
                    probe.hand_to_callback(o.timer, |t| probe.arming(|| t.arm(Duration::ZERO)));
                }
            }
        }
    }

    fn before_step(&self, _step: &Step<Op>) {
        *self.before.lock().unwrap() = self.slots.runs();
    }

    fn after_step(&self, step: &Step<Op>) {
        let before = self.before.lock().unwrap().clone();
        for (slot, &runs_before) in before.iter().enumerate() {
            let mine: Vec<&Op> = step.iter().map(|(_, o)| o).filter(|o| Self::slot(o) == slot).collect();
            if let [Op::Arm(_, due)] = mine.as_slice()
                && due.within_case()
            {
                self.slots.await_runs(slot, runs_before, 1, &format!("periodic tick after {mine:?}"));
            }
        }
        self.slots.each(|i, o| o.probe.check(&format!("periodic slot {i}")));
        self.slots.check_retired("periodic (retired)");
    }

    fn finish(&self) {
        self.slots.finish("periodic");
    }
}

proptest! {
    #![proptest_config(engine::config(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/periodic.proptest-regressions")))]

    fn periodic_timer_lifecycle_cases(steps in engine::steps(op(), 12)) {
        engine::run("periodic", || PeriodicModel { slots: Slots::new_indexed(Obj::new), before: Mutex::new(Vec::new()) }, &steps);
    }
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn periodic_timer_lifecycle() {
    crate::support::alone("lifecycle::periodic::periodic_timer_lifecycle", periodic_timer_lifecycle_cases);
}
