//! Cleanup groups: bulk release drains, frees exactly once, and is reusable.
#![cfg(windows)]

use crate::support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use windows_threadpool::Deadline;
use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::{CallbackEnviron, Pool, WorkInvocation};

/// Counts live callback states: each clone's drop decrements.
#[derive(Default)]
struct Tally {
    live: AtomicUsize,
    ran: AtomicUsize,
}

struct Token(Arc<Tally>);
impl Token {
    fn new(t: &Arc<Tally>) -> Self {
        t.live.fetch_add(1, SeqCst);
        Token(Arc::clone(t))
    }
}
impl Drop for Token {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, SeqCst);
    }
}

#[test]
fn thousand_members_released_drain_and_free_once() {
    let tally = Arc::new(Tally::default());
    let mut group = CleanupGroup::new().unwrap();
    for _ in 0..1000 {
        let tok = Token::new(&tally);
        let m = group
            .create_work(move |_| {
                tok.0.ran.fetch_add(1, SeqCst);
            })
            .unwrap();
        m.submit();
        m.submit();
        // Settle the drain so the release owes nothing (see the owed test below).
        m.wait();
    }
    assert_eq!(group.owned_resources(), 1000);
    assert_eq!(tally.live.load(SeqCst), 1000);
    group.close_members();
    assert_eq!(tally.ran.load(SeqCst), 2000, "every submitted callback ran before the release returned");
    assert_eq!(tally.live.load(SeqCst), 0, "every context freed exactly once");
    assert_eq!(group.owned_resources(), 0);
}

#[test]
fn group_dropped_without_explicit_release_drains_and_frees() {
    let tally = Arc::new(Tally::default());
    {
        let group = CleanupGroup::new().unwrap();
        for _ in 0..50 {
            let tok = Token::new(&tally);
            let m = group
                .create_work(move |_| {
                    tok.0.ran.fetch_add(1, SeqCst);
                })
                .unwrap();
            m.submit();
            m.wait();
        }
    }
    assert_eq!(tally.ran.load(SeqCst), 50);
    assert_eq!(tally.live.load(SeqCst), 0);
}

#[test]
fn group_is_reusable_after_a_release() {
    let tally = Arc::new(Tally::default());
    let mut group = CleanupGroup::new().unwrap();
    for round in 1..=3 {
        for _ in 0..20 {
            let tok = Token::new(&tally);
            let m = group
                .create_work(move |_| {
                    tok.0.ran.fetch_add(1, SeqCst);
                })
                .unwrap();
            m.submit();
            m.wait();
        }
        group.close_members();
        assert_eq!(tally.ran.load(SeqCst), 20 * round);
        assert_eq!(tally.live.load(SeqCst), 0);
    }
}

#[test]
fn members_on_private_and_default_pools_and_caller_env_untouched() {
    let pool = Pool::new().unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let before = format!("{env:?}");
    let count = Arc::new(AtomicUsize::new(0));
    let mut group = CleanupGroup::new().unwrap();
    for i in 0..40 {
        let c = Arc::clone(&count);
        let cb = move |_: &WorkInvocation<'_>| {
            c.fetch_add(1, SeqCst);
        };
        let m = if i % 2 == 0 { group.create_work_in(cb, &env) } else { group.create_work(cb) }.unwrap();
        m.submit();
        m.wait();
    }
    assert_eq!(format!("{env:?}"), before, "the caller's environment was changed");
    assert_eq!(env.as_inner().CleanupGroup, 0);
    group.close_members();
    assert_eq!(count.load(SeqCst), 40);
}

#[test]
fn callbacks_running_at_release_are_drained_and_none_runs_after() {
    let mut group = CleanupGroup::new().unwrap();
    let entered = Arc::new((Mutex::new(false), Condvar::new()));
    let left = Arc::new(AtomicBool::new(false));
    let release_started = Arc::new(AtomicBool::new(false));
    let (e, l, r) = (Arc::clone(&entered), Arc::clone(&left), Arc::clone(&release_started));
    let m = group
        .create_work(move |_| {
            *e.0.lock().unwrap() = true;
            e.1.notify_all();
            while !r.load(SeqCst) {
                std::thread::yield_now();
            }
            // Dwell past the start of the release: a release that did not
            // drain would return before this store.
            std::thread::sleep(Duration::from_millis(50));
            l.store(true, SeqCst);
        })
        .unwrap();
    m.submit();
    drop(entered.1.wait_while(entered.0.lock().unwrap(), |e| !*e).unwrap());
    release_started.store(true, SeqCst);
    group.close_members();
    assert!(left.load(SeqCst), "close_members returned while a member callback was still running");
}

