//! The wait futures: `wait::signalled`, `signalled_in` and `process_exit`,
//! under every executor of `support/executors.rs`.
#![cfg(windows)]

use crate::support;
use support::PATIENCE;

use crate::executors;
use executors::{counting_waker, on_each_executor, poll_once};

use std::future::Future;
use std::pin::Pin;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::task::Poll;
use std::time::{Duration, Instant};

use windows_threadpool::wait::{self, Event, Wait, WaitActivation, WaitResult};
use windows_threadpool::{CallbackEnviron, Deadline, Pool};

#[test]
fn a_set_event_resolves_signalled() {
    on_each_executor(|| async {
        let event = Event::manual_reset().unwrap();
        let fut = wait::signalled(event.try_clone().unwrap(), Deadline::NEVER);
        let setter = std::thread::spawn(move || event.set().unwrap());
        assert_eq!(fut.await.unwrap(), WaitResult::Signalled);
        setter.join().unwrap();
    });
}

#[test]
fn an_event_never_set_times_out() {
    on_each_executor(|| async {
        let event = Event::manual_reset().unwrap();
        let fut = wait::signalled(event.try_clone().unwrap(), Duration::from_millis(10));
        assert_eq!(fut.await.unwrap(), WaitResult::TimedOut);
    });
}

#[test]
fn signalled_in_runs_on_the_given_pool() {
    on_each_executor(|| async {
        let pool = Pool::new().unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let event = Event::auto_reset().unwrap();
        event.set().unwrap();
        let fut = wait::signalled_in(event.try_clone().unwrap(), PATIENCE, &env);
        drop(env);
        assert_eq!(fut.await.unwrap(), WaitResult::Signalled);
    });
}

#[test]
fn process_exit_reads_the_exit_code_and_keeps_the_child() {
    on_each_executor(|| async {
        let mut child = support::spawn(Command::new("cmd").args(["/c", "exit 3"])).unwrap();
        let status = wait::process_exit(&mut child).await.unwrap();
        assert_eq!(status.code(), Some(3));
        // The child is still the caller's, and agrees.
        assert_eq!(child.wait().unwrap().code(), Some(3));
    });
}

#[test]
fn process_exit_of_a_child_already_gone() {
    on_each_executor(|| async {
        let mut child = support::spawn(Command::new("cmd").args(["/c", "exit 7"])).unwrap();
        child.wait().unwrap();
        assert_eq!(wait::process_exit(&mut child).await.unwrap().code(), Some(7));
    });
}

/// One event awaited again and again by reference: each future waits on its
/// own `SYNCHRONIZE` duplicate, and the event stays the caller's.
#[test]
fn an_event_awaited_by_reference_again_and_again() {
    let event = Event::auto_reset().unwrap();
    for _ in 0..3 {
        let fut = wait::signalled(&event, PATIENCE);
        event.set().unwrap();
        assert_eq!(futures::executor::block_on(fut).unwrap(), WaitResult::Signalled);
    }
    // An auto-reset event is reset by the wait it released.
    let idle = wait::signalled(&event, Duration::from_millis(5));
    assert_eq!(futures::executor::block_on(idle).unwrap(), WaitResult::TimedOut);
    let wait_only = event.wait_only().unwrap();
    let fut = wait::signalled(&wait_only, Instant::now() + PATIENCE);
    event.set().unwrap();
    assert_eq!(futures::executor::block_on(fut).unwrap(), WaitResult::Signalled);
}

/// A borrowed event's future outlives the borrow: dropping the event and
/// the future, armed and unsignalled, in that order, is sound (the future
/// owns its duplicate), and the future still resolves when set through
/// another handle.
#[test]
fn a_future_on_a_borrowed_event_outlives_the_event() {
    let event = Event::manual_reset().unwrap();
    let setter = event.try_clone().unwrap();
    let mut fut = wait::signalled(&event, Deadline::NEVER);
    let (woken, w) = counting_waker();
    assert!(poll_once(&mut fut, &w).is_pending());
    drop(event);
    setter.set().unwrap();
    woken.0.wait_for(1);
    assert_eq!(poll_once(&mut fut, &w).map(Result::unwrap), Poll::Ready(WaitResult::Signalled));
}

