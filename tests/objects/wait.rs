//! Thread-pool waits: activations, re-arming, disarming, teardown against
//! re-arming callbacks, custom close routines, and the wait targets.
#![cfg(windows)]

#[cfg(feature = "trace")]
use crate::rows;
use crate::support;
use support::{Counter, Gate};

use std::collections::HashMap;
use std::io::Read;
use std::os::windows::io::{AsHandle, AsRawHandle, IntoRawHandle};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, WAIT_OBJECT_0, WAIT_TIMEOUT};
use windows_sys::Win32::System::Threading::{
    CloseThreadpoolWait, CreateThreadpoolWait, GetExitCodeProcess, GetExitCodeThread, PTP_CALLBACK_INSTANCE, PTP_WAIT,
    SetEvent, SetThreadpoolWait, WaitForSingleObject, WaitForThreadpoolWaitCallbacks,
};
use windows_sys::core::BOOL;
use windows_threadpool::Deadline;
use windows_threadpool::wait::{Event, Wait, WaitActivation, WaitOnlyEvent, WaitResult, WaitableHandle};
use windows_threadpool::{CallbackEnviron, Pool, Work};

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Wait>();
    send_sync::<WaitableHandle>();
    send_sync::<Event>();
    send_sync::<WaitOnlyEvent>();
};

/// How long any single expected event may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn is_signalled(h: HANDLE) -> bool {
    // SAFETY: `h` is an open handle; a zero timeout only tests the state
    // (and consumes an auto-reset event's signal, which callers account for).
    unsafe { WaitForSingleObject(h, 0) == WAIT_OBJECT_0 }
}

/// `event`, signalled.
fn signalled(event: Event) -> Event {
    event.set().unwrap();
    event
}

/// A wait whose callback sends each activation's result.
fn reporting_wait(target: WaitableHandle) -> (Wait, mpsc::Receiver<WaitResult>) {
    let (tx, rx) = mpsc::channel();
    let wait = Wait::new(target, move |act: &WaitActivation<'_>| tx.send(act.result()).unwrap()).unwrap();
    (wait, rx)
}

/// A wait on `event` whose callback only counts.
fn counting_wait(event: &Event, env: Option<&CallbackEnviron>) -> (Wait, Arc<Counter>) {
    let count = Arc::new(Counter::default());
    let c = Arc::clone(&count);
    let handle = event.try_clone().unwrap().into();
    let callback = move |_: &WaitActivation<'_>| {
        c.bump();
    };
    let wait = match env {
        Some(env) => Wait::new_in(handle, callback, env),
        None => Wait::new(handle, callback),
    }
    .unwrap();
    (wait, count)
}

/// Arms a fresh wait on `event` and returns once its callback has run: on a
/// handle that is or becomes signalled, proof that the pool has processed
/// the signal for every wait armed on it earlier (see the callers).
fn probe_fires(event: &Event) {
    let (probe, count) = counting_wait(event, None);
    probe.arm(Deadline::NEVER);
    count.wait_for(1);
}

#[test]
fn signalled_activation_reports_the_signal_and_the_handle() {
    let event = Event::auto_reset().unwrap();
    let (tx, rx) = mpsc::channel();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
        tx.send((act.result(), act.is_signalled(), act.handle().as_raw_handle() as usize)).unwrap()
    })
    .unwrap();
    let expected = wait.handle().as_raw_handle() as usize;
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    let (result, signalled, handle) = rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(result, WaitResult::Signalled);
    assert!(signalled);
    assert_eq!(handle, expected, "the activation lends the wait's own handle");
    assert!(!is_signalled(event.as_handle().as_raw_handle()), "the wait consumed the auto-reset signal");
}

#[test]
fn timeout_activation_reports_timed_out() {
    let (wait, rx) = reporting_wait(Event::auto_reset().unwrap().into());
    wait.arm(Duration::from_millis(20));
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::TimedOut);
    wait.arm(Duration::ZERO);
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::TimedOut, "a zero timeout times out at once");
}

/// Every kind of deadline is a timeout: an `Instant` (past or near), a
/// `SystemTime`, and the rearm from inside an activation.
#[test]
fn instants_and_system_times_are_timeouts() {
    let (tx, rx) = mpsc::channel();
    let rearmed = AtomicBool::new(false);
    let wait = Wait::new(Event::auto_reset().unwrap().into(), move |act: &WaitActivation<'_>| {
        tx.send(act.result()).unwrap();
        // Only the first activation re-arms, with an instant.
        if !rearmed.swap(true, SeqCst) {
            assert!(act.rearm(Instant::now() + Duration::from_millis(1)));
        }
    })
    .unwrap();
    wait.arm(Instant::now() - Duration::from_secs(1));
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::TimedOut, "a past instant times out at once");
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::TimedOut, "the re-arm with an instant");
    wait.arm(std::time::SystemTime::now() + Duration::from_millis(2));
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::TimedOut, "a system time");
    wait.stop_and_drain();
    assert!(rx.try_recv().is_err(), "one activation per arming");
}

/// `disarm` reports through `SetThreadpoolWaitEx` whether it cancelled an
/// armed wait. Wine 8 lacks the call (`docs/wine.md`): `None` there;
/// the `Some` outcome is pinned for Windows only, not yet measured there.
/// Source: Microsoft's `SetThreadpoolWaitEx` ("Returns TRUE if the wait was
/// previously set and was canceled").
#[test]
fn disarm_reports_a_cancelled_wait_where_the_system_can() {
    let event = Event::auto_reset().unwrap();
    let (wait, count) = counting_wait(&event, None);
    wait.arm(Deadline::NEVER);
    let armed = wait.disarm();
    let idle = wait.disarm();
    if support::on_wine() {
        assert_eq!((armed, idle), (None, None));
    } else {
        assert_eq!((armed, idle), (Some(true), Some(false)));
    }
    wait.stop_and_drain();
    assert_eq!(count.get(), 0);
}

/// A zero timeout on a handle already signalled: Wine always reports a
/// timeout and leaves the signal alone (docs/wine.md). On any platform the
/// result must agree with what happened to an auto-reset event's signal.
/// Windows is not pinned: Microsoft's `SetThreadpoolWait` says only "If this
/// parameter points to 0, the wait times out immediately"; not measured.
#[test]
fn zero_timeout_on_a_signalled_handle() {
    let event = signalled(Event::auto_reset().unwrap());
    let (wait, rx) = reporting_wait(event.try_clone().unwrap().into());
    wait.arm(Duration::ZERO);
    let result = rx.recv_timeout(PATIENCE).unwrap();
    wait.stop_and_drain();
    let still_signalled = is_signalled(event.as_handle().as_raw_handle());
    assert_eq!(still_signalled, result == WaitResult::TimedOut, "result {result:?} but signal left: {still_signalled}");
    if support::on_wine() {
        assert_eq!(result, WaitResult::TimedOut);
    }
}