/// The member's queued callbacks cannot start before the gate opens, and the
/// gate opens only after `cancel_pending` returned (at once: the member has
/// nothing running).
#[test]
fn member_cancel_pending_discards_queued_callbacks() {
    let held = support::held_pool();
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let mut group = CleanupGroup::new().unwrap();
    let env = held.env.clone();
    let m = group
        .create_work_in(
            move |_| {
                c.fetch_add(1, SeqCst);
            },
            &env,
        )
        .unwrap();
    for _ in 0..10 {
        m.submit();
    }
    // Opens the gate after PATIENCE if the cancellation waits instead of
    // discarding, so that bug fails the test rather than hanging it.
    let returned = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&returned);
    let opener = support::open_when(&held.gate, move || r.load(SeqCst));
    m.cancel_pending();
    returned.store(true, SeqCst);
    assert!(opener.join().unwrap(), "cancel_pending waited for callbacks it should have discarded");
    held.release();
    m.wait();
    assert_eq!(count.load(SeqCst), 0, "queued callbacks ran after cancel_pending");
    m.submit();
    m.wait();
    m.stop_and_drain();
    assert_eq!(count.load(SeqCst), 1);
    group.close_members();
}

/// A member with callbacks queued behind a blocked thread at release time:
/// the release drains them (they run before `close_members` returns). That
/// drain was the release's to do, so nothing is reported (no panic under
/// `fail-fast`).
#[test]
fn release_drains_queued_callbacks_and_settles_the_owed_drain() {
    let held = support::held_pool();
    let tally = Arc::new(Tally::default());
    let tok = Token::new(&tally);
    let mut group = CleanupGroup::new().unwrap();
    let env = held.env.clone();
    let m = group
        .create_work_in(
            move |_| {
                tok.0.ran.fetch_add(1, SeqCst);
            },
            &env,
        )
        .unwrap();
    m.submit();
    m.submit();
    // Opening before the release only makes the test weaker.
    let opener = support::open_soon(&held.gate);
    group.close_members();
    assert_eq!(tally.ran.load(SeqCst), 2, "the queued callbacks ran before the release returned");
    assert_eq!(tally.live.load(SeqCst), 0, "the member's context was freed");
    assert_eq!(group.owned_resources(), 0);
    opener.join().unwrap();
}

/// `close_members` is the members' explicit drain: members still armed when
/// it runs (a wait never signalled, a one-shot not yet due, a running
/// periodic timer) are stopped and drained by it, which is not a drain owed,
/// so nothing is reported (no panic under `fail-fast`), then or when the
/// released group is dropped.
#[test]
fn close_members_settles_members_still_armed() {
    use windows_threadpool::wait::Event;
    let mut group = CleanupGroup::new().unwrap();
    let tally = Arc::new(Tally::default());
    let tok = Token::new(&tally);
    let wait = group
        .create_wait(Event::auto_reset().unwrap().into(), move |_| {
            tok.0.ran.fetch_add(1, SeqCst);
        })
        .unwrap();
    wait.arm(Deadline::NEVER);
    let tok = Token::new(&tally);
    let timer = group
        .create_timer(move |_| {
            tok.0.ran.fetch_add(1, SeqCst);
        })
        .unwrap();
    timer.arm(Duration::from_secs(3600));
    let tok = Token::new(&tally);
    let periodic = group
        .create_periodic_timer(Duration::from_secs(3600), move |_| {
            tok.0.ran.fetch_add(1, SeqCst);
        })
        .unwrap();
    periodic.arm(periodic.period());
    group.close_members();
    assert_eq!(tally.live.load(SeqCst), 0, "every member's context was freed");
    assert_eq!(tally.ran.load(SeqCst), 0, "nothing was signalled or due");
    drop(group);
}

