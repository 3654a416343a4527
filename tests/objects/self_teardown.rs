//! An object torn down from inside its own callback: dropping the last owner
//! there completes once the callback returns, and frees what the callback
//! captured exactly once, after it returned; a drain called from there panics
//! (and, being in a callback, aborts the process) with a message naming the
//! call, instead of waiting for itself forever.
//!
//! A broken teardown hangs rather than fails, so every wait here has a
//! deadline and a missed deadline fails the test. Panics abort, so each drain
//! case runs in a child process (`support::child`); a child that does not
//! abort within the deadline exits normally, which fails its parent.
#![cfg(windows)]

use crate::support;
use support::{Counter, Gate};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use windows_sys::Win32::Foundation::ERROR_OPERATION_ABORTED;
use windows_threadpool::Deadline;
use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::io::{self, Io, IoCompletion};
use windows_threadpool::timer::{PeriodicTimer, Timer};
use windows_threadpool::wait::{Event, Wait, WaitActivation};
use windows_threadpool::{CallbackEnviron, Pool, Work};

/// How long a teardown may take before the test calls it a hang.
const DEADLINE: Duration = Duration::from_secs(10);

/// Where an object's owner lives: its own callback takes it out and drops it.
type Slot<T> = Arc<Mutex<Option<T>>>;

/// What the state a callback captured reports about its own drop.
#[derive(Default)]
struct Freed {
    drops: Mutex<usize>,
    cv: Condvar,
    /// Set if the state was dropped before the callbacks it expected had returned.
    early: AtomicBool,
    /// Callbacks that finished (the last statement of each).
    returned: AtomicUsize,
}

/// Captured by a callback; its drop is counted.
struct Captured {
    freed: Arc<Freed>,
    /// Callbacks that must have returned before this is dropped.
    expect_returned: usize,
}

impl Captured {
    fn new(expect_returned: usize) -> (Self, Arc<Freed>) {
        let freed = Arc::new(Freed::default());
        (Self { freed: Arc::clone(&freed), expect_returned }, freed)
    }

    /// The last statement of a callback.
    fn returning(&self) {
        self.freed.returned.fetch_add(1, SeqCst);
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        let returned = self.freed.returned.load(SeqCst);
        if returned < self.expect_returned {
            self.freed.early.store(true, SeqCst);
            eprintln!("self-teardown: captured state freed EARLY, {returned} callbacks had returned");
        } else {
            // Unbuffered, so a child that aborts right after still shows it.
            eprintln!("self-teardown: captured state freed after {returned} callbacks returned");
        }
        *self.freed.drops.lock().unwrap() += 1;
        self.freed.cv.notify_all();
    }
}

impl Freed {
    /// Waits (at most [`DEADLINE`]) for the captured state to be dropped, and
    /// checks it was dropped once, after the callbacks returned.
    #[track_caller]
    fn wait_freed_once(&self) {
        let g = self.drops.lock().unwrap();
        let (g, _) = self.cv.wait_timeout_while(g, DEADLINE, |n| *n == 0).unwrap();
        assert_eq!(*g, 1, "the captured state was not freed within {DEADLINE:?} (a teardown waiting for itself?)");
        drop(g);
        assert!(!self.early.load(SeqCst), "the captured state was freed before the callback returned");
    }

    fn drops(&self) -> usize {
        *self.drops.lock().unwrap()
    }
}

/// Takes the owner out of `slot` and drops it, here.
fn drop_from(slot: &Mutex<Option<impl Sized>>) -> bool {
    let owner = slot.lock().unwrap().take();
    let had = owner.is_some();
    drop(owner);
    had
}

/// A child whose teardown reports a drain owed with `fail-fast` (and so
/// aborts, possibly before its own checks ran) shows on stderr that the
/// captured state was freed exactly once, after the callbacks returned.
#[track_caller]
fn assert_freed_once_in_child(out: &support::ChildOutcome, freed: &str) {
    assert_eq!(out.stderr.matches("self-teardown: captured state freed").count(), 1, "{out:#?}");
    assert!(out.stderr.contains(freed), "{out:#?}");
}