/// A timeout beyond what the pool can represent saturates to "never in
/// practice": the wait stays armed and reports the signal, not a timeout.
#[test]
fn oversized_timeouts_saturate_to_never() {
    let event = Event::auto_reset().unwrap();
    let (wait, rx) = reporting_wait(event.try_clone().unwrap().into());
    for d in [Duration::MAX, Duration::from_secs(u64::MAX)] {
        wait.arm(d);
        event.set().unwrap();
        assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled, "{d:?}");
    }

    let (tx, rx) = mpsc::channel();
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
        let rearmed = act.rearm(Duration::MAX);
        tx.send((act.result(), rearmed)).unwrap();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), (WaitResult::Signalled, true));
    event.set().unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), (WaitResult::Signalled, true), "the saturated re-arm timed out");
    wait.stop_and_drain();
}

#[test]
fn rearming_gives_one_callback_per_signal() {
    const N: usize = 50;
    let event = Event::auto_reset().unwrap();
    let count = Arc::new(Counter::default());
    let c = Arc::clone(&count);
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
        assert!(act.rearm(Deadline::NEVER), "nothing is stopping the wait");
        c.bump();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    for i in 1..=N {
        event.set().unwrap();
        count.wait_for(i);
    }
    wait.stop_and_drain();
    assert_eq!(count.get(), N);
}

#[test]
fn rearming_with_a_timeout_gives_timed_out_activations() {
    let (tx, rx) = mpsc::channel();
    let left = AtomicUsize::new(3);
    let wait = Wait::new(Event::auto_reset().unwrap().into(), move |act: &WaitActivation<'_>| {
        tx.send(act.result()).unwrap();
        if left.fetch_sub(1, SeqCst) > 1 {
            act.rearm(Duration::from_millis(1));
        }
    })
    .unwrap();
    wait.arm(Duration::from_millis(1));
    for _ in 0..3 {
        assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::TimedOut);
    }
    wait.stop_and_drain();
    assert!(rx.try_recv().is_err(), "three armings, three activations");
}

/// On a handle that stays signalled, every arming fires at once: re-arming
/// from the callback N-1 times gives N callbacks, and one arming gives one.
#[test]
fn an_activation_consumes_its_arming() {
    const N: usize = 25;
    let event = signalled(Event::manual_reset().unwrap());
    let count = Arc::new(Counter::default());
    let c = Arc::clone(&count);
    let rearming = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
        if c.bump() < N {
            act.rearm(Deadline::NEVER);
        }
    })
    .unwrap();
    rearming.arm(Deadline::NEVER);
    count.wait_for(N);
    rearming.stop_and_drain();
    assert_eq!(count.get(), N);

    let (once, count) = counting_wait(&event, None);
    once.arm(Deadline::NEVER);
    count.wait_for(1);
    // A wait armed after the callback ran fires on the same signal; once it
    // has, the pool has processed the signal for `once` too, had it stayed
    // armed, and `wait` collects any such callback.
    probe_fires(&event);
    once.wait();
    assert_eq!(count.get(), 1, "the wrapper must not re-arm on its own");
}

#[test]
fn disarm_stops_later_signals() {
    let event = Event::manual_reset().unwrap();
    let (wait, count) = counting_wait(&event, None);
    wait.arm(Deadline::NEVER);
    wait.disarm();
    // Let the pool's wait machinery catch up with the disarm (on Wine a wait
    // thread still blocked on the old handle set could otherwise take the
    // signal below; see docs/wine.md): a probe on another signalled event.
    probe_fires(&signalled(Event::manual_reset().unwrap()));
    event.set().unwrap();
    // Armed after `wait`, the probe fires only once the pool has processed
    // the signal for every earlier wait on the handle.
    probe_fires(&event);
    wait.wait();
    assert_eq!(count.get(), 0, "a disarmed wait ran its callback");
    // Still usable.
    wait.arm(Deadline::NEVER);
    count.wait_for(1);
}

/// Dropping a wait whose callback keeps re-arming: the suppression and the
/// disarm are atomic with respect to a re-arm, so once `drop` returns no
/// callback runs again, and the callback's captures are freed.
#[test]
fn drop_races_a_rearming_callback() {
    const ITERATIONS: usize = 300;
    #[derive(Default)]
    struct Iteration {
        callbacks: AtomicUsize,
        rearmed: AtomicUsize,
        suppressed: AtomicUsize,
        after_drop: AtomicUsize,
        dropped: AtomicBool,
        started: Counter,
    }
    // Signalled for good: every arming fires at once, so the callback loops.
    let event = signalled(Event::manual_reset().unwrap());
    let mut all = Vec::new();
    for n in 0..ITERATIONS {
        let it = Arc::new(Iteration::default());
        let i = Arc::clone(&it);
        // On even iterations the callback dwells before re-arming, which
        // widens the window in which the drop meets it running: the drop then
        // usually wins the lock and the re-arm is refused. Lost in every
        // iteration, this race fails the test below; it never makes it pass.
        // On odd iterations the re-arm usually wins and the drop must disarm
        // an outstanding arming.
        let dwell = n % 2 == 0;
        let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
            i.callbacks.fetch_add(1, SeqCst);
            if i.dropped.load(SeqCst) {
                i.after_drop.fetch_add(1, SeqCst);
            }
            i.started.bump();
            if dwell {
                std::thread::sleep(Duration::from_millis(1));
            }
            if act.rearm(Deadline::NEVER) {
                i.rearmed.fetch_add(1, SeqCst);
            } else {
                i.suppressed.fetch_add(1, SeqCst);
            }
        })
        .unwrap();
        wait.arm(Deadline::NEVER);
        it.started.wait_for(2);
        support::teardown_maybe_owing("Wait", || drop(wait));
        it.dropped.store(true, SeqCst);
        let at_drop = it.callbacks.load(SeqCst);
        assert_eq!(Arc::strong_count(&it), 1, "drop freed the callback's captures");
        all.push((it, at_drop));
    }
    // Any callback after its wait's drop had the rest of the test to show up.
    let mut suppressed = 0;
    for (n, (it, at_drop)) in all.iter().enumerate() {
        let callbacks = it.callbacks.load(SeqCst);
        assert_eq!(callbacks, *at_drop, "iteration {n}: a callback ran after drop");
        assert_eq!(it.after_drop.load(SeqCst), 0, "iteration {n}");
        // Each arming (the first plus every accepted re-arm) fires at most
        // once; only the last can have been disarmed before it fired.
        let armings = 1 + it.rearmed.load(SeqCst);
        assert!(
            callbacks == armings || callbacks + 1 == armings,
            "iteration {n}: {callbacks} callbacks, {armings} armings"
        );
        suppressed += it.suppressed.load(SeqCst);
    }
    // Probabilistic, and only a check that the race above was exercised: each
    // dwelling iteration gives the drop a 1 ms window to meet the callback
    // before it re-arms, and 150 of them all missing it would fail here.
    // `custom_closer_runs_once_after_a_dwelling_callback_is_drained` shows a drop refusing a
    // running callback's re-arm deterministically.
    assert!(suppressed > 0, "no drop ever met a callback re-arming: the race was not exercised");
}

