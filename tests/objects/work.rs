//! Work objects: exactly-once accounting, draining, cancellation, teardown.
#![cfg(windows)]

use crate::support;
use support::Gate;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Condvar, Mutex};

use windows_threadpool::{CallbackEnviron, Pool, Work};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Work>();
    send_sync::<Pool>();
};

/// A work object on a private one-thread pool whose first callback blocks on
/// the gate; `entered` flips when that first callback is running, `finished`
/// as the last thing it does.
struct Blocked {
    work: Work,
    count: Arc<AtomicUsize>,
    gate: Arc<Gate>,
    entered: Arc<(Mutex<bool>, Condvar)>,
    finished: Arc<AtomicBool>,
    pool: Pool,
}

fn blocked_work() -> Blocked {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let count = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Gate::default());
    let entered = Arc::new((Mutex::new(false), Condvar::new()));
    let finished = Arc::new(AtomicBool::new(false));
    let (c, g, e, f) = (Arc::clone(&count), Arc::clone(&gate), Arc::clone(&entered), Arc::clone(&finished));
    let work = Work::new_in(
        move |_| {
            if c.fetch_add(1, SeqCst) == 0 {
                *e.0.lock().unwrap() = true;
                e.1.notify_all();
                g.wait();
                f.store(true, SeqCst);
            }
        },
        &env,
    )
    .unwrap();
    Blocked { work, count, gate, entered, finished, pool }
}

impl Blocked {
    fn wait_entered(&self) {
        let g = self.entered.0.lock().unwrap();
        drop(self.entered.1.wait_while(g, |e| !*e).unwrap());
    }

    /// A second work object on the same pool, counting its callbacks: once
    /// the first callback is entered, none of these can start before the gate
    /// opens (the pool's only thread is held), whatever the scheduling.
    fn queued_behind(&self, count: &Arc<AtomicUsize>) -> Work {
        let env = CallbackEnviron::new().with_pool(&self.pool);
        let c = Arc::clone(count);
        Work::new_in(
            move |_| {
                c.fetch_add(1, SeqCst);
            },
            &env,
        )
        .unwrap()
    }
}

#[test]
fn n_submits_run_exactly_n_callbacks() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let work = Work::new(move |_| {
        c.fetch_add(1, SeqCst);
    })
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
        Work::new(move |_| {
            c.fetch_add(1, SeqCst);
        })
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
    // Opening before `wait` is entered only makes the test weaker, never wrong.
    let opener = support::open_soon(&b.gate);
    b.work.wait();
    assert_eq!(b.count.load(SeqCst), 11);
    opener.join().unwrap();
}

/// The discarded callbacks belong to a second object queued behind the
/// blocked one: none of them can start before the gate opens, and the gate
/// opens only after `cancel_pending` returned (which it does at once: the
/// second object has nothing running). Windows discards queued callbacks
/// too: Wine's conformance test `dlls/ntdll/tests/threadpool.c` `test_tp_work`
/// (fewer than 10 of 10 posts ran after `TpWaitForWork(work, TRUE)`).
#[test]
fn cancel_pending_discards_queued_callbacks() {
    let b = blocked_work();
    b.work.submit();
    b.wait_entered();
    let count = Arc::new(AtomicUsize::new(0));
    let queued = b.queued_behind(&count);
    for _ in 0..10 {
        queued.submit();
    }
    // Opens the gate once the cancellation returned; if it never does (it
    // waited for the queued callbacks instead of discarding them), opens it
    // after PATIENCE so the test fails instead of hanging.
    let returned = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&returned);
    let opener = support::open_when(&b.gate, move || r.load(SeqCst));
    queued.cancel_pending();
    returned.store(true, SeqCst);
    assert!(opener.join().unwrap(), "cancel_pending waited for callbacks it should have discarded");
    b.work.wait();
    queued.wait();
    assert_eq!(count.load(SeqCst), 0, "the ten queued callbacks should have been discarded");
    // The object stays usable after a cancellation.
    queued.submit();
    queued.wait();
    assert_eq!(count.load(SeqCst), 1);
}

/// A `cancel_pending` racing a `wait` on another thread, with a callback
/// queued, leaves neither blocked: the crate serialises a cancelling drain
/// with the object's other drains, since under Wine 8 the raw cancellation
/// does not wake a concurrent drain of the callback it discards (docs/wine.md).
#[test]
fn cancel_pending_racing_a_wait_strands_neither() {
    let held = support::held_pool();
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let work = Work::new_in(
        move |_| {
            c.fetch_add(1, SeqCst);
        },
        &held.env,
    )
    .unwrap();
    work.submit();
    support::cancel_racing_a_drain(|| work.wait(), || work.cancel_pending(), || held.release(), || work.submit());
    assert!(count.load(SeqCst) <= 1, "one submission ran {} callbacks", count.load(SeqCst));
}

