//! Cleanup groups: bulk release drains, frees exactly once, and is reusable.
#![cfg(windows)]

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use windows_threadpool::cleanup_group::CleanupGroup;
use windows_threadpool::{CallbackEnviron, ThreadpoolPool};

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
        let m = group.create_work(move || { tok.0.ran.fetch_add(1, SeqCst); }, None).unwrap();
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
            let m = group.create_work(move || { tok.0.ran.fetch_add(1, SeqCst); }, None).unwrap();
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
            let m = group.create_work(move || { tok.0.ran.fetch_add(1, SeqCst); }, None).unwrap();
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
    let pool = ThreadpoolPool::new().unwrap();
    let mut env = CallbackEnviron::new();
    env.set_pool(&pool);
    let before = format!("{env:?}");
    let count = Arc::new(AtomicUsize::new(0));
    let mut group = CleanupGroup::new().unwrap();
    for i in 0..40 {
        let c = Arc::clone(&count);
        let e = if i % 2 == 0 { Some(&env) } else { None };
        let m = group.create_work(move || { c.fetch_add(1, SeqCst); }, e).unwrap();
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
        .create_work(
            move || {
                *e.0.lock().unwrap() = true;
                e.1.notify_all();
                while !r.load(SeqCst) {
                    std::thread::yield_now();
                }
                // Dwell past the start of the release: a release that did not
                // drain would return before this store.
                std::thread::sleep(Duration::from_millis(50));
                l.store(true, SeqCst);
            },
            None,
        )
        .unwrap();
    m.submit();
    drop(entered.1.wait_while(entered.0.lock().unwrap(), |e| !*e).unwrap());
    release_started.store(true, SeqCst);
    group.close_members();
    assert!(left.load(SeqCst), "close_members returned while a member callback was still running");
}

#[test]
fn member_cancel_pending_discards_queued_callbacks() {
    let pool = ThreadpoolPool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let mut env = CallbackEnviron::new();
    env.set_pool(&pool);
    let count = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let entered = Arc::new(AtomicBool::new(false));
    let (c, g, en) = (Arc::clone(&count), Arc::clone(&gate), Arc::clone(&entered));
    let mut group = CleanupGroup::new().unwrap();
    let m = group
        .create_work(
            move || {
                if c.fetch_add(1, SeqCst) == 0 {
                    en.store(true, SeqCst);
                    drop(g.1.wait_while(g.0.lock().unwrap(), |open| !*open).unwrap());
                }
            },
            Some(&env),
        )
        .unwrap();
    for _ in 0..11 {
        m.submit();
    }
    while !entered.load(SeqCst) {
        std::thread::yield_now();
    }
    let opener = {
        let g = Arc::clone(&gate);
        // Opening late only makes the test fail (queued callbacks would run).
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            *g.0.lock().unwrap() = true;
            g.1.notify_all();
        })
    };
    m.cancel_pending();
    assert_eq!(count.load(SeqCst), 1);
    opener.join().unwrap();
    m.submit();
    m.wait();
    m.stop_and_drain();
    assert_eq!(count.load(SeqCst), 2);
    group.close_members();
}

/// A member with a callback queued behind a blocked one at release time: the
/// release drains it (it runs before `close_members` returns), and the drain
/// it still owed is reported (a panic under `fail-fast`, after the release).
#[test]
fn release_drains_queued_callbacks_and_reports_the_owed_drain() {
    let pool = ThreadpoolPool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let mut env = CallbackEnviron::new();
    env.set_pool(&pool);
    let tally = Arc::new(Tally::default());
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let entered = Arc::new(AtomicBool::new(false));
    let (g, en, tok) = (Arc::clone(&gate), Arc::clone(&entered), Token::new(&tally));
    let mut group = CleanupGroup::new().unwrap();
    let m = group
        .create_work(
            move || {
                if tok.0.ran.fetch_add(1, SeqCst) == 0 {
                    en.store(true, SeqCst);
                    drop(g.1.wait_while(g.0.lock().unwrap(), |open| !*open).unwrap());
                }
            },
            Some(&env),
        )
        .unwrap();
    m.submit();
    m.submit();
    while !entered.load(SeqCst) {
        std::thread::yield_now();
    }
    let release_started = Arc::new(AtomicBool::new(false));
    let opener = {
        let (g, r) = (Arc::clone(&gate), Arc::clone(&release_started));
        std::thread::spawn(move || {
            while !r.load(SeqCst) {
                std::thread::yield_now();
            }
            // A release that did not wait would return before this.
            std::thread::sleep(Duration::from_millis(50));
            *g.0.lock().unwrap() = true;
            g.1.notify_all();
        })
    };
    release_started.store(true, SeqCst);
    support::teardown_owing("WorkMember", || group.close_members());
    assert_eq!(tally.ran.load(SeqCst), 2, "the queued callback ran before the release returned");
    assert_eq!(tally.live.load(SeqCst), 0, "the member's context was freed");
    assert_eq!(group.owned_resources(), 0);
    opener.join().unwrap();
}