/// After `stop_and_drain` returns nothing runs, even when the handle is
/// signalled just before the stop. Under Wine this needs the teardown flush
/// (docs/wine.md): without it about one iteration in ten sees a late
/// callback.
#[test]
fn stop_and_drain_leaves_nothing_to_run() {
    const ITERATIONS: usize = 300;
    let event = Event::manual_reset().unwrap();
    let quiet = Arc::new(AtomicBool::new(false));
    let late = Arc::new(AtomicUsize::new(0));
    let (q, l) = (Arc::clone(&quiet), Arc::clone(&late));
    let wait = Wait::new(event.try_clone().unwrap().into(), move |_: &WaitActivation<'_>| {
        if q.load(SeqCst) {
            l.fetch_add(1, SeqCst);
        }
    })
    .unwrap();
    for _ in 0..ITERATIONS {
        event.reset().unwrap();
        wait.arm(Deadline::NEVER);
        // Lets Wine's wait thread block on the handle, the state in which a
        // stop can be overtaken. Correct code passes with or without it.
        std::thread::sleep(Duration::from_micros(300));
        event.set().unwrap();
        wait.stop_and_drain();
        quiet.store(true, SeqCst);
        // A late callback comes from Wine's wait thread finishing a wait begun
        // before the disarm; a probe armed now fires only after that thread has
        // moved on (see `probe_fires`), so by then any late callback is queued,
        // and the drain below lets it run and be counted.
        probe_fires(&event);
        wait.wait();
        quiet.store(false, SeqCst);
    }
    assert_eq!(late.load(SeqCst), 0, "callbacks ran after stop_and_drain returned");
}

/// The same for `Drop`, where a late callback would run on a freed context.
/// Each iteration's wait is armed once, so its callback runs at most once; a
/// late one shows up as a call after the drop (the freed closure still points
/// at its iteration's counters) or as a second call on the next iteration's
/// counters (the allocator reused the context), if it does not crash.
/// Under Wine the window after `CloseThreadpoolWait` is narrow (measured
/// with the raw calls: 3 late callbacks in 5,000), so this test rarely sees
/// a missing flush; `stop_and_drain_leaves_nothing_to_run` covers the
/// teardown path both share (`quiesce`) with a wide window.
#[test]
fn drop_leaves_nothing_to_run() {
    const ITERATIONS: usize = 300;
    #[derive(Default)]
    struct Iteration {
        calls: AtomicUsize,
        after_drop: AtomicUsize,
        dropped: AtomicBool,
    }
    let event = Event::manual_reset().unwrap();
    let mut all = Vec::new();
    for _ in 0..ITERATIONS {
        event.reset().unwrap();
        let it = Arc::new(Iteration::default());
        let i = Arc::clone(&it);
        let wait = Wait::new(event.try_clone().unwrap().into(), move |_: &WaitActivation<'_>| {
            i.calls.fetch_add(1, SeqCst);
            if i.dropped.load(SeqCst) {
                i.after_drop.fetch_add(1, SeqCst);
            }
        })
        .unwrap();
        wait.arm(Deadline::NEVER);
        // As in `stop_and_drain_leaves_nothing_to_run`.
        std::thread::sleep(Duration::from_micros(300));
        event.set().unwrap();
        support::teardown_maybe_owing("Wait", || drop(wait));
        it.dropped.store(true, SeqCst);
        all.push(it);
    }
    for (n, it) in all.iter().enumerate() {
        assert_eq!(it.after_drop.load(SeqCst), 0, "iteration {n}: a callback ran after drop returned");
        assert!(it.calls.load(SeqCst) <= 1, "iteration {n}: one arming, {} callbacks", it.calls.load(SeqCst));
    }
}

#[test]
fn stop_and_drain_refuses_rearms_then_the_wait_can_be_armed_again() {
    let event = signalled(Event::manual_reset().unwrap());
    let count = Arc::new(Counter::default());
    let refused = Arc::new(AtomicUsize::new(0));
    let (c, r) = (Arc::clone(&count), Arc::clone(&refused));
    let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
        if !act.rearm(Deadline::NEVER) {
            r.fetch_add(1, SeqCst);
        }
        c.bump();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    count.wait_for(10);
    wait.stop_and_drain();
    let stopped_at = count.get();
    // Armed after the stop on the still-signalled handle, the probe fires
    // only after the pool processed the handle for `wait` too, had it been
    // left armed by a re-arm.
    probe_fires(&event);
    wait.wait();
    assert_eq!(count.get(), stopped_at, "a re-arm outlived stop_and_drain");
    event.reset().unwrap();
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    count.wait_for(stopped_at + 1);
    wait.stop_and_drain();
}

/// A private pool whose only thread is held by a work item until `gate`
/// opens, and a wait on `event` in that pool whose callback is therefore
/// queued, not run, when the event is signalled.
struct Queued {
    wait: Wait,
    count: Arc<Counter>,
    gate: Arc<Gate>,
    _blocker: Work,
    _pool: Pool,
}

fn queued_wait(event: &Event) -> Queued {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let gate = Arc::new(Gate::default());
    let (g, busy) = (Arc::clone(&gate), Arc::new(Counter::default()));
    let b = Arc::clone(&busy);
    let blocker = Work::new_in(
        move |_| {
            b.bump();
            g.wait();
        },
        &env,
    )
    .unwrap();
    blocker.submit();
    busy.wait_for(1);
    let (wait, count) = counting_wait(event, Some(&env));
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    // Wine delivers a signal through its wait thread, so "set" does not mean
    // "queued". A probe armed after `wait` on the same handle fires only once
    // that thread has queued `wait`'s callback (on Windows no wait thread
    // stands between; not measured).
    probe_fires(event);
    assert_eq!(count.get(), 0, "the pool's only thread is busy");
    Queued { wait, count, gate, _blocker: blocker, _pool: pool }
}

/// A disarm does not discard a callback already queued, on Windows and on
/// Wine alike (docs/wine.md). Source for Windows: the seeds' measurement, and
/// Microsoft's `SetThreadpoolWait` ("callbacks already queued will still occur").
#[test]
fn disarm_keeps_an_already_queued_callback() {
    let event = Event::manual_reset().unwrap();
    let q = queued_wait(&event);
    q.wait.disarm();
    q.gate.open();
    q.wait.wait();
    assert_eq!(q.count.get(), 1, "the queued callback was discarded by the disarm");
}

#[test]
fn drop_runs_an_already_queued_callback_before_returning() {
    let event = Event::manual_reset().unwrap();
    let Queued { wait, count, gate, _blocker, _pool } = queued_wait(&event);
    // Opening before the drop only makes the test weaker; the activation is
    // then owed or not, so the report is pinned by
    // `drop_with_a_queued_callback_reports_the_owed_drain`.
    let opener = support::open_soon(&gate);
    support::teardown_maybe_owing("Wait", || drop(wait));
    assert_eq!(count.get(), 1, "drop returned before the queued callback ran");
    opener.join().unwrap();
}

