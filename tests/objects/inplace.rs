//! In-place polling (`task` module docs, "In-place polling"): a task woken
//! inside one of the crate's callbacks (an I/O completion, the time
//! driver's timer, a wait future's callback, another task's poll) is polled
//! on that callback's thread, at most one per callback, only where the task
//! would run anyway (same pool, priority, placement), within a budget.
//!
//! Every test reads the process-wide count of in-place polls
//! (`task::inplace_polls`), so each runs in a process of its own
//! (`support::alone`).
#![cfg(windows)]

use crate::support;

use std::fs::OpenOptions;
use std::time::Duration;

use tokio::sync::mpsc;
use windows_threadpool::io::{self, AsyncIo};
use windows_threadpool::task::{self, idle_wakes, inplace_polls};
use windows_threadpool::time::{self, Deadline};
use windows_threadpool::wait::{self, Event};
use windows_threadpool::{CallbackEnviron, CallbackPriority, Pool};

/// `rounds` round trips between two tasks over two channels, `a` on `env_a`
/// and `b` on `env_b`; returns once both have finished.
fn ping_pong(rounds: usize, env_a: &CallbackEnviron, env_b: &CallbackEnviron) {
    let (to_b, mut b_rx) = mpsc::unbounded_channel::<usize>();
    let (to_a, mut a_rx) = mpsc::unbounded_channel::<usize>();
    let b = task::spawn_in(
        async move {
            while let Some(n) = b_rx.recv().await {
                if to_a.send(n + 1).is_err() {
                    break;
                }
            }
        },
        env_b,
    );
    let a = task::spawn_in(
        async move {
            for i in 0..rounds {
                to_b.send(2 * i).unwrap();
                assert_eq!(a_rx.recv().await, Some(2 * i + 1));
            }
        },
        env_a,
    );
    task::block_on(a).unwrap();
    task::block_on(b).unwrap();
}

/// Runs `run` until one of its wakes found the task idle, at most 100
/// times, and returns that run's in-place polls and such wakes. A wake that
/// finds its task still being polled (an I/O completion or a wait fast
/// enough to beat the poll's return) only marks it, and the poll polls it
/// again: nothing to poll in place. Every run before the returned one had
/// no such wake, and must have had no in-place poll either (checked), so
/// the budget is untouched.
fn until_a_wake_finds_its_task_idle(mut run: impl FnMut()) -> (usize, usize) {
    for _ in 0..100 {
        let (polls, wakes) = (inplace_polls(), idle_wakes());
        run();
        let (polls, wakes) = (inplace_polls() - polls, idle_wakes() - wakes);
        if wakes > 0 {
            return (polls, wakes);
        }
        assert_eq!(polls, 0, "{polls} in-place polls in a run where no wake found its task idle");
    }
    panic!("in 100 runs, no wake found its task idle");
}

fn one_thread_pool() -> Pool {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    pool.set_min_threads(1).unwrap();
    pool
}

/// The time driver's timer polls the task its sleep wakes: every wake that
/// found the task idle (all of them come from the timer) ran in place.
#[test]
fn a_task_woken_by_a_sleep_is_polled_in_place() {
    support::alone("inplace::a_task_woken_by_a_sleep_is_polled_in_place", || {
        let (polls, wakes) = until_a_wake_finds_its_task_idle(|| {
            task::block_on(task::spawn(async {
                for _ in 0..10 {
                    time::sleep(Duration::from_millis(1)).await;
                }
            }))
            .unwrap();
        });
        assert_eq!(polls, wakes, "10 sleeps: {wakes} wakes found the task idle, {polls} in-place polls");
    });
}