/// Dropping a group whose members were never released, one of them armed
/// (a wait never signalled), reports the drain it owed (a panic under
/// `fail-fast`, naming the member type), after the members were released
/// and freed.
#[test]
fn dropping_a_group_with_an_armed_member_reports_after_freeing_it() {
    use windows_threadpool::wait::Event;
    let group = CleanupGroup::new().unwrap();
    let tally = Arc::new(Tally::default());
    let tok = Token::new(&tally);
    let wait = group
        .create_wait(Event::auto_reset().unwrap().into(), move |_| {
            tok.0.ran.fetch_add(1, SeqCst);
        })
        .unwrap();
    wait.arm(Deadline::NEVER);
    support::teardown_owing("WaitMember", || drop(group));
    assert_eq!(tally.live.load(SeqCst), 0, "the member's context was freed");
    assert_eq!(tally.ran.load(SeqCst), 0);
}

/// Members created from several threads at once, each used by its creator
/// after the others' creations moved the group's list around, then released
/// together. (The list holds members as raw pointers so that the references
/// lent out stay valid under Rust's aliasing rules; Miri cannot run on this
/// target, so this exercises the path, it cannot show the aliasing.)
#[test]
fn members_created_from_several_threads_stay_usable_until_release() {
    const THREADS: usize = 8;
    const EACH: usize = 100;
    let mut group = CleanupGroup::new().unwrap();
    let tally = Arc::new(Tally::default());
    let created = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let members: Vec<_> = (0..EACH)
                    .map(|_| {
                        let tok = Token::new(&tally);
                        group
                            .create_work(move |_| {
                                tok.0.ran.fetch_add(1, SeqCst);
                            })
                            .unwrap()
                    })
                    .collect();
                created.wait();
                for m in &members {
                    m.submit();
                }
                for m in &members {
                    m.wait();
                }
            });
        }
    });
    assert_eq!(group.owned_resources(), THREADS * EACH);
    assert_eq!(tally.ran.load(SeqCst), THREADS * EACH);
    group.close_members();
    assert_eq!(tally.live.load(SeqCst), 0, "every context freed exactly once");
    assert_eq!(group.owned_resources(), 0);
}

#[test]
fn a_wait_member_lends_the_waited_on_handle() {
    use std::os::windows::io::{AsHandle, AsRawHandle};
    let event = windows_threadpool::Event::auto_reset().unwrap();
    let raw = event.as_handle().as_raw_handle();
    let group = CleanupGroup::new().unwrap();
    let member = group.create_wait(event.into(), |_| {}).unwrap();
    assert_eq!(AsHandle::as_handle(&member).as_raw_handle(), raw);
}

mod waits {
    use super::*;
    use std::collections::HashMap;
    use windows_sys::Win32::Foundation::{CloseHandle, HANDLE};
    use windows_sys::core::BOOL;
    use windows_threadpool::wait::{Event, WaitActivation, WaitResult, WaitableHandle};

