//! The engine every lifecycle model runs on: random steps of operations,
//! each step's operations issued concurrently from up to [`THREADS`]
//! threads, invariants checked at the barrier after every step.
//!
//! A model keeps its objects in [`SLOTS`] slots. An operation names a slot;
//! one that finds its slot empty does nothing (except `Create`). Every
//! object's callback reports to the object's [`Probe`], which records a
//! violation (a callback must never panic: that aborts the process) and the
//! barrier turns it into a failure, so proptest shrinks it.
//!
//! The invariants every model checks with a probe:
//! - **no callback after drop**: once the owner's `drop` returned (from a
//!   thread other than the callback's), no callback of that object starts;
//! - **no callback after a drain**: once a drain (`stop_and_drain`, `wait`,
//!   `run_down`, a release) returned, no callback starts unless the object
//!   was armed (or submitted to) again since. Only a drain that no other
//!   thread's operation on the same object raced in its step is taken as a
//!   fence ("alone"); a racing arm may legitimately come after it;
//! - **freed exactly once**: each callback captures a [`Freed`] guard whose
//!   drop is the context's release; it must be dropped exactly once, at the
//!   latest when the owner's drop returns (or, for a drop from the object's
//!   own callback, within [`PATIENCE`]), and no callback may start after it;
//! - **nothing leaks**: at the end of a case every context
//!   ([`windows_threadpool::live_contexts`]), every I/O operation block
//!   and every wait target ([`counted_event`]) is back to its count before
//!   the case (process handles are left to `tests/objects/leaks.rs`: see [`Counts`]);
//! - **nothing hangs**: every wait has a deadline, and a watchdog exits the
//!   process, printing the case, if a case runs past [`CASE_DEADLINE`]
//!   (a drain that never returns cannot be interrupted otherwise). It also
//!   prints the operations still running (step and thread), and with the
//!   `trace` feature and `WINDOWS_THREADPOOL_TRACE` set, the trace's latest
//!   records.
//!
//! The counts are process-wide: run the models under nextest (a process per
//! test), as `cargo xtask test` does. `LIFECYCLE_DEBUG=1` prints each step
//! before it runs.
#![allow(dead_code)]

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

/// How long the models wait for what must happen (a firing due within
/// 3 ms, a teardown handed to another thread) before failing. Shorter than
/// `support::PATIENCE`: a failing case is re-run many times while it shrinks.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Threads a step's operations are issued from.
pub const THREADS: usize = 4;
/// Objects per model.
pub const SLOTS: usize = 2;
/// Cases per model unless `PROPTEST_CASES` says otherwise (`cargo xtask
/// stress` runs many more).
pub const DEFAULT_CASES: u32 = 200;
/// A case still running after this is a hang: the watchdog exits the process.
pub const CASE_DEADLINE: Duration = Duration::from_secs(90);

/// The proptest configuration: `PROPTEST_CASES` cases (default
/// [`DEFAULT_CASES`]), failures persisted to `regressions` (a file next to
/// the model, committed: its seeds are replayed first on every run).
pub fn config(regressions: &'static str) -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(DEFAULT_CASES);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        max_shrink_iters: std::env::var("PROPTEST_MAX_SHRINK_ITERS")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(400),
        ..Config::default()
    }
}

/// [`config`] for a model whose cases cost several of the others': `cases`
/// cases, or with `PROPTEST_CASES` set (`cargo xtask stress`) its
/// [`DEFAULT_CASES`]-relative share (`PROPTEST_CASES * cases /
/// DEFAULT_CASES`), so stress scales it as it does the others. Run it with
/// [`run_cases`]: the `proptest!` macro sets `PROPTEST_CASES` over it.
pub fn config_share(regressions: &'static str, cases: u32) -> Config {
    let mut c = config(regressions);
    c.cases = match std::env::var("PROPTEST_CASES").ok().and_then(|s| s.trim().parse::<u32>().ok()) {
        Some(n) => (u64::from(n) * u64::from(cases) / u64::from(DEFAULT_CASES)).max(1) as u32,
        None => cases,
    };
    c
}

