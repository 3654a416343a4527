//! The `Wait` model, on auto-reset events.
//!
//! Operations: create, arm (never timing out, timing out now, in 1 to 3 ms,
//! or in an hour), arm with a chain of 1 to 3 re-arms requested from the
//! callback, signal the event, arm then signal, disarm,
//! `try_cancel_pending_without_heal`, `wait`, `stop_and_drain`, drop, drop
//! from the own callback.
//!
//! Delivered at most once: each arming (an owner's arm, or a re-arm the
//! callback requested) activates the callback at most once, so at every
//! barrier activations never exceed armings. Exactly once unless stopped: an
//! arm that times out within the case, an arm followed by a signal, or a
//! chain, issued in a step where it was the only operation on its wait,
//! activates (the barrier waits for it, and for the whole chain). Where
//! another operation raced it only the bound applies: a new arming replaces
//! one not yet activated; a disarm or a cancel may come before or after the
//! activation; under Wine a signal just before a disarm may still queue the
//! callback (docs/wine.md). `stop_and_drain` and drop are fences.
//!
//! Handles: each wait owns its event (closed by the teardown with a close
//! routine that counts), and the model signals it through the wait's own
//! handle; the engine checks every event was closed exactly once.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use proptest::prelude::*;
use windows_threadpool::{Deadline, Wait};

use super::engine::{self, Model, Owned, Probe, Slots, Step, tear_down};

#[derive(Debug, Clone, Copy)]
pub enum Timeout {
    Never,
    Now,
    SoonMs(u8),
    Hour,
}