    static CLOSED: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);
    /// Set by the test once every member's callback has finished.
    static CALLBACKS_DONE: AtomicBool = AtomicBool::new(false);
    static CLOSED_EARLY: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "system" fn counting_close(h: HANDLE) -> BOOL {
        if !CALLBACKS_DONE.load(SeqCst) {
            CLOSED_EARLY.fetch_add(1, SeqCst);
        }
        *CLOSED.lock().unwrap().get_or_insert_with(HashMap::new).entry(h as usize).or_default() += 1;
        // SAFETY: the handle was handed to the group, which closes it once.
        unsafe { CloseHandle(h) }
    }

    /// Custom-close and default wait members, 256 of each, signalled and
    /// released together: every callback ran, every custom closer ran
    /// exactly once and only after the release drained.
    #[test]
    fn custom_close_and_default_wait_members_released_together() {
        const N: usize = 256;
        let mut group = CleanupGroup::new().unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let mut signals = Vec::new();
        let mut raws = Vec::new();
        for i in 0..2 * N {
            let event = Event::auto_reset().unwrap();
            signals.push(event.try_clone().unwrap());
            let target = if i % 2 == 0 {
                let raw = WaitableHandle::from(event).into_handle().unwrap();
                let raw = std::os::windows::io::IntoRawHandle::into_raw_handle(raw);
                raws.push(raw as usize);
                // SAFETY: an event handle, owned from here by the target.
                unsafe { WaitableHandle::assume_waitable_with(raw, counting_close) }
            } else {
                event.into()
            };
            let f = Arc::clone(&fired);
            let m = group
                .create_wait(target, move |act: &WaitActivation<'_>| {
                    assert_eq!(act.result(), WaitResult::Signalled);
                    f.fetch_add(1, SeqCst);
                })
                .unwrap();
            m.arm(Deadline::NEVER);
        }
        for s in &signals {
            s.set().unwrap();
        }
        while fired.load(SeqCst) < 2 * N {
            std::thread::yield_now();
        }
        CALLBACKS_DONE.store(true, SeqCst);
        assert!(CLOSED.lock().unwrap().as_ref().is_none_or(|m| m.is_empty()), "closed before the release");
        group.close_members();
        assert_eq!(CLOSED_EARLY.load(SeqCst), 0);
        let closed = CLOSED.lock().unwrap().take().unwrap_or_default();
        assert_eq!(closed.len(), N, "every custom-closed target closed");
        for raw in raws {
            assert_eq!(closed.get(&raw), Some(&1), "custom closer calls for {raw:#x}");
        }
        assert_eq!(fired.load(SeqCst), 2 * N);
    }

    /// A wait member re-arming itself from its callback is stopped by the
    /// release: after it, the callback never runs again.
    #[test]
    fn a_rearming_wait_member_stops_at_release() {
        let event = Event::manual_reset().unwrap();
        event.set().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&count);
        let mut group = CleanupGroup::new().unwrap();
        let m = group
            .create_wait(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
                c.fetch_add(1, SeqCst);
                let _ = act.rearm(Deadline::NEVER);
            })
            .unwrap();
        m.arm(Deadline::NEVER);
        while count.load(SeqCst) < 5 {
            std::thread::yield_now();
        }
        group.close_members();
        let at_release = count.load(SeqCst);
        // A probe wait on the same, still signalled, event proves the pool has
        // processed the handle since the release.
        let (tx, rx) = std::sync::mpsc::channel();
        let probe =
            windows_threadpool::wait::Wait::new(event.try_clone().unwrap().into(), move |_: &WaitActivation<'_>| {
                tx.send(()).unwrap()
            })
            .unwrap();
        probe.arm(Deadline::NEVER);
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        probe.stop_and_drain();
        assert_eq!(count.load(SeqCst), at_release, "a wait member ran after its release");
    }

    /// 1,000 members of mixed kinds, released.
    #[test]
    fn thousand_mixed_members() {
        let mut group = CleanupGroup::new().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let mut signals = Vec::new();
        for i in 0..1000 {
            let r = Arc::clone(&ran);
            if i % 2 == 0 {
                let m = group
                    .create_work(move |_| {
                        r.fetch_add(1, SeqCst);
                    })
                    .unwrap();
                m.submit();
                m.wait();
            } else {
                let event = Event::auto_reset().unwrap();
                signals.push(event.try_clone().unwrap());
                let m = group
                    .create_wait(event.into(), move |_: &WaitActivation<'_>| {
                        r.fetch_add(1, SeqCst);
                    })
                    .unwrap();
                m.arm(Deadline::NEVER);
            }
        }
        for s in &signals {
            s.set().unwrap();
        }
        while ran.load(SeqCst) < 1000 {
            std::thread::yield_now();
        }
        assert_eq!(group.owned_resources(), 1000);
        group.close_members();
        assert_eq!(group.owned_resources(), 0);
        assert_eq!(ran.load(SeqCst), 1000);
    }
}

mod timers {
    use super::*;
    use windows_threadpool::timer::{PeriodicTick, TimerFiring};