/// The outcome of a child whose teardown owed a drain of `type_name`: with
/// `fail-fast` the report (a panic where no unwind may pass, so an abort);
/// without it, a normal end.
#[track_caller]
fn assert_owed_drain_reported(out: &support::ChildOutcome, type_name: &str) {
    if cfg!(feature = "fail-fast") {
        // Reported by the handed-off teardown, which aborts saying so.
        support::assert_panicked_and_aborted(
            out,
            support::AbortKind::Explicit,
            &format!("{type_name} was torn down with a drain still owed"),
        );
        assert!(out.stderr.contains("windows-threadpool: a handed-off teardown panicked; aborting"), "{out:#?}");
    } else {
        out.assert_completed();
    }
}

/// In a child process whose scenario should end in an abort: gives the abort
/// time to come, then returns (and the child exits normally, which fails the
/// parent). The abort ends the wait as soon as it comes, so the bound only
/// decides how long a loaded machine may take to print a panic's backtrace
/// before the test is failed; nextest's own limit (120 s) stays above it.
fn await_abort() {
    std::thread::sleep(ABORT_DEADLINE);
}

/// See [`await_abort`].
const ABORT_DEADLINE: Duration = Duration::from_secs(60);

// ---------------------------------------------------------------------------
// Dropping the last owner from the object's own callback

#[test]
fn work_dropped_from_its_own_callback() {
    let (cap, freed) = Captured::new(1);
    let slot: Slot<Work> = Slot::default();
    let s = Arc::clone(&slot);
    let work = Work::new(move |_| {
        assert!(drop_from(&s));
        cap.returning();
    })
    .unwrap();
    slot.lock().unwrap().insert(work).submit();
    freed.wait_freed_once();
    assert!(slot.lock().unwrap().is_none());
}

/// Every submission is dispatched (so nothing is owed) and all are running
/// when the first drops the object; the teardown waits for all of them. Each
/// is submitted once the previous one runs: Wine adds a pool thread only when
/// a submission finds every thread busy.
#[test]
fn work_dropped_by_the_first_of_several_running_callbacks() {
    const N: usize = 3;
    let (cap, freed) = Captured::new(N);
    let entered = Arc::new(support::Counter::default());
    let dropped = Arc::new(Gate::default());
    let slot: Slot<Work> = Slot::default();
    let (s, e, d) = (Arc::clone(&slot), Arc::clone(&entered), Arc::clone(&dropped));
    let work = Work::new(move |_| {
        if e.bump() == 1 {
            e.wait_for(N);
            assert!(drop_from(&s));
            d.open();
        } else {
            d.wait();
        }
        cap.returning();
    })
    .unwrap();
    *slot.lock().unwrap() = Some(work);
    for i in 1..=N {
        slot.lock().unwrap().as_ref().expect("dropped only once all have entered").submit();
        entered.wait_for(i);
    }
    freed.wait_freed_once();
    assert_eq!(freed.returned.load(SeqCst), N);
}

/// On a private pool limited to one thread, the first callback drops the
/// object while the other submissions are queued behind it on that thread:
/// the teardown must not need that thread for itself. The queued submissions
/// still run. They were owed a drain, so with `fail-fast` the teardown then
/// reports it (from the thread it was handed to, which aborts the process).
#[test]
fn work_on_a_one_thread_pool_dropped_with_submissions_queued() {
    let out = support::child("self_teardown::work_on_a_one_thread_pool_dropped_with_submissions_queued", &[], || {
        const N: usize = 3;
        let pool = Pool::new().unwrap();
        pool.set_max_threads(1).unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let (cap, freed) = Captured::new(N);
        let runs = Arc::new(AtomicUsize::new(0));
        let slot: Slot<Work> = Slot::default();
        let (s, r) = (Arc::clone(&slot), Arc::clone(&runs));
        let gate = Arc::new(Gate::default());
        let g = Arc::clone(&gate);
        let work = Work::new_in(
            move |_| {
                if r.fetch_add(1, SeqCst) == 0 {
                    // Hold the only thread until every submission is queued.
                    g.wait();
                    assert!(drop_from(&s));
                }
                cap.returning();
            },
            &env,
        )
        .unwrap();
        {
            let mut l = slot.lock().unwrap();
            let w = l.insert(work);
            for _ in 0..N {
                w.submit();
            }
        }
        gate.open();
        freed.wait_freed_once();
        assert_eq!(runs.load(SeqCst), N, "every queued submission runs");
        if cfg!(feature = "fail-fast") {
            await_abort();
        }
    });
    assert_freed_once_in_child(&out, "self-teardown: captured state freed after 3 callbacks returned");
    assert_owed_drain_reported(&out, "Work");
}