/// The pool's thread is released only once the trace shows the drop has
/// disarmed, which it does after checking the debt: the activation is still
/// queued when the drop begins, so the drain is owed, and the report (under
/// `fail-fast`) comes after the callback ran.
#[cfg(feature = "trace")]
#[test]
fn drop_with_a_queued_callback_reports_the_owed_drain() {
    support::traced_child("wait::drop_with_a_queued_callback_reports_the_owed_drain", "wait", || {
        let event = Event::manual_reset().unwrap();
        let Queued { wait, count, gate, _blocker, _pool } = queued_wait(&event);
        // This wait's record: the probe in `queued_wait` was dropped already
        // and wrote one of its own.
        let raw = wait.as_raw() as u64;
        let opener = support::open_when(&gate, move || {
            rows::rows(&windows_threadpool::trace::dump())
                .iter()
                .any(|r| r.is("wait", "suppress-and-disarm") && r.slot("wait") == Some(raw))
        });
        support::teardown_owing("Wait", || drop(wait));
        assert!(opener.join().unwrap(), "the drop never disarmed");
        assert_eq!(count.get(), 1, "drop returned before the queued callback ran");
        assert!(support::traced("wait", "drain-owed"));
    });
}

// ---- custom close routines ----

/// What a counting close routine saw for one handle.
#[derive(Default)]
struct CloseRecord {
    closes: AtomicUsize,
    /// Set by the test when the wait's callback is known to have started:
    /// the close routine then aborts the test unless the callback finished.
    callback_started: AtomicBool,
    /// Set by the wait's callback as its very last action.
    callback_done: AtomicBool,
    callback_done_at_close: AtomicBool,
    saw_teardown: AtomicBool,
    done_when_drop_returned: AtomicBool,
}

/// Handles registered with a counting close routine, and closes of handles
/// not registered (a second close of one, for instance).
#[derive(Default)]
struct Registry {
    live: Mutex<HashMap<usize, Arc<CloseRecord>>>,
    unknown: AtomicUsize,
}

/// One registry per test, so tests sharing a process never share one.
static REGISTRIES: [std::sync::LazyLock<Registry>; 4] = [const { std::sync::LazyLock::new(Registry::default) }; 4];

/// A close routine for test `S`: records the close, then closes the handle
/// with `CloseHandle`, under the registry lock so the handle value cannot be
/// reused and registered before its entry is gone.
unsafe extern "system" fn counting_close<const S: usize>(h: HANDLE) -> BOOL {
    let reg = &*REGISTRIES[S];
    let mut live = reg.live.lock().unwrap();
    match live.remove(&(h as usize)) {
        Some(r) => {
            r.closes.fetch_add(1, SeqCst);
            let done = r.callback_done.load(SeqCst);
            r.callback_done_at_close.store(done, SeqCst);
            // Fail here, with the cause: once the handle is closed under a
            // running callback, its context is freed next and the callback's
            // use of it may crash the process before any assertion runs.
            if r.callback_started.load(SeqCst) && !done {
                eprintln!("close routine ran while the wait's callback was still running: teardown did not drain");
                std::process::abort();
            }
        }
        None => {
            reg.unknown.fetch_add(1, SeqCst);
        }
    }
    // SAFETY: `h` is the handle the wrapper owned and closes once.
    unsafe { CloseHandle(h) }
}

/// A new auto-reset event as a target closed by `counting_close::<S>`, its
/// record, and a handle of the test's own to signal it with.
fn custom_target<const S: usize>() -> (WaitableHandle, Arc<CloseRecord>, Event) {
    let event = Event::auto_reset().unwrap();
    let signal = event.try_clone().unwrap();
    let raw = WaitableHandle::from(event).into_handle().unwrap().into_raw_handle();
    let record = Arc::new(CloseRecord::default());
    REGISTRIES[S].live.lock().unwrap().insert(raw as usize, Arc::clone(&record));
    // SAFETY: `raw` is an event handle owned by nothing else, and
    // `counting_close` closes it with `CloseHandle`.
    let target = unsafe { WaitableHandle::assume_waitable_with(raw, counting_close::<S>) };
    (target, record, signal)
}

const LIVE: usize = 256;

/// 256 live waits, each with a callback dwelling while its wait is torn
/// down on another thread. Each callback sees the teardown begin (its
/// re-arm is refused) before it may finish, so every teardown overlapped a
/// dwelling callback; the close routine then runs exactly once per handle,
/// after the callback finished, and no drop returns before its callback
/// finished.
#[test]
fn custom_closer_runs_once_after_a_dwelling_callback_is_drained() {
    const S: usize = 0;
    let entered = Arc::new(Counter::default());
    let saw_teardown = Arc::new(Counter::default());
    let launched = Arc::new(Gate::default());
    let release = Arc::new(Gate::default());
    let mut waits = Vec::new();
    let mut signals = Vec::new();
    for _ in 0..LIVE {
        let (target, record, signal) = custom_target::<S>();
        let (r, e, s, l, g) = (
            Arc::clone(&record),
            Arc::clone(&entered),
            Arc::clone(&saw_teardown),
            Arc::clone(&launched),
            Arc::clone(&release),
        );
        let wait = Wait::new(target, move |act: &WaitActivation<'_>| {
            e.bump();
            l.wait();
            // Re-arming on the unsignalled event is harmless until the
            // teardown refuses it, which proves the teardown has begun.
            while act.rearm(Deadline::NEVER) {
                std::thread::sleep(Duration::from_millis(1));
            }
            r.saw_teardown.store(true, SeqCst);
            s.bump();
            g.wait();
            r.callback_done.store(true, SeqCst);
        })
        .unwrap();
        wait.arm(Deadline::NEVER);
        waits.push((wait, record));
        signals.push(signal);
    }
    for s in &signals {
        s.set().unwrap();
    }
    entered.wait_for(LIVE);
    for (_, record) in &waits {
        record.callback_started.store(true, SeqCst);
    }
    let teardowns: Vec<_> = waits
        .into_iter()
        .map(|(wait, record)| {
            std::thread::spawn(move || {
                // Owed when a re-arm landed before the drop began.
                support::teardown_maybe_owing("Wait", || drop(wait));
                record.done_when_drop_returned.store(record.callback_done.load(SeqCst), SeqCst);
                record
            })
        })
        .collect();
    launched.open();
    saw_teardown.wait_for(LIVE);
    release.open();
    for (n, t) in teardowns.into_iter().enumerate() {
        let r = t.join().unwrap();
        assert!(r.saw_teardown.load(SeqCst), "wait {n}: the callback never saw its teardown");
        assert!(r.done_when_drop_returned.load(SeqCst), "wait {n}: drop returned while its callback dwelt");
        assert_eq!(r.closes.load(SeqCst), 1, "wait {n}: close routine calls");
        assert!(r.callback_done_at_close.load(SeqCst), "wait {n}: the handle was closed before the drain");
    }
    assert_eq!(REGISTRIES[S].unknown.load(SeqCst), 0, "a handle was closed twice");
    assert!(REGISTRIES[S].live.lock().unwrap().is_empty());
}

