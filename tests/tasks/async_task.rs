//! Async tasks on the pool: `task::spawn`, `task::block_on`, and
//! `JoinHandle` as a future, under the crate's executor and others.
#![cfg(windows)]

use crate::executors;
use crate::support;

use executors::{counting_waker, on_each_executor};
use support::PATIENCE;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::channel::oneshot;
use windows_threadpool::task::{self, JoinHandle};
use windows_threadpool::{CallbackEnviron, Pool};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<JoinHandle<u32>>();
};

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default()
}

/// Pending `n` times, waking itself each time before returning: every poll
/// after the first comes from a wake that arrived while the task was being
/// polled.
struct YieldN(usize);

impl Future for YieldN {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn block_on_runs_a_spawned_future_to_its_output() {
    let h = task::spawn(async { 6 * 7 });
    assert_eq!(task::block_on(h).unwrap(), 42);
}

#[test]
fn join_blocks_for_an_async_task() {
    let (tx, rx) = oneshot::channel::<u32>();
    let h = task::spawn(async move { rx.await.unwrap() + 1 });
    assert!(!h.is_finished());
    tx.send(41).unwrap();
    assert_eq!(h.join().unwrap(), 42);
}

#[test]
fn a_handle_resolves_under_every_executor() {
    on_each_executor(|| async {
        let (tx, rx) = oneshot::channel::<u32>();
        let h = task::spawn(async move { rx.await.unwrap() * 2 });
        std::thread::spawn(move || tx.send(21).unwrap());
        assert_eq!(h.await.unwrap(), 42);
    });
}

#[test]
fn a_closure_task_handle_is_a_future_too() {
    on_each_executor(|| async {
        let h = task::spawn_blocking(|| 6 * 7);
        assert_eq!(h.await.unwrap(), 42);
    });
}

/// Awaiting a closure task never runs it on the awaiting thread: on a pool
/// whose only thread is held, the await stays pending until it is released.
#[test]
fn awaiting_a_closure_task_does_not_run_it_here() {
    let held = support::held_pool();
    let env = held.env.clone();
    let here = std::thread::current().id();
    let mut h = task::spawn_blocking_in(move || std::thread::current().id(), &env);
    let waker = futures::task::noop_waker();
    assert!(Pin::new(&mut h).poll(&mut Context::from_waker(&waker)).is_pending());
    held.release();
    let ran_on = task::block_on(h).unwrap();
    assert_ne!(ran_on, here, "the awaited closure ran on the awaiting thread");
}

#[test]
fn a_panic_in_a_task_reaches_its_handle() {
    let h = task::spawn(async { panic!("boom in a task") });
    let err = task::block_on(h).unwrap_err();
    assert_eq!(panic_message(&*err), "boom in a task");
    let h = task::spawn(async {
        YieldN(3).await;
        panic!("boom after yielding")
    });
    assert_eq!(panic_message(&*h.join().unwrap_err()), "boom after yielding");
}

#[test]
fn wakes_during_a_poll_poll_again() {
    let polls = Arc::new(AtomicUsize::new(0));
    let p = polls.clone();
    let h = task::spawn(async move {
        for _ in 0..1000 {
            p.fetch_add(1, SeqCst);
            YieldN(1).await;
        }
        7
    });
    assert_eq!(h.join().unwrap(), 7);
    assert_eq!(polls.load(SeqCst), 1000);
}

/// A detached task (its handle dropped) still runs to completion.
#[test]
fn a_dropped_handle_detaches_the_task() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = oneshot::channel::<()>();
    drop(task::spawn(async move {
        go_rx.await.unwrap();
        tx.send(5).unwrap();
    }));
    go_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), 5);
}