/// The firing also asks to be re-armed; the drop refuses that re-arm, so the
/// timer fires once.
#[test]
fn one_shot_timer_dropped_from_its_firing() {
    let (cap, freed) = Captured::new(1);
    let firings = Arc::new(AtomicUsize::new(0));
    let slot: Slot<Timer> = Slot::default();
    let (s, f) = (Arc::clone(&slot), Arc::clone(&firings));
    let timer = Timer::new(move |firing| {
        f.fetch_add(1, SeqCst);
        firing.rearm(Duration::ZERO);
        assert!(drop_from(&s));
        cap.returning();
    })
    .unwrap();
    slot.lock().unwrap().insert(timer).arm(Duration::ZERO);
    freed.wait_freed_once();
    assert_eq!(firings.load(SeqCst), 1, "the re-arm requested before the drop was applied");
}

/// A tick stops its timer, then drops it: nothing is owed (even with
/// `fail-fast`), and the teardown waits for every tick still queued.
#[test]
fn periodic_timer_stopped_and_dropped_from_a_tick() {
    // Ticks queued before the stop may still run (on Wine) and find the slot empty.
    let (cap, freed) = Captured::new(1);
    let ticks = Arc::new(AtomicUsize::new(0));
    let slot: Slot<PeriodicTimer> = Slot::default();
    let (s, t) = (Arc::clone(&slot), Arc::clone(&ticks));
    let timer = PeriodicTimer::new(Duration::from_millis(1), move |tick| {
        if t.fetch_add(1, SeqCst) + 1 == 3 {
            tick.disarm();
            assert!(drop_from(&s));
        }
        cap.returning();
    })
    .unwrap();
    slot.lock().unwrap().insert(timer).arm(Duration::from_millis(1));
    freed.wait_freed_once();
    assert!(ticks.load(SeqCst) >= 3);
}

/// Another thread stops the timer (a disarm, not a drain) while a tick runs;
/// that tick then drops it. The tick's own teardown needs no drain of it, and
/// the stop left nothing armed, so nothing is owed: no `fail-fast` report.
#[test]
fn periodic_timer_disarmed_elsewhere_then_dropped_from_a_tick() {
    let out = support::child("self_teardown::periodic_timer_disarmed_elsewhere_then_dropped_from_a_tick", &[], || {
        // Ticks queued before the disarm may still run (on Wine) and find the slot empty.
        let (cap, freed) = Captured::new(1);
        let slot: Slot<PeriodicTimer> = Slot::default();
        let (entered, gate) = (Arc::new(Counter::default()), Arc::new(Gate::default()));
        let (s, e, g) = (Arc::clone(&slot), Arc::clone(&entered), Arc::clone(&gate));
        let first = AtomicBool::new(true);
        let timer = PeriodicTimer::new(Duration::from_millis(1), move |_| {
            if first.swap(false, SeqCst) {
                e.bump();
                g.wait();
                assert!(drop_from(&s));
            }
            cap.returning();
        })
        .unwrap();
        slot.lock().unwrap().insert(timer).arm(Duration::from_millis(1));
        entered.wait_for(1);
        slot.lock().unwrap().as_ref().expect("only the first tick drops it").disarm();
        gate.open();
        freed.wait_freed_once();
    });
    assert_freed_once_in_child(&out, "self-teardown: captured state freed after");
    out.assert_completed();
}