impl Timeout {
    fn deadline(self) -> Deadline {
        match self {
            Timeout::Never => Deadline::NEVER,
            Timeout::Now => Duration::ZERO.into(),
            Timeout::SoonMs(ms) => Duration::from_millis(ms.into()).into(),
            Timeout::Hour => Duration::from_secs(3600).into(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Op {
    Create(usize),
    Arm(usize, Timeout),
    ArmChain(usize, u8),
    Signal(usize),
    ArmThenSignal(usize),
    Disarm(usize),
    CancelPending(usize),
    Wait(usize),
    StopAndDrain(usize),
    Drop(usize),
    DropFromCallback(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..engine::SLOTS;
    let timeout =
        prop_oneof![Just(Timeout::Never), Just(Timeout::Now), (1u8..=3).prop_map(Timeout::SoonMs), Just(Timeout::Hour)];
    prop_oneof![
        1 => s.clone().prop_map(Op::Create),
        3 => (s.clone(), timeout).prop_map(|(s, t)| Op::Arm(s, t)),
        2 => (s.clone(), 1u8..=3).prop_map(|(s, n)| Op::ArmChain(s, n)),
        2 => s.clone().prop_map(Op::Signal),
        2 => s.clone().prop_map(Op::ArmThenSignal),
        2 => s.clone().prop_map(Op::Disarm),
        1 => s.clone().prop_map(Op::CancelPending),
        1 => s.clone().prop_map(Op::Wait),
        2 => s.clone().prop_map(Op::StopAndDrain),
        1 => s.clone().prop_map(Op::Drop),
        1 => s.prop_map(Op::DropFromCallback),
    ]
}

#[derive(Default)]
struct Acct {
    /// Owner arms and re-arms the callback requested.
    armings: AtomicUsize,
    budget: AtomicUsize,
}

struct Obj {
    wait: Wait,
    probe: Arc<Probe>,
    acct: Arc<Acct>,
}

impl Obj {
    fn new() -> Self {
        let probe = Probe::new();
        let acct = Arc::new(Acct::default());
        let (guard, a) = (probe.guard(), Arc::clone(&acct));
        let wait = Wait::new(engine::counted_event(), move |activation| {
            let p = guard.probe();
            p.enter();
            if a.budget.fetch_update(SeqCst, SeqCst, |b| b.checked_sub(1)).is_ok() {
                a.armings.fetch_add(1, SeqCst);
                p.rearm_requested();
                activation.rearm(Duration::ZERO);
            }
            p.take_self();
        })
        .expect("Wait::new");
        Self { wait, probe, acct }
    }

    fn arm(&self, timeout: Timeout) {
        self.acct.armings.fetch_add(1, SeqCst);
        self.probe.arming(|| self.wait.arm(timeout.deadline()));
    }

    /// Signals the event through the wait's own handle.
    fn signal(&self) {
        use std::os::windows::io::AsRawHandle;
        // SAFETY: the wait's handle, borrowed for the call.
        let ok = unsafe { windows_sys::Win32::System::Threading::SetEvent(self.wait.handle().as_raw_handle()) };
        assert!(ok != 0, "SetEvent: {}", std::io::Error::last_os_error());
    }
}

impl Owned for Obj {
    fn probe(&self) -> &Arc<Probe> {
        &self.probe
    }

    fn drop_owner(self) -> Arc<Probe> {
        let Self { wait, probe, .. } = self;
        tear_down(|| drop(wait));
        probe.owner_dropped();
        probe
    }
}

struct WaitModel {
    slots: Slots<Obj>,
    before: Mutex<Vec<usize>>,
}

impl Model for WaitModel {
    type Op = Op;

    fn slot(op: &Op) -> usize {
        match *op {
            Op::Create(s)
            | Op::Arm(s, _)
            | Op::ArmChain(s, _)
            | Op::Signal(s)
            | Op::ArmThenSignal(s)
            | Op::Disarm(s)
            | Op::CancelPending(s)
            | Op::Wait(s)
            | Op::StopAndDrain(s)
            | Op::Drop(s)
            | Op::DropFromCallback(s) => s,
        }
    }

    fn apply(&self, op: &Op, alone: bool) {
        let slot = Self::slot(op);
        match *op {
            Op::Create(_) => self.slots.fill(slot, Obj::new),
            Op::Arm(_, t) => {
                self.slots.with(slot, |o| o.arm(t));
            }
            Op::ArmChain(_, n) => {
                self.slots.with(slot, |o| {
                    o.acct.budget.fetch_add(n.into(), SeqCst);
                    o.arm(Timeout::Now);
                });
            }
            Op::Signal(_) => {
                self.slots.with(slot, |o| o.signal());
            }
            Op::ArmThenSignal(_) => {
                self.slots.with(slot, |o| {
                    o.arm(Timeout::Never);
                    o.signal();
                });
            }
            Op::Disarm(_) => {
                self.slots.with(slot, |o| o.wait.disarm());
            }
            Op::CancelPending(_) => {
                self.slots.with(slot, |o| o.wait.try_cancel_pending_without_heal());
            }
            Op::Wait(_) => {
                self.slots.with(slot, |o| o.wait.wait());
            }
            Op::StopAndDrain(_) => {
                self.slots.with(slot, |o| {
                    o.wait.stop_and_drain();
                    o.probe.drained(alone);
                });
            }
            Op::Drop(_) => self.slots.drop_slot(slot),
            Op::DropFromCallback(_) => {
                if let Some(o) = self.slots.take(slot) {
                    o.wait.stop_and_drain();
                    o.acct.budget.store(0, SeqCst);
                    o.probe.rested_for_one_more();
                    let probe = Arc::clone(&o.probe);
                    self.slots.retire(&probe, true);
                    probe.hand_to_callback(o.wait, |w| probe.arming(|| w.arm(Duration::ZERO)));
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
            let want = match mine.as_slice() {
                [Op::Arm(_, Timeout::Now | Timeout::SoonMs(_))] | [Op::ArmThenSignal(_)] => 1,
                [Op::ArmChain(_, n)] => 1 + usize::from(*n),
                _ => 0,
            };
            if want > 0 {
                self.slots.await_runs(slot, runs_before, want, &format!("wait activations after {mine:?}"));
            }
        }
        self.slots.each(|i, o| {
            o.probe.check(&format!("wait slot {i}"));
            let (runs, bound) = (o.probe.runs(), o.acct.armings.load(SeqCst));
            assert!(runs <= bound, "wait slot {i}: {runs} activations for {bound} armings");
        });
        self.slots.check_retired("wait (retired)");
    }

    fn finish(&self) {
        self.slots.finish("wait");
    }
}

proptest! {
    #![proptest_config(engine::config(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/wait.proptest-regressions")))]

    fn wait_lifecycle_cases(steps in engine::steps(op(), 12)) {
        engine::run("wait", || WaitModel { slots: Slots::new(Obj::new), before: Mutex::new(Vec::new()) }, &steps);
    }
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn wait_lifecycle() {
    crate::support::alone("lifecycle::wait::wait_lifecycle", wait_lifecycle_cases);
}