/// Runs `test` on values of `strategy` with `config` as it is (the
/// `proptest!` macro would apply the `PROPTEST_*` variables over it); a
/// failure panics with the shrunk value, persisted as `config` says.
#[track_caller]
pub fn run_cases<S: Strategy>(config: Config, strategy: S, test: impl Fn(S::Value))
where
    S::Value: Debug,
{
    let mut runner = proptest::test_runner::TestRunner::new(config);
    if let Err(e) = runner.run(&strategy, |v| {
        test(v);
        Ok(())
    }) {
        panic!("{e}");
    }
}

/// One step: operations with the thread (0..THREADS) that issues each.
pub type Step<Op> = Vec<(usize, Op)>;

/// Up to `max_steps` steps of 1 to [`THREADS`] operations each.
pub fn steps<Op: Debug + Clone>(
    op: impl Strategy<Value = Op>,
    max_steps: usize,
) -> impl Strategy<Value = Vec<Step<Op>>> {
    prop::collection::vec(prop::collection::vec((0..THREADS, op), 1..=THREADS), 1..=max_steps)
}

/// What a model implements; [`run`] drives it.
pub trait Model: Sync {
    type Op: Debug + Clone + Send + Sync;
    /// The slot `op` acts on.
    fn slot(op: &Self::Op) -> usize;
    /// Runs `op` on the calling thread. `alone`: no other thread's
    /// operation of this step acts on the same slot.
    fn apply(&self, op: &Self::Op, alone: bool);
    /// Called before a step's threads start.
    fn before_step(&self, _step: &Step<Self::Op>) {}
    /// Called after a step's threads have all returned: check invariants.
    fn after_step(&self, step: &Step<Self::Op>);
    /// Tears every object down and checks the final invariants.
    fn finish(&self);
}

/// Runs `steps` against `model`: each step's operations on their threads
/// (those of one thread in order), invariants after each, teardown at the
/// end, then the leak checks against the counts before the case.
pub fn run<M: Model>(name: &str, make: impl FnOnce() -> M, steps: &[Step<M::Op>]) {
    crate::support::assert_alone();
    let _watch = watch(format!("{name}: {steps:?}"));
    let debug = std::env::var_os("LIFECYCLE_DEBUG").is_some();
    if debug {
        eprintln!("lifecycle {name}: counting");
    }
    let before = Counts::now();
    {
        let model = make();
        for (i, step) in steps.iter().enumerate() {
            if debug {
                eprintln!("lifecycle {name}: step {step:?}");
            }
            model.before_step(step);
            std::thread::scope(|s| {
                for t in 0..THREADS {
                    let ops: Vec<(&M::Op, bool)> = step
                        .iter()
                        .filter(|(th, _)| *th == t)
                        .map(|(_, op)| {
                            let slot = M::slot(op);
                            (op, step.iter().all(|(th, o)| *th == t || M::slot(o) != slot))
                        })
                        .collect();
                    if ops.is_empty() {
                        continue;
                    }
                    let model = &model;
                    s.spawn(move || {
                        for (op, alone) in ops {
                            set_status(t, Some(format!("step {i}: {op:?}")));
                            model.apply(op, alone);
                            set_status(t, None);
                        }
                    });
                }
            });
            if debug {
                eprintln!("lifecycle {name}: checking");
            }
            set_status(THREADS, Some(format!("step {i}: checking the barrier")));
            model.after_step(step);
            set_status(THREADS, None);
        }
        if debug {
            eprintln!("lifecycle {name}: finishing");
        }
        set_status(THREADS, Some("the final teardown".into()));
        model.finish();
        set_status(THREADS, None);
    }
    if debug {
        eprintln!("lifecycle {name}: counting after");
    }
    let after = Counts::settled(&before, PATIENCE);
    assert_eq!(after, before, "{name}: counts after the case differ from before it");
}