/// The deadline counts from the call, not from the first poll: a future
/// first polled after its deadline has passed arms an expired timeout. Under
/// Wine an expired timeout always reports `TimedOut`, even on a signalled
/// handle (`tests/objects/wait.rs::zero_timeout_on_a_signalled_handle`), which makes
/// the start visible; were it the first poll, the signal would be reported.
#[test]
fn the_deadline_counts_from_the_call() {
    let event = Event::manual_reset().unwrap();
    let timeout = Duration::from_millis(20);
    let created = Instant::now();
    let fut = wait::signalled(event.try_clone().unwrap(), timeout);
    while created.elapsed() <= timeout {
        std::thread::yield_now();
    }
    event.set().unwrap();
    let result = futures::executor::block_on(fut).unwrap();
    if support::on_wine() {
        assert_eq!(result, WaitResult::TimedOut);
    }
}

/// The waker of the latest poll is the one woken, once.
#[test]
fn only_the_latest_waker_is_woken_once() {
    let event = Event::manual_reset().unwrap();
    let mut fut = wait::signalled(event.try_clone().unwrap(), Deadline::NEVER);
    let (a, wa) = counting_waker();
    let (b, wb) = counting_waker();
    assert!(poll_once(&mut fut, &wa).is_pending());
    assert!(poll_once(&mut fut, &wb).is_pending());
    event.set().unwrap();
    b.0.wait_for(1);
    assert!(matches!(poll_once(&mut fut, &wb), Poll::Ready(Ok(WaitResult::Signalled))));
    drop(fut);
    assert_eq!((a.0.get(), b.0.get()), (0, 1));
}

/// A future is lazy: nothing is armed before the first poll, so a signal
/// consumed before it is not seen (an auto-reset event's signal goes to the
/// first wait on it).
#[test]
fn nothing_waits_before_the_first_poll() {
    let event = Event::auto_reset().unwrap();
    let mut fut = wait::signalled(event.try_clone().unwrap(), Deadline::NEVER);
    event.set().unwrap();
    // A wait armed now takes the signal: the future has no wait yet.
    let (tx, rx) = std::sync::mpsc::channel();
    let thief = Wait::new(event.try_clone().unwrap().into(), move |a: &WaitActivation<'_>| {
        tx.send(a.result()).unwrap();
    })
    .unwrap();
    thief.arm(Deadline::NEVER);
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
    let (c, w) = counting_waker();
    assert!(poll_once(&mut fut, &w).is_pending());
    event.set().unwrap();
    c.0.wait_for(1);
    assert!(matches!(poll_once(&mut fut, &w), Poll::Ready(Ok(WaitResult::Signalled))));
}

/// Dropping an armed future whose callback is queued but cannot run (the
/// pool's only thread is held) returns without waiting for it: the wait's
/// drain happens elsewhere. A drain on this thread would wait for the gate,
/// which opens only once the drop has returned (or, failing, after
/// `PATIENCE`, which the assertion reports).
#[test]
fn dropping_an_unfinished_future_does_not_block() {
    let held = support::held_pool();
    let (env, gate) = (held.env.clone(), Arc::clone(&held.gate));

    let event = Event::manual_reset().unwrap();
    let mut fut = wait::signalled_in(event.try_clone().unwrap(), Deadline::NEVER, &env);
    let (woken, w) = counting_waker();
    assert!(poll_once(&mut fut, &w).is_pending());
    event.set().unwrap();
    // Once a later wait on the same handle has fired, the pool has queued
    // the future's callback (Wine signals through its wait thread).
    let (probe_tx, probe_rx) = std::sync::mpsc::channel();
    let probe = Wait::new(event.try_clone().unwrap().into(), move |_: &WaitActivation<'_>| {
        let _ = probe_tx.send(());
    })
    .unwrap();
    probe.arm(Deadline::NEVER);
    probe_rx.recv_timeout(PATIENCE).unwrap();

    let dropped = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&dropped);
    let opener = support::open_when(&gate, move || d.load(SeqCst));
    drop(fut);
    dropped.store(true, SeqCst);
    assert!(opener.join().unwrap(), "the drop blocked until the gate opened by timeout");
    held.release();
    // The callback ran after the drop (or is about to); the dropped future's
    // waker is not woken.
    drop(probe);
    assert_eq!(woken.0.get(), 0);
}