/// Never armed, armed and idle, and fired: 256 live waits each, every
/// handle closed exactly once by its own routine.
#[test]
fn custom_closer_runs_once_for_idle_armed_and_fired_waits() {
    const S: usize = 1;
    for scenario in ["never armed", "armed, never signalled", "signalled, callback done"] {
        let fired = Arc::new(Counter::default());
        let mut waits = Vec::new();
        for _ in 0..LIVE {
            let (target, record, signal) = custom_target::<S>();
            let (r, f) = (Arc::clone(&record), Arc::clone(&fired));
            let wait = Wait::new(target, move |_: &WaitActivation<'_>| {
                r.callback_done.store(true, SeqCst);
                f.bump();
            })
            .unwrap();
            waits.push((wait, record, signal));
        }
        if scenario != "never armed" {
            for (w, _, _) in &waits {
                w.arm(Deadline::NEVER);
            }
        }
        if scenario == "signalled, callback done" {
            for (_, _, s) in &waits {
                s.set().unwrap();
            }
            fired.wait_for(LIVE);
            for (_, r, _) in &waits {
                r.callback_started.store(true, SeqCst);
            }
        }
        for (n, (wait, record, _)) in waits.into_iter().enumerate() {
            assert_eq!(record.closes.load(SeqCst), 0, "{scenario}, wait {n}: closed while the wait lived");
            if scenario == "armed, never signalled" {
                support::teardown_owing("Wait", || drop(wait));
            } else {
                drop(wait);
            }
            assert_eq!(record.closes.load(SeqCst), 1, "{scenario}, wait {n}: close routine calls");
            let fired = scenario == "signalled, callback done";
            assert_eq!(record.callback_done_at_close.load(SeqCst), fired, "{scenario}, wait {n}");
        }
        assert_eq!(fired.get(), if scenario == "signalled, callback done" { LIVE } else { 0 }, "{scenario}");
    }
    assert_eq!(REGISTRIES[S].unknown.load(SeqCst), 0, "a handle was closed twice");
}

#[test]
fn into_handle_gives_back_an_owned_handle_or_the_wrapper() {
    const S: usize = 2;
    // Closed by CloseHandle: the handle comes back, still the same event.
    let event = Event::manual_reset().unwrap();
    let signal = event.try_clone().unwrap();
    let target = WaitableHandle::from(event);
    let raw = target.handle().as_raw_handle();
    let owned = target.into_handle().unwrap();
    assert_eq!(owned.as_raw_handle(), raw);
    signal.set().unwrap();
    assert!(is_signalled(owned.as_raw_handle()), "the handle returned is the event's");

    // A custom close routine: the wrapper comes back unchanged, not closed.
    let (target, record, _signal) = custom_target::<S>();
    let raw = target.handle().as_raw_handle();
    let back = target.into_handle().unwrap_err();
    assert_eq!(back.handle().as_raw_handle(), raw);
    assert_eq!(record.closes.load(SeqCst), 0);
    drop(back);
    assert_eq!(record.closes.load(SeqCst), 1, "dropping the wrapper closes it once");

    // Never given to a wait at all.
    let (target, record, _signal) = custom_target::<S>();
    drop(target);
    assert_eq!(record.closes.load(SeqCst), 1);
    assert_eq!(REGISTRIES[S].unknown.load(SeqCst), 0);
}

// ---- wait targets ----

#[test]
fn event_set_reset_and_clone() {
    let event = Event::manual_reset().unwrap();
    let clone = event.try_clone().unwrap();
    assert_ne!(clone.as_handle().as_raw_handle(), event.as_handle().as_raw_handle());
    clone.set().unwrap();
    assert!(is_signalled(event.as_handle().as_raw_handle()), "a clone signals the same event");
    event.reset().unwrap();
    assert!(!is_signalled(clone.as_handle().as_raw_handle()));

    // Signalled before it is armed: the wait fires at once.
    let (wait, rx) = reporting_wait(signalled(Event::manual_reset().unwrap()).into());
    wait.arm(Deadline::NEVER);
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
}

#[test]
fn events_start_unsignalled_and_reset_as_their_constructor_says() {
    let manual = Event::manual_reset().unwrap();
    let auto = Event::auto_reset().unwrap();
    let (m, a) = (manual.as_handle().as_raw_handle(), auto.as_handle().as_raw_handle());
    assert!(!is_signalled(m) && !is_signalled(a), "both start unsignalled");
    manual.set().unwrap();
    auto.set().unwrap();
    // A satisfied wait leaves a manual-reset event signalled and resets an
    // auto-reset one.
    assert!(is_signalled(m) && is_signalled(m), "manual reset: stays signalled");
    assert!(is_signalled(a), "auto reset: the set is seen once");
    assert!(!is_signalled(a), "auto reset: the wait that saw it reset it");
}

/// The raw value of whatever `h` lends through `AsHandle`.
fn lent(h: impl AsHandle) -> usize {
    h.as_handle().as_raw_handle() as usize
}

#[test]
fn a_wait_its_target_and_its_activations_lend_the_waited_on_handle() {
    let event = Event::auto_reset().unwrap();
    let clone = event.try_clone().unwrap();
    let waited_on = lent(&clone);
    let target = WaitableHandle::from(clone);
    assert_eq!(lent(&target), waited_on);
    let (tx, rx) = mpsc::channel();
    let wait = Wait::new(target, move |act: &WaitActivation<'_>| tx.send(lent(act)).unwrap()).unwrap();
    assert_eq!(lent(&wait), waited_on);
    assert_eq!(lent(&*wait), waited_on, "the view lends it too");
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), waited_on, "the activation lends it");
}

#[test]
fn a_wait_only_event_can_be_waited_on_but_not_signalled() {
    let event = Event::auto_reset().unwrap();
    let wait_only = event.wait_only().unwrap();
    let raw = wait_only.as_handle().as_raw_handle();
    // SAFETY: `raw` is an open handle; the call is expected to fail.
    let ok = unsafe { SetEvent(raw) };
    assert_eq!(ok, 0, "SetEvent through a SYNCHRONIZE-only handle succeeded");
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(5), "ERROR_ACCESS_DENIED");
    let (wait, rx) = reporting_wait(wait_only.into());
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
}

const CHILD_TEST: &str = "wait::child_process_wait_fires_when_the_process_exits";

