//! Self-heal: the registry, the repairs and the healer, driven through the
//! test-only injection points in `heal::testing` (Wine cannot reproduce the
//! stall they repair; see docs/self-heal.md).
//!
//! Every test keys its injections to pools of its own and runs in a process
//! of its own (`support::alone`, or a `support::child` scenario): the healer,
//! once started, runs for the rest of the process. Each says so with
//! [`own_process`]. Where the healer must not act behind a test's back,
//! the test blocks it for its pools (`fail_healer_start`) and runs ticks
//! itself (`tick_ahead`). Assertions are on synchronous evidence (stamps and
//! the unstarted count right after the call that sets them); a poll with a
//! deadline is used only to let an asynchronous repair get to a known state.
#![cfg(all(windows, feature = "self-heal"))]

use crate::support;
use support::Gate;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::heal::testing::{self, EntryView, OVERDUE_AFTER};
use windows_threadpool::{CallbackEnviron, Event, Pool, Wait, Work};

/// The default pool's registry key.
const DEFAULT_POOL: usize = 0;
/// Bound on every poll: generous, since the machine may be loaded.
const DEADLINE: Duration = Duration::from_secs(10);

fn key(pool: &Pool) -> usize {
    pool.as_raw() as usize
}

#[track_caller]
fn view(key: usize) -> EntryView {
    testing::entry(key).unwrap_or_else(|| panic!("pool {key:#x} is not registered"))
}

/// Polls `cond` until it holds; fails the test after [`DEADLINE`].
#[track_caller]
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out after {DEADLINE:?} waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until the registry's clock reads later than `stamp`, so that a
/// repair started from now on stamps strictly later (equal stamps count as
/// unhealed, and the clock's resolution differs between Wine and Windows).
#[track_caller]
fn clock_past(stamp: u64) {
    wait_for("the clock to pass a stamp", || testing::clock() > stamp);
}

/// Fails unless this test runs in a process of its own in which the healer
/// has not started.
#[track_caller]
fn own_process() {
    support::assert_alone();
    assert!(!testing::healer_running(), "the healer already runs in this test's own process");
}

fn env_for(pool: &Pool) -> CallbackEnviron {
    CallbackEnviron::new().with_pool(pool)
}

/// A private pool whose only thread is held by a blocked work item, so that
/// whatever else is submitted to it (a repair) stays unstarted until
/// [`Wedged::unblock`].
struct Wedged {
    blocker: Option<Work>,
    gate: Arc<Gate>,
    pool: Pool,
}

fn wedged() -> Wedged {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let gate = Arc::new(Gate::default());
    let entered = Arc::new(Gate::default());
    let (g, e) = (Arc::clone(&gate), Arc::clone(&entered));
    let blocker = Work::new_in(
        move |_| {
            e.open();
            g.wait();
        },
        &env_for(&pool),
    )
    .unwrap();
    blocker.submit();
    entered.wait();
    Wedged { blocker: Some(blocker), gate, pool }
}

impl Wedged {
    fn key(&self) -> usize {
        key(&self.pool)
    }
    fn unblock(&self) {
        self.gate.open();
    }
}

impl Drop for Wedged {
    fn drop(&mut self) {
        self.gate.open();
        if let Some(b) = self.blocker.take() {
            b.wait();
        }
    }
}

/// Runs `f`, returning its panic message if it panicked.
fn panic_message(f: impl FnOnce()) -> Option<String> {
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()?;
    Some(
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    )
}

#[test]
fn tick_skips_a_healthy_pool() {
    support::alone("self_heal::tick_skips_a_healthy_pool", || {
        own_process();
        let w = wedged();
        let k = w.key();
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&w.pool));

        // Never cancelled: however late the tick, nothing is submitted.
        testing::tick_ahead(OVERDUE_AFTER * 2);
        let v = view(k);
        assert_eq!((v.last_repair_submitted, v.unstarted), (0, 0), "a tick repaired a pool never cancelled: {v:?}");

        // Cancelled, then healed by a repair that started after the cancellation.
        reg.after_cancel();
        clock_past(view(k).last_cancel);
        w.unblock();
        wait_for("the repair to heal the pool", || {
            let v = view(k);
            !v.owes_repair && v.unstarted == 0
        });
        let healed = view(k);
        clock_past(healed.last_repair_submitted);
        testing::tick_ahead(OVERDUE_AFTER * 2);
        let v = view(k);
        assert_eq!(v.last_repair_submitted, healed.last_repair_submitted, "a tick repaired a healed pool: {v:?}");

        // The same tick does repair a pool that owes one.
        reg.stamp_cancel_at(testing::clock());
        testing::tick_ahead(Duration::ZERO);
        let v = view(k);
        assert!(v.last_repair_submitted > healed.last_repair_submitted, "a tick ignored a pool owing a repair: {v:?}");
        drop(reg);
    });
}