/// A file read's completion polls the task awaiting it.
#[test]
fn a_task_woken_by_an_io_completion_is_polled_in_place() {
    support::alone("inplace::a_task_woken_by_an_io_completion_is_polled_in_place", || {
        let path = std::env::temp_dir().join(format!("wtp-inplace-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 4096]).unwrap();
        let file =
            std::sync::Arc::new(AsyncIo::new(io::open_file(&path, OpenOptions::new().read(true)).unwrap()).unwrap());
        let mut completions = 0;
        let (polls, wakes) = until_a_wake_finds_its_task_idle(|| {
            let file = file.clone();
            let before = io::async_completions();
            task::block_on(task::spawn(async move {
                let mut buf = vec![0u8; 512];
                for i in 0..8 {
                    let (r, b) = file.read_at(buf, i * 512).await;
                    assert_eq!(r.unwrap(), 512);
                    buf = b;
                }
            }))
            .unwrap();
            completions = io::async_completions() - before;
        });
        drop(file);
        std::fs::remove_file(&path).unwrap();
        assert!(wakes <= completions, "{wakes} idle wakes from {completions} completions");
        assert_eq!(polls, wakes, "{completions} completions: {wakes} found the task idle, {polls} in-place polls");
    });
}

/// A wait future's callback polls the task awaiting it.
#[test]
fn a_task_woken_by_a_wait_is_polled_in_place() {
    support::alone("inplace::a_task_woken_by_a_wait_is_polled_in_place", || {
        let event = std::sync::Arc::new(Event::manual_reset().unwrap());
        event.set().unwrap();
        let (polls, wakes) = until_a_wake_finds_its_task_idle(|| {
            let event = event.clone();
            task::block_on(task::spawn(async move {
                for _ in 0..5 {
                    assert_eq!(wait::signalled(&*event, Deadline::NEVER).await.unwrap(), wait::WaitResult::Signalled);
                }
            }))
            .unwrap();
        });
        assert_eq!(polls, wakes, "5 waits: {wakes} found the task idle, {polls} in-place polls");
    });
}

/// Two tasks that wake each other on a pool of one thread: each poll's
/// wake of the other is polled in place, the other's reply is submitted
/// (no recursion), so the ping-pong completes; and the budget submits one
/// wake in every `BUDGET + 1` (16 + 1) that could have been polled in place.
#[test]
fn a_ping_pong_completes_on_a_one_thread_pool_within_the_budget() {
    support::alone("inplace::a_ping_pong_completes_on_a_one_thread_pool_within_the_budget", || {
        let pool = one_thread_pool();
        let env = CallbackEnviron::new().with_pool(&pool);
        const ROUNDS: usize = 340;
        let before = inplace_polls();
        ping_pong(ROUNDS, &env, &env);
        let polls = inplace_polls() - before;
        // One in-place poll per round trip at most (the reply is submitted),
        // less the one in 17 the budget submits: 320 of 340.
        assert!(polls < ROUNDS, "{polls} in-place polls for {ROUNDS} round trips: the budget never submitted");
        assert!(polls >= ROUNDS * 3 / 4, "{polls} in-place polls for {ROUNDS} round trips");
    });
}

/// A task on a private pool is never polled by a callback of the default
/// pool (the time driver's timer, a default-pool task), nor the reverse.
#[test]
fn never_across_pools() {
    support::alone("inplace::never_across_pools", || {
        let pool = Pool::new().unwrap();
        let private = CallbackEnviron::new().with_pool(&pool);
        let before = inplace_polls();
        task::block_on(task::spawn_in(
            async {
                for _ in 0..10 {
                    time::sleep(Duration::from_millis(1)).await;
                }
            },
            &private,
        ))
        .unwrap();
        ping_pong(50, &CallbackEnviron::new(), &private);
        assert_eq!(inplace_polls() - before, 0, "a task was polled in place on another pool's callback");
    });
}

/// Nor by a callback of another priority on its own pool.
#[test]
fn never_across_priorities() {
    support::alone("inplace::never_across_priorities", || {
        let high = CallbackEnviron::new().with_priority(CallbackPriority::High);
        let low = CallbackEnviron::new().with_priority(CallbackPriority::Low);
        let before = inplace_polls();
        task::block_on(task::spawn_in(
            async {
                for _ in 0..10 {
                    time::sleep(Duration::from_millis(1)).await;
                }
            },
            &high,
        ))
        .unwrap();
        ping_pong(50, &high, &CallbackEnviron::new());
        ping_pong(50, &low, &high);
        assert_eq!(inplace_polls() - before, 0, "a task was polled in place on a callback of another priority");
    });
}

/// A panic in a poll run in place is the task's: its handle returns it,
/// and the callback that polled it (the time driver's timer) goes on.
#[test]
fn a_panic_in_an_in_place_poll_goes_to_the_join_handle() {
    support::alone("inplace::a_panic_in_an_in_place_poll_goes_to_the_join_handle", || {
        let (polls, wakes) = until_a_wake_finds_its_task_idle(|| {
            let h = task::spawn(async {
                time::sleep(Duration::from_millis(1)).await;
                panic!("in place");
            });
            let payload = task::block_on(h).expect_err("the panic was not the task's");
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"in place"));
        });
        assert_eq!((polls, wakes), (1, 1), "the panicking poll did not run in place");
        // The driver still fires.
        task::block_on(task::spawn(time::sleep(Duration::from_millis(1)))).unwrap();
    });
}

