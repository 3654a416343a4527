//! The `CleanupGroup` model, with mixed members.
//!
//! A case runs on one group. Its members (a work object, a one-shot timer or
//! a wait, in [`SLOTS`] slots) borrow the group, so a release, which needs
//! the group alone, ends an *epoch*: every step before it runs on the
//! members of that epoch, the release runs alone (a step of its own), and
//! the members are gone after it. The last epoch's members are released by
//! the group's drop.
//!
//! Member operations: create (work, timer, wait), submit (1 to 3), arm (a
//! timer now, in 1 to 3 ms or in an hour, or now with 1 to 3 re-arms its
//! firings request; a wait, then signal it or not),
//! `wait`, `stop_and_drain`, `cancel_pending`. Releases: `close_members`
//! (draining), `close_members_cancelling` (discards queued callbacks, then
//! self-heal), and dropping the group for a new one.
//!
//! Invariants, besides the engine's ([`Probe`]): each member's context is
//! freed exactly once, by the release that took it (checked as that release
//! returns; a callback starting after it would also be caught by its probe,
//! but the probes are checked right away, so that check is a weak one); a work member's
//! submissions all run by a draining release (or by a `wait` or
//! `stop_and_drain` no other thread raced) and never more than submitted; a
//! timer's or wait's callbacks never outnumber its armings; at the end,
//! contexts and wait targets are back to their counts before the case.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, RwLock};

use proptest::prelude::*;
use windows_threadpool::Deadline;
use windows_threadpool::cleanup_group::{CleanupGroup, TimerMember, WaitMember, WorkMember};

use super::engine::{self, Counts, PATIENCE, Probe, SLOTS, Step, THREADS};
use super::timer::{Due, due};

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Work,
    Timer,
    Wait,
}

#[derive(Debug, Clone)]
pub enum Op {
    Create(usize, Kind),
    Submit(usize, u8),
    ArmTimer(usize, Due),
    /// Arm a timer now, its firings re-arming it 1 to 3 times more.
    ArmChain(usize, u8),
    /// Arm the wait; `true`: then signal its event.
    ArmWait(usize, bool),
    Wait(usize),
    StopAndDrain(usize),
    CancelPending(usize),
    /// Releases: each runs as a step of its own.
    CloseMembers,
    CloseMembersCancelling,
    DropGroup,
}

impl Op {
    fn is_release(&self) -> bool {
        matches!(self, Op::CloseMembers | Op::CloseMembersCancelling | Op::DropGroup)
    }
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Work), Just(Kind::Timer), Just(Kind::Wait)]
}

fn member_op() -> impl Strategy<Value = Op> {
    let s = 0..SLOTS;
    prop_oneof![
        2 => (s.clone(), kind()).prop_map(|(s, k)| Op::Create(s, k)),
        3 => (s.clone(), 1u8..=3).prop_map(|(s, n)| Op::Submit(s, n)),
        2 => (s.clone(), due()).prop_map(|(s, d)| Op::ArmTimer(s, d)),
        2 => (s.clone(), 1u8..=3).prop_map(|(s, n)| Op::ArmChain(s, n)),
        2 => (s.clone(), any::<bool>()).prop_map(|(s, signal)| Op::ArmWait(s, signal)),
        1 => s.clone().prop_map(Op::Wait),
        1 => s.clone().prop_map(Op::StopAndDrain),
        1 => s.prop_map(Op::CancelPending),
    ]
}

fn release() -> impl Strategy<Value = Op> {
    prop_oneof![Just(Op::CloseMembers), Just(Op::CloseMembersCancelling), Just(Op::DropGroup)]
}

/// Steps of member operations, and now and then a release as a step alone.
fn steps() -> impl Strategy<Value = Vec<Step<Op>>> {
    let step = prop_oneof![
        5 => prop::collection::vec((0..THREADS, member_op()), 1..=THREADS),
        1 => release().prop_map(|r| vec![(0, r)]),
    ];
    prop::collection::vec(step, 1..=12)
}