#[test]
fn overdue_repair_is_retried() {
    support::alone("self_heal::overdue_repair_is_retried", || {
        own_process();
        let w = wedged();
        let k = w.key();
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&w.pool));
        reg.after_cancel();
        let first = view(k);
        assert_eq!(first.unstarted, 1, "the inline fallback submitted one repair: {first:?}");

        // In flight and not yet overdue: the tick leaves it alone.
        testing::tick_ahead(Duration::ZERO);
        testing::tick_ahead(OVERDUE_AFTER / 2);
        let v = view(k);
        assert_eq!((v.unstarted, v.overdue_episodes), (1, 0), "a tick resubmitted a repair not yet overdue: {v:?}");

        // Overdue: recorded, and another repair is submitted.
        testing::tick_ahead(OVERDUE_AFTER + Duration::from_secs(1));
        let v = view(k);
        assert_eq!((v.unstarted, v.overdue_episodes), (2, 1), "an overdue repair was not retried: {v:?}");
        assert!(v.last_repair_submitted >= first.last_repair_submitted);

        w.unblock();
        wait_for("both repairs to start", || view(k).unstarted == 0);
        drop(reg);
    });
}

/// Under `fail-fast` the second overdue episode panics (on the healer's
/// thread that aborts; run on the test thread by `tick_ahead`, the panic is
/// catchable). Without it, the tick just retries again.
#[test]
fn second_overdue_episode_panics_only_under_fail_fast() {
    support::alone("self_heal::second_overdue_episode_panics_only_under_fail_fast", || {
        own_process();
        let w = wedged();
        let k = w.key();
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&w.pool));
        reg.after_cancel();
        let late = OVERDUE_AFTER + Duration::from_secs(1);
        assert_eq!(panic_message(|| testing::tick_ahead(late)), None, "the first overdue episode must not panic");
        assert_eq!(view(k).overdue_episodes, 1);
        let second = panic_message(|| testing::tick_ahead(late));
        let v = view(k);
        assert_eq!(v.overdue_episodes, 2, "{v:?}");
        if cfg!(feature = "fail-fast") {
            let msg = second.expect("fail-fast: the second overdue episode must panic");
            for needle in ["self-heal", &format!("pool {k:#x}"), "stayed unstarted", "twice"] {
                assert!(msg.contains(needle), "panic message {msg:?} lacks {needle:?}");
            }
            assert_eq!(v.unstarted, 2, "the panicking episode submitted a repair: {v:?}");
        } else {
            assert_eq!(second, None, "without fail-fast an overdue episode must not panic");
            assert_eq!(v.unstarted, 3, "the second overdue episode was not retried: {v:?}");
        }
        w.unblock();
        wait_for("the repairs to start", || view(k).unstarted == 0);
        drop(reg);
    });
}

/// The real healer, with repairs of a wedged pool overdue after 300 ms: its
/// second overdue episode panics on the healer's thread, which aborts the
/// process with the message on stderr.
#[cfg(feature = "fail-fast")]
#[test]
fn healer_panic_on_a_second_overdue_episode_reaches_stderr() {
    let out = support::child("self_heal::healer_panic_on_a_second_overdue_episode_reaches_stderr", &[], || {
        own_process();
        let w = wedged();
        let k = w.key();
        testing::overdue_after(k, Duration::from_millis(300));
        let reg = testing::register(Some(&w.pool));
        {
            use std::io::Write;
            println!("wedged-pool={k:#x}");
            std::io::stdout().flush().unwrap();
        }
        reg.after_cancel();
        assert!(testing::healer_running());
        // Two episodes take about 1.5 s of healer ticks. Returning makes the
        // child exit normally, which fails the parent.
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
        eprintln!("the healer never panicked: {:?}", testing::entry(k));
    });
    let k = out
        .stdout
        .lines()
        .find_map(|l| l.split_once("wedged-pool=").map(|(_, k)| k.trim().to_string()))
        .unwrap_or_else(|| panic!("the child did not report its pool: {out:#?}"));
    support::assert_panicked_and_aborted(
        &out,
        support::AbortKind::CannotUnwind,
        &format!("a repair of pool {k} stayed unstarted for 300ms twice"),
    );
}