/// `WINDOWS_THREADPOOL_NO_INPLACE=1` (read once) turns it off: every wake
/// submits, and everything still completes.
#[test]
fn the_environment_variable_turns_it_off() {
    let out = support::child(
        "inplace::the_environment_variable_turns_it_off",
        &[("WINDOWS_THREADPOOL_NO_INPLACE", "1")],
        || {
            let pool = one_thread_pool();
            let env = CallbackEnviron::new().with_pool(&pool);
            task::block_on(task::spawn(async {
                for _ in 0..5 {
                    time::sleep(Duration::from_millis(1)).await;
                }
            }))
            .unwrap();
            ping_pong(50, &env, &env);
            assert_eq!(inplace_polls(), 0, "polled in place with in-place polling off");
        },
    );
    out.assert_completed();
}

/// A poll that wakes a task and then blocks on it (`JoinHandle::join`)
/// hands the parked task to the pool first: it does not wait for itself.
#[test]
fn a_poll_that_blocks_on_the_task_it_woke_does_not_wait_for_itself() {
    support::alone("inplace::a_poll_that_blocks_on_the_task_it_woke_does_not_wait_for_itself", || {
        let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
        let b = task::spawn(async move { rx.recv().await });
        let a = task::spawn(async move {
            tx.send(7).unwrap();
            // Blocks this pool thread until `b`, woken just now, has run.
            b.join().unwrap()
        });
        assert_eq!(task::block_on(a).unwrap(), Some(7));
    });
}

/// A poll that wakes a task and then drains a pool object whose callback
/// waits for that task, with `drain` (`Work::wait`, the drop), hands the
/// parked task to the pool first: it does not wait for itself. The drain
/// begins once the callback has started, so a drop owes no drain
/// (`fail-fast`). Rerun until the wake found `b` idle, so that it was
/// parked; then the drain's flush submitted it, so nothing was polled in
/// place.
fn drain_waiting_for_the_task_it_woke(drain: fn(windows_threadpool::Work)) {
    let (polls, _) = until_a_wake_finds_its_task_idle(|| wake_then_drain(drain));
    assert_eq!(polls, 0, "the parked task was polled in place, not handed to the pool before the drain");
}

fn wake_then_drain(drain: fn(windows_threadpool::Work)) {
    let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let b = task::spawn(async move {
        ready_tx.send(()).unwrap();
        rx.recv().await
    });
    ready_rx.recv().unwrap();
    // Makes it likelier that `b` is idle, so that the send parks it.
    std::thread::sleep(Duration::from_millis(50));
    let b = std::sync::Mutex::new(Some(b));
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let a = task::spawn(async move {
        let work = windows_threadpool::Work::new(move |_| {
            started_tx.send(()).unwrap();
            let b = b.lock().unwrap().take().expect("one submission");
            assert_eq!(b.join().unwrap(), Some(7));
        })
        .unwrap();
        tx.send(7).unwrap();
        work.submit();
        started_rx.recv().unwrap();
        // Waits for the callback, which waits for `b`.
        drain(work);
    });
    task::block_on(a).unwrap();
}

#[test]
fn a_poll_that_drains_an_object_waiting_for_the_task_it_woke_does_not_wait_for_itself() {
    support::alone(
        "inplace::a_poll_that_drains_an_object_waiting_for_the_task_it_woke_does_not_wait_for_itself",
        || {
            drain_waiting_for_the_task_it_woke(|work| work.wait());
        },
    );
}

/// The owner's teardown drains too.
#[test]
fn a_poll_that_drops_an_object_waiting_for_the_task_it_woke_does_not_wait_for_itself() {
    support::alone(
        "inplace::a_poll_that_drops_an_object_waiting_for_the_task_it_woke_does_not_wait_for_itself",
        || {
            drain_waiting_for_the_task_it_woke(drop);
        },
    );
}