/// In the parent, this test binary started again as `test`'s child, which
/// lives until its stdin (piped) closes and then exits with `code`; in that
/// child, the child's part: it never returns.
fn child_until_stdin_closes(test: &str, code: i32) -> std::process::Child {
    if std::env::var(support::CHILD_VAR).as_deref() == Ok(test) {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        std::process::exit(code);
    }
    support::spawn(
        Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(support::CHILD_VAR, test)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .unwrap()
}

#[test]
fn child_process_wait_fires_when_the_process_exits() {
    let mut child = child_until_stdin_closes(CHILD_TEST, support::CHILD_DONE);
    let stdin = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let wait = Wait::new(child.into(), move |act: &WaitActivation<'_>| {
        let mut code = 0u32;
        // SAFETY: the activation lends the process handle.
        let ok = unsafe { GetExitCodeProcess(act.handle().as_raw_handle(), &mut code) };
        tx.send((act.result(), ok != 0, code)).unwrap();
    })
    .unwrap();
    wait.arm(Deadline::NEVER);
    // The child cannot exit before its stdin closes.
    assert!(rx.try_recv().is_err(), "the wait fired while the child was alive");
    drop(stdin);
    let (result, ok, code) = rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(result, WaitResult::Signalled);
    assert!(ok);
    assert_eq!(code, support::CHILD_DONE as u32, "the child ran its scenario to the end");
}

const EXIT_3_TEST: &str = "wait::a_wait_from_child_leaves_the_child_and_its_exit_status_to_the_caller";

#[test]
fn a_wait_from_child_leaves_the_child_and_its_exit_status_to_the_caller() {
    let mut child = child_until_stdin_closes(EXIT_3_TEST, 3);
    let target = WaitableHandle::from_child(&child).unwrap();
    let mut code = 0u32;
    // SAFETY: an open handle; the call is expected to fail.
    let ok = unsafe { GetExitCodeProcess(target.handle().as_raw_handle(), &mut code) };
    assert_eq!(ok, 0, "the wait's handle can query the process: it has more than SYNCHRONIZE");
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(5), "ERROR_ACCESS_DENIED");
    let (wait, rx) = reporting_wait(target);
    wait.arm(Deadline::NEVER);
    // The child cannot exit before its stdin closes.
    assert!(rx.try_recv().is_err(), "the wait fired while the child was alive");
    drop(child.stdin.take());
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
    // Closes the wait's handle; the child's own stays open.
    drop(wait);
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

#[test]
fn a_wait_from_thread_leaves_the_thread_and_its_result_to_the_caller() {
    let (go, wait_go) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let _ = wait_go.recv();
        3
    });
    let target = WaitableHandle::from_thread(&thread).unwrap();
    let mut code = 0u32;
    // SAFETY: an open handle; the call is expected to fail.
    let ok = unsafe { GetExitCodeThread(target.handle().as_raw_handle(), &mut code) };
    assert_eq!(ok, 0, "the wait's handle can query the thread: it has more than SYNCHRONIZE");
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(5), "ERROR_ACCESS_DENIED");
    let (wait, rx) = reporting_wait(target);
    wait.arm(Deadline::NEVER);
    assert!(rx.try_recv().is_err(), "the wait fired while the thread was alive");
    go.send(()).unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
    // Closes the wait's handle; the `JoinHandle`'s stays open.
    drop(wait);
    assert_eq!(thread.join().unwrap(), 3);
}

#[test]
fn thread_wait_fires_when_the_thread_exits() {
    let (go, wait_go) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let _ = wait_go.recv();
    });
    let (wait, rx) = reporting_wait(thread.into());
    wait.arm(Deadline::NEVER);
    assert!(rx.try_recv().is_err(), "the wait fired while the thread was alive");
    go.send(()).unwrap();
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
}

#[test]
fn wait_on_a_private_pool_outlives_the_pool_handle() {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let event = Event::auto_reset().unwrap();
    let (tx, rx) = mpsc::channel();
    let wait = Wait::new_in(
        event.try_clone().unwrap().into(),
        move |act: &WaitActivation<'_>| {
            assert!(act.rearm(Deadline::NEVER));
            tx.send(std::thread::current().id()).unwrap();
        },
        &env,
    )
    .unwrap();
    drop(env);
    drop(pool);
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    let first = rx.recv_timeout(PATIENCE).unwrap();
    event.set().unwrap();
    let second = rx.recv_timeout(PATIENCE).unwrap();
    assert_eq!(first, second, "a one-thread pool runs every callback on its thread");
    assert_ne!(first, std::thread::current().id());
    wait.stop_and_drain();
}

#[test]
fn panicking_wait_callback_aborts_the_process() {
    let out = support::child("wait::panicking_wait_callback_aborts_the_process", &[], || {
        let (tx, rx) = mpsc::channel::<()>();
        let wait = Wait::new(signalled(Event::auto_reset().unwrap()).into(), move |_: &WaitActivation<'_>| {
            let _keep = &tx;
            panic!("boom from a wait callback");
        })
        .unwrap();
        wait.arm(Deadline::NEVER);
        // Returns (and the child exits CHILD_DONE) only if the panic did not abort.
        let _ = rx.recv_timeout(PATIENCE);
    });
    support::assert_panicked_and_aborted(&out, support::AbortKind::CannotUnwind, "boom from a wait callback");
}

// ---- raw platform behaviour ----

static RAW_COUNT: AtomicUsize = AtomicUsize::new(0);

unsafe extern "system" fn raw_count(_: PTP_CALLBACK_INSTANCE, _: *mut core::ffi::c_void, _: PTP_WAIT, _: u32) {
    RAW_COUNT.fetch_add(1, SeqCst);
}

/// The raw API, no crate code: signal, disarm, drain. Windows documents that
/// a disarmed wait queues no new callback (`SetThreadpoolWait`: "the wait
/// object will cease to queue new callbacks"; Wine's `test_tp_wait`, "cancel a
/// pending wait", asserts it for a signal after the disarm). Wine's wait thread can still be
/// blocked on a handle array built before the disarm and queue the callback
/// after the drain returned, which would be a use-after-free in a naive
/// teardown; the crate flushes under Wine (docs/wine.md). Wine 10 showed
/// none in 3,000 iterations (Wine 8: about 1 in 10), so there the test
/// asserts Windows' outcome over as many.
#[test]
fn raw_disarm_can_be_followed_by_a_late_callback_on_wine() {
    let wine8 = support::wine_before(10);
    let event = Event::manual_reset().unwrap();
    let h = event.as_handle().as_raw_handle();
    // SAFETY: a counting callback with no context; the wait is closed below
    // after a final drain, and the static outlives everything.
    let wait = unsafe { CreateThreadpoolWait(Some(raw_count), core::ptr::null_mut(), core::ptr::null()) };
    assert_ne!(wait, 0);
    let mut late = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..if support::on_wine() { 3000 } else { 300 } {
        event.reset().unwrap();
        // SAFETY: `wait` is live and `h` open throughout.
        unsafe { SetThreadpoolWait(wait, h, core::ptr::null()) };
        // Lets the wait thread block on the handle: on Wine, losing this
        // race only makes a late callback (which the test expects) rarer.
        std::thread::sleep(Duration::from_micros(300));
        event.set().unwrap();
        // SAFETY: as above.
        unsafe {
            SetThreadpoolWait(wait, core::ptr::null_mut(), core::ptr::null());
            WaitForThreadpoolWaitCallbacks(wait, 0);
        }
        let drained = RAW_COUNT.load(SeqCst);
        // Once a probe armed now has fired, the wait thread has finished any
        // wait begun before the disarm (see `probe_fires`): a late callback
        // is queued by then, and the drain below lets it run.
        probe_fires(&event);
        // SAFETY: as above.
        unsafe { WaitForThreadpoolWaitCallbacks(wait, 0) };
        if RAW_COUNT.load(SeqCst) > drained {
            late += 1;
            if wine8 {
                break;
            }
        }
        if Instant::now() > deadline {
            break;
        }
    }
    // SAFETY: disarmed and drained; closed once.
    unsafe {
        SetThreadpoolWait(wait, core::ptr::null_mut(), core::ptr::null());
        WaitForThreadpoolWaitCallbacks(wait, 0);
        CloseThreadpoolWait(wait);
    }
    if wine8 {
        assert!(
            late > 0,
            "Wine 8 no longer queues a callback after disarm and drain: revisit the flush (docs/wine.md)"
        );
    } else {
        assert_eq!(late, 0, "a callback was queued after SetThreadpoolWait(NULL) and a drain");
    }
}