#[test]
fn inline_fallback_submits_when_the_healer_cannot_start() {
    support::alone("self_heal::inline_fallback_submits_when_the_healer_cannot_start", || {
        own_process();
        let pool = Pool::new().unwrap();
        let k = key(&pool);
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&pool));
        reg.after_cancel();
        assert!(!testing::healer_running());
        let v = view(k);
        assert!(v.last_cancel > 0, "{v:?}");
        assert!(v.last_repair_submitted >= v.last_cancel, "the cancelling thread submitted no repair: {v:?}");

        // The next cancellation retries the start.
        testing::allow_healer_start();
        reg.after_cancel();
        assert!(testing::healer_running(), "the next cancellation did not start the healer");
        drop(reg);
    });
}

/// Stamps published out of order (taken earlier, published later, as by two
/// racing cancellations or repairs) never lower a stamp.
#[test]
fn late_published_stamps_do_not_lower_a_stamp() {
    support::alone("self_heal::late_published_stamps_do_not_lower_a_stamp", || {
        own_process();
        let pool = Pool::new().unwrap();
        let k = key(&pool);
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&pool));
        let later = testing::clock() + 100_000_000; // 10 s ahead, in 100 ns units

        reg.stamp_cancel_at(later);
        reg.after_cancel(); // a real cancellation, stamped now: earlier
        assert_eq!(view(k).last_cancel, later, "a cancellation lowered the cancel stamp");

        reg.stamp_repair_started_at(later + 1);
        let submitted = view(k).last_repair_submitted;
        reg.after_cancel(); // the inline fallback submits a repair, which stamps now: earlier
        assert!(view(k).last_repair_submitted >= submitted);
        wait_for("the repair to start", || view(k).unstarted == 0);
        assert_eq!(view(k).last_repair_started, later + 1, "a repair lowered the start stamp");
        drop(reg);
    });
}

/// An entry whose last user goes while its repair runs is retired, and the
/// retirement waits for that repair to finish before returning.
#[test]
fn retirement_waits_for_a_running_repair() {
    support::alone("self_heal::retirement_waits_for_a_running_repair", || {
        own_process();
        let w = wedged();
        let k = w.key();
        testing::fail_healer_start(k);
        testing::hold_repairs(k);
        let reg = testing::register(Some(&w.pool));
        reg.after_cancel();
        clock_past(view(k).last_cancel);
        w.unblock();
        wait_for("the repair to start (it is then held)", || {
            let v = view(k);
            v.unstarted == 0 && v.last_repair_started > v.last_cancel
        });
        let dropper = thread::spawn(move || drop(reg));
        wait_for("the entry to retire", || testing::entry(k).is_none());
        // Widens the window in which a retirement that did not wait for the held
        // repair would return: such a one fails the assertion below.
        thread::sleep(Duration::from_millis(100));
        let returned_early = dropper.is_finished();
        testing::release_repairs();
        dropper.join().unwrap();
        assert!(!returned_early, "the retirement returned while its repair was still running");
    });
}