/// One member with its probe and its counts.
struct Member<'g> {
    object: Object<'g>,
    probe: Arc<Probe>,
    /// Submissions or armings due within the case.
    issued: AtomicUsize,
    /// A `cancel_pending` ran since the last reconciliation.
    cancelled: std::sync::atomic::AtomicBool,
    /// Re-arms a timer's firings may still request (shared with its callback).
    budget: Arc<AtomicUsize>,
}

enum Object<'g> {
    Work(WorkMember<'g>),
    Timer(TimerMember<'g>),
    Wait(WaitMember<'g>),
}

impl<'g> Member<'g> {
    fn new(group: &'g CleanupGroup, kind: Kind) -> Self {
        let probe = Probe::new();
        let guard = probe.guard();
        let budget = Arc::new(AtomicUsize::new(0));
        let b = Arc::clone(&budget);
        let object = match kind {
            Kind::Work => Object::Work(
                group
                    .create_work(move |_| {
                        guard.probe().enter();
                    })
                    .expect("create_work"),
            ),
            Kind::Timer => Object::Timer(
                group
                    .create_timer(move |firing| {
                        let p = guard.probe();
                        p.enter();
                        if b.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok() {
                            p.rearm_requested();
                            firing.rearm(std::time::Duration::ZERO);
                        }
                    })
                    .expect("create_timer"),
            ),
            Kind::Wait => Object::Wait(
                group
                    .create_wait(engine::counted_event(), move |_| {
                        guard.probe().enter();
                    })
                    .expect("create_wait"),
            ),
        };
        Self { object, probe, issued: AtomicUsize::new(0), cancelled: Default::default(), budget }
    }

    fn apply(&self, op: &Op, alone: bool) {
        match (op, &self.object) {
            (Op::Submit(_, n), Object::Work(w)) => {
                for _ in 0..*n {
                    self.probe.arming(|| {
                        self.issued.fetch_add(1, SeqCst);
                        w.submit();
                    });
                }
            }
            (Op::ArmTimer(_, due), Object::Timer(t)) => {
                if due.within_case() {
                    self.issued.fetch_add(1, SeqCst);
                }
                self.probe.arming(|| t.arm(due.duration()));
            }
            (Op::ArmChain(_, n), Object::Timer(t)) => {
                // Each re-arm a firing may request counts as an arming.
                self.issued.fetch_add(1 + usize::from(*n), SeqCst);
                self.budget.fetch_add((*n).into(), SeqCst);
                self.probe.arming(|| t.arm(std::time::Duration::ZERO));
            }
            (Op::ArmWait(_, signal), Object::Wait(w)) => {
                self.issued.fetch_add(1, SeqCst);
                self.probe.arming(|| w.arm(Deadline::NEVER));
                if *signal {
                    use std::os::windows::io::AsRawHandle;
                    // SAFETY: the wait's own event, open while the member
                    // (which this borrows) lives.
                    let ok = unsafe { windows_sys::Win32::System::Threading::SetEvent(w.handle().as_raw_handle()) };
                    assert_ne!(ok, 0, "SetEvent");
                }
            }
            (Op::Wait(_) | Op::StopAndDrain(_), object) => {
                let stop = matches!(op, Op::StopAndDrain(_));
                match object {
                    Object::Work(w) if stop => w.stop_and_drain(),
                    Object::Work(w) => w.wait(),
                    Object::Timer(t) if stop => t.stop_and_drain(),
                    Object::Timer(t) => t.wait(),
                    Object::Wait(w) if stop => w.stop_and_drain(),
                    Object::Wait(w) => w.wait(),
                }
                // `wait` fences a work object only (a timer or wait armed
                // for later still fires after it).
                if stop || matches!(object, Object::Work(_)) {
                    self.probe.drained(alone);
                    if alone && matches!(object, Object::Work(_)) {
                        self.reconcile_work();
                    }
                }
            }
            (Op::CancelPending(_), object) => {
                self.cancelled.store(true, SeqCst);
                match object {
                    Object::Work(w) => w.cancel_pending(),
                    Object::Timer(t) => t.cancel_pending(),
                    #[cfg(feature = "self-heal")]
                    Object::Wait(w) => w.try_cancel_pending(),
                    // Without self-heal only the unhealed cancellation
                    // exists, which may leave a Windows pool without a
                    // worker: not in a random sequence.
                    #[cfg(not(feature = "self-heal"))]
                    Object::Wait(_) => {}
                }
            }
            // An operation for another kind of member: nothing.
            _ => {}
        }
    }

    /// A work member with nothing queued or running: every submission ran,
    /// less what a cancel since the last reconciliation discarded.
    #[track_caller]
    fn reconcile_work(&self) {
        let (runs, issued) = (self.probe.runs(), self.issued.load(SeqCst));
        if self.cancelled.swap(false, SeqCst) {
            assert!(runs <= issued, "group work member: {runs} runs for {issued} submissions");
            // What the cancel discarded no longer counts.
            self.issued.store(runs, SeqCst);
        } else {
            assert_eq!(runs, issued, "group work member: runs vs submissions after a drain");
        }
    }

    /// At every barrier: never more callbacks than submissions or armings.
    #[track_caller]
    fn bound(&self, what: &str) {
        self.probe.check(what);
        let (runs, issued) = (self.probe.runs(), self.issued.load(SeqCst));
        // A timer or wait may also fire for an arming counted as not due
        // within the case only if it is due: the hour never is.
        assert!(runs <= issued, "{what}: {runs} callbacks for {issued} submissions or armings");
    }
}

/// Runs `steps` on one group (see the module docs).
fn run(steps: &[Step<Op>]) {
    let _watch = engine::watch(format!("group: {steps:?}"));
    start_the_healer();
    let before = Counts::now();
    {
        let mut group = CleanupGroup::new().expect("CleanupGroup::new");
        let mut rest = steps;
        while !rest.is_empty() {
            // The members of one epoch: until the next release.
            let end = rest.iter().position(|s| s.iter().any(|(_, o)| o.is_release())).unwrap_or(rest.len());
            let (epoch, after) = rest.split_at(end);
            let released = run_epoch(&group, epoch);
            match after.first().map(|s| &s[0].1) {
                Some(Op::CloseMembers) => group.close_members(),
                Some(Op::CloseMembersCancelling) => cancelling_release(&mut group),
                Some(Op::DropGroup) | None => {
                    engine::tear_down(|| drop(group));
                    group = CleanupGroup::new().expect("CleanupGroup::new");
                }
                Some(op) => unreachable!("not a release: {op:?}"),
            }
            let cancelling = cfg!(feature = "self-heal")
                && matches!(after.first().map(|s| &s[0].1), Some(Op::CloseMembersCancelling));
            for (m, probe, issued, cancelled) in released {
                // The release freed the context and fenced the callbacks.
                probe.owner_dropped();
                probe.check(&format!("group member {m:?} after the release"));
                let runs = probe.runs();
                assert!(runs <= issued, "group member {m:?}: {runs} callbacks for {issued} issued");
                if matches!(m, Kind::Work) && !cancelling && !cancelled {
                    assert_eq!(runs, issued, "group work member: a draining release ran every submission");
                }
            }
            rest = after.get(1..).unwrap_or(&[]);
        }
        engine::tear_down(|| drop(group));
    }
    let after = Counts::settled(&before, PATIENCE);
    assert_eq!(after, before, "group: counts after the case differ from before it");
}

/// The cancelling release: with self-heal, the healing one. Without it the
/// model releases by draining instead: `close_members_cancelling_without_heal`
/// can leave a Windows pool with no worker (its documented liveness caveat),
/// which a random sequence would hit.
#[cfg(feature = "self-heal")]
fn cancelling_release(group: &mut CleanupGroup) {
    group.close_members_cancelling();
}

#[cfg(not(feature = "self-heal"))]
fn cancelling_release(group: &mut CleanupGroup) {
    group.close_members();
}

/// A cancelling release starts the process's self-heal healer (a periodic
/// timer, so one context, kept for the life of the process) the first time:
/// started here, before any case counts contexts. (A case's own cancelling
/// release registers repair objects too; they retire within the patience
/// the final count allows.)
fn start_the_healer() {
    #[cfg(feature = "self-heal")]
    static STARTED: std::sync::Once = std::sync::Once::new();
    #[cfg(feature = "self-heal")]
    STARTED.call_once(|| {
        let contexts = windows_threadpool::live_contexts();
        let mut group = CleanupGroup::new().expect("CleanupGroup::new");
        drop(group.create_work(|_| {}).expect("create_work"));
        group.close_members_cancelling();
        assert!(windows_threadpool::heal::testing::healer_running());
        // The default pool's entry (and its repair object) retires once the
        // repair has run: not part of any case either.
        // Its repair object is freed just after the entry leaves the
        // registry: wait for the count too (the healer's timer stays).
        engine::wait_until(
            || "the warm-up's self-heal entry to retire".into(),
            || {
                windows_threadpool::heal::testing::entry(0).is_none()
                    && windows_threadpool::live_contexts() == contexts + 1
            },
        );
    });
}

/// One epoch's steps on `group`'s members; returns, for each member, what
/// the release that ends the epoch must settle: its kind, probe, issued
/// count and whether a cancel ran since it was last reconciled.
fn run_epoch(group: &CleanupGroup, steps: &[Step<Op>]) -> Vec<(Kind, Arc<Probe>, usize, bool)> {
    let slots: Vec<RwLock<Option<(Kind, Member<'_>)>>> = (0..SLOTS).map(|_| RwLock::new(None)).collect();
    let slot_of = |op: &Op| match *op {
        Op::Create(s, _)
        | Op::Submit(s, _)
        | Op::ArmTimer(s, _)
        | Op::ArmChain(s, _)
        | Op::ArmWait(s, _)
        | Op::Wait(s)
        | Op::StopAndDrain(s)
        | Op::CancelPending(s) => s,
        _ => unreachable!("a release is a step of its own"),
    };
    for step in steps {
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let ops: Vec<(&Op, bool)> = step
                    .iter()
                    .filter(|(th, _)| *th == t)
                    .map(|(_, op)| (op, step.iter().all(|(th, o)| *th == t || slot_of(o) != slot_of(op))))
                    .collect();
                if ops.is_empty() {
                    continue;
                }
                let slots = &slots;
                s.spawn(move || {
                    for (op, alone) in ops {
                        let slot = &slots[slot_of(op)];
                        if let Op::Create(_, kind) = op {
                            let mut g = slot.write().unwrap();
                            // An occupied slot keeps its member: members
                            // cannot be dropped one by one.
                            if g.is_none() {
                                *g = Some((*kind, Member::new(group, *kind)));
                            }
                        } else if let Some((_, m)) = &*slot.read().unwrap() {
                            m.apply(op, alone);
                        }
                    }
                });
            }
        });
        for (i, slot) in slots.iter().enumerate() {
            if let Some((_, m)) = &*slot.read().unwrap() {
                m.bound(&format!("group slot {i}"));
            }
        }
    }
    slots
        .into_iter()
        .filter_map(|s| s.into_inner().unwrap())
        .map(|(k, m)| (k, Arc::clone(&m.probe), m.issued.load(SeqCst), m.cancelled.load(SeqCst)))
        .collect()
}

proptest! {
    #![proptest_config(engine::config(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/objects/lifecycle/group.proptest-regressions")))]

    fn group_lifecycle_cases(steps in steps()) {
        run(&steps);
    }
}

/// The cases, in a process of their own (the counts are the process's).
#[test]
fn group_lifecycle() {
    crate::support::alone("lifecycle::group::group_lifecycle", group_lifecycle_cases);
}