/// A signal after the disarm queues nothing and stays with the event. Source
/// for Windows: Wine's conformance test `dlls/ntdll/tests/threadpool.c`
/// `test_tp_wait` ("cancel a pending wait": no callback, the semaphore keeps
/// its count).
#[test]
fn signalled_state_is_left_alone_by_a_disarmed_wait() {
    // The auto-reset signal set after a disarm is still there for others.
    let event = Event::auto_reset().unwrap();
    let (wait, count) = counting_wait(&event, None);
    wait.arm(Deadline::NEVER);
    wait.stop_and_drain();
    event.set().unwrap();
    assert!(is_signalled(event.as_handle().as_raw_handle()));
    assert_eq!(count.get(), 0);
    // SAFETY: a zero-timeout test of an open handle.
    assert_eq!(unsafe { WaitForSingleObject(event.as_handle().as_raw_handle(), 0) }, WAIT_TIMEOUT, "consumed above");
}

#[cfg(feature = "trace")]
#[test]
fn wait_records_its_life_in_order() {
    support::traced_child("wait::wait_records_its_life_in_order", "wait,syscall", || {
        let main = rows::thread_id();
        let event = Event::auto_reset().unwrap();
        let count = Arc::new(Counter::default());
        let gate = Arc::new(Gate::default());
        let (c, g) = (Arc::clone(&count), Arc::clone(&gate));
        // Activation 1 re-arms; activation 2 blocks until teardown has
        // refused re-arms, then tries one. (A callback's failed assertion
        // aborts the child, which fails the test.)
        let wait = Wait::new(event.try_clone().unwrap().into(), move |act: &WaitActivation<'_>| {
            if c.bump() == 1 {
                assert!(act.rearm(Deadline::NEVER), "nothing is stopping the wait");
            } else {
                g.wait();
                assert!(!act.rearm(Deadline::NEVER), "teardown refuses re-arms");
            }
        })
        .unwrap();
        let target = wait.handle().as_raw_handle() as u64;
        wait.arm(Deadline::NEVER);
        event.set().unwrap();
        count.wait_for(1);
        event.set().unwrap();
        count.wait_for(2);
        // Activation 2 goes on only once teardown refuses re-arms.
        let opener = support::open_when(&gate, || support::traced("wait", "suppress-and-disarm"));
        drop(wait); // nothing owed: activation 2 consumed the re-armed arming
        assert!(opener.join().unwrap(), "the drop never suppressed re-arms");

        let all = rows::rows(&windows_threadpool::trace::dump());
        let created: Vec<&rows::Row> = all.iter().filter(|r| r.is("wait", "created")).collect();
        assert_eq!(created.len(), 1, "{all:#?}");
        let (raw, ctx) = (created[0].slot("wait").unwrap(), created[0].slot("context").unwrap());
        let life: Vec<&rows::Row> = all
            .iter()
            .filter(|r| {
                (r.target == "wait" && r.slot("wait") == Some(raw))
                    || (r.is_syscall()
                        && (r.slot("wait") == Some(raw)
                            || r.slot("context") == Some(ctx)
                            || (r.event == "CloseHandle" && r.slot("handle") == Some(target))))
            })
            .collect();
        let on_main: Vec<&rows::Row> = life.iter().copied().filter(|r| r.tid == main).collect();
        assert_eq!(
            rows::labels(&on_main),
            [
                "syscall-enter CreateThreadpoolWait",
                "syscall-leave CreateThreadpoolWait",
                "wait created",
                "wait armed",
                "syscall-enter SetThreadpoolWait",
                "syscall-leave SetThreadpoolWait",
                "wait drop-begin",
                "syscall-enter SetThreadpoolWait",
                "syscall-leave SetThreadpoolWait",
                "wait suppress-and-disarm",
                "syscall-enter WaitForThreadpoolWaitCallbacks",
                "syscall-leave WaitForThreadpoolWaitCallbacks",
                "wait drained",
                "wait drop-drained",
                "syscall-enter CloseThreadpoolWait",
                "syscall-leave CloseThreadpoolWait",
                "syscall-enter CloseHandle",
                "syscall-leave CloseHandle",
                "wait drop-closed",
            ],
            "{on_main:#?}"
        );
        rows::assert_bracketed(&on_main);
        let m = |i: usize| on_main[i];
        assert_eq!(m(3).slot("handle"), Some(target), "armed on the wait's own handle");
        assert_eq!(m(4).slot("handle"), Some(target));
        assert_eq!(m(7).slot("handle"), Some(0), "teardown disarms (NULL handle)");
        assert_eq!(m(9).slot("flush"), Some(0), "every arming was consumed: no Wine flush needed");
        assert_eq!(m(10).slot("cancel"), Some(0), "teardown never cancels");

        let activations = rows::callbacks(&life, main);
        let labels: Vec<Vec<String>> = activations.iter().map(|a| rows::labels(a)).collect();
        assert_eq!(
            labels,
            [
                vec![
                    "wait trampoline-entered",
                    "wait rearm-entered",
                    "syscall-enter SetThreadpoolWait",
                    "syscall-leave SetThreadpoolWait",
                    "wait rearm-left",
                    "wait trampoline-left",
                ],
                vec!["wait trampoline-entered", "wait rearm-suppressed", "wait trampoline-left"],
            ],
            "{activations:#?}"
        );
        let a1 = &activations[0];
        rows::assert_bracketed(a1);
        assert!(activations.iter().all(|a| a[0].slot("timed_out") == Some(0)), "both were signalled: {activations:#?}");
        assert_eq!(
            (a1[1].slot("handle"), a1[2].slot("handle")),
            (Some(target), Some(target)),
            "re-armed on its handle"
        );
        // Across threads, only what happens before.
        let i = |r: &rows::Row| r.index;
        assert!(i(m(4)) < i(a1[0]), "activation 1 before the arming");
        assert!(i(a1[2]) < i(activations[1][0]), "activation 2 before the re-arm");
        assert!(i(activations[1][0]) < i(m(6)), "activation 2 entered after the drop began");
        assert!(i(m(8)) < i(activations[1][1]), "the re-arm was refused before teardown disarmed");
        assert!(i(activations[1][2]) < i(m(11)), "teardown's drain returned before activation 2 ended");
    });
}