    /// A one-shot member fires, re-arms itself through its `TimerFiring`
    /// twice, and stops; a periodic member ticks until its tick stops it.
    #[test]
    fn timer_members_fire_and_rearm() {
        let mut group = CleanupGroup::new().unwrap();
        let fired = Arc::new(AtomicUsize::new(0));
        let f = Arc::clone(&fired);
        let one_shot = group
            .create_timer(move |firing: &TimerFiring<'_>| {
                if f.fetch_add(1, SeqCst) + 1 < 3 {
                    firing.rearm(Duration::from_millis(1));
                }
            })
            .unwrap();
        let ticks = Arc::new(AtomicUsize::new(0));
        let t = Arc::clone(&ticks);
        let periodic = group
            .create_periodic_timer(Duration::from_millis(2), move |tick: &PeriodicTick<'_>| {
                if t.fetch_add(1, SeqCst) + 1 == 4 {
                    tick.disarm();
                }
            })
            .unwrap();
        assert_eq!(periodic.period(), Duration::from_millis(2));
        one_shot.arm(Duration::from_millis(1));
        periodic.arm(periodic.period());
        assert!(periodic.is_armed());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while (fired.load(SeqCst) < 3 || ticks.load(SeqCst) < 4) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        one_shot.stop_and_drain();
        periodic.stop_and_drain();
        assert_eq!(fired.load(SeqCst), 3, "the first firing and its two re-arms");
        assert!(ticks.load(SeqCst) >= 4, "ticked until the fourth tick stopped it");
        assert!(!periodic.is_armed());
        group.close_members();
    }

    /// A self-re-arming one-shot member and a running periodic member are
    /// stopped by the release: nothing runs after it, and the release, which
    /// settles what they owed, reports nothing.
    #[test]
    fn release_stops_rearming_and_ticking_members() {
        let mut group = CleanupGroup::new().unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        let live = Arc::new(());
        let (r1, l1) = (Arc::clone(&runs), Arc::clone(&live));
        let one_shot = group
            .create_timer(move |firing: &TimerFiring<'_>| {
                let _keep = &l1;
                r1.fetch_add(1, SeqCst);
                firing.rearm(Duration::from_millis(1));
            })
            .unwrap();
        let (r2, l2) = (Arc::clone(&runs), Arc::clone(&live));
        let periodic = group
            .create_periodic_timer(Duration::from_millis(1), move |_: &PeriodicTick<'_>| {
                let _keep = &l2;
                r2.fetch_add(1, SeqCst);
            })
            .unwrap();
        one_shot.arm(Duration::ZERO);
        periodic.arm(periodic.period());
        while runs.load(SeqCst) < 10 {
            std::thread::yield_now();
        }
        // The periodic member is still running when the group is released:
        // the release settles that drain, so nothing is reported.
        group.close_members();
        // Both closures are gone, and with them the only code that counts
        // runs: nothing can run after the release without a use after free.
        assert_eq!(Arc::strong_count(&live), 1, "both member contexts were freed by the release");
    }

    #[test]
    fn invalid_periods_are_rejected_by_the_group_too() {
        let group = CleanupGroup::new().unwrap();
        for p in [Duration::ZERO, Duration::from_micros(1500)] {
            let e = group.create_periodic_timer(p, |_| {}).expect_err("rejected");
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        }
        assert_eq!(group.owned_resources(), 0);
    }
}

/// The member methods not exercised above, each checked by its effect.
mod member_api {
    use super::*;
    use std::time::SystemTime;
    use windows_threadpool::timer::TimerFiring;
    use windows_threadpool::wait::{Event, WaitActivation};
    use windows_threadpool::{Timer, Wait};