/// What must be back to its value after a case: contexts and I/O
/// operation blocks alive, and wait targets created less those closed.
/// (Process handles are counted by `tests/objects/leaks.rs` over thousands of
/// cycles instead: under Wine 8 the pool's own handles come and go with
/// its idle threads, which a per-case count cannot tell from a leak.)
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Counts {
    pub contexts: usize,
    pub operations: usize,
    pub wait_targets_open: usize,
}

impl Counts {
    pub fn now() -> Self {
        Self {
            contexts: windows_threadpool::live_contexts(),
            operations: windows_threadpool::io::live_operations(),
            wait_targets_open: TARGETS_OPENED.load(SeqCst) - TARGETS_CLOSED.load(SeqCst),
        }
    }

    /// The counts once they equal `want`, or after `patience` (a teardown
    /// handed to another thread finishes on its own time).
    pub fn settled(want: &Self, patience: Duration) -> Self {
        let deadline = Instant::now() + patience;
        loop {
            let now = Self::now();
            if now == *want || Instant::now() > deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

static TARGETS_OPENED: AtomicUsize = AtomicUsize::new(0);
static TARGETS_CLOSED: AtomicUsize = AtomicUsize::new(0);

/// A new auto-reset event as a wait target whose close is counted: each must
/// be closed exactly once (the count of those open returns to its value
/// before the case; a second close of one would make it fall below).
pub fn counted_event() -> windows_threadpool::WaitableHandle {
    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::Win32::System::Threading::CreateEventW;
    use windows_sys::core::BOOL;
    unsafe extern "system" fn close_counted(h: HANDLE) -> BOOL {
        TARGETS_CLOSED.fetch_add(1, SeqCst);
        // SAFETY: the wait hands over the handle it owned, once.
        unsafe { CloseHandle(h) }
    }
    // SAFETY: no security attributes, no name.
    let h = unsafe { CreateEventW(core::ptr::null(), 0, 0, core::ptr::null()) };
    assert!(!h.is_null(), "CreateEventW: {}", std::io::Error::last_os_error());
    TARGETS_OPENED.fetch_add(1, SeqCst);
    // SAFETY: a new event of ours, closed only by `close_counted`.
    unsafe { windows_threadpool::WaitableHandle::assume_waitable_with(h, close_counted) }
}

/// Polls `cond` until it holds; panics naming `what` after [`PATIENCE`].
#[track_caller]
pub fn wait_until(what: impl Fn() -> String, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for {}", what());
        std::thread::sleep(Duration::from_micros(200));
    }
}

// ---- the watchdog ----------------------------------------------------------

static WATCHED: Mutex<Option<(Instant, String)>> = Mutex::new(None);

/// What each step thread (0..THREADS) is doing, and at index THREADS what
/// the case's own thread is doing (a barrier check, the final teardown):
/// printed by the watchdog, so a hang names the operations still running.
static STATUS: Mutex<[Option<String>; THREADS + 1]> = Mutex::new([const { None }; THREADS + 1]);

fn set_status(t: usize, what: Option<String>) {
    STATUS.lock().unwrap_or_else(|e| e.into_inner())[t] = what;
}

/// Clears the watched case when dropped.
pub struct Watch(());

impl Drop for Watch {
    fn drop(&mut self) {
        *WATCHED.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Watches a case described by `what`: if it is still running after
/// [`CASE_DEADLINE`], the process prints it and exits (a hang fails, with
/// the sequence that caused it).
pub fn watch(what: String) -> Watch {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(100));
                let w = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((deadline, what)) = &*w
                    && Instant::now() > *deadline
                {
                    let status = STATUS.lock().unwrap_or_else(|e| e.into_inner());
                    let running: Vec<String> = status
                        .iter()
                        .enumerate()
                        .filter_map(|(t, s)| {
                            let who = if t == THREADS { "case".to_string() } else { format!("thread {t}") };
                            s.as_ref().map(|s| format!("  {who}: {s}"))
                        })
                        .collect();
                    let mut report = format!(
                        "lifecycle: a case hung (ran past {CASE_DEADLINE:?}); still running:\n{}\nthe case:\n{what}\n",
                        if running.is_empty() { "  (no operation)".to_string() } else { running.join("\n") }
                    );
                    // With the `trace` feature and WINDOWS_THREADPOOL_TRACE set: the latest records.
                    if windows_threadpool::trace::enabled() {
                        let dump = windows_threadpool::trace::dump();
                        let lines: Vec<&str> = dump.lines().collect();
                        report.push_str("lifecycle: the trace's last records:\n");
                        for l in &lines[lines.len().saturating_sub(80)..] {
                            report.push_str(l);
                            report.push('\n');
                        }
                    }
                    // Written to the stream itself, not with `eprintln!`: this
                    // thread inherited the test's output capture, whose
                    // buffer `exit` would discard (without `--nocapture`).
                    use std::io::Write as _;
                    let _ = std::io::stderr().write_all(report.as_bytes());
                    std::process::exit(101);
                }
            }
        });
    });
    *STATUS.lock().unwrap_or_else(|e| e.into_inner()) = [const { None }; THREADS + 1];
    *WATCHED.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now() + CASE_DEADLINE, what));
    Watch(())
}