/// Records its drop.
struct DropFlag(Arc<AtomicUsize>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A future that never completes and keeps no waker: once its handle is
/// dropped nothing refers to the task, which is freed with its future.
#[test]
fn a_task_nobody_can_wake_is_freed_with_its_last_reference() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let (polled_tx, polled_rx) = std::sync::mpsc::channel();
    let flag = DropFlag(dropped.clone());
    let h = task::spawn(async move {
        let _flag = flag;
        polled_tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    polled_rx.recv_timeout(PATIENCE).unwrap();
    // The callback gives up its reference after the poll; the handle's is
    // then the last. Waiting for the poll to end needs a bound, not a sleep
    // that decides: the drop flag is checked once the handle is gone.
    let deadline = std::time::Instant::now() + PATIENCE;
    drop(h);
    while dropped.load(SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(dropped.load(SeqCst), 1, "the unfinished future was not dropped");
}

/// A waker kept after its task completed does nothing when woken.
#[test]
fn a_waker_outliving_its_task_is_harmless() {
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    let k = kept.clone();
    let h = task::spawn(std::future::poll_fn(move |cx| {
        *k.lock().unwrap() = Some(cx.waker().clone());
        Poll::Ready(3)
    }));
    assert_eq!(h.join().unwrap(), 3);
    let w = kept.lock().unwrap().take().unwrap();
    w.wake_by_ref();
    w.wake();
}

#[test]
fn ten_thousand_tasks_waiting_at_once() {
    const N: usize = 10_000;
    let mut senders = Vec::with_capacity(N);
    let handles: Vec<_> = (0..N)
        .map(|i| {
            let (tx, rx) = oneshot::channel::<usize>();
            senders.push(tx);
            task::spawn(async move { rx.await.unwrap() + i })
        })
        .collect();
    for (i, tx) in senders.into_iter().enumerate() {
        tx.send(i).unwrap();
    }
    let sum: usize = task::block_on(futures::future::join_all(handles)).into_iter().map(|r| r.unwrap()).sum();
    assert_eq!(sum, 2 * (0..N).sum::<usize>());
}

/// Tasks on a private pool run on its threads and keep it open: the pool's
/// handle is dropped while they wait, and they still finish.
#[test]
fn tasks_on_a_private_pool_keep_it_open() {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let (tx, rx) = oneshot::channel::<u32>();
    let h = task::spawn_in(async move { rx.await.unwrap() }, &env);
    drop(env);
    drop(pool);
    tx.send(9).unwrap();
    assert_eq!(h.join().unwrap(), 9);
}

/// `may_run_long` is answered inside an async task's poll, which runs in a
/// pool callback.
#[test]
fn may_run_long_answers_inside_an_async_task() {
    let h = task::spawn(async { task::may_run_long() });
    assert!(h.join().unwrap().is_some());
}

/// A handle polled with one waker and then another wakes only the latest,
/// once.
#[test]
fn a_handle_wakes_its_latest_waker_once() {
    let ((a, wa), (b, wb)) = (counting_waker(), counting_waker());
    let (tx, rx) = oneshot::channel::<u32>();
    let mut h = task::spawn(async move { rx.await.unwrap() });
    assert!(Pin::new(&mut h).poll(&mut Context::from_waker(&wa)).is_pending());
    assert!(Pin::new(&mut h).poll(&mut Context::from_waker(&wb)).is_pending());
    tx.send(4).unwrap();
    b.0.wait_for(1);
    match Pin::new(&mut h).poll(&mut Context::from_waker(&wb)) {
        Poll::Ready(r) => assert_eq!(r.unwrap(), 4),
        Poll::Pending => panic!("woken but not finished"),
    }
    assert_eq!((a.0.get(), b.0.get()), (0, 1));
}

/// A `!Unpin` future that records where it was polled and where it is
/// dropped: the pin guarantee says they are the same place.
struct WherePolledWhereDropped {
    polled_at: Arc<AtomicUsize>,
    dropped_at: Arc<AtomicUsize>,
    _pin: std::marker::PhantomPinned,
}

impl Future for WherePolledWhereDropped {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.polled_at.store(std::ptr::from_ref(&*self).addr(), SeqCst);
        Poll::Ready(())
    }
}

impl Drop for WherePolledWhereDropped {
    fn drop(&mut self) {
        self.dropped_at.store(std::ptr::from_ref(&*self).addr(), SeqCst);
    }
}

/// A completed future is dropped where it was pinned, not moved out first:
/// a future that registered its address (an intrusive waiter list) must
/// find it there in its `Drop`.
#[test]
fn a_completed_future_is_dropped_in_place() {
    let (polled_at, dropped_at) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(1)));
    let fut = WherePolledWhereDropped {
        polled_at: polled_at.clone(),
        dropped_at: dropped_at.clone(),
        _pin: std::marker::PhantomPinned,
    };
    task::spawn(fut).join().unwrap();
    assert_eq!(dropped_at.load(SeqCst), polled_at.load(SeqCst), "the pinned future was moved before its drop");
}

/// Counts its wakers' references, to see who still holds one.
struct CountingWaker;
impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {}
}

