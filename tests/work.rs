//! Work objects: exactly-once accounting, draining, cancellation, teardown.
#![cfg(windows)]

mod support;
use support::{Gate, open_after_start};

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Condvar, Mutex};

use windows_threadpool::{CallbackEnviron, ThreadpoolPool, ThreadpoolWork};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ThreadpoolWork>();
    send_sync::<ThreadpoolPool>();
};

/// A work object on a private one-thread pool whose first callback blocks on
/// the gate; `entered` flips when that first callback is running.
struct Blocked {
    work: ThreadpoolWork,
    count: Arc<AtomicUsize>,
    gate: Arc<Gate>,
    entered: Arc<(Mutex<bool>, Condvar)>,
    _pool: ThreadpoolPool,
}

fn blocked_work() -> Blocked {
    let pool = ThreadpoolPool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let mut env = CallbackEnviron::new();
    env.set_pool(&pool);
    let count = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Gate::default());
    let entered = Arc::new((Mutex::new(false), Condvar::new()));
    let (c, g, e) = (Arc::clone(&count), Arc::clone(&gate), Arc::clone(&entered));
    let work = ThreadpoolWork::new(
        move || {
            if c.fetch_add(1, SeqCst) == 0 {
                *e.0.lock().unwrap() = true;
                e.1.notify_all();
                g.wait();
            }
        },
        Some(&mut env),
    )
    .unwrap();
    Blocked { work, count, gate, entered, _pool: pool }
}

impl Blocked {
    fn wait_entered(&self) {
        let g = self.entered.0.lock().unwrap();
        drop(self.entered.1.wait_while(g, |e| !*e).unwrap());
    }
}

#[test]
fn n_submits_run_exactly_n_callbacks() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let work = ThreadpoolWork::new(
        move || {
            c.fetch_add(1, SeqCst);
        },
        None,
    )
    .unwrap();
    for _ in 0..1000 {
        work.submit();
    }
    work.wait();
    assert_eq!(count.load(SeqCst), 1000);
    work.submit();
    work.stop_and_drain();
    assert_eq!(count.load(SeqCst), 1001);
}

#[test]
fn concurrent_submitters_lose_none() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let work = Arc::new(
        ThreadpoolWork::new(
            move || {
                c.fetch_add(1, SeqCst);
            },
            None,
        )
        .unwrap(),
    );
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (w, b) = (Arc::clone(&work), Arc::clone(&barrier));
            std::thread::spawn(move || {
                b.wait();
                for _ in 0..500 {
                    w.submit();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    work.wait();
    assert_eq!(count.load(SeqCst), 8 * 500);
}

#[test]
fn wait_covers_queued_callbacks() {
    let b = blocked_work();
    for _ in 0..11 {
        b.work.submit();
    }
    b.wait_entered();
    assert_eq!(b.count.load(SeqCst), 1, "ten are queued behind the blocked one");
    let started = Arc::new(AtomicBool::new(false));
    let opener = open_after_start(Arc::clone(&b.gate), Arc::clone(&started));
    started.store(true, SeqCst);
    b.work.wait();
    assert_eq!(b.count.load(SeqCst), 11);
    opener.join().unwrap();
}

#[test]
fn cancel_pending_discards_queued_callbacks() {
    let b = blocked_work();
    for _ in 0..11 {
        b.work.submit();
    }
    b.wait_entered();
    let started = Arc::new(AtomicBool::new(false));
    let opener = open_after_start(Arc::clone(&b.gate), Arc::clone(&started));
    started.store(true, SeqCst);
    b.work.cancel_pending();
    assert_eq!(b.count.load(SeqCst), 1, "the ten queued callbacks should have been discarded");
    opener.join().unwrap();
    // The object stays usable after a cancellation.
    b.work.submit();
    b.work.wait();
    assert_eq!(b.count.load(SeqCst), 2);
}

#[test]
fn drop_runs_queued_callbacks_before_returning() {
    let b = blocked_work();
    for _ in 0..11 {
        b.work.submit();
    }
    b.wait_entered();
    let started = Arc::new(AtomicBool::new(false));
    let opener = open_after_start(Arc::clone(&b.gate), Arc::clone(&started));
    let Blocked { work, count, _pool, .. } = b;
    started.store(true, SeqCst);
    support::teardown_owing("ThreadpoolWork", || drop(work));
    // All eleven ran before drop returned; eleven is every submission, so none can run after.
    assert_eq!(count.load(SeqCst), 11);
    opener.join().unwrap();
}

#[test]
fn callback_state_is_freed_after_drop() {
    let state = Arc::new(());
    let s = Arc::clone(&state);
    let work = ThreadpoolWork::new(move || drop(Arc::clone(&s)), None).unwrap();
    work.submit();
    work.wait();
    assert_eq!(Arc::strong_count(&state), 2);
    drop(work);
    assert_eq!(Arc::strong_count(&state), 1, "the callback's captures are freed by drop");
}

#[test]
fn panicking_work_callback_aborts_the_process() {
    let out = support::child("panicking_work_callback_aborts_the_process", &[], || {
        let work = ThreadpoolWork::new(|| panic!("boom from a work callback"), None).unwrap();
        work.submit();
        work.wait();
        // Only reached if the panic did not abort: the child then exits CHILD_DONE.
    });
    support::assert_panicked_and_aborted(&out, "boom from a work callback");
}

/// A teardown owing a drain on a thread that is already unwinding: under
/// `fail-fast` the report is a second panic, which aborts the process;
/// without it the first panic unwinds normally (a test failure, exit 101).
#[test]
fn drain_owed_while_unwinding() {
    let out = support::child("drain_owed_while_unwinding", &[], || {
        let b = blocked_work();
        b.work.submit();
        b.work.submit();
        b.wait_entered();
        // Dropped by the unwind just before `b`: only then may the gate open,
        // so the second submission is still queued (owed) when `b` drops.
        struct Unwinding(Arc<AtomicBool>);
        impl Drop for Unwinding {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let reached = Arc::new(AtomicBool::new(false));
        let _opener = open_after_start(Arc::clone(&b.gate), Arc::clone(&reached));
        let _unwinding = Unwinding(reached);
        panic!("first panic, with a work object owing a drain");
    });
    assert!(out.stderr.contains("first panic"), "{out:#?}");
    if cfg!(feature = "fail-fast") {
        support::assert_panicked_and_aborted(&out, "drain still owed");
    } else {
        assert_eq!(out.code, Some(support::TEST_FAILED), "{out:#?}");
        assert!(!out.stderr.contains("drain still owed"), "{out:#?}");
    }
}