/// `cancel_pending` still waits for a callback that is running: it returns
/// only after the callback's last statement.
#[test]
fn cancel_pending_waits_for_the_running_callback() {
    let b = blocked_work();
    b.work.submit();
    b.wait_entered();
    // Opening before `cancel_pending` is entered only makes the test weaker.
    let opener = support::open_soon(&b.gate);
    b.work.cancel_pending();
    assert!(b.finished.load(SeqCst), "cancel_pending returned while the callback was running");
    opener.join().unwrap();
}

#[test]
fn drop_runs_queued_callbacks_before_returning() {
    let b = blocked_work();
    for _ in 0..11 {
        b.work.submit();
    }
    b.wait_entered();
    let opener = support::open_soon(&b.gate);
    let Blocked { work, count, pool: _pool, .. } = b;
    // Owed unless the gate opened early and all ten were dispatched before
    // the drop began; `drop_with_a_queued_submission_reports_the_owed_drain`
    // pins the report.
    support::teardown_maybe_owing("Work", || drop(work));
    // All eleven ran before drop returned; eleven is every submission, so none can run after.
    assert_eq!(count.load(SeqCst), 11);
    opener.join().unwrap();
}

/// The gate opens only once the trace shows the drop draining, so the drop
/// certainly began with the second submission queued: owed. The report
/// (under `fail-fast`) comes after the queued callback ran.
#[cfg(feature = "trace")]
#[test]
fn drop_with_a_queued_submission_reports_the_owed_drain() {
    support::traced_child("work::drop_with_a_queued_submission_reports_the_owed_drain", "work,syscall", || {
        let b = blocked_work();
        b.work.submit();
        b.work.submit();
        b.wait_entered();
        let opener = support::open_when(&b.gate, || support::traced("syscall-enter", "WaitForThreadpoolWorkCallbacks"));
        let Blocked { work, count, pool: _pool, .. } = b;
        support::teardown_owing("Work", || drop(work));
        assert!(opener.join().unwrap(), "the drop never drained");
        assert_eq!(count.load(SeqCst), 2);
        assert!(support::traced("work", "drain-owed"));
    });
}

#[test]
fn as_raw_is_the_live_work_object() {
    let count = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&count);
    let work = Work::new(move |_| {
        c.fetch_add(1, SeqCst);
    })
    .unwrap();
    let raw = work.as_raw();
    assert_ne!(raw, 0);
    assert_eq!(work.as_raw(), raw, "stable for the object's life");
    // SAFETY: `raw` is the live work object `work` owns; the crate's own
    // drain below covers this submission.
    unsafe { windows_sys::Win32::System::Threading::SubmitThreadpoolWork(raw) };
    work.wait();
    assert_eq!(count.load(SeqCst), 1, "a raw submission ran the object's callback");
}

#[test]
fn callback_state_is_freed_after_drop() {
    let state = Arc::new(());
    let s = Arc::clone(&state);
    let work = Work::new(move |_| drop(Arc::clone(&s))).unwrap();
    work.submit();
    work.wait();
    assert_eq!(Arc::strong_count(&state), 2);
    drop(work);
    assert_eq!(Arc::strong_count(&state), 1, "the callback's captures are freed by drop");
}

#[test]
fn panicking_work_callback_aborts_the_process() {
    let out = support::child("work::panicking_work_callback_aborts_the_process", &[], || {
        let work = Work::new(|_| panic!("boom from a work callback")).unwrap();
        work.submit();
        work.wait();
        // Only reached if the panic did not abort: the child then exits CHILD_DONE.
    });
    support::assert_panicked_and_aborted(&out, support::AbortKind::CannotUnwind, "boom from a work callback");
}

/// A teardown owing a drain on a thread that is already unwinding: under
/// `fail-fast` the report is a second panic, which aborts the process;
/// without it the first panic unwinds normally (a test failure, exit 101).
/// The gate opens only once the trace shows the drop draining, so the second
/// submission is certainly still queued (owed) when the drop begins.
#[cfg(any(feature = "trace", not(feature = "fail-fast")))]
#[test]
fn drain_owed_while_unwinding() {
    let out = support::child("work::drain_owed_while_unwinding", &[(support::TRACE_VAR, "work,syscall")], || {
        let b = blocked_work();
        b.work.submit();
        b.work.submit();
        b.wait_entered();
        let draining =
            || !cfg!(feature = "trace") || support::traced("syscall-enter", "WaitForThreadpoolWorkCallbacks");
        let _opener = support::open_when(&b.gate, draining);
        panic!("first panic, with a work object owing a drain");
    });
    assert!(out.stderr.contains("first panic"), "{out:#?}");
    if cfg!(feature = "fail-fast") {
        support::assert_panicked_and_aborted(&out, support::AbortKind::PanicWhileUnwinding, "drain still owed");
    } else {
        assert_eq!(out.code, Some(support::TEST_FAILED), "{out:#?}");
        assert!(!out.stderr.contains("drain still owed"), "{out:#?}");
    }
}