/// Another thread arms a one-shot timer for later while its firing runs; the
/// firing then drops it. That arming was owed a drain (a drop is not a
/// drain), so with `fail-fast` the teardown reports it.
#[test]
fn one_shot_timer_armed_elsewhere_then_dropped_from_its_firing() {
    let out = support::child("self_teardown::one_shot_timer_armed_elsewhere_then_dropped_from_its_firing", &[], || {
        let (cap, freed) = Captured::new(1);
        let slot: Slot<Timer> = Slot::default();
        let (entered, gate) = (Arc::new(Counter::default()), Arc::new(Gate::default()));
        let (s, e, g) = (Arc::clone(&slot), Arc::clone(&entered), Arc::clone(&gate));
        let timer = Timer::new(move |_| {
            e.bump();
            g.wait();
            assert!(drop_from(&s));
            cap.returning();
        })
        .unwrap();
        slot.lock().unwrap().insert(timer).arm(Duration::ZERO);
        entered.wait_for(1);
        slot.lock().unwrap().as_ref().expect("the firing has not dropped it yet").arm(Duration::from_secs(3600));
        gate.open();
        freed.wait_freed_once();
        if cfg!(feature = "fail-fast") {
            await_abort();
        }
    });
    assert_freed_once_in_child(&out, "self-teardown: captured state freed after");
    assert_owed_drain_reported(&out, "Timer");
}

/// A tick drops its running timer without stopping it first: the teardown
/// stops and drains it; the timer was still running, so it owed a drain,
/// which `fail-fast` reports.
#[test]
fn periodic_timer_dropped_running_from_a_tick() {
    let out = support::child("self_teardown::periodic_timer_dropped_running_from_a_tick", &[], || {
        let (cap, freed) = Captured::new(1);
        let slot: Slot<PeriodicTimer> = Slot::default();
        let s = Arc::clone(&slot);
        let timer = PeriodicTimer::new(Duration::from_millis(1), move |_| {
            drop_from(&s);
            cap.returning();
        })
        .unwrap();
        slot.lock().unwrap().insert(timer).arm(Duration::from_millis(1));
        freed.wait_freed_once();
        if cfg!(feature = "fail-fast") {
            await_abort();
        }
    });
    assert_freed_once_in_child(&out, "self-teardown: captured state freed after");
    assert_owed_drain_reported(&out, "PeriodicTimer");
}

/// After the drop, the activation's re-arm is refused: the wait is torn down.
#[test]
fn wait_dropped_from_its_activation() {
    let (cap, freed) = Captured::new(1);
    let rearmed = Arc::new(Mutex::new(None));
    let event = Event::auto_reset().unwrap();
    let slot: Slot<Wait> = Slot::default();
    let (s, r) = (Arc::clone(&slot), Arc::clone(&rearmed));
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act| {
        assert!(drop_from(&s));
        *r.lock().unwrap() = Some(act.rearm(Deadline::NEVER));
        cap.returning();
    })
    .unwrap();
    slot.lock().unwrap().insert(wait).arm(Deadline::NEVER);
    event.set().unwrap();
    freed.wait_freed_once();
    assert_eq!(*rearmed.lock().unwrap(), Some(false), "a re-arm after the drop must be refused");
}

#[test]
fn io_dropped_from_its_completion() {
    let (cap, freed) = Captured::new(1);
    let (server, client) = io::pipe_pair().unwrap();
    let slot: Slot<Io> = Slot::default();
    let s = Arc::clone(&slot);
    let server = Io::new(server, move |c: &IoCompletion| {
        assert!(c.error().is_none(), "{:?}", c.error());
        assert!(drop_from(&s));
        cap.returning();
    })
    .unwrap();
    slot.lock().unwrap().insert(server).read(vec![0u8; 4]).unwrap();
    let client = Io::new(client, |_: &IoCompletion| {}).unwrap();
    client.write(b"ping".to_vec()).unwrap();
    freed.wait_freed_once();
    client.stop_and_drain();
}