    /// Returns once a wait on `event` armed now (on the default pool) has
    /// fired: the pool has then processed the signal for every wait armed on
    /// it earlier, so their callbacks are queued (see `tests/objects/wait.rs`).
    fn probe_fires(event: &Event) {
        let fired = Arc::new(support::Counter::default());
        let f = Arc::clone(&fired);
        let probe = Wait::new(event.try_clone().unwrap().into(), move |_: &WaitActivation<'_>| {
            f.bump();
        })
        .unwrap();
        probe.arm(Deadline::NEVER);
        fired.wait_for(1);
    }

    /// Returns once a one-shot on the default pool due at `at` has fired:
    /// every timer due earlier has then been expired (due-time order).
    fn witness_at(at: SystemTime) {
        let fired = Arc::new(support::Counter::default());
        let f = Arc::clone(&fired);
        let w = Timer::new(move |_: &TimerFiring<'_>| {
            f.bump();
        })
        .unwrap();
        w.arm(at);
        fired.wait_for(1);
    }

    #[test]
    fn wait_member_handle_arm_disarm_and_try_cancel_pending() {
        use std::os::windows::io::AsRawHandle;
        let event = Event::manual_reset().unwrap();
        let held = support::held_pool();
        let count = Arc::new(support::Counter::default());
        let c = Arc::clone(&count);
        let mut group = CleanupGroup::new().unwrap();
        let env = held.env.clone();
        let target = event.try_clone().unwrap();
        let target_raw = target.as_handle().as_raw_handle();
        let m = group
            .create_wait_in(
                target.into(),
                move |_: &WaitActivation<'_>| {
                    c.bump();
                },
                &env,
            )
            .unwrap();
        assert_eq!(m.handle().as_raw_handle(), target_raw, "handle() is the wait's own target");
        // Disarmed before the signal: nothing queues.
        m.arm(Deadline::NEVER);
        m.disarm();
        event.set().unwrap();
        probe_fires(&event);
        // Armed on the signalled event: the callback queues behind the held
        // thread, where try_cancel_pending discards it (it returns at once:
        // nothing of the member runs).
        m.arm(Deadline::NEVER);
        probe_fires(&event);
        let returned = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&returned);
        let opener = support::open_when(&held.gate, move || r.load(SeqCst));
        #[cfg(feature = "self-heal")]
        m.try_cancel_pending();
        // The held pool dispatches again once its gate opens below.
        #[cfg(not(feature = "self-heal"))]
        m.try_cancel_pending_without_heal();
        returned.store(true, SeqCst);
        assert!(opener.join().unwrap(), "try_cancel_pending waited for a callback it should have discarded");
        held.release();
        m.wait();
        assert_eq!(count.get(), 0, "a disarmed or cancelled activation ran");
        // Still usable: armed again, it fires.
        m.arm(Deadline::NEVER);
        count.wait_for(1);
        m.stop_and_drain();
        group.close_members();
    }

    #[test]
    fn timer_member_arm_is_armed_disarm_and_cancel_pending() {
        let held = support::held_pool();
        let count = Arc::new(support::Counter::default());
        let c = Arc::clone(&count);
        let mut group = CleanupGroup::new().unwrap();
        let env = held.env.clone();
        let m = group
            .create_timer_in(
                move |_: &TimerFiring<'_>| {
                    c.bump();
                },
                &env,
            )
            .unwrap();
        assert!(!m.is_armed());
        m.arm(SystemTime::now() + Duration::from_secs(3600));
        assert!(m.is_armed(), "set_at armed nothing");
        m.disarm();
        assert!(!m.is_armed(), "disarm left the timer set");
        // Due now: the firing queues behind the held thread (the witness, due
        // later, has fired), where cancel_pending discards it.
        let due = SystemTime::now() + Duration::from_millis(5);
        m.arm(due);
        witness_at(due + Duration::from_millis(5));
        let returned = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&returned);
        let opener = support::open_when(&held.gate, move || r.load(SeqCst));
        m.cancel_pending();
        returned.store(true, SeqCst);
        assert!(opener.join().unwrap(), "cancel_pending waited for a firing it should have discarded");
        held.release();
        m.wait();
        assert_eq!(count.get(), 0, "the cancelled firing ran");
        m.arm(Duration::ZERO);
        count.wait_for(1);
        m.stop_and_drain();
        group.close_members();
    }

    #[test]
    fn periodic_member_arm_and_disarm() {
        let count = Arc::new(support::Counter::default());
        let c = Arc::clone(&count);
        let mut group = CleanupGroup::new().unwrap();
        let m = group
            .create_periodic_timer(Duration::from_millis(1), move |_: &windows_threadpool::timer::PeriodicTick<'_>| {
                c.bump();
            })
            .unwrap();
        assert!(!m.is_armed());
        m.arm(Duration::ZERO);
        assert!(m.is_armed());
        count.wait_for(3);
        m.disarm();
        assert!(!m.is_armed(), "disarm left the timer running");
        m.wait();
        m.stop_and_drain();
        let after = count.get();
        group.close_members();
        assert_eq!(count.get(), after, "a tick ran during the release of a stopped and drained member");
        assert_eq!(Arc::strong_count(&count), 1, "the member's closure was freed");
    }

    /// The arming methods a member shares with its standalone type through
    /// their common view: each arms the member, which then fires; `as_raw`
    /// is the object the group owns.
    #[test]
    fn members_arm_with_windows_and_absolute_starts() {
        let fired = Arc::new(support::Counter::default());
        let ticks = Arc::new(support::Counter::default());
        let (f, t) = (Arc::clone(&fired), Arc::clone(&ticks));
        let mut group = CleanupGroup::new().unwrap();
        let one_shot = group
            .create_timer(move |_: &TimerFiring<'_>| {
                f.bump();
            })
            .unwrap();
        let periodic = group
            .create_periodic_timer(Duration::from_millis(1), move |_: &windows_threadpool::timer::PeriodicTick<'_>| {
                t.bump();
            })
            .unwrap();
        let work = group.create_work(|_| {}).unwrap();
        assert!(one_shot.as_raw() != 0 && periodic.as_raw() != 0 && work.as_raw() != 0);
        assert_ne!(one_shot.as_raw(), periodic.as_raw());
        one_shot.arm_with_window(Duration::ZERO, Duration::from_millis(1));
        fired.wait_for(1);
        periodic.arm(SystemTime::now());
        assert!(periodic.is_armed());
        ticks.wait_for(2);
        periodic.stop_and_drain();
        let before = ticks.get();
        periodic.arm_with_window(Duration::ZERO, Duration::from_millis(1));
        assert!(periodic.is_armed());
        ticks.wait_for(before + 2);
        periodic.stop_and_drain();
        one_shot.stop_and_drain();
        group.close_members();
    }
}