/// An entry with a submitted repair still unstarted does not retire, even
/// when it owes nothing: retiring it would drain that repair, blocking the
/// dropping thread on a pool that may never dispatch.
#[test]
fn unstarted_repair_keeps_the_entry() {
    support::alone("self_heal::unstarted_repair_keeps_the_entry", || {
        own_process();
        let w = wedged();
        let k = w.key();
        testing::fail_healer_start(k);
        testing::hold_repairs(k);
        let reg = testing::register(Some(&w.pool));
        reg.after_cancel();
        reg.after_cancel();
        assert_eq!(view(k).unstarted, 2);
        clock_past(view(k).last_cancel);
        w.unblock();
        // The first repair starts and is held on the pool's only thread; the
        // second stays queued behind it.
        wait_for("the first repair to start", || {
            let v = view(k);
            v.unstarted == 1 && v.last_repair_started > v.last_cancel
        });
        assert!(!view(k).owes_repair);

        let dropper = thread::spawn(move || drop(reg));
        let deadline = Instant::now() + DEADLINE;
        while !dropper.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        let blocked = !dropper.is_finished();
        let after_drop = testing::entry(k);
        if blocked {
            testing::release_repairs();
        }
        dropper.join().unwrap();
        assert!(!blocked, "dropping the last user blocked on the unstarted repair");
        let v = after_drop.expect("the entry retired with a repair unstarted");
        assert_eq!((v.users, v.unstarted), (0, 1), "{v:?}");
        testing::tick_ahead(Duration::ZERO);
        assert!(testing::entry(k).is_some(), "a tick retired the entry with a repair unstarted");

        testing::release_repairs();
        wait_for("the second repair to start", || view(k).unstarted == 0);
        testing::tick_ahead(Duration::ZERO);
        assert_eq!(testing::entry(k), None, "the tick did not retire the entry once nothing was outstanding");
    });
}

#[test]
fn entries_retire_when_the_last_user_drops_and_nothing_is_owed() {
    support::alone("self_heal::entries_retire_when_the_last_user_drops_and_nothing_is_owed", || {
        own_process();
        let pool = Pool::new().unwrap();
        let k = key(&pool);
        let r1 = testing::register(Some(&pool));
        let r2 = testing::register(Some(&pool));
        assert_eq!(view(k).users, 2);
        drop(r1);
        assert_eq!(view(k).users, 1);
        drop(r2);
        assert_eq!(testing::entry(k), None, "the entry outlived its last user");

        // Owing a repair, the entry outlives its users; once repaired, a tick retires it.
        let w = wedged();
        let k = w.key();
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&w.pool));
        reg.after_cancel();
        drop(reg);
        let v = view(k);
        assert!(v.users == 0 && v.owes_repair && v.unstarted == 1, "{v:?}");
        clock_past(v.last_cancel);
        w.unblock();
        wait_for("the repair to heal the pool", || {
            let v = view(k);
            !v.owes_repair && v.unstarted == 0
        });
        testing::tick_ahead(Duration::ZERO);
        assert_eq!(testing::entry(k), None, "a tick did not retire a healed entry without users");
    });
}

#[test]
fn failed_registration_keeps_its_key_and_retries_at_cancellation() {
    support::alone("self_heal::failed_registration_keeps_its_key_and_retries_at_cancellation", || {
        own_process();
        let pool = Pool::new().unwrap();
        let k = key(&pool);
        testing::fail_repair_creation(k);
        testing::fail_healer_start(k);
        let reg = testing::register(Some(&pool));
        let v = view(k);
        assert!(v.users == 1 && !v.has_repair, "{v:?}");

        // While creation fails, a cancellation is stamped but nothing can repair it.
        reg.after_cancel();
        let v = view(k);
        assert!(v.last_cancel > 0 && !v.has_repair && v.last_repair_submitted == 0, "{v:?}");

        testing::allow_repair_creation();
        reg.after_cancel();
        let v = view(k);
        assert!(v.has_repair, "the cancellation did not retry creating the repair: {v:?}");
        assert!(v.last_repair_submitted >= v.last_cancel, "{v:?}");
        drop(reg);
    });
}