/// An armed future whose callback has published (its waker was woken) is
/// dropped in place, with no hand-off: its drain waits at most for a
/// callback finishing its wake. In a child, so that no other test's
/// hand-off is counted.
#[test]
fn a_future_dropped_after_its_wake_drops_its_wait_in_place() {
    let out = support::child("async_wait::a_future_dropped_after_its_wake_drops_its_wait_in_place", &[], || {
        let event = Event::manual_reset().unwrap();
        let mut fut = wait::signalled(event.try_clone().unwrap(), Deadline::NEVER);
        let (woken, w) = counting_waker();
        assert!(poll_once(&mut fut, &w).is_pending());
        event.set().unwrap();
        woken.0.wait_for(1);
        let before = windows_threadpool::handoffs();
        drop(fut);
        assert_eq!(windows_threadpool::handoffs(), before, "the drop of a settled wait was handed off");
    });
    out.assert_completed();
}

/// A future dropped before its event is set, then the event set: nothing
/// breaks, under every executor.
#[test]
fn dropping_then_setting_the_event() {
    on_each_executor(|| async {
        let event = Event::manual_reset().unwrap();
        let mut fut = wait::signalled(event.try_clone().unwrap(), Deadline::NEVER);
        assert!(std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut fut).poll(cx))).await.is_pending());
        drop(fut);
        event.set().unwrap();
        // The event still works for a new wait.
        assert_eq!(wait::signalled(event.try_clone().unwrap(), Deadline::NEVER).await.unwrap(), WaitResult::Signalled);
    });
}

/// Futures dropped right after their first poll while another thread sets
/// their events: whichever side wins, nothing crashes or hangs, and the
/// events still work afterwards.
#[test]
fn futures_dropped_while_their_events_are_set() {
    const N: usize = 500;
    let events: Arc<Vec<Event>> = Arc::new((0..N).map(|_| Event::manual_reset().unwrap()).collect());
    let (_c, w) = counting_waker();
    let mut futs: Vec<_> = events.iter().map(|e| wait::signalled(e.try_clone().unwrap(), Deadline::NEVER)).collect();
    for f in &mut futs {
        assert!(poll_once(f, &w).is_pending());
    }
    let setter = {
        let events = Arc::clone(&events);
        std::thread::spawn(move || events.iter().for_each(|e| e.set().unwrap()))
    };
    drop(futs);
    setter.join().unwrap();
    let last = wait::signalled(events[N - 1].try_clone().unwrap(), Deadline::NEVER);
    assert_eq!(futures::executor::block_on(last).unwrap(), WaitResult::Signalled);
}

/// 10,000 waits on 10,000 events set from another thread, joined.
#[test]
fn ten_thousand_concurrent_waits() {
    const N: usize = 10_000;
    on_each_executor(|| async {
        let start = Instant::now();
        let events: Vec<Event> = (0..N).map(|_| Event::manual_reset().unwrap()).collect();
        let futs: Vec<_> = events.iter().map(|e| wait::signalled(e.try_clone().unwrap(), Deadline::NEVER)).collect();
        let setter = std::thread::spawn(move || {
            for e in &events {
                e.set().unwrap();
            }
        });
        let results = futures::future::join_all(futs).await;
        setter.join().unwrap();
        assert_eq!(results.len(), N);
        assert!(results.iter().all(|r| matches!(r, Ok(WaitResult::Signalled))));
        eprintln!("{N} waits: {:?}", start.elapsed());
    });
}