// ---- the probe ---------------------------------------------------------------

/// What one object's callbacks report to (see the module docs).
#[derive(Default)]
pub struct Probe {
    /// Callbacks started.
    pub runs: AtomicUsize,
    /// Bumped after each drain that no other thread raced.
    epoch: AtomicU64,
    /// The epoch at the latest arming (or submission, or re-arm request).
    armed_at: AtomicU64,
    /// Armings in progress.
    arming: AtomicUsize,
    /// The owner's drop returned (not a drop from the callback).
    dropped: AtomicBool,
    /// How often the callback's [`Freed`] guard was dropped.
    freed: AtomicUsize,
    violations: Mutex<Vec<String>>,
    /// The object itself, while a callback is to drop it.
    pub self_owner: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// Set when the callback dropped the object it was handed.
    pub self_dropped: AtomicBool,
    /// For an object dropped from its callback: how many callbacks must
    /// have run once its context is freed (0: not checked).
    pub expect_runs: AtomicUsize,
}

impl Probe {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn violation(&self, what: String) {
        self.violations.lock().unwrap_or_else(|e| e.into_inner()).push(what);
    }

    /// The first thing every callback does.
    pub fn enter(&self) {
        if self.freed.load(SeqCst) > 0 {
            self.violation("a callback started after its context was freed".into());
        }
        if self.dropped.load(SeqCst) {
            self.violation("a callback started after the owner's drop returned".into());
        }
        let (epoch, armed_at) = (self.epoch.load(SeqCst), self.armed_at.load(SeqCst));
        if self.arming.load(SeqCst) == 0 && epoch > armed_at {
            self.violation(format!(
                "a callback started after a drain returned, with no arming since (epoch {epoch}, armed at {armed_at})"
            ));
        }
        self.runs.fetch_add(1, SeqCst);
    }

    /// Runs an arming (or submission) `f`, marking it in progress.
    pub fn arming<R>(&self, f: impl FnOnce() -> R) -> R {
        self.arming.fetch_add(1, SeqCst);
        let r = f();
        self.armed_at.fetch_max(self.epoch.load(SeqCst), SeqCst);
        self.arming.fetch_sub(1, SeqCst);
        r
    }

    /// A callback requested a re-arm (call before returning).
    pub fn rearm_requested(&self) {
        self.armed_at.fetch_max(self.epoch.load(SeqCst), SeqCst);
    }

    /// A drain returned; `alone`: no other thread raced it on this object.
    pub fn drained(&self, alone: bool) {
        if alone {
            self.epoch.fetch_add(1, SeqCst);
        }
    }