/// On a one-thread pool, a completion callback drops its I/O object while a
/// second read is outstanding. The teardown cancels that read and waits for
/// its completion, which only the pool's one thread can deliver once the
/// dropping callback has returned: the teardown must not need that thread.
/// The outstanding read was owed a drain, which `fail-fast` reports.
#[test]
fn io_on_a_one_thread_pool_dropped_with_a_read_outstanding() {
    let out = support::child("self_teardown::io_on_a_one_thread_pool_dropped_with_a_read_outstanding", &[], || {
        let pool = Pool::new().unwrap();
        pool.set_max_threads(1).unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let (cap, freed) = Captured::new(2);
        let results = Arc::new(Mutex::new(Vec::new()));
        let (server, client) = io::pipe_pair().unwrap();
        let slot: Slot<Io> = Slot::default();
        let (s, r) = (Arc::clone(&slot), Arc::clone(&results));
        let server = Io::new_in(
            server,
            move |c: &IoCompletion| {
                r.lock().unwrap().push(c.io_result());
                drop_from(&s);
                cap.returning();
            },
            &env,
        )
        .unwrap();
        {
            let mut l = slot.lock().unwrap();
            let server = l.insert(server);
            server.read(vec![0u8; 4]).unwrap();
            server.read(vec![0u8; 4]).unwrap();
        }
        let client = Io::new(client, |_: &IoCompletion| {}).unwrap();
        client.write(b"ping".to_vec()).unwrap();
        freed.wait_freed_once();
        let mut results = results.lock().unwrap().clone();
        results.sort();
        assert_eq!(results, [0, ERROR_OPERATION_ABORTED], "one read completes, the teardown cancels the other");
        client.stop_and_drain();
        if cfg!(feature = "fail-fast") {
            await_abort();
        }
    });
    assert_freed_once_in_child(&out, "self-teardown: captured state freed after 2 callbacks returned");
    assert_owed_drain_reported(&out, "Io");
}

/// A member's callback drops the group: the release, which waits for that
/// callback, is handed off; every member's state is freed once.
#[test]
fn cleanup_group_dropped_from_a_members_callback() {
    let (cap, freed) = Captured::new(1);
    let (idle_cap, idle_freed) = Captured::new(0);
    let slot: Slot<CleanupGroup> = Slot::default();
    let gate = Arc::new(Gate::default());
    let group = CleanupGroup::new().unwrap();
    {
        let (s, g) = (Arc::clone(&slot), Arc::clone(&gate));
        let member = group
            .create_work(move |_| {
                g.wait();
                assert!(drop_from(&s));
                cap.returning();
            })
            .unwrap();
        member.submit();
        let _idle = group
            .create_work(move |_| {
                let _ = &idle_cap;
            })
            .unwrap();
    }
    *slot.lock().unwrap() = Some(group);
    gate.open();
    freed.wait_freed_once();
    idle_freed.wait_freed_once();
    assert_eq!((freed.drops(), idle_freed.drops()), (1, 1));
}

/// A wait member's callback drops the group, then tries to re-arm: the
/// member was stopped under the group's lock before the release was handed
/// off, as an object dropped in its own callback is, so the re-arm is
/// refused and the release owes nothing for it (under `fail-fast` an owed
/// report would abort the hand-off thread, and this process with it).
#[test]
fn a_member_whose_callback_drops_the_group_refuses_rearms() {
    let slot: Slot<CleanupGroup> = Slot::default();
    let gate = Arc::new(Gate::default());
    let (tx, rx) = std::sync::mpsc::channel();
    let event = Event::manual_reset().unwrap();
    event.set().unwrap();
    let group = CleanupGroup::new().unwrap();
    {
        let (s, g) = (Arc::clone(&slot), Arc::clone(&gate));
        let member = group
            .create_wait(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
                g.wait();
                let dropped = drop_from(&s);
                let _ = tx.send((dropped, act.rearm(Deadline::NEVER)));
            })
            .unwrap();
        member.arm(Deadline::NEVER);
    }
    *slot.lock().unwrap() = Some(group);
    gate.open();
    assert_eq!(rx.recv_timeout(support::PATIENCE), Ok((true, false)), "(group dropped, re-armed)");
}