// ---- public API coverage ----

/// A cancellation racing a `wait` on another thread, with an activation
/// queued, leaves neither blocked: the crate serialises a cancelling drain
/// with the object's other drains, since under Wine 8 the raw cancellation
/// does not wake a concurrent drain of the callback it discards (docs/wine.md).
#[test]
fn try_cancel_pending_racing_a_wait_strands_neither() {
    let event = Event::manual_reset().unwrap();
    let q = queued_wait(&event);
    support::cancel_racing_a_drain(
        || q.wait.wait(),
        || {
            #[cfg(feature = "self-heal")]
            q.wait.try_cancel_pending();
            #[cfg(not(feature = "self-heal"))]
            q.wait.try_cancel_pending_without_heal();
        },
        || q.gate.open(),
        // The event is still signalled: an arming queues an activation at once.
        || q.wait.arm(Deadline::NEVER),
    );
    q._blocker.wait();
    q.wait.stop_and_drain();
    assert!(q.count.get() <= 1, "one signal ran {} activations", q.count.get());
}

/// A queued activation is discarded: it cannot start before the gate opens
/// (the pool's only thread is held), and the gate opens only after the
/// cancellation returned (at once: nothing of the wait is running).
#[test]
fn try_cancel_pending_discards_a_queued_callback() {
    let event = Event::manual_reset().unwrap();
    let q = queued_wait(&event);
    let returned = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&returned);
    let opener = support::open_when(&q.gate, move || r.load(SeqCst));
    #[cfg(feature = "self-heal")]
    q.wait.try_cancel_pending();
    // The private pool dispatches again once its gate opens below.
    #[cfg(not(feature = "self-heal"))]
    q.wait.try_cancel_pending_without_heal();
    returned.store(true, SeqCst);
    assert!(opener.join().unwrap(), "the cancellation waited for a callback it should have discarded");
    q._blocker.wait();
    q.wait.wait();
    assert_eq!(q.count.get(), 0, "the queued callback ran");
    // The cancellation does not disarm, and the wait stays usable.
    event.reset().unwrap();
    q.wait.arm(Deadline::NEVER);
    event.set().unwrap();
    q.count.wait_for(1);
}

/// `assume_waitable` takes a handle the caller vouches for: the wait fires on
/// it, and `handle()` is that handle.
#[test]
fn assume_waitable_waits_on_and_owns_the_handle() {
    use std::os::windows::io::{FromRawHandle, OwnedHandle};
    // SAFETY: a fresh manual-reset event, initially signalled, owned below.
    let raw =
        unsafe { windows_sys::Win32::System::Threading::CreateEventW(core::ptr::null(), 1, 1, core::ptr::null()) };
    assert!(!raw.is_null());
    // SAFETY: `raw` is open and owned by nothing else.
    let owned = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: an event is waitable.
    let target = unsafe { WaitableHandle::assume_waitable(owned) };
    let (wait, rx) = reporting_wait(target);
    assert_eq!(wait.handle().as_raw_handle(), raw);
    wait.arm(Deadline::NEVER);
    assert_eq!(rx.recv_timeout(PATIENCE).unwrap(), WaitResult::Signalled);
    wait.stop_and_drain();
}

#[test]
fn as_raw_is_the_live_wait_object() {
    let event = signalled(Event::manual_reset().unwrap());
    let (a, count) = counting_wait(&event, None);
    let (b, _) = counting_wait(&event, None);
    assert_ne!(a.as_raw(), 0);
    assert_ne!(a.as_raw(), b.as_raw(), "each wait has its own TP_WAIT");
    a.arm(Deadline::NEVER);
    count.wait_for(1);
    // SAFETY: `a.as_raw()` is live; a drain through it is the crate's own `wait`.
    unsafe { WaitForThreadpoolWaitCallbacks(a.as_raw(), 0) };
    assert_eq!(count.get(), 1);
}

/// A wait whose every arming has activated owes Wine no flush at teardown
/// (the flush needs a free thread in the wait's pool): it can be dropped
/// from a callback holding the only thread of its pool. On Windows no
/// teardown flushes; under Wine this pins that only an outstanding arming does.
#[test]
fn a_settled_wait_drops_on_the_only_thread_of_its_pool() {
    let pool = Pool::new().unwrap();
    pool.set_max_threads(1).unwrap();
    pool.set_min_threads(1).unwrap();
    let env = CallbackEnviron::new().with_pool(&pool);
    let event = Event::auto_reset().unwrap();
    let (wait, count) = counting_wait(&event, Some(&env));
    wait.arm(Deadline::NEVER);
    event.set().unwrap();
    count.wait_for(1);
    let slot = Mutex::new(Some(wait));
    let (tx, rx) = mpsc::channel();
    let work = Work::new_in(
        move |_| {
            drop(slot.lock().unwrap().take());
            tx.send(()).unwrap();
        },
        &env,
    )
    .unwrap();
    work.submit();
    rx.recv_timeout(PATIENCE).expect("the settled wait's drop returned on the pool's only thread");
    work.wait();
}

/// A named event: opened by its name, the other handle sets it; creating
/// it again opens the same event; no such name is `NotFound`; a NUL in the
/// name is `InvalidInput`.
#[test]
fn a_named_event_is_set_through_another_handle_opened_by_name() {
    let name = format!("Local\\windows-threadpool-test-{}", std::process::id());
    let created = Event::named_manual_reset(&name).unwrap();
    assert!(!is_signalled(created.as_handle().as_raw_handle()));
    Event::open(&name).unwrap().set().unwrap();
    assert!(is_signalled(created.as_handle().as_raw_handle()));
    let again = Event::named_manual_reset(&name).unwrap();
    assert!(is_signalled(again.as_handle().as_raw_handle()), "an existing event keeps its state");
    again.reset().unwrap();
    assert!(!is_signalled(created.as_handle().as_raw_handle()));
    let missing = Event::open(&format!("{name}-missing")).unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound, "{missing}");
    for bad in [Event::open("a\0b").unwrap_err(), Event::named_manual_reset("a\0b").unwrap_err()] {
        assert_eq!(bad.kind(), std::io::ErrorKind::InvalidInput);
    }
}