/// The `cancel-untracked` record names the pool whose repair object could
/// not be created, and only that one.
#[cfg(feature = "trace")]
#[test]
fn untracked_cancellation_names_its_pool() {
    support::traced_child("self_heal::untracked_cancellation_names_its_pool", "heal", || {
        own_process();
        let tracked = Pool::new().unwrap();
        let untracked = Pool::new().unwrap();
        let (kt, ku) = (key(&tracked), key(&untracked));
        testing::fail_healer_start(kt);
        testing::fail_repair_creation(ku);
        let rt = testing::register(Some(&tracked));
        let ru = testing::register(Some(&untracked));
        rt.after_cancel();
        ru.after_cancel();
        let dump = windows_threadpool::trace::dump();
        let pools_of = |event: &str| -> Vec<usize> {
            dump.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    (f.get(2) == Some(&"heal") && f.get(3) == Some(&event)).then(|| {
                        let slot = f
                            .iter()
                            .find_map(|s| s.strip_prefix("pool=0x"))
                            .unwrap_or_else(|| panic!("no pool in {l:?}"));
                        usize::from_str_radix(slot, 16).unwrap()
                    })
                })
                .collect()
        };
        assert_eq!(pools_of("cancel-untracked"), vec![ku], "{dump}");
        let mut stamped = pools_of("cancel-stamped");
        stamped.sort_unstable();
        let mut both = vec![kt, ku];
        both.sort_unstable();
        assert_eq!(stamped, both, "{dump}");
        drop((rt, ru));
    });
}

/// `try_cancel_pending` (standalone wait on a private pool and on the default
/// pool, wait member) stamps the pool when it returns, and a repair is
/// submitted (by the inline fallback, the healer being blocked).
#[test]
fn try_cancel_pending_stamps_the_pool_and_submits_a_repair() {
    support::alone("self_heal::try_cancel_pending_stamps_the_pool_and_submits_a_repair", || {
        own_process();
        let p = Pool::new().unwrap();
        let q = Pool::new().unwrap();
        for k in [key(&p), key(&q), DEFAULT_POOL] {
            testing::fail_healer_start(k);
        }
        let on_p = Wait::new_in(Event::auto_reset().unwrap().into(), |_| {}, &env_for(&p)).unwrap();
        let on_default = Wait::new(Event::auto_reset().unwrap().into(), |_| {}).unwrap();
        let mut group = CleanupGroup::new().unwrap();
        let member = group.create_wait_in(Event::auto_reset().unwrap().into(), |_| {}, &env_for(&q)).unwrap();
        let cases: [(&str, usize, &dyn Fn()); 3] = [
            ("Wait on a private pool", key(&p), &|| on_p.try_cancel_pending()),
            ("Wait on the default pool", DEFAULT_POOL, &|| on_default.try_cancel_pending()),
            ("WaitMember on a private pool", key(&q), &|| member.try_cancel_pending()),
        ];
        for (what, k, cancel) in cases {
            assert_eq!(view(k).last_cancel, 0, "{what}");
            let before = testing::clock();
            cancel();
            let after = testing::clock();
            let v = view(k);
            assert!(before <= v.last_cancel && v.last_cancel <= after, "{what}: not stamped by the call: {v:?}");
            assert!(v.last_repair_submitted >= v.last_cancel, "{what}: no repair submitted: {v:?}");
        }
        assert!(!testing::healer_running());
        drop((on_p, on_default));
        group.close_members();
    });
}

/// `close_members_cancelling` stamps each distinct pool its members used
/// exactly once, as a cancellation does, and keeps the pools registered until
/// they are stamped: the entries of two wedged private pools (repairs held
/// unstarted) are still there afterwards, with no user left.
#[test]
fn close_members_cancelling_stamps_each_pool_once() {
    support::alone("self_heal::close_members_cancelling_stamps_each_pool_once", || {
        own_process();
        let (b, c) = (wedged(), wedged());
        let (kb, kc) = (b.key(), c.key());
        for k in [kb, kc, DEFAULT_POOL] {
            testing::fail_healer_start(k);
        }
        // The default pool's repair runs at once; this keeps its entry readable.
        let default_reg = testing::register(None);
        let mut group = CleanupGroup::new().unwrap();
        let (env_b, env_c) = (env_for(&b.pool), env_for(&c.pool));
        let _ = group.create_work_in(|_| {}, &env_b).unwrap();
        let _ = group.create_work_in(|_| {}, &env_b).unwrap();
        let _ = group.create_wait_in(Event::auto_reset().unwrap().into(), |_| {}, &env_c).unwrap();
        let _ = group.create_work(|_| {}).unwrap();
        for k in [kb, kc, DEFAULT_POOL] {
            assert!(view(k).users > 0);
        }

        let before = testing::clock();
        group.close_members_cancelling();
        let after = testing::clock();
        for (what, k) in [("first private pool", kb), ("second private pool", kc), ("default pool", DEFAULT_POOL)] {
            let v = testing::entry(k).unwrap_or_else(|| panic!("{what}: the entry retired before it was stamped"));
            assert!(before <= v.last_cancel && v.last_cancel <= after, "{what}: not stamped by the release: {v:?}");
            assert!(v.last_repair_submitted >= v.last_cancel, "{what}: no repair submitted: {v:?}");
        }
        for (what, k) in [("first private pool", kb), ("second private pool", kc)] {
            let v = view(k);
            assert_eq!(v.users, 0, "{what}: {v:?}");
            assert_eq!(v.unstarted, 1, "{what}: one stamp per pool submits one repair: {v:?}");
        }
        drop((env_b, env_c));
        drop((b, c, default_reg));
    });
}

