//! `time::sleep`, `sleep_until`, `interval` and `timeout` under every executor.
#![cfg(windows)]

use crate::executors;
use crate::support;

use executors::{counting_waker, on_each_executor};
use support::PATIENCE;

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::{Duration, Instant};

use windows_threadpool::task;
use windows_threadpool::time::{self, Elapsed, MissedTickBehavior, Sleep, Timeout};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Sleep>();
    send_sync::<time::Interval>();
    send_sync::<Timeout<Sleep>>();
};

const MS: Duration = Duration::from_millis(1);

#[test]
fn a_sleep_completes_at_its_deadline_never_before() {
    on_each_executor(|| async {
        for d in [MS, 5 * MS, 20 * MS] {
            let start = Instant::now();
            let s = time::sleep(d);
            let deadline = s.deadline().unwrap();
            s.await;
            assert!(Instant::now() >= deadline, "woke {:?} early", deadline - Instant::now());
            assert!(start.elapsed() >= d);
        }
    });
}

#[test]
fn a_past_deadline_is_ready_at_once() {
    on_each_executor(|| async {
        let mut s = time::sleep_until(Instant::now() - Duration::from_secs(1));
        assert!(!s.is_elapsed());
        (&mut s).await;
        assert!(s.is_elapsed());
        // Ready again when polled again, as tokio's is.
        s.await;
    });
}

#[test]
fn timeout_gives_the_output_or_elapsed() {
    on_each_executor(|| async {
        assert_eq!(time::timeout(Duration::from_secs(60), async { 5 }).await, Ok(5));
        let start = Instant::now();
        let r = time::timeout(5 * MS, time::sleep(Duration::from_secs(60))).await;
        assert!(start.elapsed() >= 5 * MS);
        let elapsed: Elapsed = r.unwrap_err();
        assert_eq!(elapsed.to_string(), "deadline has elapsed");
        let e: std::io::Error = elapsed.into();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    });
}

#[test]
fn interval_ticks_on_its_schedule() {
    on_each_executor(|| async {
        let start = Instant::now();
        let mut i = time::interval_at(start, 3 * MS);
        assert_eq!(i.missed_tick_behavior(), MissedTickBehavior::Burst);
        for k in 0..4u32 {
            let t = i.tick().await;
            assert_eq!(t, start + k * 3 * MS, "tick {k}");
            assert!(Instant::now() >= t);
        }
    });
}

/// The waker of the latest poll is the one woken, exactly once.
#[test]
fn the_latest_waker_is_woken_once() {
    let ((a, wa), (b, wb)) = (counting_waker(), counting_waker());
    let mut s = time::sleep(5 * MS);
    assert!(Pin::new(&mut s).poll(&mut Context::from_waker(&wa)).is_pending());
    assert!(Pin::new(&mut s).poll(&mut Context::from_waker(&wb)).is_pending());
    b.0.wait_for(1);
    assert!(Pin::new(&mut s).poll(&mut Context::from_waker(&wb)).is_ready());
    // Another sleep's firing after this one's cannot wake it again.
    task::block_on(time::sleep(5 * MS));
    assert_eq!((a.0.get(), b.0.get()), (0, 1));
}

/// Sleeps dropped before their deadline never wake anyone, and the ones
/// left still fire. Each has a waker of its own: a thread preempted past a
/// sleep's 2 ms deadline before its first poll or its drop may see it fire,
/// rightly, so only the sleeps dropped before their deadline are held to no
/// wake.
#[test]
fn dropped_sleeps_do_not_fire() {
    let mut dropped_in_time = Vec::new();
    for _ in 0..1000 {
        let (count, waker) = counting_waker();
        let mut s = time::sleep(2 * MS);
        let deadline = s.deadline().expect("a finite sleep has a deadline");
        if Pin::new(&mut s).poll(&mut Context::from_waker(&waker)).is_ready() {
            // Preempted past the deadline before the first poll: rightly fired.
            assert!(Instant::now() >= deadline, "a sleep was ready before its deadline");
            continue;
        }
        drop(s);
        if Instant::now() < deadline {
            dropped_in_time.push(count);
        }
    }
    assert!(!dropped_in_time.is_empty(), "no sleep was dropped before its deadline");
    task::block_on(time::sleep(20 * MS));
    let woken = dropped_in_time.iter().filter(|c| c.0.get() != 0).count();
    assert_eq!(woken, 0, "{woken} of {} sleeps dropped in time were woken", dropped_in_time.len());
}

#[test]
fn ten_thousand_concurrent_sleeps() {
    on_each_executor(|| async {
        let start = Instant::now();
        let sleeps = (0..10_000u32).map(|i| async move {
            let s = time::sleep(Duration::from_micros(u64::from(i % 50) * 1000 + 1000));
            let deadline = s.deadline().unwrap();
            s.await;
            assert!(Instant::now() >= deadline);
        });
        futures::future::join_all(sleeps).await;
        assert!(start.elapsed() >= 50 * MS);
        assert!(start.elapsed() < PATIENCE);
    });
}

/// A sleep inside a task spawned on the pool: nothing but pool callbacks
/// (the driver's timer, the task's work object) completes it.
#[test]
fn sleeps_in_pool_tasks() {
    let handles: Vec<_> = (0..100u64)
        .map(|i| {
            task::spawn(async move {
                let start = Instant::now();
                time::sleep(Duration::from_millis(i % 10 + 1)).await;
                start.elapsed()
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert!(h.join().unwrap() >= Duration::from_millis(i as u64 % 10 + 1));
    }
}

/// An interval reports the period and the missed-tick behaviour it was given.
#[test]
fn an_interval_reports_its_period_and_behaviour() {
    let mut i = time::interval(7 * MS);
    assert_eq!(i.period(), 7 * MS);
    for b in [MissedTickBehavior::Skip, MissedTickBehavior::Delay, MissedTickBehavior::Burst] {
        i.set_missed_tick_behavior(b);
        assert_eq!(i.missed_tick_behavior(), b);
    }
}

/// `reset` moves the next tick to a period from now. Here the next tick was
/// due 0.1 s after the first; after `reset` it is 2 s away, so a 1 s timeout
/// on it elapses (timers fire late, never early: the outcome does not depend
/// on timing).
#[test]
fn reset_moves_the_next_tick_a_period_from_now() {
    task::block_on(async {
        let period = Duration::from_secs(2);
        let start = Instant::now() - Duration::from_millis(1900);
        let mut i = time::interval_at(start, period);
        assert_eq!(i.tick().await, start);
        let before = Instant::now();
        i.reset();
        assert!(
            time::timeout(Duration::from_secs(1), i.tick()).await.is_err(),
            "ticked before a period from the reset"
        );
        let t = i.tick().await;
        assert!(t >= before + period, "the tick after the reset was scheduled at {:?} after it", t - before);
    });
}