    /// The owner's drop returned on a thread other than the callback's:
    /// the context must be freed by now, and no callback may start.
    #[track_caller]
    pub fn owner_dropped(&self) {
        self.dropped.store(true, SeqCst);
        let freed = self.freed.load(SeqCst);
        if freed != 1 {
            self.violation(format!("the drop returned with the context freed {freed} times (want 1)"));
        }
    }

    /// The guard a callback captures; dropping it is the context's release.
    pub fn guard(self: &Arc<Self>) -> Freed {
        Freed(Arc::clone(self))
    }

    pub fn freed(&self) -> usize {
        self.freed.load(SeqCst)
    }

    pub fn runs(&self) -> usize {
        self.runs.load(SeqCst)
    }

    /// Panics with every violation recorded so far.
    #[track_caller]
    pub fn check(&self, what: &str) {
        let v = self.violations.lock().unwrap_or_else(|e| e.into_inner());
        assert!(v.is_empty(), "{what}: {v:?}");
        let freed = self.freed.load(SeqCst);
        assert!(freed <= 1, "{what}: the context was freed {freed} times");
    }

    /// After a drop from the object's own callback: waits until the teardown
    /// handed to another thread freed the context.
    #[track_caller]
    pub fn await_freed(&self, what: &str) {
        wait_until(
            || format!("{what}: the context of an object dropped from its callback to be freed"),
            || self.freed.load(SeqCst) > 0,
        );
        self.check(what);
    }

    /// Before handing an object brought to rest (by a drain no other thread
    /// raced) to its own callback: that drain is a fence, and exactly one
    /// more callback must run before its context is freed.
    pub fn rested_for_one_more(&self) {
        self.drained(true);
        self.expect_runs.store(self.runs() + 1, SeqCst);
    }

    /// Hands `obj` to its own callback, which drops it ([`Self::take_self`]):
    /// `trigger` (which makes the callback run) is called with the hand-over
    /// slot locked, so the callback finds the object there.
    pub fn hand_to_callback<T: Send + 'static>(&self, obj: T, trigger: impl FnOnce(&T)) {
        let mut g = self.self_owner.lock().unwrap_or_else(|e| e.into_inner());
        trigger(&obj);
        *g = Some(Box::new(obj));
    }

    /// In a callback: drops the object if it was handed over.
    pub fn take_self(&self) {
        self.take_self_with(|| {});
    }

    /// In a callback: if the object was handed over, runs `before`, then
    /// drops it.
    pub fn take_self_with(&self, before: impl FnOnce()) {
        let obj = self.self_owner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(obj) = obj {
            before();
            drop(obj);
            self.self_dropped.store(true, SeqCst);
        }
    }
}

/// Captured by a callback: its drop counts the context's release.
pub struct Freed(Arc<Probe>);

impl Freed {
    pub fn probe(&self) -> &Probe {
        &self.0
    }
}

impl Drop for Freed {
    fn drop(&mut self) {
        self.0.freed.fetch_add(1, SeqCst);
    }
}

/// Drops (or otherwise tears down) in `f`, accepting the `fail-fast` report
/// of a drain still owed (which it raises after the teardown completed):
/// the models drop armed objects on purpose.
pub fn tear_down(f: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        if !(cfg!(feature = "fail-fast") && msg.contains("drain still owed")) {
            std::panic::resume_unwind(payload);
        }
    }
}

// ---- slots -----------------------------------------------------------------

/// A model's object as the engine's slot helpers handle it.
pub trait Owned {
    fn probe(&self) -> &Arc<Probe>;
    /// Drops the owner on this thread, checking what a drop must; returns
    /// the object's probe.
    fn drop_owner(self) -> Arc<Probe>;
}