/// A member on a one-thread pool whose only thread a plain work item holds:
/// its callbacks are all queued, none can start before the gate opens, and
/// the gate opens only after `close_members_cancelling` returned (at once:
/// no member callback is running). The release discards them and stamps the
/// pool.
#[test]
fn close_members_cancelling_discards_queued_callbacks() {
    support::alone("self_heal::close_members_cancelling_discards_queued_callbacks", || {
        own_process();
        let pool = Pool::new().unwrap();
        pool.set_max_threads(1).unwrap();
        let k = key(&pool);
        testing::fail_healer_start(k);
        // Keeps the entry readable once the repair has run.
        let reg = testing::register(Some(&pool));
        let count = Arc::new(AtomicUsize::new(0));
        let (gate, entered) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let blocker = {
            let (g, e) = (Arc::clone(&gate), Arc::clone(&entered));
            Work::new_in(
                move |_| {
                    e.open();
                    g.wait();
                },
                &env_for(&pool),
            )
            .unwrap()
        };
        blocker.submit();
        entered.wait();
        let mut group = CleanupGroup::new().unwrap();
        {
            let n = Arc::clone(&count);
            let member = group
                .create_work_in(
                    move |_| {
                        n.fetch_add(1, SeqCst);
                    },
                    &env_for(&pool),
                )
                .unwrap();
            for _ in 0..3 {
                member.submit();
            }
        }
        // Opens the gate after PATIENCE if the release waits for the queued
        // callbacks instead of discarding them, so that fails rather than hangs.
        let returned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = Arc::clone(&returned);
        let opener = support::open_when(&gate, move || r.load(SeqCst));
        let before = testing::clock();
        // An explicit release settles what its members owed: nothing is reported.
        group.close_members_cancelling();
        let after = testing::clock();
        returned.store(true, SeqCst);
        assert!(opener.join().unwrap(), "the release waited for callbacks it should have discarded");
        blocker.wait();
        assert_eq!(count.load(SeqCst), 0, "queued callbacks ran");
        let v = view(k);
        assert!(before <= v.last_cancel && v.last_cancel <= after, "not stamped by the release: {v:?}");
        assert!(v.last_repair_submitted >= v.last_cancel, "no repair submitted: {v:?}");
        // The repair runs on the pool's only thread after anything queued before it.
        wait_for("the repair to run", || view(k).unstarted == 0);
        assert_eq!(count.load(SeqCst), 0, "a discarded callback ran after the release");
        drop(blocker);
        drop(reg);
    });
}

/// Liveness: with nothing blocked, the healer repairs a stamped pool within a
/// bounded time, and retires the entry once its last user is gone.
#[test]
fn healer_repairs_a_stamped_pool() {
    support::alone("self_heal::healer_repairs_a_stamped_pool", || {
        own_process();
        let pool = Pool::new().unwrap();
        let k = key(&pool);
        let wait = Wait::new_in(Event::auto_reset().unwrap().into(), |_| {}, &env_for(&pool)).unwrap();
        wait.try_cancel_pending();
        assert!(testing::healer_running(), "the cancellation did not start the healer");
        wait_for("the healer to repair the pool", || {
            let v = view(k);
            v.last_repair_started > v.last_cancel && !v.owes_repair
        });
        drop(wait);
        wait_for("the entry to retire", || testing::entry(k).is_none());
    });
}