/// A periodic member's tick stops its timer, then drops the group: the
/// member owes nothing, as a standalone timer stopped and dropped from a
/// tick does (`periodic_timer_stopped_and_dropped_from_a_tick`), so under
/// `fail-fast` no report aborts the hand-off thread; every tick's state is
/// freed once.
#[test]
fn periodic_member_stopped_by_its_tick_then_its_group_dropped() {
    let (cap, freed) = Captured::new(1);
    let ticks = Arc::new(AtomicUsize::new(0));
    let slot: Slot<CleanupGroup> = Slot::default();
    let group = CleanupGroup::new().unwrap();
    {
        let (s, t) = (Arc::clone(&slot), Arc::clone(&ticks));
        let member = group
            .create_periodic_timer(Duration::from_millis(1), move |tick| {
                if t.fetch_add(1, SeqCst) + 1 == 3 {
                    tick.disarm();
                    assert!(drop_from(&s));
                }
                cap.returning();
            })
            .unwrap();
        member.arm(Duration::from_millis(1));
    }
    *slot.lock().unwrap() = Some(group);
    freed.wait_freed_once();
    assert!(ticks.load(SeqCst) >= 3);
}

// ---------------------------------------------------------------------------
// Draining from the object's own callback panics

/// An object its own callback can reach.
type Own<T> = Arc<OnceLock<T>>;