/// A handle polled once and then dropped (say, by a timeout) gives up the
/// waker it registered: the awaiting task is not kept alive, nor woken, by
/// the task it no longer awaits.
#[test]
fn a_dropped_handle_forgets_its_waker() {
    let (tx, rx) = oneshot::channel::<()>();
    let mut h = task::spawn(async move { rx.await.ok() });
    let count = Arc::new(CountingWaker);
    let waker = Waker::from(count.clone());
    assert!(Pin::new(&mut h).poll(&mut Context::from_waker(&waker)).is_pending());
    drop(waker);
    assert_eq!(Arc::strong_count(&count), 2, "the handle registered a clone");
    drop(h);
    assert_eq!(Arc::strong_count(&count), 1, "the dropped handle still holds the awaiting task's waker");
    drop(tx);
}

/// Wakes from another thread, each racing the end of the poll that
/// registered the waker (landing before it, during it as `NOTIFIED`, or
/// after it as a new submission): none is lost, or the task would hang.
#[test]
fn wakes_from_another_thread_racing_the_poll_are_never_lost() {
    const N: usize = 10_000;
    let shared = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0), futures::task::AtomicWaker::new()));
    let s = shared.clone();
    let h = task::spawn(async move {
        let (released, reached, waker) = &*s;
        for i in 1..=N {
            reached.store(i - 1, SeqCst);
            std::future::poll_fn(|cx| {
                waker.register(cx.waker());
                if released.load(SeqCst) >= i { Poll::Ready(()) } else { Poll::Pending }
            })
            .await;
        }
        N
    });
    let s = shared.clone();
    let producer = std::thread::spawn(move || {
        let (released, reached, waker) = &*s;
        for i in 1..=N {
            while reached.load(SeqCst) < i - 1 {
                std::thread::yield_now();
            }
            released.store(i, SeqCst);
            waker.wake();
        }
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(h.join().unwrap()).unwrap());
    assert_eq!(rx.recv_timeout(PATIENCE * 2).expect("a wake was lost: the task hangs"), N);
    producer.join().unwrap();
}

/// `block_on` wakes for `wake_by_ref` as for `wake`: a future woken by
/// reference from another thread is polled again and completes.
#[test]
fn block_on_wakes_for_a_wake_by_reference() {
    for by_ref in [true, false] {
        let (tx, rx) = std::sync::mpsc::channel();
        // On its own thread, so that a lost wake fails the test instead of hanging it.
        std::thread::spawn(move || {
            let mut woken = false;
            let out = task::block_on(std::future::poll_fn(|cx| {
                if woken {
                    return Poll::Ready(7);
                }
                woken = true;
                let waker = cx.waker().clone();
                std::thread::spawn(move || if by_ref { waker.wake_by_ref() } else { waker.wake() });
                Poll::Pending
            }));
            tx.send(out).unwrap();
        });
        assert_eq!(rx.recv_timeout(PATIENCE), Ok(7), "by_ref: {by_ref}");
    }
}

/// An async task whose last reference goes away in its own pool callback
/// (its handle dropped, its poll pending with no waker kept) is freed there,
/// and the close of its private pool is handed to another thread.
#[cfg(feature = "trace")]
#[test]
fn an_abandoned_task_hands_its_pools_close_off() {
    use windows_sys::Win32::System::Threading::GetCurrentThreadId;
    let out = support::traced_child("async_task::an_abandoned_task_hands_its_pools_close_off", "pool", || {
        let pool = Pool::new().unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let gate = Arc::new(support::Gate::default());
        let g = Arc::clone(&gate);
        let (tx, rx) = std::sync::mpsc::channel();
        drop(task::spawn_in(
            std::future::poll_fn(move |_| {
                g.wait();
                // SAFETY: no preconditions.
                tx.send(unsafe { GetCurrentThreadId() }).unwrap();
                Poll::<()>::Pending
            }),
            &env,
        ));
        drop((env, pool));
        gate.open();
        let task_thread = rx.recv_timeout(PATIENCE).unwrap().to_string();
        assert_ne!(support::pool_closer(), task_thread, "the pool was closed from its own task's callback");
    });
    out.assert_completed();
}

/// Polling a `JoinHandle` again after it returned `Ready` is a bug of the
/// caller, reported as a panic (not a `Pending` that never wakes).
#[test]
fn a_join_handle_polled_after_completion_panics() {
    let mut h = task::spawn(async { 1 });
    let (_, waker) = counting_waker();
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Poll::Ready(r) = executors::poll_once(&mut h, &waker) {
            assert_eq!(r.unwrap(), 1);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never completed");
        std::thread::yield_now();
    }
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| executors::poll_once(&mut h, &waker)));
    assert!(again.is_err(), "a second poll after Ready did not panic");
}