#[cfg(feature = "trace")]
use crate::rows;

/// The bulk release is bracketed by `syscall` records and framed by the
/// group's own `release-begin`/`release-ended`, in that order, with the
/// member count in slot b.
#[cfg(feature = "trace")]
#[test]
fn group_release_records_its_syscall_brackets() {
    support::traced_child("cleanup_group::group_release_records_its_syscall_brackets", "group,syscall", || {
        let mut group = CleanupGroup::new().unwrap();
        for _ in 0..3 {
            let _ = group.create_work(|_| {}).unwrap();
        }
        group.close_members();
        drop(group);
        let all = rows::rows(&windows_threadpool::trace::dump());
        let group_rows: Vec<&rows::Row> = all
            .iter()
            .filter(|r| r.target == "group" || (r.is_syscall() && (r.event.contains("CleanupGroup"))))
            .collect();
        assert_eq!(
            rows::labels(&group_rows),
            [
                "syscall-enter CreateThreadpoolCleanupGroup",
                "syscall-leave CreateThreadpoolCleanupGroup",
                "group created",
                "group member-created",
                "group member-created",
                "group member-created",
                "group release-begin",
                "syscall-enter CloseThreadpoolCleanupGroupMembers",
                "syscall-leave CloseThreadpoolCleanupGroupMembers",
                "group release-ended",
                "group release-begin",
                "syscall-enter CloseThreadpoolCleanupGroupMembers",
                "syscall-leave CloseThreadpoolCleanupGroupMembers",
                "group release-ended",
                "syscall-enter CloseThreadpoolCleanupGroup",
                "syscall-leave CloseThreadpoolCleanupGroup",
                "group closed",
            ]
        );
        let begin = group_rows.iter().find(|r| r.is("group", "release-begin")).unwrap();
        assert_eq!(begin.slot("members"), Some(3));
        let leave = group_rows.iter().find(|r| r.is("syscall-leave", "CloseThreadpoolCleanupGroupMembers")).unwrap();
        assert_eq!(leave.slot("cancel"), Some(0), "a draining release passes FALSE");
    });
}

/// A `Drop` that reports a drain owed closes the group first: the report (a
/// panic under `fail-fast`) cannot leave the group open.
#[cfg(feature = "trace")]
#[test]
fn a_reporting_drop_closes_the_group_before_it_reports() {
    support::traced_child(
        "cleanup_group::a_reporting_drop_closes_the_group_before_it_reports",
        "group,syscall",
        || {
            let group = CleanupGroup::new().unwrap();
            let wait =
                group.create_wait(windows_threadpool::wait::Event::auto_reset().unwrap().into(), |_| {}).unwrap();
            wait.arm(Deadline::NEVER);
            support::teardown_owing("WaitMember", || drop(group));
            let all = rows::rows(&windows_threadpool::trace::dump());
            let group_rows: Vec<&rows::Row> = all
                .iter()
                .filter(|r| r.target == "group" || (r.is_syscall() && (r.event.contains("CleanupGroup"))))
                .collect();
            assert_eq!(
                rows::labels(&group_rows),
                [
                    "syscall-enter CreateThreadpoolCleanupGroup",
                    "syscall-leave CreateThreadpoolCleanupGroup",
                    "group created",
                    "group member-created",
                    "group release-begin",
                    "syscall-enter CloseThreadpoolCleanupGroupMembers",
                    "syscall-leave CloseThreadpoolCleanupGroupMembers",
                    "group release-ended",
                    "syscall-enter CloseThreadpoolCleanupGroup",
                    "syscall-leave CloseThreadpoolCleanupGroup",
                    "group closed",
                ]
            );
        },
    );
}