fn work_calling(drain: fn(&Work)) {
    let own: Own<Work> = Own::default();
    let o = Arc::clone(&own);
    let work = Work::new(move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(work);
    own.get().unwrap().submit();
}

fn timer_calling(drain: fn(&Timer)) {
    let own: Own<Timer> = Own::default();
    let o = Arc::clone(&own);
    let timer = Timer::new(move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(timer);
    own.get().unwrap().arm(Duration::ZERO);
}

/// A re-executed child is started again only when it ended as Wine's failed
/// start does: `STATUS_DLL_INIT_FAILED` with nothing written.
#[test]
fn a_child_is_started_again_only_after_a_silent_dll_init_failure() {
    use std::os::windows::process::ExitStatusExt;
    use std::process::{ExitStatus, Output};
    let out = |code: u32, stdout: &[u8], stderr: &[u8]| Output {
        status: ExitStatus::from_raw(code),
        stdout: stdout.to_vec(),
        stderr: stderr.to_vec(),
    };
    assert!(support::failed_to_start(&out(0xC000_0142, b"", b"")));
    assert!(!support::failed_to_start(&out(0xC000_0142, b"\nrunning 1 test\n", b"")));
    assert!(!support::failed_to_start(&out(0xC000_0142, b"", b"boom")));
    assert!(!support::failed_to_start(&out(support::ABORT_STATUS, b"", b"")));
    assert!(!support::failed_to_start(&out(1, b"", b"")));
}

/// A process is started again only after the error Wine's `CreateProcess`
/// gives when the new process dies starting, `ERROR_INTERNAL_ERROR`.
#[test]
fn a_spawn_is_tried_again_only_after_wines_dying_start() {
    use std::io::{Error, ErrorKind};
    assert!(support::spawn_died_starting(&Error::from_raw_os_error(1359)));
    assert!(!support::spawn_died_starting(&Error::from_raw_os_error(2)), "ERROR_FILE_NOT_FOUND");
    assert!(!support::spawn_died_starting(&Error::from_raw_os_error(5)), "ERROR_ACCESS_DENIED");
    assert!(!support::spawn_died_starting(&Error::from(ErrorKind::Other)));
}

/// A period no test outlives: the first tick is the only one, so no second
/// tick panics on another thread while the first one's abort is under way.
const ONE_TICK: Duration = Duration::from_secs(3600);

fn periodic_calling(drain: fn(&PeriodicTimer)) {
    let own: Own<PeriodicTimer> = Own::default();
    let o = Arc::clone(&own);
    let timer = PeriodicTimer::new(ONE_TICK, move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(timer);
    own.get().unwrap().arm(Duration::ZERO);
}

fn wait_calling(drain: fn(&Wait)) {
    let own: Own<Wait> = Own::default();
    let o = Arc::clone(&own);
    let event = Event::auto_reset().unwrap();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(wait);
    own.get().unwrap().arm(Deadline::NEVER);
    event.set().unwrap();
}

fn io_calling(drain: fn(&Io)) {
    let own: Own<Io> = Own::default();
    let o = Arc::clone(&own);
    let (server, client) = io::pipe_pair().unwrap();
    let server = Io::new(server, move |_: &IoCompletion| drain(o.get().unwrap())).unwrap();
    let _ = own.set(server);
    own.get().unwrap().read(vec![0u8; 4]).unwrap();
    let client = Io::new(client, |_: &IoCompletion| {}).unwrap();
    client.write(b"ping".to_vec()).unwrap();
    // Never torn down: the process is to abort while its write may be outstanding.
    std::mem::forget(client);
}

/// A group that lives as long as the process, so its members can be reached
/// from their own callbacks.
fn static_group() -> &'static CleanupGroup {
    Box::leak(Box::new(CleanupGroup::new().unwrap()))
}

fn work_member_calling(drain: fn(&windows_threadpool::cleanup_group::WorkMember<'static>)) {
    let own = Arc::new(OnceLock::new());
    let o = Arc::clone(&own);
    let member = static_group().create_work(move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(member);
    own.get().unwrap().submit();
}

fn timer_member_calling(drain: fn(&windows_threadpool::cleanup_group::TimerMember<'static>)) {
    let own = Arc::new(OnceLock::new());
    let o = Arc::clone(&own);
    let member = static_group().create_timer(move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(member);
    own.get().unwrap().arm(Duration::ZERO);
}

fn periodic_member_calling(drain: fn(&windows_threadpool::cleanup_group::PeriodicTimerMember<'static>)) {
    let own = Arc::new(OnceLock::new());
    let o = Arc::clone(&own);
    let member = static_group().create_periodic_timer(ONE_TICK, move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(member);
    own.get().unwrap().arm(Duration::ZERO);
}

fn wait_member_calling(drain: fn(&windows_threadpool::cleanup_group::WaitMember<'static>)) {
    let own = Arc::new(OnceLock::new());
    let o = Arc::clone(&own);
    let event = Event::auto_reset().unwrap();
    let member =
        static_group().create_wait(event.try_clone().unwrap().into(), move |_| drain(o.get().unwrap())).unwrap();
    let _ = own.set(member);
    own.get().unwrap().arm(Deadline::NEVER);
    event.set().unwrap();
}

/// A member's callback calls `release` on its own group.
fn group_releasing_from_a_member(release: fn(&mut CleanupGroup)) {
    let slot: Slot<CleanupGroup> = Slot::default();
    let gate = Arc::new(Gate::default());
    let group = CleanupGroup::new().unwrap();
    {
        let (s, g) = (Arc::clone(&slot), Arc::clone(&gate));
        let member = group
            .create_work(move |_| {
                g.wait();
                release(s.lock().unwrap().as_mut().unwrap());
            })
            .unwrap();
        member.submit();
    }
    *slot.lock().unwrap() = Some(group);
    gate.open();
}

/// One child-process test per drain method: the callback calls it on its own
/// object and must abort with the message naming `call`.
macro_rules! drain_from_own_callback_panics {
    ($($(#[$attr:meta])* $name:ident: $scenario:expr, $call:literal, $whose:literal;)*) => {$(
        #[test]
        $(#[$attr])*
        fn $name() {
            let out = support::child(concat!("self_teardown::", stringify!($name)), &[], || {
                $scenario;
                await_abort();
            });
            support::assert_panicked_and_aborted(
                &out,
                support::AbortKind::CannotUnwind,
                concat!("windows-threadpool: ", $call, "() called from ", $whose,
                    " callback can never return (it would wait for itself)"),
            );
        }
    )*};
}

drain_from_own_callback_panics! {
    work_wait_from_own_callback_panics:
        work_calling(|w| w.wait()), "Work::wait", "the object's own";
    work_stop_and_drain_from_own_callback_panics:
        work_calling(|w| w.stop_and_drain()), "Work::stop_and_drain", "the object's own";
    work_cancel_pending_from_own_callback_panics:
        work_calling(|w| w.cancel_pending()), "Work::cancel_pending", "the object's own";
    timer_wait_from_own_callback_panics:
        timer_calling(|t| t.wait()), "Timer::wait", "the object's own";
    timer_stop_and_drain_from_own_callback_panics:
        timer_calling(|t| t.stop_and_drain()), "Timer::stop_and_drain", "the object's own";
    timer_cancel_pending_from_own_callback_panics:
        timer_calling(|t| t.cancel_pending()), "Timer::cancel_pending", "the object's own";
    periodic_wait_from_own_callback_panics:
        periodic_calling(|t| t.wait()), "PeriodicTimer::wait", "the object's own";
    periodic_stop_and_drain_from_own_callback_panics:
        periodic_calling(|t| t.stop_and_drain()), "PeriodicTimer::stop_and_drain", "the object's own";
    wait_wait_from_own_callback_panics:
        wait_calling(|w| w.wait()), "Wait::wait", "the object's own";
    wait_stop_and_drain_from_own_callback_panics:
        wait_calling(|w| w.stop_and_drain()), "Wait::stop_and_drain", "the object's own";
    #[cfg(feature = "self-heal")]
    wait_try_cancel_pending_from_own_callback_panics:
        wait_calling(|w| w.try_cancel_pending()), "Wait::try_cancel_pending", "the object's own";
    wait_try_cancel_pending_without_heal_from_own_callback_panics:
        wait_calling(|w| w.try_cancel_pending_without_heal()),
        "Wait::try_cancel_pending_without_heal", "the object's own";
    io_run_down_from_own_callback_panics:
        io_calling(|i| i.run_down()), "Io::run_down", "the object's own";
    io_stop_and_drain_from_own_callback_panics:
        io_calling(|i| i.stop_and_drain()), "Io::stop_and_drain", "the object's own";
    io_wait_from_own_callback_panics:
        io_calling(|i| i.wait()), "Io::wait", "the object's own";
    work_member_wait_from_own_callback_panics:
        work_member_calling(|w| w.wait()), "WorkMember::wait", "the object's own";
    work_member_stop_and_drain_from_own_callback_panics:
        work_member_calling(|w| w.stop_and_drain()), "WorkMember::stop_and_drain", "the object's own";
    work_member_cancel_pending_from_own_callback_panics:
        work_member_calling(|w| w.cancel_pending()), "WorkMember::cancel_pending", "the object's own";
    timer_member_wait_from_own_callback_panics:
        timer_member_calling(|t| t.wait()), "TimerMember::wait", "the object's own";
    timer_member_stop_and_drain_from_own_callback_panics:
        timer_member_calling(|t| t.stop_and_drain()), "TimerMember::stop_and_drain", "the object's own";
    timer_member_cancel_pending_from_own_callback_panics:
        timer_member_calling(|t| t.cancel_pending()), "TimerMember::cancel_pending", "the object's own";
    periodic_member_wait_from_own_callback_panics:
        periodic_member_calling(|t| t.wait()), "PeriodicTimerMember::wait", "the object's own";
    periodic_member_stop_and_drain_from_own_callback_panics:
        periodic_member_calling(|t| t.stop_and_drain()), "PeriodicTimerMember::stop_and_drain", "the object's own";
    wait_member_wait_from_own_callback_panics:
        wait_member_calling(|w| w.wait()), "WaitMember::wait", "the object's own";
    wait_member_stop_and_drain_from_own_callback_panics:
        wait_member_calling(|w| w.stop_and_drain()), "WaitMember::stop_and_drain", "the object's own";
    #[cfg(feature = "self-heal")]
    wait_member_try_cancel_pending_from_own_callback_panics:
        wait_member_calling(|w| w.try_cancel_pending()), "WaitMember::try_cancel_pending", "the object's own";
    wait_member_try_cancel_pending_without_heal_from_own_callback_panics:
        wait_member_calling(|w| w.try_cancel_pending_without_heal()),
        "WaitMember::try_cancel_pending_without_heal", "the object's own";
    close_members_from_a_members_callback_panics:
        group_releasing_from_a_member(|g| g.close_members()), "CleanupGroup::close_members", "a member's";
    #[cfg(feature = "self-heal")]
    close_members_cancelling_from_a_members_callback_panics:
        group_releasing_from_a_member(|g| g.close_members_cancelling()),
        "CleanupGroup::close_members_cancelling", "a member's";
    close_members_cancelling_without_heal_from_a_members_callback_panics:
        group_releasing_from_a_member(|g| g.close_members_cancelling_without_heal()),
        "CleanupGroup::close_members_cancelling_without_heal", "a member's";
}