/// A model's objects: each slot holds an object and its probe. Operations
/// that use an object take the read lock; a drop takes the write lock, so
/// it waits for them and nothing reaches a dropped object.
pub struct Slots<T> {
    slots: Vec<RwLock<Option<T>>>,
    /// Probes of objects no longer in a slot: checked to the end.
    pub retired: Mutex<Vec<(Arc<Probe>, bool)>>,
}

impl<T> Slots<T> {
    pub fn new(make: impl Fn() -> T) -> Self {
        Self::new_indexed(|_| make())
    }

    /// Slots filled with `make(slot)`.
    pub fn new_indexed(make: impl Fn(usize) -> T) -> Self {
        Self { slots: (0..SLOTS).map(|i| RwLock::new(Some(make(i)))).collect(), retired: Mutex::new(Vec::new()) }
    }

    /// Runs `f` on the object in `slot`, if any.
    pub fn with<R>(&self, slot: usize, f: impl FnOnce(&T) -> R) -> Option<R> {
        let g = self.slots[slot].read().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map(f)
    }

    /// Takes the object out of `slot`.
    pub fn take(&self, slot: usize) -> Option<T> {
        self.slots[slot].write().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Fills `slot` if it is empty.
    pub fn fill(&self, slot: usize, make: impl FnOnce() -> T) {
        let mut g = self.slots[slot].write().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(make());
        }
    }

    /// Remembers a probe of an object that left its slot; `self_drop`: its
    /// callback drops it (its release is awaited at the next check).
    pub fn retire(&self, probe: &Arc<Probe>, self_drop: bool) {
        self.retired.lock().unwrap_or_else(|e| e.into_inner()).push((Arc::clone(probe), self_drop));
    }

    /// Every object still in a slot.
    pub fn each(&self, mut f: impl FnMut(usize, &T)) {
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(t) = s.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
                f(i, t);
            }
        }
    }

    /// Checks the probes of retired objects; those dropped from their
    /// callback are awaited until their context is freed.
    #[track_caller]
    pub fn check_retired(&self, what: &str) {
        let retired = self.retired.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (probe, self_drop) in retired {
            if self_drop {
                probe.await_freed(what);
                assert!(probe.self_dropped.load(SeqCst), "{what}: the callback that was to drop its object never did");
                let want = probe.expect_runs.load(SeqCst);
                assert!(
                    want == 0 || probe.runs() == want,
                    "{what}: {} callbacks ran before the context of an object dropped from its callback was freed, \
                     want {want}",
                    probe.runs()
                );
            }
            probe.check(what);
        }
    }

    /// Takes every object out (for the final teardown).
    pub fn drain_all(&self) -> Vec<T> {
        self.slots.iter().filter_map(|s| s.write().unwrap_or_else(|e| e.into_inner()).take()).collect()
    }
}

impl<T: Owned> Slots<T> {
    /// `Drop`: drops the object in `slot` (if any) from this thread.
    pub fn drop_slot(&self, slot: usize) {
        if let Some(o) = self.take(slot) {
            let probe = o.drop_owner();
            self.retire(&probe, false);
        }
    }

    /// The end of a case: drops every object left and checks every probe.
    #[track_caller]
    pub fn finish(&self, model: &str) {
        for o in self.drain_all() {
            let probe = o.drop_owner();
            self.retire(&probe, false);
        }
        self.check_retired(&format!("{model} (final)"));
    }

    /// After a step: waits until the object in `slot` (if any) has started
    /// `want` callbacks more than `before`; `what` names them for the failure.
    #[track_caller]
    pub fn await_runs(&self, slot: usize, before: usize, want: usize, what: &str) {
        self.with(slot, |o| {
            wait_until(
                || format!("slot {slot}: {want} {what} (saw {})", o.probe().runs() - before),
                || o.probe().runs() >= before + want,
            )
        });
    }

    /// Callbacks started so far, per slot (0 for an empty one).
    pub fn runs(&self) -> Vec<usize> {
        (0..SLOTS).map(|s| self.with(s, |o| o.probe().runs()).unwrap_or(0)).collect()
    }
}
